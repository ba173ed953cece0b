//! Whether a record of any kind exists (`RecordRepo`), and the events of the outbox as they are
//! read back (`EventRepo::list_events`): the same statements on both backends.

use crm_app::{ports::Slice, StoreError};
use crm_domain::{Event, ObjectKind, Tenant};
use sqlx::QueryBuilder;

use crate::{
    clauses::{slice_clause, tenant_query, tenant_where},
    record_table,
    rows::{event, EVENT_COLUMNS},
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

/// `impl RecordRepo for $tx` with the statement above.
#[macro_export]
macro_rules! impl_record_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::RecordRepo, $tx, records, [
            fn record_exists(tenant: &$crate::reexport::Tenant, object: $crate::reexport::ObjectKind, id: &str) -> Result<bool, $crate::reexport::StoreError>;
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
