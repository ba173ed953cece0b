//! Pipelines and their stages (`PipelineRepo`): the shared statements, and how a write
//! transaction learns that a concurrent one changed the default pipeline under a statement (see
//! `crm_store_sql::pipelines`).

use crm_app::StoreError;
use crm_domain::{PipelineId, Tenant};
use crm_store_sql::pipelines::DefaultGuard;

use crate::tx::{tenant_query, PostgresTx};

crm_store_sql::impl_pipeline_repo!(PostgresTx);

impl DefaultGuard for PostgresTx {
    /// Settled in a read transaction (its snapshot is its answer), or when the tenant has no
    /// default pipeline other than `except` as of now: a statement of its own sees every
    /// transaction that has committed, including those it waited for.
    async fn default_settled(
        &mut self,
        tenant: &Tenant,
        except: Option<&PipelineId>,
    ) -> Result<bool, StoreError> {
        if matches!(self, PostgresTx::Read(..)) {
            return Ok(true);
        }
        let q = tenant_query(
            "SELECT EXISTS (SELECT 1 FROM pipelines
                            WHERE workspace_id = $1 AND mode = $2 AND is_default AND ($3::text IS NULL OR id <> $3))",
            tenant,
        )
        .bind(except.map(PipelineId::as_str));
        Ok(!self.exists(q).await?)
    }
}
