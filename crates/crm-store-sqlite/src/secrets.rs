//! Sealed secrets in the row layer (webhook secrets, connection keys), the raw access
//! `crm_app::secrets` needs to seal and re-seal them all, and the scrub of what rewritten rows
//! leave in the file.

use async_trait::async_trait;
pub(crate) use crm_app::secrets::{CONNECTIONS, WEBHOOKS};
use crm_app::{
    secrets::{SecretRepo, StoredSecret},
    StoreError,
};

use crate::{
    backend,
    rows::{get, tenant_of},
    SqliteStore, SqliteTx,
};

pub(crate) use crm_app::secrets::{open_row as open, seal_row as seal};

/// (table, column) of every stored secret.
const SECRET_COLUMNS: [(&str, &str); 2] = [(WEBHOOKS, "secret"), (CONNECTIONS, "api_key")];

#[async_trait]
impl SecretRepo for SqliteTx {
    async fn secret_check(&mut self) -> Result<Option<String>, StoreError> {
        sqlx::query_scalar("SELECT value FROM secret_check WHERE id = 1")
            .fetch_optional(self.conn())
            .await
            .map_err(backend)
    }

    async fn claim_secret_check(&mut self, sealed: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "INSERT INTO secret_check (id, value) VALUES (1, $1) ON CONFLICT DO NOTHING",
        )
        .bind(sealed)
        .execute(self.conn())
        .await
        .map_err(backend)?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_secret_check(&mut self, sealed: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE secret_check SET value = $1 WHERE id = 1")
            .bind(sealed)
            .execute(self.conn())
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn stored_secrets(&mut self) -> Result<Vec<StoredSecret>, StoreError> {
        let mut all = Vec::new();
        for (table, column) in SECRET_COLUMNS {
            let rows = sqlx::query(&format!(
                "SELECT workspace_id, mode, id, {column} AS value FROM {table} ORDER BY workspace_id, mode, id"
            ))
            .fetch_all(self.conn())
            .await
            .map_err(backend)?;
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
        .map_err(backend)?;
        Ok(())
    }
}

/// How many times the final checkpoint is tried while another connection holds an old snapshot.
const CHECKPOINT_TRIES: u32 = 50;

impl SqliteStore {
    /// Rewrites the whole file without its free pages (`VACUUM`, with `secure_delete` on so
    /// that nothing freed on the way keeps its old bytes), then copies the write-ahead log into it
    /// and truncates the log to nothing: what rows held before they were rewritten (plaintext
    /// secrets, values sealed under a retired key) is left neither in free pages nor in the log.
    pub(crate) async fn scrub(&self) -> Result<(), StoreError> {
        let mut conn = self.writer.acquire().await.map_err(backend)?;
        let done = async {
            sqlx::query("PRAGMA secure_delete = ON")
                .execute(&mut *conn)
                .await?;
            sqlx::query("VACUUM").execute(&mut *conn).await?;
            for _ in 0..CHECKPOINT_TRIES {
                let (busy, _, _): (i64, i64, i64) =
                    sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)")
                        .fetch_one(&mut *conn)
                        .await?;
                if busy == 0 {
                    return Ok(true);
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Ok::<bool, sqlx::Error>(false)
        }
        .await;
        // The writer's ordinary writes do not pay for zeroing what they free.
        let reset = sqlx::query("PRAGMA secure_delete = OFF")
            .execute(&mut *conn)
            .await;
        match done.map_err(backend)? {
            true => reset.map(|_| ()).map_err(backend),
            false => Err(StoreError::Backend(
                "another connection kept the write-ahead log from being truncated; stop the other processes using this database file and run the command again"
                    .into(),
            )),
        }
    }
}
