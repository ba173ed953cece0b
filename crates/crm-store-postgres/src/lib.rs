//! The store port over Postgres (sqlx), for deployments where several server processes share
//! one database.
//!
//! Writes run in ordinary (READ COMMITTED) transactions from a shared pool. Where SQLite relies
//! on its single writer, this store locks instead: a write transaction reads the records it is
//! about to change (contacts, companies, pipelines, the default pipeline, deals, activities)
//! `FOR UPDATE` (a stage's deals before their pipeline, as a deal update takes them), and locks
//! an enum group before appending to it, so concurrent read-modify-writes queue rather than fail
//! or collide; moving the default pipeline looks
//! again after waiting (see `clear_default_pipeline`). Postgres aborts a whole transaction on
//! any failed statement, while the port promises that `Duplicate` leaves it usable; so
//! uniqueness is checked with `ON CONFLICT DO NOTHING`, or inside a savepoint where that cannot
//! work, and the port's savepoints are real ones. Reads take a plain pooled connection with no
//! `BEGIN`. Text search reads the newest rows, then trigram indexes (`search_page`). This crate knows SQL and
//! sqlx, and no HTTP and no business rule beyond what the port's contracts say.

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
mod pool;
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
    sync::{Arc, OnceLock},
    time::Duration,
};

use async_trait::async_trait;
use crm_app::{
    ports::{ConfigEvents, ConfigMarks, Reference},
    Store, StoreError, Tx,
};
use crm_domain::{history::Change, Contact, Event, Tenant, WorkspaceId};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};

use crate::{
    owner::Owner,
    pool::{Connector, Lease, Pool},
};

use tx::PostgresTx;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// The name `normalise_contact_emails` records in `data_migrations` once it has run.
const EMAIL_NORMALISATION: &str = "0012_email_normalisation";

/// Connections per process when the caller does not choose: Postgres serves about a hundred in
/// all by default, and several processes may share it.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 16;

/// How many pooled connections a write tries when each turns out to be dead at its `BEGIN`
/// (or its ping).
const BEGIN_ATTEMPTS: u32 = 3;

/// A write of one statement outside a transaction pings a connection idle this long first.
const ALONE_PING_IF_IDLE_FOR: Duration = Duration::from_secs(1);

/// How a write checks its connection before its first statement ([`PostgresStore::write_lease`]).
enum WriteStart {
    /// A transaction: its `BEGIN` is the check.
    Begin,
    /// One statement outside a transaction.
    Alone,
}

/// A failed statement or connection as the port's error: `Unavailable` when the database could
/// not be reached or the session was lost (`pool::is_unavailable`), `Backend` otherwise.
pub(crate) fn backend(e: sqlx::Error) -> StoreError {
    if pool::is_unavailable(&e) {
        StoreError::Unavailable(Box::new(e))
    } else {
        StoreError::Backend(Box::new(e))
    }
}

/// The `NOTIFY` channel of configuration changes; the payload is the workspace id.
pub(crate) const CONFIG_CHANNEL: &str = "crm_config_changed";

#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    /// This process's listener for configuration changes, once `follow_config_changes` runs.
    local: Arc<OnceLock<Arc<dyn ConfigEvents>>>,
    /// Whose idempotency claims this store writes (see `owner`).
    owner: Arc<Owner>,
    /// Seals and opens webhook secrets and connection keys in the row layer.
    secrets: tx::Secrets,
}

impl PostgresStore {
    /// Connects to the database at `url` (any sqlx Postgres URL) with a pool of
    /// [`DEFAULT_MAX_CONNECTIONS`].
    pub async fn connect(url: &str) -> Result<PostgresStore, StoreError> {
        Self::connect_with(url, DEFAULT_MAX_CONNECTIONS).await
    }

