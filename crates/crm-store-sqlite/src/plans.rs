//! Keys, plans and usage metering over SQLite. Every write transaction holds the database's one
//! write lock from `BEGIN IMMEDIATE`, so reservations of a capped allowance never interleave.

use crm_app::{
    ports::{PlanCounts, UsageLock},
    StoreError,
};
use crm_domain::{Tenant, Timestamp};
use sqlx::Row;

use crate::{backend, rows};

fn count(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Backend(format!("{what} out of range").into()))
}

fn unsigned(v: i64, what: &str) -> Result<u64, StoreError> {
    u64::try_from(v).map_err(|_| rows::corrupt(what))
}

crm_store_sql::impl_plan_repo!(crate::SqliteTx, {
    async fn lock_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        holder: &str,
        now: Timestamp,
    ) -> Result<UsageLock, StoreError> {
        let (ws, mode, start) = (
            tenant.workspace_id.as_str(),
            tenant.mode.as_str(),
            period_start.millis(),
        );
        sqlx::query("INSERT INTO usage_counters (workspace_id, mode, period_start, used) VALUES ($1, $2, $3, 0) ON CONFLICT DO NOTHING")
            .bind(ws)
            .bind(mode)
            .bind(start)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        sqlx::query("DELETE FROM usage_leases WHERE workspace_id = $1 AND mode = $2 AND period_start = $3 AND holder <> $4 AND expires_at <= $5")
            .bind(ws)
            .bind(mode)
            .bind(start)
            .bind(holder)
            .bind(now.millis())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        let row = sqlx::query(
            "SELECT c.used,
                    (SELECT COALESCE(SUM(reserved), 0) FROM usage_leases l
                      WHERE l.workspace_id = c.workspace_id AND l.mode = c.mode AND l.period_start = c.period_start AND l.holder <> $4) AS others,
                    (SELECT COALESCE(SUM(reserved), 0) FROM usage_leases l
                      WHERE l.workspace_id = c.workspace_id AND l.mode = c.mode AND l.period_start = c.period_start AND l.holder = $4) AS own
             FROM usage_counters c WHERE c.workspace_id = $1 AND c.mode = $2 AND c.period_start = $3",
        )
        .bind(ws)
        .bind(mode)
        .bind(start)
        .bind(holder)
        .fetch_one(self.conn())
        .await
        .map_err(backend)?;
        Ok(UsageLock {
            used: unsigned(row.try_get("used").map_err(backend)?, "used")?,
            others_reserved: unsigned(row.try_get("others").map_err(backend)?, "reserved")?,
            own_reserved: unsigned(row.try_get("own").map_err(backend)?, "reserved")?,
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
        let (ws, mode, start) = (
            tenant.workspace_id.as_str(),
            tenant.mode.as_str(),
            period_start.millis(),
        );
        sqlx::query(
            "INSERT INTO usage_counters (workspace_id, mode, period_start, used) VALUES ($1, $2, $3, $4)
             ON CONFLICT (workspace_id, mode, period_start) DO UPDATE SET used = usage_counters.used + excluded.used",
        )
        .bind(ws)
        .bind(mode)
        .bind(start)
        .bind(count(counted, "counted")?)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        let lease = if reserved == 0 {
            sqlx::query("DELETE FROM usage_leases WHERE workspace_id = $1 AND mode = $2 AND period_start = $3 AND holder = $4")
                .bind(ws)
                .bind(mode)
                .bind(start)
                .bind(holder)
        } else {
            sqlx::query(
                "INSERT INTO usage_leases (workspace_id, mode, period_start, holder, reserved, expires_at) VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (workspace_id, mode, period_start, holder) DO UPDATE SET reserved = excluded.reserved, expires_at = excluded.expires_at",
            )
            .bind(ws)
            .bind(mode)
            .bind(start)
            .bind(holder)
            .bind(count(reserved, "reserved")?)
            .bind(lease_until.millis())
        };
        lease.execute(self.conn()).await.map_err(backend)?;
        Ok(())
    }

    async fn count_plan_objects(&mut self, tenant: &Tenant) -> Result<PlanCounts, StoreError> {
        // The single writer already serialises a count and the insert that follows it.
        let active_automations =
            crm_app::ports::AutomationRepo::count_active_automations(self, tenant).await?;
        let sequences = crm_app::ports::SequenceRepo::count_sequences(self, tenant).await?;
        Ok(PlanCounts {
            active_automations,
            sequences,
        })
    }
});
