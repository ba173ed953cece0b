//! A workspace's plan and settings, and its usage read back (`PlanRepo`): the same statements on
//! both backends. Reserving and recording usage lock differently and stay in each store.

use crm_app::{auth::Workspace, StoreError};
use crm_domain::{Tenant, Timestamp};

use crate::{clauses::tenant_query, corrupt, sql::Col, Arg, Unit};

pub async fn update_workspace<U: Unit>(tx: &mut U, ws: &Workspace) -> Result<bool, StoreError> {
    let included = ws
        .included_requests_override
        .map(i64::try_from)
        .transpose()
        .map_err(|_| StoreError::Backend("included_requests_override is out of range".into()))?;
    let q = sqlx::query::<U::Db>(
        "UPDATE workspaces SET name = $1, plan = $2, overage_cap_usd = $3, rate_limit_override = $4, included_requests_override = $5,
         history_retention_days = $6, email_retention_days = $7
         WHERE id = $8",
    )
    .arg(ws.name.as_str())
    .arg(ws.plan.as_str())
    .arg(ws.overage_cap_usd)
    .arg(ws.rate_limit_override.map(i64::from))
    .arg(included)
    .arg(ws.history_retention_days.map(i64::from))
    .arg(ws.email_retention_days.map(i64::from))
    .arg(ws.id.as_str());
    Ok(tx.execute(q).await? == 1)
}

pub async fn get_usage<U: Unit>(
    tx: &mut U,
    tenant: &Tenant,
    period_start: Timestamp,
) -> Result<u64, StoreError> {
    let q = tenant_query::<U::Db>(
        "SELECT used FROM usage_counters WHERE workspace_id = $1 AND mode = $2 AND period_start = $3",
        tenant,
    )
    .arg(period_start.millis());
    let used = tx.optional(q, |r| r.col::<i64>("used")).await?.unwrap_or(0);
    u64::try_from(used).map_err(|_| corrupt("used"))
}

/// `impl PlanRepo for $tx` with the statements above, and the store's own usage reservations
/// and plan counts in the braces.
#[macro_export]
macro_rules! impl_plan_repo {
    ($tx:ty, { $($own:tt)* }) => {
        $crate::port_impl!($crate::reexport::PlanRepo, $tx, plans, [
            fn update_workspace(ws: &$crate::reexport::Workspace) -> Result<bool, $crate::reexport::StoreError>;
            fn get_usage(tenant: &$crate::reexport::Tenant, period_start: $crate::reexport::Timestamp) -> Result<u64, $crate::reexport::StoreError>;
        ], [$($own)*]);
    };
}
