//! Pipelines and their stages (`PipelineRepo`), with the locking a shared database needs (see
//! the crate docs).

use async_trait::async_trait;
use crm_app::{
    ports::{PipelineRepo, RowLock},
    StoreError,
};
use crm_domain::{Pipeline, PipelineId, StageType, Tenant, Timestamp};

use crm_store_sql::Unit;

use crate::{
    rows::{self, get},
    tx::{tenant_query, PostgresTx},
};

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

#[async_trait]
impl PipelineRepo for PostgresTx {
    async fn insert_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        // ON CONFLICT, unlike a failed INSERT, leaves the transaction usable. A concurrent insert
        // of the same key makes this one wait for its outcome, then report the clash.
        let q = tenant_query(
            "INSERT INTO pipelines (workspace_id, mode, id, key, name, is_default, stages, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.key)
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.created_at.millis())
        .bind(p.updated_at.millis())
        .bind(p.version);
        match self.execute(q).await? {
            0 => Err(StoreError::Duplicate),
            _ => Ok(()),
        }
    }

    async fn get_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
        lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3{}",
            rows::PIPELINE_COLUMNS,
            self.locking(lock)
        );
        self.optional(tenant_query(&sql, tenant).bind(id.as_str()), rows::pipeline)
            .await
    }

    async fn get_pipeline_by_key(
        &mut self,
        tenant: &Tenant,
        key: &str,
        lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND key = $3{}",
            rows::PIPELINE_COLUMNS,
            self.locking(lock)
        );
        self.optional(tenant_query(&sql, tenant).bind(key), rows::pipeline)
            .await
    }

    /// Share-locked in a write transaction: a deal created in the default pipeline must not land
    /// in a stage a concurrent transaction is removing. A row lock waits for the
    /// current holder and then re-checks `is_default`; when that transaction moved the default
    /// elsewhere the row no longer qualifies and the new default was invisible to the statement,
    /// so the lookup is repeated rather than answering "no default".
    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND is_default LIMIT 1{}",
            rows::PIPELINE_COLUMNS,
            self.locking(RowLock::Share)
        );
        for _ in 0..DEFAULT_ROUNDS {
            if let Some(p) = self
                .optional(tenant_query(&sql, tenant), rows::pipeline)
                .await?
            {
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

    async fn list_pipelines(&mut self, tenant: &Tenant) -> Result<Vec<Pipeline>, StoreError> {
        // Ids are time-ordered: ascending is oldest first.
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 ORDER BY id",
            rows::PIPELINE_COLUMNS
        );
        self.all(tenant_query(&sql, tenant), rows::pipeline).await
    }

    async fn update_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE pipelines SET name = $4, is_default = $5, stages = $6::jsonb, updated_at = $7, version = $8
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.updated_at.millis())
        .bind(p.version)
        .bind(p.version - 1);
        match self.execute(q).await? {
            0 => Err(StoreError::Stale),
            _ => Ok(()),
        }
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
            let q = tenant_query(
                "UPDATE pipelines SET is_default = FALSE, updated_at = $4, version = version + 1
                 WHERE workspace_id = $1 AND mode = $2 AND is_default AND id <> $3",
                tenant,
            )
            .bind(keep.as_str())
            .bind(now.millis());
            self.execute(q).await?;
            if self.is_read() || !self.other_default_exists(tenant, Some(keep)).await? {
                return Ok(());
            }
        }
        Err(StoreError::Backend(
            "the default pipeline kept changing while being cleared".into(),
        ))
    }

    async fn delete_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "DELETE FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str());
        self.execute(q).await?;
        Ok(())
    }

    async fn count_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: Option<&str>,
    ) -> Result<i64, StoreError> {
        let q = tenant_query(
            "SELECT COUNT(*) AS n FROM deals
             WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND ($4::text IS NULL OR stage = $4)",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(stage);
        let row = q.fetch_one(self.conn()).await.map_err(crate::backend)?;
        get(&row, "n")
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

    async fn move_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        from: &str,
        to: &str,
        to_type: StageType,
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        let q = tenant_query(
            "UPDATE deals SET stage = $5, stage_type = $6, updated_at = $7, version = version + 1
             WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(from)
        .bind(to)
        .bind(to_type.as_str())
        .bind(now.millis());
        self.execute(q).await
    }

    async fn set_deals_stage_type(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
        stage_type: StageType,
    ) -> Result<(), StoreError> {
        let q = tenant_query(
            "UPDATE deals SET stage_type = $5 WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(stage)
        .bind(stage_type.as_str());
        self.execute(q).await?;
        Ok(())
    }
}
