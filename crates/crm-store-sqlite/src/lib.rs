//! The store port over SQLite (sqlx), the embedded default.
//!
//! SQLite allows one writer at a time, so writes go through a pool of exactly one connection
//! that opens every transaction with `BEGIN IMMEDIATE` (taking the write lock up front, which is
//! what makes read-then-write transactions safe under WAL), while reads use a separate pool of
//! read-only connections that never wait for the writer. This crate knows SQL and sqlx, and no
//! HTTP and no business rule beyond what the port's contracts say.

mod activities;
mod automations;
mod companies;
mod contacts;
mod deals;
mod email;
mod events;
mod exports;
mod idempotency;
mod imports;
mod keys;
mod owner;
mod pipelines;
mod plans;
mod records;
mod registry;
mod rows;
mod search;
mod secrets;
mod sequences;
mod sessions;
mod tx;
mod users;
mod webhooks;
mod workspaces;

use std::{
    str::FromStr,
    sync::{Arc, OnceLock},
    time::Duration,
};

use async_trait::async_trait;
use crm_app::{
    ports::{ConfigEvents, ConfigMarks},
    Store, StoreError, Tx,
};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

use owner::Owner;
pub(crate) use tx::SqliteTx;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// The name `normalise_contact_emails` records in `data_migrations` once it has run.
const EMAIL_NORMALISATION: &str = "0012_email_normalisation";

/// A failed statement or connection as the port's error. Only a database file that cannot be
/// opened (gone with its disk or mount, or its permissions) is `Unavailable`: a busy file, a full
/// pool (the single writer held by a long transaction) and everything else remain `Backend`.
pub(crate) fn backend(e: sqlx::Error) -> StoreError {
    if is_unavailable(&e) {
        StoreError::Unavailable(Box::new(e))
    } else {
        StoreError::Backend(Box::new(e))
    }
}

/// `SQLITE_CANTOPEN` (14), also in its extended forms, or an I/O error opening a connection.
fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db
            .code()
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| code & 0xff == 14),
        _ => false,
    }
}

#[derive(Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// This process's listener for configuration changes, once `follow_config_changes` runs.
    local: Arc<OnceLock<Arc<dyn ConfigEvents>>>,
    /// Whose idempotency claims this store writes (see `owner`).
    owner: Arc<Owner>,
    /// Seals and opens webhook secrets and connection keys in the row layer.
    secrets: tx::Secrets,
}

/// How often other processes' configuration changes (the CLI's `workspace set-plan`) are looked
/// for; this process's own are known at commit.
const CONFIG_POLL: Duration = Duration::from_millis(100);

