//! API keys listed, revoked and touched (`KeyRepo`): the same statements on both backends but
//! for the name of the two-argument maximum ([`Unit::GREATEST`]).

use crm_app::{
    auth::ApiKeyRecord,
    ports::{KeyUse, Slice},
    StoreError,
};
use crm_domain::{Tenant, Timestamp};
use sqlx::QueryBuilder;

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    rows::{api_key, KEY_COLUMNS},
    Arg, Unit,
};

pub async fn list_api_keys<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    slice: &Slice,
) -> Result<Vec<ApiKeyRecord>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {KEY_COLUMNS} FROM api_keys k"));
    tenant_where(&mut qb, tenant);
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, api_key).await
}

pub async fn update_api_key_state<U: Unit>(
    tx: &mut U,
    key: &ApiKeyRecord,
) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>(
        "UPDATE api_keys SET revoked_at = $1, expires_at = $2 WHERE workspace_id = $3 AND mode = $4 AND id = $5",
    )
    .arg(key.revoked_at.map(Timestamp::millis))
    .arg(key.expires_at.map(Timestamp::millis))
    .arg(key.workspace_id.as_str())
    .arg(key.mode.as_str())
    .arg(key.id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn rename_api_key<U: Unit>(tx: &mut U, key: &ApiKeyRecord) -> Result<bool, StoreError> {
    let q = sqlx::query::<U::Db>(
        "UPDATE api_keys SET name = $1 WHERE workspace_id = $2 AND mode = $3 AND id = $4",
    )
    .arg(key.name.as_str())
    .arg(key.workspace_id.as_str())
    .arg(key.mode.as_str())
    .arg(key.id.as_str());
    Ok(tx.execute(q).await? == 1)
}

/// Raises each key's `last_used_at`, never lowering it.
pub async fn touch_api_keys<U: Unit>(tx: &mut U, uses: &[KeyUse]) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE api_keys SET last_used_at = {}(COALESCE(last_used_at, $4), $4)
         WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        U::GREATEST
    );
    for u in uses {
        let q = tenant_query::<U::Db>(&sql, &u.tenant)
            .arg(u.id.as_str())
            .arg(u.at.millis());
        tx.execute(q).await?;
    }
    Ok(())
}

/// `impl KeyRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_key_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::KeyRepo, $tx, keys, [
            fn list_api_keys(tenant: &$crate::reexport::Tenant, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::ApiKeyRecord>, $crate::reexport::StoreError>;
            fn update_api_key_state(key: &$crate::reexport::ApiKeyRecord) -> Result<bool, $crate::reexport::StoreError>;
            fn rename_api_key(key: &$crate::reexport::ApiKeyRecord) -> Result<bool, $crate::reexport::StoreError>;
            fn touch_api_keys(uses: &[$crate::reexport::KeyUse]) -> Result<(), $crate::reexport::StoreError>;
        ], []);
    };
}
