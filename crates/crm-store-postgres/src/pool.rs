//! The connection pool: deadpool over plain sqlx connections.
//!
//! Not sqlx's own `PgPool`, because that one pings every connection it takes back (sqlx 0.8,
//! `return_to_pool`, not configurable): one more round trip per unit of work, a third of the
//! server's CPU for a `GET` by id and one message in two on the database's side. Here a
//! connection goes back to the pool as it is, at no cost, and is checked only when that can
//! matter:
//! - a connection unused for [`PING_IF_IDLE_FOR`] is pinged before it is handed out (a server
//!   or a proxy may have dropped it; no answer within 5 s and it is replaced), one older than
//!   [`MAX_LIFETIME`] is replaced;
//! - a statement that failed at the connection level (I/O, protocol) marks it broken
//!   ([`Lease::failed`]) and the pool replaces it;
//! - a write dropped without `commit` (an error, a cancelled request) leaves a transaction open
//!   with its row locks: the ROLLBACK is sent at once from a spawned task, not when the
//!   connection is next used, and the connection returns to the pool only after it.
//!
//! A unit of work cancelled in the middle of a statement (its request future dropped) leaves
//! the rest of the reply unread; sqlx drains it before the connection's next statement
//! (`wait_until_ready`), as its own release ping would have.

use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, RecycleError, RecycleResult};
use sqlx::{
    postgres::{PgConnectOptions, PgDatabaseError, PgSeverity},
    Connection, Database, PgConnection, Postgres, TransactionManager,
};

/// A pooled connection idle this long is pinged before use.
pub(crate) const PING_IF_IDLE_FOR: Duration = Duration::from_secs(30);

/// A connection this old is closed and replaced when it comes up for use (as sqlx's pool did),
/// so that the server's per-connection caches and a failover's stale routes do not live forever.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// How long an abandoned transaction's ROLLBACK may take before its connection is closed
/// instead (which rolls back too, on the server's side).
const ROLLBACK_TIMEOUT: Duration = Duration::from_secs(30);

type TxManager = <Postgres as Database>::TransactionManager;

/// Opens connections with the store's options and decides whether an idle one may be reused.
pub(crate) struct Connector {
    pub(crate) options: PgConnectOptions,
}

/// A connection and whether it failed in a way that makes it unusable.
pub(crate) struct PooledConnection {
    raw: PgConnection,
    broken: bool,
    /// How long it sat unused before this lease took it (zero when new).
    idle_before: Duration,
}

impl managed::Manager for Connector {
    type Type = PooledConnection;
    type Error = sqlx::Error;

    async fn create(&self) -> Result<PooledConnection, sqlx::Error> {
        let raw = PgConnection::connect_with(&self.options).await?;
        Ok(PooledConnection {
            raw,
            broken: false,
            idle_before: Duration::ZERO,
        })
    }

    async fn recycle(
        &self,
        conn: &mut PooledConnection,
        metrics: &Metrics,
    ) -> RecycleResult<sqlx::Error> {
        if conn.broken {
            return Err(RecycleError::message("the connection failed in use"));
        }
        if metrics.age() >= MAX_LIFETIME {
            return Err(RecycleError::message(
                "the connection reached its maximum lifetime",
            ));
        }
        if metrics.last_used() >= PING_IF_IDLE_FOR {
            conn.raw.ping().await.map_err(RecycleError::Backend)?;
        }
        conn.idle_before = metrics.last_used();
        Ok(())
    }
}

pub(crate) type Pool = managed::Pool<Connector>;

/// A connection taken from the pool for one unit of work; dropping it gives the connection back
/// (after rolling back a transaction left open, see the module documentation).
pub(crate) struct Lease(Option<Object<Connector>>);

impl Lease {
    pub(crate) fn new(conn: Object<Connector>) -> Lease {
        Lease(Some(conn))
    }

    fn pooled(&mut self) -> &mut PooledConnection {
        self.0
            .as_mut()
            .expect("a lease holds its connection until dropped")
    }

    pub(crate) fn raw(&mut self) -> &mut PgConnection {
        &mut self.pooled().raw
    }

    /// How long the connection sat in the pool before this lease (about: since it was last
    /// handed out).
    pub(crate) fn idle_before(&self) -> Duration {
        self.0.as_ref().map_or(Duration::ZERO, |c| c.idle_before)
    }

    /// A round trip that does nothing: whether the connection still works.
    pub(crate) async fn ping(&mut self) -> Result<(), sqlx::Error> {
        let result = self.raw().ping().await;
        result.map_err(|e| self.failed(e))
    }

    /// `BEGIN`, or a savepoint inside a transaction.
    pub(crate) async fn begin(&mut self) -> Result<(), sqlx::Error> {
        let result = TxManager::begin(self.raw(), None).await;
        result.map_err(|e| self.failed(e))
    }

    /// `COMMIT` of what the last [`Lease::begin`] opened (or the savepoint's release).
    pub(crate) async fn commit(&mut self) -> Result<(), sqlx::Error> {
        let result = TxManager::commit(self.raw()).await;
        result.map_err(|e| self.failed(e))
    }

    /// `ROLLBACK` of what the last [`Lease::begin`] opened (to the savepoint, for one).
    pub(crate) async fn rollback(&mut self) -> Result<(), sqlx::Error> {
        let result = TxManager::rollback(self.raw()).await;
        result.map_err(|e| self.failed(e))
    }

    /// Whether a statement failed at the connection level (see [`Lease::failed`]).
    pub(crate) fn is_broken(&self) -> bool {
        self.0.as_ref().is_some_and(|c| c.broken)
    }

    /// Passes `e` on, first marking the connection broken when the error is the connection's
    /// own (not a statement's): the pool then replaces it instead of handing it out again.
    pub(crate) fn failed(&mut self, e: sqlx::Error) -> sqlx::Error {
        if is_connection_error(&e) {
            self.pooled().broken = true;
        }
        e
    }
}

/// Errors after which the connection cannot be used: its transport failed, or the server ended
/// the session (a FATAL error, such as `pg_terminate_backend` or a shutdown, arrives as a
/// database error before the socket closes).
fn is_connection_error(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.try_downcast_ref::<PgDatabaseError>().is_some_and(|pg| {
            matches!(pg.severity(), PgSeverity::Fatal | PgSeverity::Panic)
                || pg.code().starts_with("08")
        }),
        _ => false,
    }
}

/// Errors that say the database cannot be reached or the session was lost: a connection error,
/// or the server shutting down, starting up, or out of connection slots.
pub(crate) fn is_unavailable(e: &sqlx::Error) -> bool {
    is_connection_error(e)
        || matches!(e, sqlx::Error::Database(db) if db
            .try_downcast_ref::<PgDatabaseError>()
            .is_some_and(|pg| matches!(pg.code(), "57P01" | "57P02" | "57P03" | "53300")))
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut conn) = self.0.take() else {
            return;
        };
        if TxManager::get_transaction_depth(&conn.raw) == 0 {
            return; // back to the pool as it is
        }
        TxManager::start_rollback(&mut conn.raw);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    // Sends the queued ROLLBACK and waits for the server to be ready again; a
                    // server that never answers must not keep the pool's slot forever.
                    let outcome = tokio::time::timeout(ROLLBACK_TIMEOUT, conn.raw.ping()).await;
                    if !matches!(outcome, Ok(Ok(()))) {
                        tracing::warn!("rolling back an abandoned transaction failed or timed out; closing its connection");
                        drop(Object::take(conn));
                    }
                });
            }
            // No runtime to send it from (a test's end): closing the connection rolls back too.
            Err(_) => drop(Object::take(conn)),
        }
    }
}