/// The file the database at `url` lives in; `None` for an in-memory database.
pub fn database_file(url: &str) -> Result<Option<std::path::PathBuf>, StoreError> {
    if url.contains(":memory:") || url.contains("mode=memory") {
        return Ok(None);
    }
    let options = SqliteConnectOptions::from_str(url).map_err(backend)?;
    Ok(Some(options.get_filename().to_path_buf()))
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `url` (`sqlite://crm.db`, `sqlite:///abs/path.db`,
    /// any sqlx SQLite URL) in WAL mode.
    pub async fn connect(url: &str) -> Result<SqliteStore, StoreError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(backend)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(false)
            // Keep the WAL file from growing without bound between checkpoints.
            .pragma("journal_size_limit", "67108864")
            .pragma("cache_size", "-16000")
            .statement_cache_capacity(256);
        // The writer keeps statement journals in memory: every multi-row statement in a
        // transaction journals the pages it changes, and past 64 KiB SQLite spills that journal
        // to a temporary file, a write(2) per page on the writer's thread.
        let writer_options = options.clone().pragma("temp_store", "memory");
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            // An embedded connection cannot go stale; sqlx's default ping per acquire is a
            // round trip to the connection's worker thread on every read and write.
            .test_before_acquire(false)
            .connect_with(writer_options)
            .await
            .map_err(backend)?;
        let readers = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(2)
            .clamp(2, 8)
            * 2;
        // Readers keep 4 MB each: they share the OS page cache anyway, and 16 MB apiece was most
        // of the server's resident memory under load (peak RSS at 128 clients above 100 MiB).
        let reader_options = options.clone().pragma("cache_size", "-4000");
        let reader = SqlitePoolOptions::new()
            .max_connections(readers)
            .acquire_timeout(Duration::from_secs(30))
            .test_before_acquire(false)
            .connect_with(reader_options)
            .await
            .map_err(backend)?;
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let file = (!memory).then(|| options.get_filename());
        let owner = Owner::take(file).map_err(|e| StoreError::Backend(Box::new(e)))?;
        Ok(SqliteStore {
            writer,
            reader,
            local: Arc::default(),
            owner: Arc::new(owner),
            secrets: Arc::new(crm_app::secrets::NoKeys),
        })
    }

    /// The store with `secrets` sealing and opening webhook secrets and connection keys
    /// (without it, reading or writing one fails).
    pub fn with_secrets(mut self, secrets: Arc<dyn crm_app::secrets::SecretBox>) -> SqliteStore {
        self.secrets = secrets;
        self
    }

    /// Applies the migrations under `migrations/sqlite`, then the data steps SQL cannot do.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATOR
            .run(&self.writer)
            .await
            .map_err(|e| StoreError::Backend(Box::new(e)))?;
        self.normalise_contact_emails().await
    }

    /// Rewrites each contact's stored e-mail address in its normalised form (decisions §22;
    /// migration 0012), once. Only addresses with a non-ASCII character can change: ASCII ones were
    /// already stored lower-cased, which is all normalising does to them. Rows go oldest first, so
    /// the oldest contact gets a contested address unless one already holds it. A contact whose
    /// normalised address is taken, or whose address no longer normalises, keeps its address and
    /// is recorded in `email_normalisation_conflicts` and the log, for an operator to resolve.
    async fn normalise_contact_emails(&self) -> Result<(), StoreError> {
        let mut tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend)?;
        let done: Option<i64> = sqlx::query_scalar("SELECT 1 FROM data_migrations WHERE name = ?")
            .bind(EMAIL_NORMALISATION)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?;
        if done.is_some() {
            return Ok(());
        }
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT workspace_id, mode, id, email FROM contacts
             WHERE email IS NOT NULL AND length(CAST(email AS BLOB)) <> length(email)
             ORDER BY workspace_id, mode, id",
        )
        .fetch_all(&mut *tx)
        .await
        .map_err(backend)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let (mut rewritten, mut conflicts) = (0_usize, 0_usize);
        for (workspace_id, mode, id, email) in rows {
            let conflict = match crm_domain::Email::parse(&email) {
                Some(normal) if normal.as_str() == email => continue,
                Some(normal) => {
                    let holder: Option<String> = sqlx::query_scalar(
                        "SELECT id FROM contacts WHERE workspace_id = ? AND mode = ? AND email = ?",
                    )
                    .bind(&workspace_id)
                    .bind(&mode)
                    .bind(normal.as_str())
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(backend)?;
                    match holder {
                        Some(holder) => ("taken", Some(normal.as_str().to_owned()), Some(holder)),
                        None => {
                            sqlx::query(
                                "UPDATE contacts SET email = ?, version = version + 1, updated_at = ?
                                 WHERE workspace_id = ? AND mode = ? AND id = ?",
                            )
                            .bind(normal.as_str())
                            .bind(now)
                            .bind(&workspace_id)
                            .bind(&mode)
                            .bind(&id)
                            .execute(&mut *tx)
                            .await
                            .map_err(backend)?;
                            rewritten += 1;
                            continue;
                        }
                    }
                }
                None => ("invalid", None, None),
            };
            let (reason, normalised, held_by) = conflict;
            tracing::warn!(
                workspace_id, mode, contact_id = id, email, reason, normalised, held_by,
                "e-mail normalisation: contact keeps its address (see email_normalisation_conflicts)"
            );
            sqlx::query(
                "INSERT INTO email_normalisation_conflicts
                 (workspace_id, mode, contact_id, email, reason, normalised, held_by, recorded_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(&workspace_id)
            .bind(&mode)
            .bind(&id)
            .bind(&email)
            .bind(reason)
            .bind(normalised)
            .bind(held_by)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
            conflicts += 1;
        }
        sqlx::query("INSERT INTO data_migrations (name, applied_at) VALUES (?, ?)")
            .bind(EMAIL_NORMALISATION)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        tx.commit().await.map_err(backend)?;
        if rewritten + conflicts > 0 {
            tracing::info!(rewritten, conflicts, "e-mail addresses normalised");
        }
        Ok(())
    }

    pub fn into_arc(self) -> Arc<dyn Store> {
        Arc::new(self)
    }

    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin_write(&self) -> Result<Box<dyn Tx>, StoreError> {
        let tx = self
            .writer
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(backend)?;
        Ok(Box::new(SqliteTx::write(
            tx,
            ConfigMarks::new(self.local.get().cloned()),
            self.owner.clone(),
            self.secrets.clone(),
        )))
    }

    async fn begin_read(&self) -> Result<Box<dyn Tx>, StoreError> {
        let conn = self.reader.acquire().await.map_err(backend)?;
        Ok(Box::new(SqliteTx::read(conn, self.secrets.clone())))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&self.reader)
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn scrub_freed_space(&self) -> Result<(), StoreError> {
        self.scrub().await
    }

    /// This process's changes are told at commit. Other processes writing the same file (SQLite
    /// serves one server; the CLI is the other writer) bump `config_epoch`, read every
    /// [`CONFIG_POLL`]; a change there forgets everything, since it does not say whose.
    async fn follow_config_changes(&self, events: Arc<dyn ConfigEvents>) {
        let _ = self.local.set(events.clone());
        let mut last: Option<i64> = None;
        loop {
            match sqlx::query_scalar::<_, i64>("SELECT seq FROM config_epoch WHERE id = 1")
                .fetch_one(&self.reader)
                .await
            {
                Ok(seq) => {
                    match last {
                        None => events.connected(),
                        Some(prev) if prev != seq => events.changed_unknown(),
                        Some(_) => {}
                    }
                    last = Some(seq);
                }
                Err(e) => {
                    if last.take().is_some() {
                        tracing::warn!(error = %e, "reading config_epoch failed; caching is off until it succeeds");
                        events.disconnected();
                    }
                }
            }
            tokio::time::sleep(CONFIG_POLL).await;
        }
    }
}

