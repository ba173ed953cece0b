//! API key management (decisions §7): list, create, revoke and roll the keys of the caller's
//! mode. Secrets are shown once, when a key is created or rolled; only their hash is stored.

use crm_domain::{
    audit::{changes, secret_changed},
    history::FieldChange,
    ApiKeyId, Timestamp, ValidationError,
};
use serde_json::{json, Value};

use crate::{
    audit::Audited,
    auth::{generate_key, hash_key, ApiKeyRecord, Caller, Scope, Scopes, SCOPE_RESOURCES},
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    App,
};

const LIST: &str = "keys";
pub const MAX_NAME_LEN: usize = 200;
/// The longest a rolled key's old secret may keep working (as Stripe allows).
pub const MAX_EXPIRE_OLD_AFTER_SECONDS: u64 = 7 * 24 * 60 * 60;

/// A key with its secret, which is shown this once.
#[derive(Debug)]
pub struct NewKey {
    pub key: ApiKeyRecord,
    pub secret: String,
}

/// Every scope a key may be given: `*` and `<resource>:read|write`.
pub fn all_scopes() -> Vec<String> {
    std::iter::once("*".to_owned())
        .chain(
            SCOPE_RESOURCES
                .iter()
                .flat_map(|r| [format!("{r}:read"), format!("{r}:write")]),
        )
        .collect()
}

/// A key may hand out only what it holds itself: `*` only from a `*` key, `x:write` only from a
/// key that may write `x`, and so on. Otherwise `keys:write` would be a way to every scope.
fn check_grantable(caller: &Caller, requested: &[String]) -> Result<(), AppError> {
    for s in requested {
        let held = if s == "*" {
            caller.scopes.0.iter().any(|c| c == "*")
        } else {
            let needed = s.split_once(':').and_then(|(res, acc)| {
                let resource = SCOPE_RESOURCES.iter().find(|r| **r == res)?;
                Some(if acc == "write" {
                    Scope::write(resource)
                } else {
                    Scope::read(resource)
                })
            });
            needed.is_some_and(|n| caller.scopes.allows(n))
        };
        if !held {
            return Err(AppError::Forbidden { scope: s.clone() });
        }
    }
    Ok(())
}

fn check_name(name: Option<String>) -> Result<String, AppError> {
    let name = name.map(|n| n.trim().to_owned()).unwrap_or_default();
    if name.is_empty() {
        return Err(ValidationError::invalid("name", "name is required").into());
    }
    if name.chars().count() > MAX_NAME_LEN {
        return Err(ValidationError::invalid(
            "name",
            format!("name is at most {MAX_NAME_LEN} characters"),
        )
        .into());
    }
    Ok(name)
}

fn check_scopes(scopes: Option<Vec<String>>) -> Result<Vec<String>, AppError> {
    let scopes = scopes.unwrap_or_default();
    if scopes.is_empty() {
        return Err(ValidationError::invalid(
            "scopes",
            "scopes must name at least one scope, such as \"contacts:read\" or \"*\"",
        )
        .into());
    }
    let mut unique: Vec<String> = Vec::with_capacity(scopes.len());
    for s in scopes {
        if !unique.contains(&s) {
            unique.push(s);
        }
    }
    Scopes::parse(unique).map(|s| s.0).map_err(|bad| {
        ValidationError::UnknownValue {
            field: "scopes".into(),
            value: bad,
            valid_options: all_scopes(),
        }
        .into()
    })
}

/// What the audit log shows of a key: never its hash.
fn audit_shape(key: &ApiKeyRecord) -> Value {
    json!({
        "name": key.name,
        "scopes": key.scopes,
        "mode": key.mode.as_str(),
        "revoked_at": key.revoked_at.map(|t| t.millis()),
        "expires_at": key.expires_at.map(|t| t.millis()),
    })
}

/// A new key's audited changes: its members and, redacted, its secret.
fn created_changes(key: &ApiKeyRecord) -> Vec<FieldChange> {
    let mut out = changes(None, Some(&audit_shape(key)));
    out.push(FieldChange {
        field: "secret".into(),
        from: Value::Null,
        to: json!(crm_domain::audit::REDACTED),
    });
    out
}

impl App {
    fn key_id(id: &str) -> Result<ApiKeyId, AppError> {
        ApiKeyId::parse(id).map_err(|_| AppError::not_found("key", id))
    }

