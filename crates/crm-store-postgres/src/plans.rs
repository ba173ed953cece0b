//! Keys, plans and usage metering over Postgres.
//!
//! Reservations of a capped allowance must not interleave (two processes reading the same
//! headroom would both take it), so `lock_usage` locks the tenant's counter row with a statement
//! of its own before the leases are read, and every write of a lease first writes that row.
//! Counters of several tenants are never written in one transaction, so no two transactions can
//! wait on each other's rows in opposite orders.

use crm_app::{
    ports::{PlanCounts, UsageLock},
    StoreError,
};
use crm_domain::{Tenant, Timestamp};

use crm_store_sql::Unit;

use crate::{
    rows::{self, get},
    tx::{out_of_range, tenant_query, PostgresTx},
};

fn count(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| out_of_range(what))
}

fn unsigned(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| rows::corrupt(what))
}

crm_store_sql::impl_plan_repo!(crate::PostgresTx, {
    async fn lock_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        holder: &str,
        now: Timestamp,
    ) -> Result<UsageLock, StoreError> {
        let create = tenant_query(
            "INSERT INTO usage_counters (workspace_id, mode, period_start, used) VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(period_start.millis());
        self.execute(create).await?;
        let lock = if matches!(self, PostgresTx::Write(..)) {
            " FOR UPDATE"
        } else {
            ""
        };
        let sql = format!("SELECT used FROM usage_counters WHERE workspace_id = $1 AND mode = $2 AND period_start = $3{lock}");
        let used = self
            .optional(
                tenant_query(&sql, tenant).bind(period_start.millis()),
                |r| get::<i64>(r, "used"),
            )
            .await?
            .unwrap_or(0);
        let expired = tenant_query(
            "DELETE FROM usage_leases WHERE workspace_id = $1 AND mode = $2 AND period_start = $3 AND holder <> $4 AND expires_at <= $5",
            tenant,
        )
        .bind(period_start.millis())
        .bind(holder)
        .bind(now.millis());
        self.execute(expired).await?;
        let sums = tenant_query(
            "SELECT COALESCE(SUM(reserved) FILTER (WHERE holder <> $4), 0)::BIGINT AS others,
                    COALESCE(SUM(reserved) FILTER (WHERE holder = $4), 0)::BIGINT AS own
             FROM usage_leases WHERE workspace_id = $1 AND mode = $2 AND period_start = $3",
            tenant,
        )
        .bind(period_start.millis())
        .bind(holder);
        let (others, own) = self
            .optional(sums, |r| {
                Ok((get::<i64>(r, "others")?, get::<i64>(r, "own")?))
            })
            .await?
            .unwrap_or((0, 0));
        Ok(UsageLock {
            used: unsigned(used, "used")?,
            others_reserved: unsigned(others, "reserved")?,
            own_reserved: unsigned(own, "reserved")?,
        })
    }

    async fn record_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        counted: u64,
        holder: &str,
        reserved: u64,
        lease_until: Timestamp,
    ) -> Result<(), StoreError> {
        let add = tenant_query(
            "INSERT INTO usage_counters (workspace_id, mode, period_start, used) VALUES ($1, $2, $3, $4)
             ON CONFLICT (workspace_id, mode, period_start) DO UPDATE SET used = usage_counters.used + excluded.used",
            tenant,
        )
        .bind(period_start.millis())
        .bind(count(counted, "counted")?);
        self.execute(add).await?;
        let lease = if reserved == 0 {
            tenant_query("DELETE FROM usage_leases WHERE workspace_id = $1 AND mode = $2 AND period_start = $3 AND holder = $4", tenant)
                .bind(period_start.millis())
                .bind(holder)
        } else {
            tenant_query(
                "INSERT INTO usage_leases (workspace_id, mode, period_start, holder, reserved, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (workspace_id, mode, period_start, holder) DO UPDATE SET reserved = excluded.reserved, expires_at = excluded.expires_at",
                tenant,
            )
            .bind(period_start.millis())
            .bind(holder)
            .bind(count(reserved, "reserved")?)
            .bind(lease_until.millis())
        };
        self.execute(lease).await?;
        Ok(())
    }

    async fn count_plan_objects(&mut self, tenant: &Tenant) -> Result<PlanCounts, StoreError> {
        if matches!(self, PostgresTx::Write(..)) {
            // Serialises plan-cap checks of one workspace: a create that counts and then inserts
            // must not interleave with another doing the same (see crm_app::plans::check_plan_cap).
            let q = sqlx::query("SELECT 1 FROM workspaces WHERE id = $1 FOR UPDATE")
                .bind(tenant.workspace_id.as_str());
            self.execute(q).await?;
        }
        let active_automations =
            crm_app::ports::AutomationRepo::count_active_automations(self, tenant).await?;
        let sequences = crm_app::ports::SequenceRepo::count_sequences(self, tenant).await?;
        Ok(PlanCounts {
            active_automations,
            sequences,
        })
    }
});
