//! Workspaces and the API keys that authenticate into them (`WorkspaceRepo`): the same
//! statements on both backends.

use crm_app::{
    auth::{ApiKeyRecord, Workspace},
    StoreError,
};
use crm_domain::{ApiKeyId, Tenant, Timestamp, WorkspaceId};

use crate::{
    clauses::tenant_query,
    rows::{api_key, workspace, KEY_COLUMNS, WORKSPACE_COLUMNS},
    sql::Col,
    Arg, Unit,
};

/// A value a 64-bit signed column cannot hold.
fn out_of_range(what: &str) -> StoreError {
    StoreError::Backend(format!("{what} is out of range").into())
}

pub async fn insert_workspace<U: Unit>(tx: &mut U, ws: &Workspace) -> Result<(), StoreError> {
    let included = ws
        .included_requests_override
        .map(i64::try_from)
        .transpose()
        .map_err(|_| out_of_range("included_requests_override"))?;
    let q = sqlx::query::<U::Db>(
        "INSERT INTO workspaces (id, name, plan, created_at, overage_cap_usd, rate_limit_override, included_requests_override)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .arg(ws.id.as_str())
    .arg(ws.name.as_str())
    .arg(ws.plan.as_str())
    .arg(ws.created_at.millis())
    .arg(ws.overage_cap_usd)
    .arg(ws.rate_limit_override.map(i64::from))
    .arg(included);
    tx.execute(q).await?;
    Ok(())
}

pub async fn get_workspace<U: Unit>(
    tx: &mut U,
    id: &WorkspaceId,
) -> Result<Option<Workspace>, StoreError> {
    let sql = format!("SELECT {WORKSPACE_COLUMNS} FROM workspaces w WHERE w.id = $1");
    tx.optional(sqlx::query::<U::Db>(&sql).arg(id.as_str()), workspace)
        .await
}

pub async fn has_workspaces<U: Unit>(tx: &mut U) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>("SELECT EXISTS (SELECT 1 FROM workspaces) AS found");
    Ok(tx
        .optional(q, |r| r.col::<bool>("found"))
        .await?
        .unwrap_or(false))
}

/// The id and the hash are unique; `ON CONFLICT DO NOTHING` reports a clash as `Duplicate`
/// without aborting a Postgres transaction.
pub async fn insert_api_key<U: Unit>(tx: &mut U, key: &ApiKeyRecord) -> Result<(), StoreError> {
    let scopes =
        serde_json::to_string(&key.scopes).map_err(|e| StoreError::Backend(Box::new(e)))?;
    let q = sqlx::query::<U::Db>(
        "INSERT INTO api_keys (workspace_id, mode, id, name, scopes, key_hash, created_at, last_used_at, revoked_at, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
    )
    .arg(key.workspace_id.as_str())
    .arg(key.mode.as_str())
    .arg(key.id.as_str())
    .arg(key.name.as_str())
    .arg(scopes)
    .arg(key.key_hash.as_str())
    .arg(key.created_at.millis())
    .arg(key.last_used_at.map(Timestamp::millis))
    .arg(key.revoked_at.map(Timestamp::millis))
    .arg(key.expires_at.map(Timestamp::millis));
    match tx.execute(q).await? {
        0 => Err(StoreError::Duplicate),
        _ => Ok(()),
    }
}

pub async fn find_api_key<U: Unit>(
    tx: &mut U,
    hash: &str,
) -> Result<Option<(ApiKeyRecord, Workspace)>, StoreError> {
    let sql = format!(
        "SELECT {KEY_COLUMNS}, {WORKSPACE_COLUMNS} FROM api_keys k JOIN workspaces w ON w.id = k.workspace_id WHERE k.key_hash = $1"
    );
    tx.optional(sqlx::query::<U::Db>(&sql).arg(hash), |r| {
        Ok((api_key(r)?, workspace(r)?))
    })
    .await
}

pub async fn get_api_key<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ApiKeyId,
) -> Result<Option<ApiKeyRecord>, StoreError> {
    let sql = format!(
        "SELECT {KEY_COLUMNS} FROM api_keys k WHERE k.workspace_id = $1 AND k.mode = $2 AND k.id = $3"
    );
    tx.optional(
        tenant_query::<U::Db>(&sql, tenant).arg(id.as_str()),
        api_key,
    )
    .await
}

/// `impl WorkspaceRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_workspace_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::WorkspaceRepo, $tx, workspaces, [
            fn insert_workspace(ws: &$crate::reexport::Workspace) -> Result<(), $crate::reexport::StoreError>;
            fn get_workspace(id: &$crate::reexport::WorkspaceId) -> Result<Option<$crate::reexport::Workspace>, $crate::reexport::StoreError>;
            fn has_workspaces() -> Result<bool, $crate::reexport::StoreError>;
            fn insert_api_key(key: &$crate::reexport::ApiKeyRecord) -> Result<(), $crate::reexport::StoreError>;
            fn find_api_key(hash: &str) -> Result<Option<($crate::reexport::ApiKeyRecord, $crate::reexport::Workspace)>, $crate::reexport::StoreError>;
            fn get_api_key(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ApiKeyId) -> Result<Option<$crate::reexport::ApiKeyRecord>, $crate::reexport::StoreError>;
        ], []);
    };
}