    /// The key as stored, with a use this process has not written yet.
    fn with_pending_use(&self, mut key: ApiKeyRecord) -> ApiKeyRecord {
        if let Some(at) = self.meter.pending_touch(&key.id) {
            key.last_used_at = Some(key.last_used_at.map_or(at, |t| t.max(at)));
        }
        key
    }

    fn new_key_record(
        &self,
        caller: &Caller,
        name: String,
        scopes: Vec<String>,
        secret: &str,
        now: Timestamp,
    ) -> ApiKeyRecord {
        ApiKeyRecord {
            id: ApiKeyId::from_uuid(self.ids.new_uuid()),
            workspace_id: caller.tenant.workspace_id.clone(),
            mode: caller.tenant.mode,
            name,
            scopes,
            key_hash: hash_key(secret),
            created_at: now,
            last_used_at: None,
            revoked_at: None,
            expires_at: None,
        }
    }

    /// The keys of the caller's mode, newest first, revoked and expired ones included.
    pub async fn list_keys(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<ApiKeyRecord>, AppError> {
        let slice = slice_for(&page, &caller.tenant, LIST, "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_api_keys(&caller.tenant, &slice).await?;
        Ok(
            page_from(rows, &page, &caller.tenant, LIST, "", |k| k.id.to_string())
                .map(|k| self.with_pending_use(k)),
        )
    }

    pub async fn get_key(&self, caller: &Caller, id: &str) -> Result<ApiKeyRecord, AppError> {
        let id = Self::key_id(id)?;
        let mut tx = self.store.begin_read().await?;
        let key = tx
            .get_api_key(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("key", id.as_str()))?;
        Ok(self.with_pending_use(key))
    }

    /// Creates a key of the caller's mode with `scopes` (each held by the caller).
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_key(
        &self,
        caller: &Caller,
        name: Option<String>,
        scopes: Option<Vec<String>>,
    ) -> Result<NewKey, AppError> {
        let name = check_name(name)?;
        let scopes = check_scopes(scopes)?;
        check_grantable(caller, &scopes)?;
        let secret = generate_key(caller.tenant.mode);
        let key = self.new_key_record(caller, name, scopes, &secret, self.clock.now());
        let mut tx = self.store.begin_write().await?;
        tx.insert_api_key(&key).await?;
        let what = Audited::new("key.created", "key", key.id.as_str(), created_changes(&key));
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(NewKey { key, secret })
    }

    /// Revokes a key at once: from the next request on, on every server process, it gets 401.
    /// Revoking a revoked key answers the same.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn revoke_key(&self, caller: &Caller, id: &str) -> Result<ApiKeyRecord, AppError> {
        let id = Self::key_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let mut key = tx
            .get_api_key(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("key", id.as_str()))?;
        if key.revoked_at.is_none() {
            let before = audit_shape(&key);
            key.revoked_at = Some(self.clock.now());
            tx.mark_config_changed(&key.workspace_id);
            tx.update_api_key_state(&key).await?;
            let diff = changes(Some(&before), Some(&audit_shape(&key)));
            self.audit(
                &mut tx,
                caller,
                Audited::new("key.revoked", "key", id.as_str(), diff),
            )
            .await?;
            tx.commit().await?;
        }
        Ok(self.with_pending_use(key))
    }

    /// Renames a key (decisions §3: `PATCH /keys/{id}` `{name}`); a revoked or expired key may
    /// be renamed too. Renaming to the same name changes nothing and writes no audit entry.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn rename_key(
        &self,
        caller: &Caller,
        id: &str,
        name: Option<String>,
    ) -> Result<ApiKeyRecord, AppError> {
        let id = Self::key_id(id)?;
        let name = check_name(name)?;
        let mut tx = self.store.begin_write().await?;
        let mut key = tx
            .get_api_key(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("key", id.as_str()))?;
        if key.name != name {
            let before = audit_shape(&key);
            key.name = name;
            // Cached callers copy the key's name into history entries: forget them.
            tx.mark_config_changed(&key.workspace_id);
            tx.rename_api_key(&key).await?;
            let diff = changes(Some(&before), Some(&audit_shape(&key)));
            self.audit(
                &mut tx,
                caller,
                Audited::new("key.renamed", "key", id.as_str(), diff),
            )
            .await?;
            tx.commit().await?;
        }
        Ok(self.with_pending_use(key))
    }

