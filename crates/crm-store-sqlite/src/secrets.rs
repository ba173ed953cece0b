//! Sealed secrets in the row layer (webhook secrets, connection keys), the raw access
//! `crm_app::secrets` needs to seal and re-seal them all, and the scrub of what rewritten rows
//! leave in the file.

pub(crate) use crm_app::secrets::WEBHOOKS;
use crm_app::StoreError;

use crate::{backend, SqliteStore, SqliteTx};

pub(crate) use crm_app::secrets::open_row as open;

crm_store_sql::impl_secret_repo!(SqliteTx);

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
