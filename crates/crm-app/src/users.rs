//! Users (decisions §21, §24): people of a workspace who sign in to the console, each with a role
//! that stands for a set of scopes. A key manages them with `users:write`, but may create a user
//! of a role, or move a user to it, only when it holds every scope of that role itself, so that
//! `users:write` is no way to more access than the key has. The last admin of a workspace stays.
//!
//! Users belong to the workspace as a whole, so their audit entries are written in both modes.

use crm_domain::{
    audit::{changes, REDACTED},
    history::{Actor, Channel, FieldChange, Via},
    user::{check_email, check_name, check_password, SIGN_IN_LINK_MS},
    Email, Mode, Role, Tenant, Timestamp, User, UserId, ValidationError, WorkspaceId,
};
use serde_json::{json, Value};

use crate::{
    audit::{operator, Audited},
    auth::{generate_token, hash_key, Caller, Scope, SCOPE_RESOURCES},
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    passwords::hash_password,
    ports::{SignInLink, StoreError, Tx},
    App,
};

const LIST: &str = "users";

/// A user to create, as given.
#[derive(Debug, Default)]
pub struct UserInput {
    pub email: Option<String>,
    pub name: Option<String>,
    pub role: Option<String>,
}

/// The members of a user a `PATCH` changes; `None` keeps the member.
pub type UserPatch = UserInput;

/// A user just created, or given a new link: the link's token, shown this once.
#[derive(Debug)]
pub struct WithLink {
    pub user: User,
    /// The one-time token of `<public URL>/sign-in/<token>`; `None` when the operator set a
    /// password instead.
    pub token: Option<String>,
    pub expires_at: Option<Timestamp>,
}

/// Who makes a change to users: the actor, channel and request id its audit entry carries.
struct By {
    actor: Actor,
    channel: Channel,
    request_id: Option<String>,
}

impl By {
    fn caller(caller: &Caller) -> By {
        let author = caller.author(Via::Direct);
        By {
            actor: author.actor,
            channel: author.channel,
            request_id: author.request_id,
        }
    }

    fn operator() -> By {
        By {
            actor: operator(),
            channel: Channel::Cli,
            request_id: None,
        }
    }
}

/// The caller may give `role` only if it holds every scope of it: 403 naming the first it lacks.
pub fn check_role_grantable(caller: &Caller, role: Role) -> Result<(), AppError> {
    if role == Role::Admin {
        return if caller.scopes.0.iter().any(|s| s == "*") {
            Ok(())
        } else {
            Err(AppError::Forbidden { scope: "*".into() })
        };
    }
    for resource in SCOPE_RESOURCES {
        let needed = if role.grants(resource, true) {
            Scope::write(resource)
        } else if role.grants(resource, false) {
            Scope::read(resource)
        } else {
            continue;
        };
        caller.require(needed)?;
    }
    Ok(())
}

/// What the audit log shows of a user: never the password's hash.
fn audit_shape(user: &User) -> Value {
    json!({"email": user.email.as_str(), "name": user.name, "role": user.role.as_str()})
}

fn parse_role(raw: &str) -> Result<Role, AppError> {
    Ok(Role::parse(raw.trim())?)
}

fn required(value: Option<String>, field: &'static str) -> Result<String, AppError> {
    value.ok_or_else(|| ValidationError::invalid(field, format!("{field} is required")).into())
}

fn email_taken() -> AppError {
    AppError::Conflict {
        detail: "a user with this email already exists (emails are unique across the installation)"
            .into(),
        existing: None,
    }
}

fn last_admin() -> AppError {
    AppError::Conflict {
        detail: "this is the workspace's last admin; make another user admin first".into(),
        existing: None,
    }
}

impl App {
    fn user_id(id: &str) -> Result<UserId, AppError> {
        UserId::parse(id).map_err(|_| AppError::not_found("user", id))
    }

    async fn load_user(
        tx: &mut Box<dyn Tx>,
        workspace: &WorkspaceId,
        id: &str,
    ) -> Result<User, AppError> {
        let id = Self::user_id(id)?;
        tx.get_user(workspace, &id)
            .await?
            .ok_or_else(|| AppError::not_found("user", id.as_str()))
    }

    async fn audit_user(
        &self,
        tx: &mut Box<dyn Tx>,
        workspace: &WorkspaceId,
        by: &By,
        what: Audited,
    ) -> Result<(), AppError> {
        self.audit_workspace(
            tx,
            workspace,
            by.actor.clone(),
            by.channel,
            by.request_id.clone(),
            what,
        )
        .await
    }

    /// A new link for `user`, replacing its older ones, with its audit entry.
    async fn new_link(
        &self,
        tx: &mut Box<dyn Tx>,
        user: &User,
        by: &By,
    ) -> Result<(String, Timestamp), AppError> {
        let token = generate_token();
        let now = self.clock.now();
        let link = SignInLink {
            token_hash: hash_key(&token),
            user_id: user.id.clone(),
            workspace_id: user.workspace_id.clone(),
            created_at: now,
            expires_at: now.plus_millis(SIGN_IN_LINK_MS),
        };
        tx.replace_sign_in_link(&link).await?;
        let change = FieldChange {
            field: "sign_in_link".into(),
            from: Value::Null,
            to: json!(REDACTED),
        };
        let what = Audited::new(
            "user.sign_in_link_created",
            "user",
            user.id.as_str(),
            vec![change],
        );
        self.audit_user(tx, &user.workspace_id, by, what).await?;
        Ok((token, link.expires_at))
    }

