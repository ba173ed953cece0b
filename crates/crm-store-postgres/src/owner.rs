//! Who holds an idempotency claim, and whether that process still runs.
//!
//! Each store takes a random owner id and holds the session-level advisory lock
//! `(OWNER_LOCK_CLASS, id)` on a connection of its own for as long as it lives; every claim it
//! writes carries the id. Postgres drops a session's locks the moment its connection closes, and
//! the kernel closes a process's connections however it ends (`SIGKILL` included), so a claim
//! whose owner's lock is free belongs to a process that is gone. A host that vanishes without
//! closing its connections keeps its locks until the server notices (TCP keepalive); the claim's
//! lease covers that case.
//!
//! One connection per process rather than a lock per claim on the request's own connection: a
//! request's claim and its write run in separate transactions, possibly on separate pooled
//! connections, and pinning one for the whole request would let a full pool wait on itself.

use std::time::Duration;

use crm_app::StoreError;
use sqlx::{postgres::PgConnectOptions, Connection, PgConnection};
use tokio::task::AbortHandle;

/// The first key of every owner lock ("crm1"), keeping them apart from other advisory locks
/// (those of the migrator and of enum groups take a single bigint key, a space of their own).
pub(crate) const OWNER_LOCK_CLASS: i32 = 0x6372_6d31;

/// How often the owner's connection is checked; a lost one is replaced and its lock taken again.
const CHECK_EVERY: Duration = Duration::from_secs(2);

/// This process's claim owner: its id and the task holding its lock (ended when dropped, which
/// closes the connection and frees the lock).
pub(crate) struct Owner {
    pub(crate) id: i64,
    holder: AbortHandle,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.holder.abort();
    }
}

impl Owner {
    /// Takes a fresh id and its lock before returning, so that no claim is ever written under an
    /// id whose lock is not held.
    pub(crate) async fn start(options: &PgConnectOptions) -> Result<Owner, StoreError> {
        let options = options.clone().application_name("crm idempotency owner");
        let (id, conn) = loop {
            let id = random_id();
            let mut conn = PgConnection::connect_with(&options)
                .await
                .map_err(crate::backend)?;
            // Taken (an id another live process drew): draw again.
            if try_lock(&mut conn, id).await.map_err(crate::backend)? {
                break (id, conn);
            }
        };
        let holder = tokio::spawn(hold(options, id, conn)).abort_handle();
        Ok(Owner { id, holder })
    }
}

/// Keeps the lock for good: checks the connection every [`CHECK_EVERY`], and when it is lost,
/// reconnects and takes the lock again. Until then this process's unfinished claims look
/// abandoned to other processes; a warning says so.
async fn hold(options: PgConnectOptions, id: i64, mut conn: PgConnection) {
    loop {
        tokio::time::sleep(CHECK_EVERY).await;
        if conn.ping().await.is_ok() {
            continue;
        }
        tracing::warn!("the idempotency owner connection was lost; other processes may take over this process's claims until it is back");
        conn = loop {
            match relock(&options, id).await {
                Ok(Some(conn)) => break conn,
                Ok(None) => tracing::warn!(
                    "the idempotency owner lock is still held by the lost session; trying again"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "reconnecting the idempotency owner failed; trying again")
                }
            }
            tokio::time::sleep(CHECK_EVERY).await;
        };
    }
}

async fn relock(options: &PgConnectOptions, id: i64) -> Result<Option<PgConnection>, sqlx::Error> {
    let mut conn = PgConnection::connect_with(options).await?;
    Ok(try_lock(&mut conn, id).await?.then_some(conn))
}

async fn try_lock(conn: &mut PgConnection, id: i64) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT pg_try_advisory_lock($1, $2)")
        .bind(OWNER_LOCK_CLASS)
        .bind(lock_key(id))
        .fetch_one(conn)
        .await
}

/// The owner lock's second key: ids are drawn below 2^31.
pub(crate) fn lock_key(id: i64) -> i32 {
    i32::try_from(id).unwrap_or(i32::MAX)
}

/// A positive id below 2^31 from the random bits of a UUIDv7.
fn random_id() -> i64 {
    let bytes = uuid::Uuid::now_v7().into_bytes();
    let bits = u32::from_be_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
    i64::from(bits & 0x7fff_ffff).max(1)
}
