//! Pipelines and their stages (`PipelineRepo`): the shared statements. The single writer
//! serializes write transactions, so the default pipeline is read and cleared in one statement
//! each, and there is nothing to lock.

use crm_app::StoreError;
use crm_domain::{Pipeline, PipelineId, Tenant, Timestamp};
use crm_store_sql::pipelines::{clear_other_defaults, read_default_pipeline};

crm_store_sql::impl_pipeline_repo!(crate::SqliteTx, json = "", {
    async fn default_pipeline(&mut self, tenant: &Tenant) -> Result<Option<Pipeline>, StoreError> {
        read_default_pipeline(self, tenant).await
    }

    async fn clear_default_pipeline(
        &mut self,
        tenant: &Tenant,
        keep: &PipelineId,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        clear_other_defaults(self, tenant, keep, now).await
    }

    async fn lock_stage_deals(
        &mut self,
        _: &Tenant,
        _: &PipelineId,
        _: &str,
    ) -> Result<(), StoreError> {
        Ok(()) // the write transaction holds the single writer's lock
    }
});