    /// The users of the caller's workspace, newest first.
    pub async fn list_users(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<User>, AppError> {
        let slice = slice_for(&page, &caller.tenant, LIST, "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_users(&caller.tenant.workspace_id, &slice).await?;
        Ok(page_from(rows, &page, &caller.tenant, LIST, "", |u| {
            u.id.to_string()
        }))
    }

    pub async fn get_user(&self, caller: &Caller, id: &str) -> Result<User, AppError> {
        let mut tx = self.store.begin_read().await?;
        Self::load_user(&mut tx, &caller.tenant.workspace_id, id).await
    }

    /// Creates a user of the caller's workspace, with a one-time sign-in link.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_user(
        &self,
        caller: &Caller,
        input: UserInput,
    ) -> Result<WithLink, AppError> {
        let email = check_email(&required(input.email, "email")?)?;
        let name = check_name(&required(input.name, "name")?)?;
        let role = parse_role(&required(input.role, "role")?)?;
        check_role_grantable(caller, role)?;
        let workspace = caller.tenant.workspace_id.clone();
        self.insert_user(workspace, email, name, role, None, By::caller(caller))
            .await
    }

    /// `crm-server user create`: the operator creates a user of `workspace`, with `password`
    /// (then no link) or a one-time sign-in link.
    pub async fn create_user_as_operator(
        &self,
        workspace: &WorkspaceId,
        input: UserInput,
        password: Option<&str>,
    ) -> Result<WithLink, AppError> {
        let email = check_email(&required(input.email, "email")?)?;
        let name = check_name(&required(input.name, "name")?)?;
        let role = parse_role(&required(input.role, "role")?)?;
        let hash = match password {
            Some(p) => {
                check_password(p)?;
                Some(hash_password(p)?)
            }
            None => None,
        };
        {
            let mut tx = self.store.begin_read().await?;
            if tx.get_workspace(workspace).await?.is_none() {
                return Err(AppError::not_found("workspace", workspace.as_str()));
            }
        }
        self.insert_user(workspace.clone(), email, name, role, hash, By::operator())
            .await
    }

    async fn insert_user(
        &self,
        workspace_id: WorkspaceId,
        email: Email,
        name: String,
        role: Role,
        password_hash: Option<String>,
        by: By,
    ) -> Result<WithLink, AppError> {
        let user = User {
            id: UserId::from_uuid(self.ids.new_uuid()),
            workspace_id,
            email,
            name,
            role,
            password_hash,
            created_at: self.clock.now(),
            last_login_at: None,
        };
        let mut tx = self.store.begin_write().await?;
        match tx.insert_user(&user).await {
            Err(StoreError::Duplicate) => return Err(email_taken()),
            other => other?,
        }
        let created = changes(None, Some(&audit_shape(&user)));
        let what = Audited::new("user.created", "user", user.id.as_str(), created);
        self.audit_user(&mut tx, &user.workspace_id, &by, what)
            .await?;
        let (token, expires_at) = if user.password_hash.is_none() {
            let (t, at) = self.new_link(&mut tx, &user, &by).await?;
            (Some(t), Some(at))
        } else {
            (None, None)
        };
        tx.commit().await?;
        Ok(WithLink {
            user,
            token,
            expires_at,
        })
    }

    /// Changes a user's email, name or role. A new role or email needs every scope of the
    /// user's (new) role; the last admin keeps its role.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn update_user(
        &self,
        caller: &Caller,
        id: &str,
        patch: UserPatch,
    ) -> Result<User, AppError> {
        let email = patch.email.as_deref().map(check_email).transpose()?;
        let name = patch.name.as_deref().map(check_name).transpose()?;
        let role = patch.role.as_deref().map(parse_role).transpose()?;
        let workspace = &caller.tenant.workspace_id;
        let mut tx = self.store.begin_write().await?;
        let mut user = Self::load_user(&mut tx, workspace, id).await?;
        let before = user.clone();
        let new_role = role.unwrap_or(user.role);
        let email_changes = email.as_ref().is_some_and(|e| *e != user.email);
        if new_role != user.role || email_changes {
            check_role_grantable(caller, new_role)?;
        }
        if user.role == Role::Admin
            && new_role != Role::Admin
            && tx.count_admins(workspace).await? <= 1
        {
            return Err(last_admin());
        }
        if let Some(e) = email {
            user.email = e;
        }
        if let Some(n) = name {
            user.name = n;
        }
        user.role = new_role;
        if user == before {
            return Ok(user);
        }
        match tx.update_user(&user).await {
            Err(StoreError::Duplicate) => return Err(email_taken()),
            other => other?,
        };
        let diff = changes(Some(&audit_shape(&before)), Some(&audit_shape(&user)));
        let action = if before.role != user.role {
            // The user's sessions end: the new role applies from their next sign-in (§24).
            Self::revoke_sessions(&mut tx, &user.id).await?;
            "user.role_changed"
        } else {
            "user.updated"
        };
        let what = Audited::new(action, "user", user.id.as_str(), diff);
        self.audit_user(&mut tx, workspace, &By::caller(caller), what)
            .await?;
        tx.commit().await?;
        Ok(user)
    }

