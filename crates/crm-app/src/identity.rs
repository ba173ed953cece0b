//! Who is calling and what a key allows: workspaces, API key records, scopes and the caller an
//! authenticated key makes. Plain types shared by the ports (the store keeps workspaces and keys;
//! the configuration cache keeps callers) and the use cases; a leaf module.

use std::{
    ops::Deref,
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
};

use crm_domain::{
    history::{Actor, ActorType, Author, Channel, Via},
    ApiKeyId, Mode, Plan, Role, Tenant, Timestamp, UserId, WorkspaceId,
};

use crate::error::AppError;

#[derive(Debug, Clone, PartialEq)]
pub struct Workspace {
    pub id: WorkspaceId,
    pub name: String,
    pub plan: Plan,
    pub created_at: Timestamp,
    /// USD cap on metered overage; `None` is unlimited.
    pub overage_cap_usd: Option<f64>,
    pub rate_limit_override: Option<u32>,
    pub included_requests_override: Option<u64>,
    /// Days history entries are kept; `None`: forever (decisions §25).
    pub history_retention_days: Option<u32>,
    /// Days emails are kept; `None`: forever (decisions §25).
    pub email_retention_days: Option<u32>,
}

impl Workspace {
    /// The limits in force: the plan's, with the operator's overrides.
    pub fn limits(&self) -> crm_domain::PlanLimits {
        self.plan
            .limits_with(self.rate_limit_override, self.included_requests_override)
    }
}

#[derive(Clone, PartialEq)]
pub struct ApiKeyRecord {
    pub id: ApiKeyId,
    pub workspace_id: WorkspaceId,
    pub mode: Mode,
    pub name: String,
    pub scopes: Vec<String>,
    /// Hex SHA-256 of the whole key. The key itself is never stored.
    pub key_hash: String,
    pub created_at: Timestamp,
    pub last_used_at: Option<Timestamp>,
    pub revoked_at: Option<Timestamp>,
    /// When a rolled key's old secret stops working.
    pub expires_at: Option<Timestamp>,
}

impl std::fmt::Debug for ApiKeyRecord {
    // The hash is not the key, but it is still a credential lookup value: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyRecord")
            .field("id", &self.id)
            .field("mode", &self.mode)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// What the key cache knows a key by ([`crate::auth::key_digest`]): never the key itself.
pub type KeyDigest = [u8; 16];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// A permission an operation needs: `<resource>:read` or `<resource>:write`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    pub resource: &'static str,
    pub access: Access,
}

impl Scope {
    /// For operations that touch several kinds of record (search, batch): the operation checks
    /// the scope of each record kind itself, and the generic check lets it through.
    pub const PER_RECORD: Scope = Scope {
        resource: "per-record",
        access: Access::Read,
    };

    pub const fn read(resource: &'static str) -> Scope {
        Scope {
            resource,
            access: Access::Read,
        }
    }

    pub const fn write(resource: &'static str) -> Scope {
        Scope {
            resource,
            access: Access::Write,
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Scope::PER_RECORD {
            return f.write_str("per-record");
        }
        let access = match self.access {
            Access::Read => "read",
            Access::Write => "write",
        };
        write!(f, "{}:{access}", self.resource)
    }
}

/// Resources that scopes name (decisions §7).
pub const SCOPE_RESOURCES: [&str; 20] = [
    "contacts",
    "companies",
    "deals",
    "activities",
    "pipelines",
    "registry",
    "automations",
    "sequences",
    "webhooks",
    "connections",
    "templates",
    "settings",
    "usage",
    "events",
    "emails",
    "keys",
    "imports",
    // The audit log (decisions §25): `audit:read`.
    "audit",
    // Erasure of contacts, companies and deals (decisions §25): `erase:write`, beside the
    // object's own `:write`.
    "erase",
    // People who sign in to the console (decisions §21, §24).
    "users",
];

/// The scopes granted to a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scopes(pub Vec<String>);

impl Scopes {
    pub fn all() -> Scopes {
        Scopes(vec!["*".to_owned()])
    }

    /// `write` implies `read`; `*` allows everything.
    pub fn allows(&self, needed: Scope) -> bool {
        self.0.iter().any(|s| {
            if s == "*" {
                return true;
            }
            match s.split_once(':') {
                Some((res, acc)) if res == needed.resource => {
                    acc == "write" || (acc == "read" && needed.access == Access::Read)
                }
                _ => false,
            }
        })
    }

    /// Every scope a key may be given: `*`, then each resource's `read` and `write`.
    pub fn options() -> Vec<String> {
        std::iter::once("*".to_owned())
            .chain(
                SCOPE_RESOURCES
                    .iter()
                    .flat_map(|r| [format!("{r}:read"), format!("{r}:write")]),
            )
            .collect()
    }

