//! Sealed secrets in the row layer (webhook secrets, connection keys), the raw access
//! `crm_app::secrets` needs to seal and re-seal them all, and the rewrite of their tables after.

use async_trait::async_trait;
pub(crate) use crm_app::secrets::{CONNECTIONS, WEBHOOKS};
use crm_app::{
    secrets::{SecretRepo, StoredSecret},
    StoreError,
};

use crm_store_sql::Unit;

use crate::{
    backend,
    rows::{get, tenant_of},
    PostgresStore, PostgresTx,
};

pub(crate) use crm_app::secrets::{open_row as open, seal_row as seal};

/// (table, column) of every stored secret.
const SECRET_COLUMNS: [(&str, &str); 2] = [(WEBHOOKS, "secret"), (CONNECTIONS, "api_key")];

#[async_trait]
impl SecretRepo for PostgresTx {
    async fn secret_check(&mut self) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT value FROM secret_check WHERE id = 1")
            .fetch_optional(self.conn())
            .await
            .map_err(|e| self.failed(e))
    }

    async fn claim_secret_check(&mut self, sealed: &str) -> Result<bool, StoreError> {
        // A concurrent claimer's uncommitted row makes this insert wait for its commit.
        let done = sqlx::query(
            "INSERT INTO secret_check (id, value) VALUES (1, $1) ON CONFLICT DO NOTHING",
        )
        .bind(sealed)
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_secret_check(&mut self, sealed: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE secret_check SET value = $1 WHERE id = 1")
            .bind(sealed)
            .execute(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
        Ok(())
    }

    async fn stored_secrets(&mut self) -> Result<Vec<StoredSecret>, StoreError> {
        let mut all = Vec::new();
        for (table, column) in SECRET_COLUMNS {
            let rows = sqlx::query(&format!(
                "SELECT workspace_id, mode, id, {column} AS value FROM {table} ORDER BY workspace_id, mode, id FOR UPDATE"
            ))
            .fetch_all(self.conn())
            .await
            .map_err(|e| self.failed(e))?;
            for r in &rows {
                all.push(StoredSecret {
                    table,
                    tenant: tenant_of(r)?,
                    id: get(r, "id")?,
                    value: get(r, "value")?,
                });
            }
        }
        Ok(all)
    }

    async fn replace_stored_secret(&mut self, secret: &StoredSecret) -> Result<(), StoreError> {
        let (table, column) = SECRET_COLUMNS
            .into_iter()
            .find(|(t, _)| *t == secret.table)
            .ok_or_else(|| StoreError::Backend(format!("no secrets in {}", secret.table).into()))?;
        sqlx::query(&format!(
            "UPDATE {table} SET {column} = $1 WHERE workspace_id = $2 AND mode = $3 AND id = $4"
        ))
        .bind(&secret.value)
        .bind(secret.tenant.workspace_id.as_str())
        .bind(secret.tenant.mode.as_str())
        .bind(&secret.id)
        .execute(self.conn())
        .await
        .map_err(|e| self.failed(e))?;
        Ok(())
    }
}

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
