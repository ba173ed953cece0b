//! Activities (`ActivityRepo`): every statement the same on both backends, the list included
//! (it has no text search). Activities page by when they happened, newest first, so their cursor
//! is `"<occurred_at ms>:<id>"` rather than an id.
//!
//! As for deals, the insert and update texts differ only in the JSON cast, which
//! [`impl_activity_repo!`] takes as a literal and `concat!`s at compile time.

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
    Arg, Unit,
};

/// The position an activity cursor names: `(occurred_at ms, id)`.
fn activity_position(before: &str) -> Result<(i64, &str), StoreError> {
    let (ms, id) = before
        .split_once(':')
        .ok_or_else(|| corrupt("activity cursor"))?;
    Ok((ms.parse().map_err(|_| corrupt("activity cursor"))?, id))
}

/// Inserts an activity with `sql`, the statement [`impl_activity_repo!`] writes.
pub async fn insert_activity<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    a: &Activity,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = bind_activity(tenant_query::<U::Db>(sql, tenant), a).arg(a.created_at.millis());
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

/// Updates an activity with `sql` if its stored version is the one before `a`'s; `Stale` if not.
pub async fn update_activity<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    a: &Activity,
    sql: &'static str,
) -> Result<(), StoreError> {
    let q = bind_activity(tenant_query::<U::Db>(sql, tenant), a).arg(a.version - 1);
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

/// `impl ActivityRepo for $tx` with the statements above, `$json` being the backend's
/// `Unit::JSON` as a literal (`""` or `"::jsonb"`).
#[macro_export]
macro_rules! impl_activity_repo {
    ($tx:ty, json = $json:literal) => {
        $crate::port_impl!($crate::reexport::ActivityRepo, $tx, activities, [
            fn get_activity(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ActivityId) -> Result<Option<$crate::reexport::Activity>, $crate::reexport::StoreError>;
            fn delete_activity(tenant: &$crate::reexport::Tenant, id: &$crate::reexport::ActivityId) -> Result<(), $crate::reexport::StoreError>;
            fn list_activities(tenant: &$crate::reexport::Tenant, filter: &$crate::reexport::ActivityFilter, slice: &$crate::reexport::Slice) -> Result<Vec<$crate::reexport::Activity>, $crate::reexport::StoreError>;
        ], [
            async fn insert_activity(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                a: &$crate::reexport::Activity,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "INSERT INTO activities (workspace_id, mode, id, type, contact_id, deal_id, body, occurred_at, \
                     custom_fields, updated_at, version, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9", $json, ", $10, $11, $12)"
                );
                $crate::activities::insert_activity(self, tenant, a, SQL).await
            }

            async fn update_activity(
                &mut self,
                tenant: &$crate::reexport::Tenant,
                a: &$crate::reexport::Activity,
            ) -> Result<(), $crate::reexport::StoreError> {
                const SQL: &str = concat!(
                    "UPDATE activities SET type = $4, contact_id = $5, deal_id = $6, body = $7, occurred_at = $8, \
                     custom_fields = $9", $json, ", updated_at = $10, version = $11 \
                     WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $12"
                );
                $crate::activities::update_activity(self, tenant, a, SQL).await
            }
        ]);
    };
}