    /// Connects with a pool of at most `max_connections`.
    pub async fn connect_with(
        url: &str,
        max_connections: u32,
    ) -> Result<PostgresStore, StoreError> {
        let options: PgConnectOptions = url.parse().map_err(backend)?;
        let pool = Pool::builder(Connector {
            options: options.clone(),
        })
        // A pool of none would only ever time out.
        .max_size(max_connections.max(1) as usize)
        .runtime(deadpool::Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(30)))
        .create_timeout(Some(Duration::from_secs(30)))
        // The ping of a long-idle connection: one that does not answer is dropped for a new one.
        .recycle_timeout(Some(Duration::from_secs(5)))
        .build()
        .map_err(|e| StoreError::Backend(Box::new(e)))?;
        // Fail here, not at the first request, when the database cannot be reached.
        let owner = Owner::start(&options).await?;
        let store = PostgresStore {
            pool,
            local: Arc::default(),
            owner: Arc::new(owner),
            secrets: Arc::new(crm_app::secrets::NoKeys),
        };
        drop(store.lease().await?);
        Ok(store)
    }

    /// A connection for one unit of work.
    /// A pooled connection for a write. A connection the server dropped while it sat in the
    /// pool fails the write's first message; when that is its `BEGIN` nothing has happened yet,
    /// so another connection may try (the broken one is not handed out again). A write of one
    /// statement has no such harmless first message: a connection idle for
    /// [`ALONE_PING_IF_IDLE_FOR`] is pinged first instead (a busy one is in use every few ms).
    async fn write_lease(&self, start: WriteStart) -> Result<Lease, StoreError> {
        let mut attempts = 0;
        loop {
            let mut lease = self.lease().await?;
            let checked = match start {
                WriteStart::Begin => lease.begin().await,
                WriteStart::Alone if lease.idle_before() >= ALONE_PING_IF_IDLE_FOR => {
                    lease.ping().await
                }
                WriteStart::Alone => Ok(()),
            };
            match checked {
                Ok(()) => return Ok(lease),
                Err(_) if lease.is_broken() && attempts < BEGIN_ATTEMPTS => attempts += 1,
                Err(e) => return Err(backend(e)),
            }
        }
    }

    async fn lease(&self) -> Result<Lease, StoreError> {
        match self.pool.get().await {
            Ok(conn) => Ok(Lease::new(conn)),
            Err(deadpool::managed::PoolError::Backend(e)) => Err(backend(e)),
            // No connection within the wait or connect timeout: the database does not answer,
            // or every connection is stuck on it.
            Err(e @ deadpool::managed::PoolError::Timeout(_)) => {
                Err(StoreError::Unavailable(Box::new(e)))
            }
            Err(e) => Err(StoreError::Backend(Box::new(e))),
        }
    }

    /// Applies the migrations under `migrations/postgres`, then the data steps SQL cannot do. Safe
    /// to run from several processes at once: sqlx serializes the migrations with an advisory
    /// lock, and each data step locks the table that records it.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        let mut lease = self.lease().await?;
        MIGRATOR
            .run(lease.raw())
            .await
            .map_err(|e| StoreError::Backend(Box::new(e)))?;
        drop(lease);
        self.normalise_contact_emails().await
    }

    /// Rewrites each contact's stored e-mail address in its normalised form (decisions §22;
    /// migration 0012), once. Only addresses with a non-ASCII character can change: ASCII ones were
    /// already stored lower-cased, which is all normalising does to them. Rows go oldest first, so
    /// the oldest contact gets a contested address unless one already holds it. A contact whose
    /// normalised address is taken, or whose address no longer normalises, keeps its address and
    /// is recorded in `email_normalisation_conflicts` and the log, for an operator to resolve.
    async fn normalise_contact_emails(&self) -> Result<(), StoreError> {
        let mut lease = self.lease().await?;
        let mut tx = sqlx::Connection::begin(lease.raw())
            .await
            .map_err(backend)?;
        // Processes starting together wait here for the first to finish, then find it done.
        sqlx::query("LOCK TABLE data_migrations IN EXCLUSIVE MODE")
            .execute(&mut *tx)
            .await
            .map_err(backend)?;
        let done: Option<i32> = sqlx::query_scalar("SELECT 1 FROM data_migrations WHERE name = $1")
            .bind(EMAIL_NORMALISATION)
            .fetch_optional(&mut *tx)
            .await
            .map_err(backend)?;
        if done.is_some() {
            return Ok(());
        }
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(
            "SELECT workspace_id, mode, id, email FROM contacts
             WHERE email IS NOT NULL AND octet_length(email) <> char_length(email)
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
                        "SELECT id FROM contacts WHERE workspace_id = $1 AND mode = $2 AND email = $3",
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
                                "UPDATE contacts SET email = $1, version = version + 1, updated_at = $2
                                 WHERE workspace_id = $3 AND mode = $4 AND id = $5",
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
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
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
        sqlx::query("INSERT INTO data_migrations (name, applied_at) VALUES ($1, $2)")
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

    /// The store with `secrets` sealing and opening webhook secrets and connection keys
    /// (without it, reading or writing one fails).
    pub fn with_secrets(mut self, secrets: Arc<dyn crm_app::secrets::SecretBox>) -> PostgresStore {
        self.secrets = secrets;
        self
    }

    pub fn into_arc(self) -> Arc<dyn Store> {
        Arc::new(self)
    }

    /// Closes the pool: connections close as they come back, and no new unit of work starts.
    pub async fn close(&self) {
        self.pool.close();
    }
}

#[async_trait]
impl Store for PostgresStore {
    async fn begin_write(&self) -> Result<Box<dyn Tx>, StoreError> {
        let lease = self.write_lease(WriteStart::Begin).await?;
        Ok(Box::new(PostgresTx::write(
            lease,
            ConfigMarks::new(self.local.get().cloned()),
            self.owner.id,
            self.secrets.clone(),
        )))
    }

    async fn insert_contact_alone(
        &self,
        tenant: &Tenant,
        contact: &Contact,
        refs: &[Reference<'_>],
        event: &Event,
        change: &Change,
    ) -> Result<(), StoreError> {
        // No transaction: the one statement is atomic on its own.
        let lease = self.write_lease(WriteStart::Alone).await?;
        PostgresTx::read(lease, self.secrets.clone())
            .insert_contact_alone(tenant, contact, refs, event, change)
            .await
    }

    async fn begin_read(&self) -> Result<Box<dyn Tx>, StoreError> {
        // No BEGIN: it would cost two round trips per request. As with the SQLite store's readers,
        // a read unit of work is therefore not one snapshot: each statement sees what had
        // committed when it started.
        Ok(Box::new(PostgresTx::read(
            self.lease().await?,
            self.secrets.clone(),
        )))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let mut lease = self.lease().await?;
        let result = sqlx::query("SELECT 1").execute(lease.raw()).await;
        result.map_err(|e| backend(lease.failed(e)))?;
        Ok(())
    }

    async fn scrub_freed_space(&self) -> Result<(), StoreError> {
        self.scrub().await
    }

    /// `LISTEN`s on its own connection (outside the pool, which it would otherwise shrink by
    /// one for good). A lost connection may have lost notifications: `disconnected`, then a new
    /// connection a second later, then `connected`.
    async fn follow_config_changes(&self, events: Arc<dyn ConfigEvents>) {
        let _ = self.local.set(events.clone());
        loop {
            if let Err(e) = self.listen(&*events).await {
                tracing::warn!(error = %e, "configuration change feed lost; caching is off until it reconnects");
            }
            events.disconnected();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

impl PostgresStore {
    async fn listen(&self, events: &dyn ConfigEvents) -> Result<(), sqlx::Error> {
        let own = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(self.pool.manager().options.clone())
            .await?;
        let mut listener = PgListener::connect_with(&own).await?;
        listener.listen(CONFIG_CHANNEL).await?;
        events.connected();
        while let Some(notification) = listener.try_recv().await? {
            match WorkspaceId::parse(notification.payload()) {
                Ok(ws) => events.changed(&ws),
                Err(_) => events.changed_unknown(),
            }
        }
        Ok(())
    }
}