/// A store in a file of its own under the temp directory, for the tests that need a real file
/// (query plans, the WAL); [`TempStore::remove`] closes it and deletes its files.
#[cfg(test)]
pub(crate) struct TempStore {
    pub store: SqliteStore,
    pub path: std::path::PathBuf,
}

#[cfg(test)]
impl TempStore {
    /// A new file named after `purpose`, connected but not migrated.
    pub async fn open(purpose: &str) -> TempStore {
        let path = std::env::temp_dir().join(format!(
            "crm-{purpose}-{}.db",
            uuid::Uuid::now_v7().simple()
        ));
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        TempStore { store, path }
    }

    /// A new file named after `purpose`, with every migration applied.
    pub async fn migrated(purpose: &str) -> TempStore {
        let temp = TempStore::open(purpose).await;
        temp.store.migrate().await.unwrap();
        temp
    }

    pub async fn remove(self) {
        self.store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.path.display()));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crm_app::{ports::ConfigMarks, Tx};

    use crate::{SqliteTx, TempStore};

    /// A steady stream of writes keeps the WAL bounded: 40 MiB written back to back leave a WAL of
    /// a few MiB (SQLite's automatic checkpoint at 1,000 pages, on the writer, between two of its
    /// writes), not 40. A checkpoint on another connection cannot promise that (docs/decisions.md).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn steady_writes_keep_the_wal_bounded() {
        let temp = TempStore::open("wal").await;
        let store = &temp.store;
        let wal = std::path::PathBuf::from(format!("{}-wal", temp.path.display()));
        let mut largest = 0;
        for round in 0..400 {
            let tx = store.writer.begin_with("BEGIN IMMEDIATE").await.unwrap();
            let mut tx = SqliteTx::write(
                tx,
                ConfigMarks::new(None),
                store.owner.clone(),
                Arc::new(crm_app::secrets::NoKeys),
            );
            if round == 0 {
                sqlx::query("CREATE TABLE filler (round INTEGER, data BLOB)")
                    .execute(tx.conn())
                    .await
                    .unwrap();
            }
            sqlx::query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100) INSERT INTO filler SELECT $1, randomblob(1000) FROM n")
                .bind(round)
                .execute(tx.conn())
                .await
                .unwrap();
            Box::new(tx).commit().await.unwrap();
            largest = largest.max(std::fs::metadata(&wal).unwrap().len());
        }
        assert!(largest < 8 << 20, "the WAL reached {largest} bytes");
        temp.remove().await;
    }
}
