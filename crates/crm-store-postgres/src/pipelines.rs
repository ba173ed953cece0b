//! Pipelines and their stages (`PipelineRepo`), with the locking a shared database needs (see
//! the crate docs).

use crm_app::StoreError;
use crm_domain::{Pipeline, PipelineId, Tenant, Timestamp};
use crm_store_sql::{
    pipelines::{clear_other_defaults, read_default_pipeline},
    Unit,
};

use crate::tx::{tenant_query, PostgresTx};

/// How often a statement is repeated when a concurrent transaction changed the default
/// pipeline under it (each repetition needs another such commit to be needed; see
/// `clear_default_pipeline`).
const DEFAULT_ROUNDS: usize = 32;

impl PostgresTx {
    fn is_read(&self) -> bool {
        matches!(self, PostgresTx::Read(..))
    }

    /// Whether the tenant has a default pipeline other than `except`, as of now (a statement of
    /// its own sees every transaction that has committed, including those it waited for).
    async fn other_default_exists(
        &mut self,
        tenant: &Tenant,
        except: Option<&PipelineId>,
    ) -> Result<bool, StoreError> {
        let q = tenant_query(
            "SELECT EXISTS (SELECT 1 FROM pipelines
                            WHERE workspace_id = $1 AND mode = $2 AND is_default AND ($3::text IS NULL OR id <> $3))",
            tenant,
        )
        .bind(except.map(PipelineId::as_str));
        self.exists(q).await
    }
}

crm_store_sql::impl_pipeline_repo!(crate::PostgresTx, json = "::jsonb", {
    /// Share-locked in a write transaction: a deal created in the default pipeline must not land
    /// in a stage a concurrent transaction is removing. A row lock waits for the
    /// current holder and then re-checks `is_default`; when that transaction moved the default
    /// elsewhere the row no longer qualifies and the new default was invisible to the statement,
    /// so the lookup is repeated rather than answering "no default".
    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError> {
        for _ in 0..DEFAULT_ROUNDS {
            if let Some(p) = read_default_pipeline(self, tenant).await? {
                return Ok(Some(p));
            }
            if self.is_read() || !self.other_default_exists(tenant, None).await? {
                return Ok(None);
            }
        }
        Err(StoreError::Backend(
            "the default pipeline kept changing while being read".into(),
        ))
    }

    /// One UPDATE is not enough under READ COMMITTED. Two transactions making pipelines A and
    /// B the default both clear the old default C; the second waits for the first's lock on C,
    /// then finds C cleared and skips it, but A, which the first made the default, was not
    /// the default in the second UPDATE's snapshot, so it would keep its flag and the tenant
    /// would end with two defaults. So after clearing, a fresh statement looks again, and
    /// clears again while another default has appeared. Every change of default locks the
    /// current default row (clearing it, or editing it), so a transaction that commits a new
    /// default before this one finishes is always one this one waited for, and seen.
    async fn clear_default_pipeline(
        &mut self,
        tenant: &Tenant,
        keep: &PipelineId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        for _ in 0..DEFAULT_ROUNDS {
            clear_other_defaults(self, tenant, keep, now).await?;
            if self.is_read() || !self.other_default_exists(tenant, Some(keep)).await? {
                return Ok(());
            }
        }
        Err(StoreError::Backend(
            "the default pipeline kept changing while being cleared".into(),
        ))
    }

    async fn lock_stage_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "SELECT id FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4 ORDER BY id{}",
            self.for_update()
        );
        self.all(
            tenant_query(&sql, tenant)
                .bind(pipeline.as_str())
                .bind(stage),
            |_| Ok(()),
        )
        .await?;
        Ok(())
    }
});
