//! WAL checkpoints off the writer's thread.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses its threshold, on the
//! connection that committed: here the single writer, whose thread every write in the process
//! waits for. So the writer's automatic checkpoint is off, and a connection of its own copies
//! the WAL back into the database (`PRAGMA wal_checkpoint(PASSIVE)`, which never blocks the
//! writer or a reader) on the other core, at most every [`INTERVAL`] and only after commits.
//! The WAL is reset and truncated (`journal_size_limit`) exactly as before: by the first write
//! after a checkpoint that copied everything while no reader still needed the old frames.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use sqlx::{Connection, SqliteConnection};
use tokio::sync::Notify;

/// The least time between two checkpoints. A checkpoint costs an fsync of the database file
/// and copies each page once however often it was written since the last one, so waiting
/// collects the commits of a busy moment into one; at the writer's top rate a WAL grows by a few
/// MiB in this time, about what SQLite's own default threshold (1,000 pages) lets it grow.
pub(crate) const INTERVAL: Duration = Duration::from_millis(100);

/// Told of every commit by the writer; the loop in [`run`] waits on it.
#[derive(Default)]
pub struct Checkpoints {
    wake: Notify,
    closed: AtomicBool,
    /// Checkpoints run so far.
    done: AtomicU64,
}

impl Checkpoints {
    /// A write transaction committed: its frames are in the WAL.
    pub(crate) fn committed(&self) {
        self.wake.notify_one();
    }

    /// How many checkpoints have run.
    #[cfg(test)]
    pub(crate) fn done(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// Ends the loop (after one last checkpoint if a commit is pending).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.wake.notify_one();
    }
}

/// Held by every clone of the store; the last one dropped ends the loop.
pub(crate) struct Guard(pub(crate) Arc<Checkpoints>);

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Checkpoints after commits until the store is dropped or closed, then closes `conn`.
pub(crate) async fn run(checkpoints: Arc<Checkpoints>, mut conn: SqliteConnection) {
    loop {
        checkpoints.wake.notified().await;
        if checkpoints.closed.load(Ordering::Acquire) {
            break;
        }
        tokio::time::sleep(INTERVAL).await;
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&mut conn).await {
            Ok(_) => {
                checkpoints.done.fetch_add(1, Ordering::AcqRel);
            }
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed; the next commit tries again"),
        }
    }
    let _ = conn.close().await;
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use crm_app::{ports::ConfigMarks, Tx};

    use crate::{SqliteStore, SqliteTx};

    /// With the writer's own checkpoint off, the WAL is still copied back after commits, so each
    /// write starts it over instead of growing it: five writes of about 1 MiB leave a WAL of about
    /// one write's size, not five.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commits_are_checkpointed_and_the_wal_is_reused() {
        let path = std::env::temp_dir().join(format!("crm-wal-{}.db", uuid::Uuid::now_v7().simple()));
        let store = SqliteStore::connect(&format!("sqlite://{}", path.display())).await.unwrap();
        let wal = std::path::PathBuf::from(format!("{}-wal", path.display()));
        let mut sizes = Vec::new();
        for round in 0..5 {
            let before = store.checkpoints.0.done();
            let tx = store.writer.begin_with("BEGIN IMMEDIATE").await.unwrap();
            let mut tx = SqliteTx::write(tx, ConfigMarks::new(None), store.checkpoints.0.clone());
            if round == 0 {
                sqlx::query("CREATE TABLE filler (round INTEGER, data BLOB)").execute(tx.conn()).await.unwrap();
            }
            sqlx::query("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) INSERT INTO filler SELECT $1, randomblob(1000) FROM n")
                .bind(round)
                .execute(tx.conn())
                .await
                .unwrap();
            Box::new(tx).commit().await.unwrap();
            let waited = Instant::now();
            while store.checkpoints.0.done() == before {
                assert!(waited.elapsed().as_secs() < 10, "no checkpoint within 10 s of a commit");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            sizes.push(std::fs::metadata(&wal).unwrap().len());
        }
        assert!(sizes[0] > 1_000_000, "a write of 1 MB went to the WAL: {sizes:?}");
        assert!(sizes[4] < sizes[0] * 2, "the WAL grew with every write: {sizes:?}");
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
