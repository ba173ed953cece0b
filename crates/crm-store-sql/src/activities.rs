//! Activities (`ActivityRepo`): every statement the same on both backends, the list included
//! (it has no text search). Activities page by when they happened, newest first, so their cursor
//! is `"<occurred_at ms>:<id>"` rather than an id.
//! The insert and update texts are the store's [`Statements`].

use crm_app::{
    ports::{ActivityFilter, RowLock, Slice},
    StoreError,
};
use crm_domain::{Activity, ActivityId, ContactId, DealId, Tenant};
use sqlx::QueryBuilder;

use crate::{
    binds::bind_activity,
    clauses::{and_equals, tenant_query, tenant_where},
    corrupt,
    rows::{activity, ACTIVITY_COLUMNS},
    sql::PushArg,
    statements::Statements,
    Arg, Unit,
};

/// The position an activity cursor names: `(occurred_at ms, id)`.
fn activity_position(before: &str) -> Result<(i64, &str), StoreError> {
    let (ms, id) = before
        .split_once(':')
        .ok_or_else(|| corrupt("activity cursor"))?;
    Ok((ms.parse().map_err(|_| corrupt("activity cursor"))?, id))
}

/// Inserts an activity.
pub async fn insert_activity<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    a: &Activity,
) -> Result<(), StoreError> {
    let q = bind_activity(tenant_query::<U::Db>(U::INSERT_ACTIVITY, tenant), a)
        .arg(a.created_at.millis());
    tx.execute(q).await?;
    Ok(())
}

/// An activity by id, locked for update in a write transaction.
pub async fn get_activity<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ActivityId,
) -> Result<Option<Activity>, StoreError> {
    let sql = format!(
        "SELECT {ACTIVITY_COLUMNS} FROM activities WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
        tx.locking(RowLock::Update)
    );
    tx.optional(
        tenant_query::<U::Db>(&sql, tenant).arg(id.as_str()),
        activity,
    )
    .await
}

/// Updates an activity if its stored version is the one before `a`'s; `Stale` if not.
pub async fn update_activity<U: Statements>(
    tx: &mut U,
    tenant: &Tenant,
    a: &Activity,
) -> Result<(), StoreError> {
    let q = bind_activity(tenant_query::<U::Db>(U::UPDATE_ACTIVITY, tenant), a).arg(a.version - 1);
    match tx.execute(q).await? {
        0 => Err(StoreError::Stale),
        _ => Ok(()),
    }
}

pub async fn delete_activity<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    id: &ActivityId,
) -> Result<(), StoreError> {
    let q = tenant_query::<U::Db>(
        "DELETE FROM activities WHERE workspace_id = $1 AND mode = $2 AND id = $3",
        tenant,
    )
    .arg(id.as_str());
    tx.execute(q).await?;
    Ok(())
}

/// A page of a tenant's activities, newest first by when they happened.
pub async fn list_activities<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    filter: &ActivityFilter,
    slice: &Slice,
) -> Result<Vec<Activity>, StoreError> {
    let mut qb = QueryBuilder::<U::Db>::new(format!("SELECT {ACTIVITY_COLUMNS} FROM activities"));
    tenant_where(&mut qb, tenant);
    and_equals(
        &mut qb,
        "contact_id",
        filter.contact_id.as_ref().map(ContactId::as_str),
    );
    and_equals(
        &mut qb,
        "deal_id",
        filter.deal_id.as_ref().map(DealId::as_str),
    );
    and_equals(&mut qb, "type", filter.activity_type.as_deref());
    if let Some(before) = &slice.before {
        let (ms, id) = activity_position(before)?;
        // A row comparison, which the (…, occurred_at, id) indexes serve as one range.
        qb.push(" AND (occurred_at, id) < (")
            .push_arg(ms)
            .push(", ")
            .push_arg(id)
            .push(")");
    }
    qb.push(" ORDER BY occurred_at DESC, id DESC LIMIT ")
        .push_arg(i64::from(slice.limit));
    tx.all_built(&mut qb, activity).await
}

/// `impl ActivityRepo for $tx` with the statements above (`$tx` implements [`Statements`]).
#[macro_export]
macro_rules! impl_activity_repo {
    ($tx:ty) => {
        $crate::port_impl!($crate::reexport::ActivityRepo, $tx, activities, [
            fn insert_activity(tenant: &$crate::reexport::Tenant, a: &$crate::reexport::Activity) -> Result<(), $crate::reexport::StoreError>;
            fn get_activity(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ActivityId) -> Result<Option<$crate::reexport::Activity>, $crate::reexport::StoreError>;
            fn update_activity(tenant: &$crate::reexport::Tenant, a: &$crate::reexport::Activity) -> Result<(), $crate::reexport::StoreError>;
            fn delete_activity(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ActivityId) -> Result<(), $crate::reexport::StoreError>;
            fn list_activities(tenant: &$crate::reexport::Tenant, filter: &$crate::reexport::ActivityFilter, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::Activity>, $crate::reexport::StoreError>;
        ], []);
    };
}
