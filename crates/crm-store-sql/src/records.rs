//! Whether a record of any kind exists and the owners records name (`RecordRepo`), and the events
//! of the outbox as they are read back (`EventRepo::list_events`): the same statements on both
//! backends.

use crm_app::{
    ports::{ClearedReference, RowLock, Slice},
    StoreError,
};
use crm_domain::{Company, CompanyId, Event, ObjectKind, Tenant, Timestamp, UserId};
use sqlx::QueryBuilder;

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    record_table,
    rows::{company, event, COMPANY_COLUMNS, EVENT_COLUMNS},
    sql::{Col, PushArg},
    Arg, Unit,
};

pub async fn record_exists<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    object: ObjectKind,
    id: &str,
) -> Result<bool, StoreError> {
    let sql = format!(
        "SELECT EXISTS (SELECT 1 FROM {} WHERE workspace_id = $1 AND mode = $2 AND id = $3) AS found",
        record_table(object)
    );
    let q = tenant_query::<U::Db>(&sql, tenant).arg(id);
    Ok(tx
        .optional(q, |r| r.col::<bool>("found"))
        .await?
        .unwrap_or(false))
}

/// Whether the tenant's workspace has the user `id` (users have no mode). A write transaction
/// holds the row `FOR KEY SHARE`: the user cannot be deleted until it ends, and a sign-in's
/// update of the row is not held up.
pub async fn owner_exists<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &str,
) -> Result<bool, StoreError> {
    let sql = format!(
        "SELECT 1 AS found FROM users WHERE workspace_id = $1 AND id = $2{}",
        tx.locking(RowLock::KeyShare)
    );
    let q = sqlx::query::<U::Db>(&sql)
        .arg(tenant.workspace_id.as_str())
        .arg(id);
    Ok(tx.optional(q, |r| r.col::<i32>("found")).await?.is_some())
}

/// The tables whose records have an owner.
const OWNED: [ObjectKind; 3] = [ObjectKind::Contact, ObjectKind::Company, ObjectKind::Deal];

/// Sets `owner_id` to null on the tenant's records `user` owns, tombstones and soft-deleted ones
/// included; answers them by table, then id.
pub async fn clear_owner<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    user: &UserId,
    now: Timestamp,
) -> Result<Vec<ClearedReference>, StoreError> {
    let mut out = Vec::new();
    for object in OWNED {
        let sql = format!(
            "UPDATE {} SET owner_id = NULL, version = version + 1, updated_at = $4 \
             WHERE workspace_id = $1 AND mode = $2 AND owner_id = $3 RETURNING id, version",
            record_table(object)
        );
        let q = tenant_query::<U::Db>(&sql, tenant)
            .arg(user.as_str())
            .arg(now.millis());
        let mut rows = tx
            .all(q, |r| {
                Ok((r.col::<String>("id")?, r.col::<i64>("version")?))
            })
            .await?;
        rows.sort_unstable();
        out.extend(rows.into_iter().map(|(id, version)| ClearedReference {
            object,
            id,
            field: crm_domain::owner::FIELD.to_owned(),
            version,
        }));
    }
    Ok(out)
}

/// The tenant's companies of `ids`, soft-deleted ones too, in one statement.
pub async fn companies_by_ids<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    ids: &[CompanyId],
) -> Result<Vec<Company>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {COMPANY_COLUMNS} FROM companies"));
    tenant_where(&mut qb, tenant);
    U::push_in(&mut qb, "id", ids.iter().map(CompanyId::as_str));
    tx.all_built(&mut qb, company).await
}

/// A tenant's events newest first, of one type if asked.
pub async fn list_events<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    event_type: Option<&str>,
    slice: &Slice,
) -> Result<Vec<Event>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {EVENT_COLUMNS} FROM events"));
    tenant_where(&mut qb, tenant);
    if let Some(t) = event_type {
        qb.push(" AND type = ").push_arg(t);
    }
    slice_clause(&mut qb, slice);
    tx.all_built(&mut qb, event).await
}

/// `impl RecordRepo for $tx` with the statements above.
#[macro_export]
macro_rules! impl_record_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::RecordRepo, $tx, records, [
            fn record_exists(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, id: &str) -> Result<bool, $crate::reexport::StoreError>;
            fn owner_exists(tenant: &$crate::reexport::Tenant, id: &str) -> Result<bool, $crate::reexport::StoreError>;
            fn clear_owner(tenant: &$crate::reexport::Tenant, user: &$crate::reexport::UserId, now: $crate::reexport::Timestamp) -> Result<Vec<$crate::reexport::ClearedReference>, $crate::reexport::StoreError>;
            fn companies_by_ids(tenant: &$crate::reexport::Tenant, ids: &[$crate::reexport::CompanyId]) -> Result<Vec<$crate::reexport::Company>, $crate::reexport::StoreError>;
        ], []);
    };
}

/// `impl EventRepo for $tx` with `list_events` above, and the store's own inserts (each backend
/// queues an event for dispatch its own way) in the braces.
#[macro_export]
macro_rules! impl_event_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::EventRepo, $tx, records, [
            fn list_events(tenant: &$crate::reexport::Tenant, event_type: Option<&str>, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::Event>, $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}
