//! Pipelines and their stages (`PipelineRepo`): the shared statements. The single writer
//! serializes write transactions, so no concurrent writer changes the default pipeline under a
//! statement, and there is nothing to lock.

use crm_app::StoreError;
use crm_domain::{PipelineId, Tenant};
use crm_store_sql::pipelines::DefaultGuard;

use crate::SqliteTx;

crm_store_sql::impl_pipeline_repo!(SqliteTx);

impl DefaultGuard for SqliteTx {
    async fn default_settled(
        &mut self,
        _: &Tenant,
        _: Option<&PipelineId>,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }
}