    /// Checks a list of requested scopes: each `*` or `<resource>:read|write`.
    pub fn parse(requested: Vec<String>) -> Result<Scopes, String> {
        for s in &requested {
            let ok = s == "*"
                || s.split_once(':').is_some_and(|(r, a)| {
                    SCOPE_RESOURCES.contains(&r) && (a == "read" || a == "write")
                });
            if !ok {
                return Err(s.clone());
            }
        }
        Ok(Scopes(requested))
    }
}

/// Who is calling: the tenant of the key, what it may do, and the workspace's plan. Built once
/// per key and kept in the key cache, so a request takes a reference count, not copies of the
/// key's scopes and the workspace's fields.
#[derive(Debug, Clone)]
pub struct Caller(Arc<Identity>, Origin);

/// Where one call came from: its transport and its request id, which the history entries of its
/// writes carry (decisions §24, "History, corrected"). A caller from the key cache has the
/// default, `system` and no request id; the entry point sets the call's own
/// ([`Caller::with_origin`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub channel: Channel,
    pub request_id: Option<Arc<str>>,
}

impl Default for Origin {
    fn default() -> Self {
        Origin {
            channel: Channel::System,
            request_id: None,
        }
    }
}

/// What authenticated: an API key, or a user signed in to the console (decisions §21: a session
/// resolves to the same identity a key does, so scopes, plans and history apply alike).
#[derive(Debug, Clone, PartialEq)]
pub enum Principal {
    /// The key and its name when it was read: history entries copy the name.
    Key { id: ApiKeyId, name: String },
    /// The user and its name when the session was read.
    User { id: UserId, name: String },
}

#[derive(Debug)]
pub struct Identity {
    pub tenant: Tenant,
    pub principal: Principal,
    pub scopes: Scopes,
    pub workspace: Workspace,
    /// When this copy last passed a use of the key to the meter (Unix milliseconds; 0: never):
    /// uses closer together than [`TOUCH_EVERY_MS`] are not passed on (the meter's `touch` takes a
    /// lock both worker threads contend for).
    touched_ms: AtomicI64,
}

/// `last_used_at` is kept to this, and written by the next flush (about a second).
pub const TOUCH_EVERY_MS: i64 = 250;

impl Caller {
    pub fn new(tenant: Tenant, key_id: ApiKeyId, scopes: Scopes, workspace: Workspace) -> Caller {
        Caller::named(tenant, key_id, String::new(), scopes, workspace)
    }

    /// [`Caller::new`] of a key with a name.
    pub fn named(
        tenant: Tenant,
        key_id: ApiKeyId,
        key_name: String,
        scopes: Scopes,
        workspace: Workspace,
    ) -> Caller {
        Caller::of(
            tenant,
            Principal::Key {
                id: key_id,
                name: key_name,
            },
            scopes,
            workspace,
        )
    }

    /// A user signed in to the console, working in `tenant`'s mode: its role's scopes.
    pub fn user(
        tenant: Tenant,
        id: UserId,
        name: String,
        role: Role,
        workspace: Workspace,
    ) -> Caller {
        let scopes = Scopes(role.scopes(&SCOPE_RESOURCES));
        Caller::of(tenant, Principal::User { id, name }, scopes, workspace)
    }

    fn of(tenant: Tenant, principal: Principal, scopes: Scopes, workspace: Workspace) -> Caller {
        Caller(
            Arc::new(Identity {
                tenant,
                principal,
                scopes,
                workspace,
                touched_ms: AtomicI64::new(0),
            }),
            Origin::default(),
        )
    }

    /// This caller, making the call `origin` describes.
    pub fn with_origin(&self, origin: Origin) -> Caller {
        Caller(self.0.clone(), origin)
    }

    pub fn origin(&self) -> &Origin {
        &self.1
    }

    /// The author of this call's writes, made `via`: its key or user, transport and request id.
    pub fn author(&self, via: Via) -> Author {
        let (kind, id, name) = match &self.0.principal {
            Principal::Key { id, name } => (ActorType::ApiKey, id.as_str(), name),
            Principal::User { id, name } => (ActorType::User, id.as_str(), name),
        };
        Author {
            actor: Actor {
                kind,
                id: Some(id.to_owned()),
                name: Some(name.clone()),
            },
            channel: self.1.channel,
            via,
            request_id: self.1.request_id.as_deref().map(str::to_owned),
        }
    }

    /// A copy with its own allocation, for one thread's copy of a key cache: a reference count
    /// shared by several worker threads moves its cache line between the cores on every request
    /// that clones and drops it.
    pub fn for_this_thread(&self) -> Caller {
        let Identity {
            tenant,
            principal,
            scopes,
            workspace,
            touched_ms: _,
        } = &*self.0;
        Caller::of(
            tenant.clone(),
            principal.clone(),
            scopes.clone(),
            workspace.clone(),
        )
        .with_origin(self.1.clone())
    }

