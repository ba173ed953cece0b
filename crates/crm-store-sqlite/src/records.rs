//! Whether a record of any kind exists (`RecordRepo`).

use async_trait::async_trait;
use crm_app::{ports::RecordRepo, StoreError};
use crm_domain::{ObjectKind, Tenant};
use sqlx::Row;

use crate::{backend, tx::SqliteTx};

pub(crate) fn record_table(object: ObjectKind) -> &'static str {
    match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    }
}

#[async_trait]
impl RecordRepo for SqliteTx {
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError> {
        let table = record_table(object);
        let sql = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE workspace_id = $1 AND mode = $2 AND id = $3)");
        let row = sqlx::query(&sql)
            .bind(tenant.workspace_id.as_str())
            .bind(tenant.mode.as_str())
            .bind(id)
            .fetch_one(self.conn())
            .await
            .map_err(backend)?;
        row.try_get::<bool, _>(0).map_err(backend)
    }
}
