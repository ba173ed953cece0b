//! The in-process infrastructure behind `crm-app`'s ports: the configuration cache
//! ([`MemoryConfigCache`]), the usage meter ([`Meter`]), the in-memory rate limiter
//! ([`LocalRateLimiter`]), write grouping ([`WriteSlots`]), the outbox signal, and the system
//! clock and id source. It knows tokio, locks, per-thread maps and the store port; it knows no
//! CRM rule (what is counted, capped or grouped is crm-app's), no HTTP and no SQL.
//! [`Runtime::new`] builds an application with all of it, as the server and its tests run one.

pub mod background;
pub mod config_cache;
pub mod meter;
pub mod outbox;
pub mod rate_limiter;
pub mod system;
pub mod write_groups;

use std::{
    hash::Hash,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use crm_app::{
    create_groups::{ContactCreate, ContactCreateGrouping, ContactCreated},
    views::RecordViews,
    App, Clock, IdSource, Infrastructure, Store,
};
use tokio::sync::Notify;

pub use background::TokioBackground;
pub use config_cache::MemoryConfigCache;
pub use meter::{Meter, FLUSH_INTERVAL_MS};
pub use outbox::OutboxNotify;
pub use rate_limiter::LocalRateLimiter;
pub use write_groups::WriteSlots;

/// An application with this process's infrastructure.
pub struct Runtime {
    pub app: App,
    /// Notified whenever the application writes events: what the webhook fan-out loop waits on
    /// between polls.
    pub events_written: Arc<Notify>,
}

impl Runtime {
    /// An application over `store` with an empty configuration cache (filled once
    /// [`App::follow_config_changes`] runs), a usage meter writing to `store` (its counts reach
    /// the store when [`App::flush_usage`] runs), rate budgets in this process's memory (see
    /// [`App::with_rate_limiter`] to share them) and no write grouping (see
    /// [`contact_create_slots`]).
    /// `views` renders records as clients see them (crm-api's bodies, handed in by the binary).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        ids: Arc<dyn IdSource>,
        views: Arc<dyn RecordViews>,
    ) -> Runtime {
        let holder = crm_domain::encode_uuid(ids.new_uuid());
        let events_written = Arc::new(Notify::new());
        let infrastructure = Infrastructure {
            config: Arc::new(MemoryConfigCache::new()),
            meter: Arc::new(Meter::new(holder, store.clone(), clock.clone())),
            limiter: Arc::new(LocalRateLimiter::new()),
            outbox: Arc::new(OutboxNotify(events_written.clone())),
            background: Arc::new(TokioBackground),
        };
        Runtime {
            app: App::new(store, clock, ids, views, infrastructure),
            events_written,
        }
    }
}

/// Contact creates grouped once `slots` create transactions are in flight, up to `max_group`
/// in one transaction (see [`WriteSlots`]); for [`App::with_contact_create_grouping`].
pub fn contact_create_slots(slots: usize, max_group: usize) -> Arc<ContactCreateGrouping> {
    Arc::new(WriteSlots::<ContactCreate, ContactCreated>::new(
        slots, max_group,
    ))
}

/// The map for per-request lookups (key cache, rate limiter, meter): keyed by server-made ids and
/// key hashes, never attacker-chosen keys, so foldhash rather than SipHash, which costs a cached
/// request noticeably more.
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

/// A number of its own for each key cache, meter and limiter: per-thread maps are shared by every
/// instance on the thread (tests run many apps), so their entries carry it.
pub(crate) fn instance_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