    /// Replaces a key's secret: a new key (new id and secret, same name and scopes) is created,
    /// and the old secret keeps working for `expire_old_after_seconds` (default 0: it stops now).
    /// Rolling hands out the key's scopes, so the caller must hold them all, as for a create.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn roll_key(
        &self,
        caller: &Caller,
        id: &str,
        expire_old_after_seconds: Option<u64>,
    ) -> Result<NewKey, AppError> {
        let id = Self::key_id(id)?;
        let grace = expire_old_after_seconds.unwrap_or(0);
        if grace > MAX_EXPIRE_OLD_AFTER_SECONDS {
            return Err(ValidationError::invalid(
                "expire_old_after_seconds",
                format!(
                    "expire_old_after_seconds is at most {MAX_EXPIRE_OLD_AFTER_SECONDS} (7 days)"
                ),
            )
            .into());
        }
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let mut old = tx
            .get_api_key(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("key", id.as_str()))?;
        if old.revoked_at.is_some() {
            return Err(AppError::Conflict {
                detail: "this key is revoked; create a new key instead".into(),
                existing: None,
            });
        }
        if old.expires_at.is_some_and(|at| at <= now) {
            return Err(AppError::Conflict {
                detail: "this key has expired; roll its successor or create a new key".into(),
                existing: None,
            });
        }
        check_grantable(caller, &old.scopes)?;
        let secret = generate_key(caller.tenant.mode);
        let key = self.new_key_record(caller, old.name.clone(), old.scopes.clone(), &secret, now);
        let expiry = now.plus_millis(grace as i64 * 1000);
        let before = audit_shape(&old);
        old.expires_at = Some(old.expires_at.map_or(expiry, |at| at.min(expiry)));
        tx.mark_config_changed(&old.workspace_id);
        tx.update_api_key_state(&old).await?;
        tx.insert_api_key(&key).await?;
        let mut diff = changes(Some(&before), Some(&audit_shape(&old)));
        diff.push(FieldChange {
            field: "successor_id".into(),
            from: Value::Null,
            to: json!(key.id.as_str()),
        });
        diff.push(secret_changed("secret"));
        self.audit(
            &mut tx,
            caller,
            Audited::new("key.rolled", "key", id.as_str(), diff),
        )
        .await?;
        tx.commit().await?;
        Ok(NewKey { key, secret })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{Mode, Plan, Tenant, WorkspaceId};

    fn caller(scopes: &[&str]) -> Caller {
        let ws = WorkspaceId::from_uuid(uuid::Uuid::now_v7());
        Caller::new(
            Tenant {
                workspace_id: ws.clone(),
                mode: Mode::Test,
            },
            ApiKeyId::from_uuid(uuid::Uuid::now_v7()),
            Scopes(scopes.iter().map(|s| s.to_string()).collect()),
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
    fn a_key_grants_only_scopes_it_holds() {
        let c = caller(&["keys:write", "contacts:write"]);
        assert!(check_grantable(
            &c,
            &[
                "contacts:read".into(),
                "contacts:write".into(),
                "keys:read".into()
            ]
        )
        .is_ok());
        assert!(
            matches!(check_grantable(&c, &["deals:read".into()]), Err(AppError::Forbidden { scope }) if scope == "deals:read")
        );
        assert!(
            matches!(check_grantable(&c, &["*".into()]), Err(AppError::Forbidden { scope }) if scope == "*")
        );
        assert!(check_grantable(&caller(&["*"]), &["*".into(), "deals:write".into()]).is_ok());
    }

    #[test]
    fn scopes_are_checked_and_deduplicated() {
        assert_eq!(
            check_scopes(Some(vec!["contacts:read".into(), "contacts:read".into()])).unwrap(),
            vec!["contacts:read"]
        );
        assert!(matches!(
            check_scopes(Some(vec![])),
            Err(AppError::Validation(ValidationError::Invalid { .. }))
        ));
        match check_scopes(Some(vec!["contact:read".into()])) {
            Err(AppError::Validation(ValidationError::UnknownValue { valid_options, .. })) => {
                assert!(
                    valid_options.contains(&"contacts:read".to_owned())
                        && valid_options.contains(&"*".to_owned())
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
