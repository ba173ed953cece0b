//! What a process keeps in memory about workspaces between requests: API keys with their
//! workspace, each tenant's registries, and the rules every write consults (active automations,
//! triggered sequences). The use cases read through it (`cached_reads.rs`); an adapter
//! keeps it, told of every change by the store's feed ([`super::ConfigEvents`], which every
//! cache also is).
//!
//! Correctness rests on invalidation, never on expiry, so the contract is about what a cache
//! MUST NOT answer:
//! - Until [`ConfigEvents::connected`] is first called, and from [`ConfigEvents::disconnected`]
//!   until the next `connected`, every lookup MUST answer `None` and [`ConfigCache::generation`]
//!   MUST be [`Generation::OFF`].
//! - After [`ConfigEvents::changed`] for a workspace, no lookup MAY answer a value kept before it
//!   for that workspace (its keys, registries, automations, sequences); after
//!   [`ConfigEvents::changed_unknown`] or `connected`, no lookup MAY answer any value kept before.
//! - A `keep_*` call MUST keep nothing when any invalidation (`changed`, `changed_unknown`,
//!   `connected`, `disconnected`) happened since its `seen` generation was taken, or when `seen` is
//!   [`Generation::OFF`]: a value read while the configuration changed is never kept.
//!
//! A cache MAY forget an entry at any time (a bound on memory, or on the age of an entry).

use std::sync::Arc;

use crm_domain::{rule::Automation, sequence::Sequence, ObjectKind, Registry, Tenant, Timestamp};

use super::ConfigEvents;
use crate::identity::{KeyAuth, KeyDigest};

/// A reading of a cache's invalidation counter, taken before a database read whose result may
/// be kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generation(Option<u64>);

impl Generation {
    /// The cache is off (its feed is not connected): nothing read now may be kept.
    pub const OFF: Generation = Generation(None);

    /// The counter at `count`.
    pub fn at(count: u64) -> Generation {
        Generation(Some(count))
    }

    /// The counter, or `None` when the cache was off.
    pub fn count(self) -> Option<u64> {
        self.0
    }
}

/// The cache of keys, registries and rules (see the module documentation for its contract).
pub trait ConfigCache: ConfigEvents {
    /// Take before reading from the database what a `keep_*` call may then store.
    fn generation(&self) -> Generation;

    /// The key with this SHA-256, as authentication last found it in the store. `now`: the wall
    /// clock as authentication read it (coarse will do); an answer MUST NOT outlive, on that
    /// clock, the entry it copies.
    fn key(&self, digest: &KeyDigest, now: Timestamp) -> Option<KeyAuth>;
    fn keep_key(&self, seen: Generation, digest: &KeyDigest, auth: &KeyAuth);

    /// `tenant`'s registry of `object`.
    fn registry(&self, tenant: &Tenant, object: ObjectKind) -> Option<Arc<Registry>>;
    fn keep_registry(
        &self,
        seen: Generation,
        tenant: &Tenant,
        object: ObjectKind,
        registry: &Arc<Registry>,
    );

    /// Every enabled automation of the tenant, oldest first.
    fn automations(&self, tenant: &Tenant) -> Option<Arc<Vec<Automation>>>;
    fn keep_automations(&self, seen: Generation, tenant: &Tenant, rules: &Arc<Vec<Automation>>);

    /// Every enabled sequence of the tenant that has a trigger, oldest first.
    fn sequences(&self, tenant: &Tenant) -> Option<Arc<Vec<Sequence>>>;
    fn keep_sequences(&self, seen: Generation, tenant: &Tenant, sequences: &Arc<Vec<Sequence>>);

    /// Whether the tenant has any sequence at all (enabled or not, triggered or not).
    fn any_sequence(&self, tenant: &Tenant) -> Option<bool>;
    fn keep_any_sequence(&self, seen: Generation, tenant: &Tenant, any: bool);
}

/// A cache that keeps nothing: every lookup goes to the store. For a process that does not
/// follow configuration changes (an operator's command) and for tests.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoConfigCache;

impl ConfigEvents for NoConfigCache {
    fn changed(&self, _: &crm_domain::WorkspaceId) {}
    fn changed_unknown(&self) {}
    fn connected(&self) {}
    fn disconnected(&self) {}
}

impl ConfigCache for NoConfigCache {
    fn generation(&self) -> Generation {
        Generation::OFF
    }
    fn key(&self, _: &KeyDigest, _: Timestamp) -> Option<KeyAuth> {
        None
    }
    fn keep_key(&self, _: Generation, _: &KeyDigest, _: &KeyAuth) {}
    fn registry(&self, _: &Tenant, _: ObjectKind) -> Option<Arc<Registry>> {
        None
    }
    fn keep_registry(&self, _: Generation, _: &Tenant, _: ObjectKind, _: &Arc<Registry>) {}
    fn automations(&self, _: &Tenant) -> Option<Arc<Vec<Automation>>> {
        None
    }
    fn keep_automations(&self, _: Generation, _: &Tenant, _: &Arc<Vec<Automation>>) {}
    fn sequences(&self, _: &Tenant) -> Option<Arc<Vec<Sequence>>> {
        None
    }
    fn keep_sequences(&self, _: Generation, _: &Tenant, _: &Arc<Vec<Sequence>>) {}
    fn any_sequence(&self, _: &Tenant) -> Option<bool> {
        None
    }
    fn keep_any_sequence(&self, _: Generation, _: &Tenant, _: bool) {}
}
