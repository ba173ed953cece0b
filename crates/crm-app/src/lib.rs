//! The use cases of the CRM and the ports they need.
//!
//! Every write is one transaction opened through the [`ports::Store`] port: the record, its
//! events (outbox) and the idempotency result commit together or not at all. This crate knows the
//! rules (through `crm-domain`) and the ports, and nothing of HTTP, JSON wire DTOs, SQL or any
//! particular database: adapters implement [`ports`], transports call [`App`].

pub mod activities;
pub mod auth;
pub mod automation_ports;
pub mod automations;
pub mod batch;
pub mod companies;
pub mod config_cache;
pub mod contacts;
mod create_groups;
pub mod deals;
pub mod emails;
pub mod error;
pub mod events;
pub mod idempotency;
pub mod keys;
pub mod mail_ports;
pub mod metering;
pub mod paging;
pub mod pipelines;
pub mod plans;
pub mod ports;
pub mod ratelimit;
pub mod registry;
pub mod search;
pub mod secrets;
pub mod sequence_hooks;
pub mod sequence_ports;
pub mod sequence_sends;
pub mod sequences;
pub mod system;
pub mod views;
pub mod webhooks;
pub mod workspaces;
pub mod write;

/// The map for per-request lookups (key cache, rate limiter, meter): keyed by server-made ids and
/// key hashes, never attacker-chosen keys, so foldhash rather than SipHash, which was 4 % of a
/// cached request's instructions.
pub(crate) type FastMap<K, V> = foldhash::HashMap<K, V>;

/// Inserts into one of the per-thread maps (key copies, usage handles) of at most `max` entries:
/// past it a new key takes an old one's place, so a larger working set costs copies, not memory.
pub(crate) fn insert_bounded<K: Eq + Hash + Clone, V>(
    map: &mut FastMap<K, V>,
    max: usize,
    key: K,
    value: V,
) {
    if map.len() >= max && !map.contains_key(&key) {
        if let Some(old) = map.keys().next().cloned() {
            map.remove(&old);
        }
    }
    map.insert(key, value);
}

/// A number of its own for each key cache and meter: per-thread maps are shared by every instance
/// on the thread (tests run many apps), so their entries carry it.
pub(crate) fn instance_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

use std::{
    hash::Hash,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

pub use auth::{Access, Caller, Scope, Scopes};
pub use error::AppError;
pub use metering::{Admission, Refused};
pub use paging::{Page, PageParams};
pub use ports::{Clock, IdSource, RateLimiter, RateStatus, Store, StoreError, Tx};

/// The application: the ports it was built with. Cheap to clone.
#[derive(Clone)]
pub struct App {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdSource>,
    /// Rate budgets, usage counts and key uses of this process.
    pub meter: Arc<metering::Meter>,
    /// The network for webhooks (resolving hosts at registration); none in CLI commands.
    pub outbound: Option<Arc<dyn webhooks::Outbound>>,
    /// Keys, plans, registries and rules kept between requests; off until
    /// [`App::follow_config_changes`] runs (CLI commands never turn it on).
    pub config: Arc<config_cache::ConfigCache>,
    /// Where contact creates are queued once the server groups them (`create_groups`).
    create_groups: Arc<create_groups::CreateGroups>,
    /// How records look to clients: event payloads and stored answers are built with it.
    pub(crate) views: Arc<dyn views::RecordViews>,
    /// Notified when this process writes events, so that an idle fan-out loop looks again at
    /// once instead of after its idle wait ([`App::events_written`]).
    events_written: Arc<tokio::sync::Notify>,
}

impl App {
    /// `views` renders records as clients see them (crm-api's bodies).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
        views: Arc<dyn views::RecordViews>,
    ) -> App {
        let holder = crm_domain::encode_uuid(ids.new_uuid());
        let meter = Arc::new(metering::Meter::new(
            holder,
            Arc::new(ratelimit::LocalRateLimiter::new()),
        ));
        App {
            store,
            clock,
            ids,
            meter,
            outbound: None,
            config: Arc::new(config_cache::ConfigCache::new()),
            create_groups: Arc::default(),
            views,
            events_written: Arc::default(),
        }
    }

    /// Notified (`notify_waiters`: nothing is stored for a loop that has not armed a waiter)
    /// whenever this process writes events to the outbox, possibly before they commit (inside a
    /// transaction) or for a transaction that then rolls back: a fan-out loop that waits on it
    /// looks again soon, and keeps looking every poll for a few looks. Events other processes
    /// write are found by polling.
    pub fn events_written(&self) -> &Arc<tokio::sync::Notify> {
        &self.events_written
    }

    /// The same application with rate budgets kept by `limiter` (shared by several processes)
    /// instead of in this process.
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> App {
        let holder = crm_domain::encode_uuid(self.ids.new_uuid());
        self.meter = Arc::new(metering::Meter::new(holder, limiter));
        self
    }

    /// The same application with webhook hosts resolved (and deliveries sent) through `outbound`.
    pub fn with_outbound(mut self, outbound: Arc<dyn webhooks::Outbound>) -> App {
        self.outbound = Some(outbound);
        self
    }

    /// Keeps [`App::config`] in step with the database for the life of the process; until it
    /// runs, nothing is cached.
    pub async fn follow_config_changes(&self) {
        self.store.follow_config_changes(self.config.clone()).await
    }

    /// Whether the database answers.
    pub async fn ready(&self) -> Result<(), AppError> {
        Ok(self.store.ping().await?)
    }
}
