//! Sealed secrets in the row layer (webhook secrets, connection keys), the raw access
//! `crm_app::secrets` needs to seal and re-seal them all, and the rewrite of their tables after.

pub(crate) use crm_app::secrets::WEBHOOKS;
use crm_app::StoreError;

use crate::{backend, PostgresStore, PostgresTx};

pub(crate) use crm_app::secrets::open_row as open;

crm_store_sql::impl_secret_repo!(PostgresTx);

impl PostgresStore {
    /// Rewrites the tables that hold secrets into new files (`VACUUM FULL`), so the row versions
    /// that held them before they were sealed or re-sealed are gone from the live database. (The
    /// server's WAL and any backup keep what they recorded: docs/operations.md.) Holds each
    /// table's exclusive lock for the moment of its rewrite.
    pub(crate) async fn scrub(&self) -> Result<(), StoreError> {
        let mut lease = self.lease().await?;
        let done = sqlx::query("VACUUM FULL webhooks, connections, secret_check")
            .execute(lease.raw())
            .await;
        done.map_err(|e| backend(lease.failed(e)))?;
        Ok(())
    }
}