    /// Deletes a user with its sign-in links and sessions; the last admin stays. The records
    /// the user owned, in both modes, are left without an owner (decisions §24), each with a
    /// history entry by `system`.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn delete_user(&self, caller: &Caller, id: &str) -> Result<User, AppError> {
        let workspace = &caller.tenant.workspace_id;
        let mut tx = self.store.begin_write().await?;
        let user = Self::load_user(&mut tx, workspace, id).await?;
        if user.role == Role::Admin && tx.count_admins(workspace).await? <= 1 {
            return Err(last_admin());
        }
        // Owners are cleared before the user goes, so that a write holding one of the user's
        // records while it names the user finishes first instead of deadlocking with this
        // deletion, and again after, for records written meanwhile: a write naming the user
        // holds the user's row until it commits, which the deletion waits for.
        let now = self.clock.now();
        self.clear_owner(&mut tx, caller, &user.id, now).await?;
        tx.delete_user(workspace, &user.id).await?;
        self.clear_owner(&mut tx, caller, &user.id, now).await?;
        let diff = changes(Some(&audit_shape(&user)), None);
        let what = Audited::new("user.deleted", "user", user.id.as_str(), diff);
        self.audit_user(&mut tx, workspace, &By::caller(caller), what)
            .await?;
        tx.commit().await?;
        Ok(user)
    }

    /// Leaves the records `user` owns, in both modes, without an owner, each with a history entry
    /// by `system`.
    async fn clear_owner(
        &self,
        tx: &mut Box<dyn Tx>,
        caller: &Caller,
        user: &UserId,
        now: Timestamp,
    ) -> Result<(), AppError> {
        for mode in [Mode::Live, Mode::Test] {
            let tenant = Tenant {
                workspace_id: caller.tenant.workspace_id.clone(),
                mode,
            };
            let cleared = tx.clear_owner(&tenant, user, now).await?;
            let changes = self.cleared_reference_changes(caller, &cleared, user.as_str(), now);
            tx.insert_changes(&tenant, &changes).await?;
        }
        Ok(())
    }

    /// A new one-time sign-in link for a user (a password reset), replacing older ones. It is a
    /// way into the user's account, so it needs every scope of the user's role, as creating
    /// the user would.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn issue_sign_in_link(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<WithLink, AppError> {
        let workspace = &caller.tenant.workspace_id;
        let mut tx = self.store.begin_write().await?;
        let user = Self::load_user(&mut tx, workspace, id).await?;
        check_role_grantable(caller, user.role)?;
        let (token, expires_at) = self.new_link(&mut tx, &user, &By::caller(caller)).await?;
        tx.commit().await?;
        Ok(WithLink {
            user,
            token: Some(token),
            expires_at: Some(expires_at),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{ApiKeyId, Mode, Plan, Tenant};

    fn caller(scopes: &[&str]) -> Caller {
        let ws = WorkspaceId::from_uuid(uuid::Uuid::now_v7());
        Caller::new(
            Tenant {
                workspace_id: ws.clone(),
                mode: Mode::Test,
            },
            ApiKeyId::from_uuid(uuid::Uuid::now_v7()),
            crate::auth::Scopes(scopes.iter().map(|s| s.to_string()).collect()),
            crate::auth::Workspace {
                id: ws,
                name: "w".into(),
                plan: Plan::Free,
                created_at: Timestamp::from_millis(0),
                overage_cap_usd: None,
                rate_limit_override: None,
                included_requests_override: None,
                history_retention_days: None,
                email_retention_days: None,
            },
        )
    }

    #[test]
    fn a_role_is_given_only_by_a_key_holding_all_of_it() {
        assert!(check_role_grantable(&caller(&["*"]), Role::Admin).is_ok());
        let forbidden = |c: &Caller, r| match check_role_grantable(c, r) {
            Err(AppError::Forbidden { scope }) => scope,
            other => panic!("{other:?}"),
        };
        let users_only = caller(&["users:write"]);
        assert_eq!(forbidden(&users_only, Role::Admin), "*");
        assert_eq!(forbidden(&users_only, Role::Viewer), "contacts:read");
        assert_eq!(forbidden(&users_only, Role::Member), "contacts:write");
        let readers: Vec<String> = SCOPE_RESOURCES
            .iter()
            .map(|r| format!("{r}:read"))
            .collect();
        let readers: Vec<&str> = readers.iter().map(String::as_str).collect();
        assert!(check_role_grantable(&caller(&readers), Role::Viewer).is_ok());
        assert_eq!(forbidden(&caller(&readers), Role::Member), "contacts:write");
    }
}