    /// Whether a use at `now` should reach the meter: the first, and then one per
    /// [`TOUCH_EVERY_MS`] (per copy of the caller).
    pub(crate) fn should_touch(&self, now: Timestamp) -> bool {
        let now = now.millis();
        let last = self.0.touched_ms.load(Ordering::Relaxed);
        if last != 0 && now >= last && now - last < TOUCH_EVERY_MS {
            return false;
        }
        self.0.touched_ms.store(now, Ordering::Relaxed);
        true
    }
}

impl Deref for Caller {
    type Target = Identity;

    fn deref(&self) -> &Identity {
        &self.0
    }
}

impl Identity {
    /// The key that authenticated; `None` for a user of the console.
    pub fn key_id(&self) -> Option<&ApiKeyId> {
        match &self.principal {
            Principal::Key { id, .. } => Some(id),
            Principal::User { .. } => None,
        }
    }

    pub fn require(&self, scope: Scope) -> Result<(), AppError> {
        if scope == Scope::PER_RECORD || self.scopes.allows(scope) {
            Ok(())
        } else {
            Err(AppError::Forbidden {
                scope: scope.to_string(),
            })
        }
    }
}

/// What authentication needs of a key: the caller it makes, and whether it still works. The
/// key cache holds these (cloning one is a reference count).
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub caller: Caller,
    pub revoked_at: Option<Timestamp>,
    pub expires_at: Option<Timestamp>,
}

impl KeyAuth {
    pub fn new(record: ApiKeyRecord, workspace: Workspace) -> KeyAuth {
        let tenant = Tenant {
            workspace_id: record.workspace_id,
            mode: record.mode,
        };
        KeyAuth {
            caller: Caller::named(
                tenant,
                record.id,
                record.name,
                Scopes(record.scopes),
                workspace,
            ),
            revoked_at: record.revoked_at,
            expires_at: record.expires_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_uses_reach_the_meter_at_most_once_per_interval() {
        let w = WorkspaceId::from_uuid(uuid::Uuid::now_v7());
        let caller = Caller::new(
            Tenant {
                workspace_id: w.clone(),
                mode: Mode::Test,
            },
            ApiKeyId::from_uuid(uuid::Uuid::now_v7()),
            Scopes(vec!["*".into()]),
            Workspace {
                id: w,
                name: "w".into(),
                plan: Plan::Free,
                created_at: Timestamp::from_millis(0),
                overage_cap_usd: None,
                rate_limit_override: None,
                included_requests_override: None,
                history_retention_days: None,
                email_retention_days: None,
            },
        );
        let at = |ms| Timestamp::from_millis(1_800_000_000_000 + ms);
        assert!(caller.should_touch(at(0)), "the first use");
        assert!(!caller.should_touch(at(TOUCH_EVERY_MS - 1)));
        assert!(caller.should_touch(at(TOUCH_EVERY_MS)));
        assert!(
            caller.should_touch(at(0)),
            "a clock that went back is passed on"
        );
        // Each thread's copy counts for itself.
        let copy = caller.for_this_thread();
        assert!(copy.should_touch(at(1)) && !caller.should_touch(at(1)));
    }

    #[test]
    fn write_implies_read_and_star_allows_all() {
        let s = Scopes(vec!["contacts:write".into(), "deals:read".into()]);
        assert!(s.allows(Scope::read("contacts")));
        assert!(s.allows(Scope::write("contacts")));
        assert!(s.allows(Scope::read("deals")));
        assert!(!s.allows(Scope::write("deals")));
        assert!(!s.allows(Scope::read("companies")));
        assert!(Scopes::all().allows(Scope::write("keys")));
    }

    #[test]
    fn scope_parsing_rejects_unknown_resources() {
        assert!(Scopes::parse(vec!["contacts:read".into(), "*".into()]).is_ok());
        assert_eq!(
            Scopes::parse(vec!["contact:read".into()]),
            Err("contact:read".into())
        );
        assert!(Scopes::parse(vec!["contacts:admin".into()]).is_err());
    }

    /// The scopes the API documents as grantable are the ones a key can be given.
    #[test]
    fn every_listed_scope_parses() {
        let options = Scopes::options();
        assert_eq!(options.len(), 1 + 2 * SCOPE_RESOURCES.len());
        assert!(
            options
                .iter()
                .all(|o| Scopes::parse(vec![o.clone()]).is_ok()),
            "{options:?}"
        );
        assert!(options.contains(&"*".to_owned()) && options.contains(&"keys:write".to_owned()));
    }
}
