//! Pipelines and their stages (`PipelineRepo`).

use async_trait::async_trait;
use crm_app::{
    ports::{PipelineRepo, RowLock},
    StoreError,
};
use crm_domain::{Pipeline, PipelineId, StageType, Tenant, Timestamp};
use sqlx::Row;

use crate::{
    backend, rows,
    tx::{tenant_query, SqliteTx},
};

#[async_trait]
impl PipelineRepo for SqliteTx {
    async fn insert_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        let done = tenant_query(
            "INSERT INTO pipelines (workspace_id, mode, id, key, name, is_default, stages, created_at, updated_at, version)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.key)
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.created_at.millis())
        .bind(p.updated_at.millis())
        .bind(p.version)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Duplicate);
        }
        Ok(())
    }

    // The single writer serializes write transactions: there is nothing to lock.
    async fn get_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
        _lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            rows::PIPELINE_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .bind(id.as_str())
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::pipeline).transpose()
    }

    async fn get_pipeline_by_key(
        &mut self,
        tenant: &Tenant,
        key: &str,
        _lock: RowLock,
    ) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND key = $3",
            rows::PIPELINE_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .bind(key)
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::pipeline).transpose()
    }

    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND is_default LIMIT 1",
            rows::PIPELINE_COLUMNS
        );
        let row = tenant_query(&sql, tenant)
            .fetch_optional(self.conn())
            .await
            .map_err(backend)?;
        row.as_ref().map(rows::pipeline).transpose()
    }

    async fn list_pipelines(&mut self, tenant: &Tenant) -> Result<Vec<Pipeline>, StoreError> {
        let sql = format!(
            "SELECT {} FROM pipelines WHERE workspace_id = $1 AND mode = $2 ORDER BY id",
            rows::PIPELINE_COLUMNS
        );
        let rows = tenant_query(&sql, tenant)
            .fetch_all(self.conn())
            .await
            .map_err(backend)?;
        rows.iter().map(rows::pipeline).collect()
    }

    async fn update_pipeline(&mut self, tenant: &Tenant, p: &Pipeline) -> Result<(), StoreError> {
        let done = tenant_query(
            "UPDATE pipelines SET name = $4, is_default = $5, stages = $6, updated_at = $7, version = $8
             WHERE workspace_id = $1 AND mode = $2 AND id = $3 AND version = $9",
            tenant,
        )
        .bind(p.id.as_str())
        .bind(&p.name)
        .bind(p.is_default)
        .bind(rows::stages_json(&p.stages))
        .bind(p.updated_at.millis())
        .bind(p.version)
        .bind(p.version - 1)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Stale);
        }
        Ok(())
    }

    async fn clear_default_pipeline(
        &mut self,
        tenant: &Tenant,
        keep: &PipelineId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        tenant_query(
            "UPDATE pipelines SET is_default = FALSE, updated_at = $4, version = version + 1
             WHERE workspace_id = $1 AND mode = $2 AND is_default AND id <> $3",
            tenant,
        )
        .bind(keep.as_str())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn delete_pipeline(
        &mut self,
        tenant: &Tenant,
        id: &PipelineId,
    ) -> Result<(), StoreError> {
        tenant_query(
            "DELETE FROM pipelines WHERE workspace_id = $1 AND mode = $2 AND id = $3",
            tenant,
        )
        .bind(id.as_str())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn count_deals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: Option<&str>,
    ) -> Result<i64, StoreError> {
        let row = tenant_query(
            "SELECT COUNT(*) FROM deals WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND ($4 IS NULL OR stage = $4)",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(stage)
        .fetch_one(self.conn())
        .await
        .map_err(backend)?;
        row.try_get(0).map_err(backend)
    }

    async fn lock_stage_deals(
        &mut self,
        _: &Tenant,
        _: &PipelineId,
        _: &str,
    ) -> Result<(), StoreError> {
        Ok(()) // the write transaction holds the single writer's lock
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
        let done = tenant_query(
            "UPDATE deals SET stage = $5, stage_type = $6, updated_at = $7, version = version + 1
             WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4",
            tenant,
        )
        .bind(pipeline.as_str())
        .bind(from)
        .bind(to)
        .bind(to_type.as_str())
        .bind(now.millis())
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected())
    }

    async fn set_deals_stage_type(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        stage: &str,
        stage_type: StageType,
    ) -> Result<(), StoreError> {
        tenant_query("UPDATE deals SET stage_type = $5 WHERE workspace_id = $1 AND mode = $2 AND pipeline_id = $3 AND stage = $4", tenant)
            .bind(pipeline.as_str())
            .bind(stage)
            .bind(stage_type.as_str())
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }
}
