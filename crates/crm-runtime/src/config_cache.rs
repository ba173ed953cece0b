//! The configuration cache of one process ([`crm_app::ports::ConfigCache`]): API keys with
//! their workspace (plan, overrides, spend cap), each tenant's registry, and the rules every
//! write consults (active automations, triggered sequences). Reading these per request would
//! cost up to six queries on a plain create; they change rarely.
//!
//! Correctness rests on invalidation, never on expiry:
//! - A transaction that changes any of it calls [`crm_app::ports::Tx::mark_config_changed`]; the
//!   store then tells every process at commit (Postgres `NOTIFY`, delivered with the commit; on
//!   SQLite, which serves one process, this process at once and other processes such as the CLI
//!   through a change counter polled every 100 ms), and tells this process before `commit`
//!   returns, so the caller's next request already sees the change.
//! - The cache is only used while the store's change feed is connected ([`ConfigEvents`]): until
//!   it first connects, and whenever it drops, every lookup goes to the database.
//! - A value read from the database is kept only if no invalidation happened since the read
//!   began (a generation counter), so a read racing a change can never cache the old state.
//!
//! Entries also expire after [`MAX_AGE`], a bound on the damage should a notification ever be
//! lost without the feed noticing.

use std::{
    cell::RefCell,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, MutexGuard,
    },
    time::{Duration, Instant},
};

use crm_app::{
    identity::{KeyAuth, KeyDigest},
    ports::{ConfigCache, ConfigEvents, Generation},
};
use crm_domain::{
    rule::Automation, sequence::Sequence, ObjectKind, Registry, Tenant, Timestamp, WorkspaceId,
};

use crate::FastMap as HashMap;

/// Longest an entry is trusted without being re-read.
pub const MAX_AGE: Duration = Duration::from_secs(60);
/// Keys and tenants kept at most; past it nothing new is kept until entries expire or change.
const MAX_ENTRIES: usize = 20_000;

struct Timed<T> {
    value: T,
    at: Instant,
}

impl<T: Clone> Timed<T> {
    fn fresh(&self) -> Option<T> {
        (self.at.elapsed() < MAX_AGE).then(|| self.value.clone())
    }
}

#[derive(Default)]
struct TenantConfig {
    registries: HashMap<ObjectKind, Timed<Arc<Registry>>>,
    automations: Option<Timed<Arc<Vec<Automation>>>>,
    sequences: Option<Timed<Arc<Vec<Sequence>>>>,
    /// Whether the tenant has any sequence at all (enabled or not, triggered or not).
    any_sequence: Option<Timed<bool>>,
}

#[derive(Default)]
struct State {
    generation: u64,
    /// By the key's SHA-256.
    keys: HashMap<KeyDigest, Timed<KeyAuth>>,
    tenants: HashMap<Tenant, TenantConfig>,
}

pub struct MemoryConfigCache {
    /// Tells this cache's entries in [`THREAD_KEYS`] from another's (tests run many apps).
    id: u64,
    live: AtomicBool,
    /// `State::generation`, readable without the lock (written under it).
    generation: AtomicU64,
    state: Mutex<State>,
}

/// Keys one thread keeps at most in [`THREAD_KEYS`]; past it each new one takes an old one's
/// place (a working set larger than this only costs copies).
const THREAD_KEYS_MAX: usize = 4_096;

/// A key as one thread last found it in the shared map: valid while the cache's generation is
/// still `generation`, and on the wall clock from `made` until `until`, when the shared entry it
/// copies would expire (checked against the time authentication reads anyway).
struct ThreadKey {
    generation: u64,
    auth: KeyAuth,
    made: Timestamp,
    until: Timestamp,
}

thread_local! {
    /// Per thread, by (cache, digest): the shared map's mutex, and the reference count of a
    /// caller every worker thread clones, would move their cache lines between the cores on
    /// every request. Each thread's copy has its own [`crm_app::Caller`] allocation.
    static THREAD_KEYS: RefCell<HashMap<(u64, KeyDigest), ThreadKey>> = RefCell::new(HashMap::default());
}

impl Default for MemoryConfigCache {
    fn default() -> MemoryConfigCache {
        MemoryConfigCache {
            id: crate::instance_id(),
            live: AtomicBool::new(false),
            generation: AtomicU64::new(0),
            state: Mutex::default(),
        }
    }
}

impl MemoryConfigCache {
    pub fn new() -> MemoryConfigCache {
        MemoryConfigCache::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain maps behind: still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether lookups may be answered from memory.
    fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    /// Stores `f`'s change if no invalidation happened since `seen` was taken.
    fn keep(&self, seen: Generation, f: impl FnOnce(&mut State)) {
        let Some(seen) = seen.count() else { return };
        let mut state = self.state();
        if state.generation == seen && self.is_live() {
            f(&mut state);
        }
    }

    fn tenant<T: Clone>(
        &self,
        tenant: &Tenant,
        get: impl FnOnce(&TenantConfig) -> Option<&Timed<T>>,
    ) -> Option<T> {
        if !self.is_live() {
            return None;
        }
        self.state()
            .tenants
            .get(tenant)
            .and_then(get)
            .and_then(Timed::fresh)
    }

    fn keep_tenant(
        &self,
        seen: Generation,
        tenant: &Tenant,
        put: impl FnOnce(&mut TenantConfig, Instant),
    ) {
        self.keep(seen, |s| {
            if s.tenants.len() >= MAX_ENTRIES && !s.tenants.contains_key(tenant) {
                return;
            }
            put(s.tenants.entry(tenant.clone()).or_default(), Instant::now());
        });
    }

    fn forget(&self, which: impl Fn(&WorkspaceId) -> bool) {
        let mut state = self.state();
        state.generation += 1;
        // Before the lock is let go: a thread that then reads the shared map under it also
        // sees this generation, so no thread's copy can outlive the change (see `key`).
        self.generation.store(state.generation, Ordering::Release);
        state
            .keys
            .retain(|_, k| !which(&k.value.caller.workspace.id));
        state.tenants.retain(|t, _| !which(&t.workspace_id));
    }
}

impl ConfigCache for MemoryConfigCache {
    fn generation(&self) -> Generation {
        if !self.is_live() {
            return Generation::OFF;
        }
        Generation::at(self.state().generation)
    }

    /// The key's caller when this process has it: from this thread's copy while no invalidation
    /// happened since it was made, else from the shared map (and then copied for this thread).
    /// `now`: the wall clock as authentication read it (coarse will do).
    fn key(&self, digest: &KeyDigest, now: Timestamp) -> Option<KeyAuth> {
        if !self.is_live() {
            return None;
        }
        let generation = self.generation.load(Ordering::Acquire);
        let mine = THREAD_KEYS.with(|keys| {
            let keys = keys.try_borrow().ok()?;
            let key = keys.get(&(self.id, *digest))?;
            // A clock set back past the copy's making ends it too.
            (key.generation == generation && key.made <= now && now < key.until)
                .then(|| key.auth.clone())
        });
        if mine.is_some() {
            return mine;
        }
        let (auth, left, generation) = {
            let state = self.state();
            let timed = state.keys.get(digest)?;
            let auth = Timed::fresh(timed)?;
            (
                auth,
                MAX_AGE.saturating_sub(timed.at.elapsed()),
                state.generation,
            )
        };
        THREAD_KEYS.with(|keys| {
            let Ok(mut keys) = keys.try_borrow_mut() else {
                return;
            };
            let copy = KeyAuth {
                caller: auth.caller.for_this_thread(),
                ..auth.clone()
            };
            let until = now.plus_millis(i64::try_from(left.as_millis()).unwrap_or(i64::MAX));
            crate::insert_bounded(
                &mut keys,
                THREAD_KEYS_MAX,
                (self.id, *digest),
                ThreadKey {
                    generation,
                    auth: copy,
                    made: now,
                    until,
                },
            );
        });
        Some(auth)
    }

    fn keep_key(&self, seen: Generation, digest: &KeyDigest, auth: &KeyAuth) {
        self.keep(seen, |s| {
            if s.keys.len() < MAX_ENTRIES || s.keys.contains_key(digest) {
                s.keys.insert(
                    *digest,
                    Timed {
                        value: auth.clone(),
                        at: Instant::now(),
                    },
                );
            }
        });
    }

    fn registry(&self, tenant: &Tenant, object: ObjectKind) -> Option<Arc<Registry>> {
        self.tenant(tenant, |t| t.registries.get(&object))
    }

    fn keep_registry(
        &self,
        seen: Generation,
        tenant: &Tenant,
        object: ObjectKind,
        registry: &Arc<Registry>,
    ) {
        self.keep_tenant(seen, tenant, |t, at| {
            t.registries.insert(
                object,
                Timed {
                    value: registry.clone(),
                    at,
                },
            );
        });
    }

    /// Every enabled automation of the tenant, oldest first.
    fn automations(&self, tenant: &Tenant) -> Option<Arc<Vec<Automation>>> {
        self.tenant(tenant, |t| t.automations.as_ref())
    }

    fn keep_automations(&self, seen: Generation, tenant: &Tenant, rules: &Arc<Vec<Automation>>) {
        self.keep_tenant(seen, tenant, |t, at| {
            t.automations = Some(Timed {
                value: rules.clone(),
                at,
            })
        });
    }

    /// Every enabled sequence of the tenant that has a trigger, oldest first.
    fn sequences(&self, tenant: &Tenant) -> Option<Arc<Vec<Sequence>>> {
        self.tenant(tenant, |t| t.sequences.as_ref())
    }

    fn keep_sequences(&self, seen: Generation, tenant: &Tenant, seqs: &Arc<Vec<Sequence>>) {
        self.keep_tenant(seen, tenant, |t, at| {
            t.sequences = Some(Timed {
                value: seqs.clone(),
                at,
            })
        });
    }

    fn any_sequence(&self, tenant: &Tenant) -> Option<bool> {
        self.tenant(tenant, |t| t.any_sequence.as_ref())
    }

    fn keep_any_sequence(&self, seen: Generation, tenant: &Tenant, any: bool) {
        self.keep_tenant(seen, tenant, |t, at| {
            t.any_sequence = Some(Timed { value: any, at })
        });
    }
}

impl ConfigEvents for MemoryConfigCache {
    fn changed(&self, workspace: &WorkspaceId) {
        self.forget(|w| w == workspace);
    }

    fn changed_unknown(&self) {
        self.forget(|_| true);
    }

    fn connected(&self) {
        // Whatever happened while disconnected is unknown: start empty.
        self.forget(|_| true);
        self.live.store(true, Ordering::Release);
    }

    fn disconnected(&self) {
        self.live.store(false, Ordering::Release);
        self.forget(|_| true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_app::identity::{ApiKeyRecord, Workspace};
    use crm_domain::{ApiKeyId, Mode, Plan};

    fn workspace(id: &WorkspaceId) -> Workspace {
        Workspace {
            id: id.clone(),
            name: "w".into(),
            plan: Plan::Free,
            created_at: Timestamp::from_millis(0),
            overage_cap_usd: None,
            rate_limit_override: None,
            included_requests_override: None,
            history_retention_days: None,
            email_retention_days: None,
        }
    }

    fn key(ws: &WorkspaceId) -> ApiKeyRecord {
        ApiKeyRecord {
            id: ApiKeyId::from_uuid(uuid::Uuid::now_v7()),
            workspace_id: ws.clone(),
            mode: Mode::Test,
            name: "k".into(),
            scopes: vec!["*".into()],
            key_hash: "h".into(),
            created_at: Timestamp::from_millis(0),
            last_used_at: None,
            revoked_at: None,
            expires_at: None,
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000)
    }

    fn ws() -> WorkspaceId {
        WorkspaceId::from_uuid(uuid::Uuid::now_v7())
    }

    #[test]
    fn nothing_is_kept_until_the_feed_connects() {
        let cache = MemoryConfigCache::new();
        let w = ws();
        cache.keep_key(
            cache.generation(),
            &[1; 16],
            &KeyAuth::new(key(&w), workspace(&w)),
        );
        assert!(cache.key(&[1; 16], now()).is_none());
        cache.connected();
        cache.keep_key(
            cache.generation(),
            &[1; 16],
            &KeyAuth::new(key(&w), workspace(&w)),
        );
        assert!(cache.key(&[1; 16], now()).is_some());
        cache.disconnected();
        assert!(cache.key(&[1; 16], now()).is_none());
    }

    #[test]
    fn a_read_that_raced_an_invalidation_is_not_kept() {
        let cache = MemoryConfigCache::new();
        cache.connected();
        let w = ws();
        let seen = cache.generation();
        cache.changed(&ws()); // any change, even another workspace's, since the read began
        cache.keep_key(seen, &[1; 16], &KeyAuth::new(key(&w), workspace(&w)));
        assert!(cache.key(&[1; 16], now()).is_none());
    }

    #[test]
    fn a_change_forgets_only_that_workspace() {
        let cache = MemoryConfigCache::new();
        cache.connected();
        let (a, b) = (ws(), ws());
        let tenant = |w: &WorkspaceId| Tenant {
            workspace_id: w.clone(),
            mode: Mode::Live,
        };
        let reg = Arc::new(Registry::default());
        cache.keep_key(
            cache.generation(),
            &[2; 16],
            &KeyAuth::new(key(&a), workspace(&a)),
        );
        cache.keep_key(
            cache.generation(),
            &[3; 16],
            &KeyAuth::new(key(&b), workspace(&b)),
        );
        cache.keep_registry(cache.generation(), &tenant(&a), ObjectKind::Contact, &reg);
        cache.keep_registry(cache.generation(), &tenant(&b), ObjectKind::Contact, &reg);
        cache.changed(&a);
        assert!(
            cache.key(&[2; 16], now()).is_none()
                && cache.registry(&tenant(&a), ObjectKind::Contact).is_none()
        );
        assert!(
            cache.key(&[3; 16], now()).is_some()
                && cache.registry(&tenant(&b), ObjectKind::Contact).is_some()
        );
        cache.changed_unknown();
        assert!(cache.key(&[3; 16], now()).is_none());
    }
    #[test]
    fn a_threads_copy_of_a_key_lasts_only_until_the_next_change() {
        let cache = MemoryConfigCache::new();
        cache.connected();
        let w = ws();
        cache.keep_key(
            cache.generation(),
            &[4; 16],
            &KeyAuth::new(key(&w), workspace(&w)),
        );
        let shared = cache.key(&[4; 16], now()).unwrap();
        let copy = cache.key(&[4; 16], now()).unwrap();
        assert_eq!(
            (&copy.caller.principal, &copy.caller.scopes),
            (&shared.caller.principal, &shared.caller.scopes)
        );
        assert!(
            !std::ptr::eq(&*copy.caller, &*shared.caller),
            "the second lookup answers from this thread's own copy"
        );
        // Another cache on this thread does not see it.
        let other = MemoryConfigCache::new();
        other.connected();
        assert!(other.key(&[4; 16], now()).is_none());
        // Revoking (any change of the workspace) reaches this thread's copy and another thread's.
        let on_other_thread = || {
            std::thread::scope(|s| {
                s.spawn(|| cache.key(&[4; 16], now()).is_some())
                    .join()
                    .unwrap()
            })
        };
        assert!(on_other_thread());
        cache.changed(&w);
        assert!(cache.key(&[4; 16], now()).is_none());
        assert!(!on_other_thread());
        // Kept again, it is found again, and a change of another workspace only costs a copy.
        cache.keep_key(
            cache.generation(),
            &[4; 16],
            &KeyAuth::new(key(&w), workspace(&w)),
        );
        assert!(cache.key(&[4; 16], now()).is_some() && cache.key(&[4; 16], now()).is_some());
        cache.changed(&ws());
        assert!(cache.key(&[4; 16], now()).is_some());
        cache.disconnected();
        assert!(cache.key(&[4; 16], now()).is_none());
    }

    #[test]
    fn a_thread_keeps_a_bounded_number_of_copies_and_every_key_is_still_found() {
        let cache = MemoryConfigCache::new();
        cache.connected();
        let w = ws();
        let digest = |i: usize| {
            let mut d = [0xAB; 16];
            d[..8].copy_from_slice(&(i as u64).to_le_bytes());
            d
        };
        let n = THREAD_KEYS_MAX + 10;
        for i in 0..n {
            cache.keep_key(
                cache.generation(),
                &digest(i),
                &KeyAuth::new(key(&w), workspace(&w)),
            );
        }
        for _ in 0..2 {
            assert!((0..n).all(|i| cache.key(&digest(i), now()).is_some()));
        }
        assert!(THREAD_KEYS.with(|keys| keys.borrow().len()) <= THREAD_KEYS_MAX);
    }

    #[test]
    fn a_threads_copy_ends_when_the_shared_entry_would_and_when_the_clock_goes_back() {
        let cache = MemoryConfigCache::new();
        cache.connected();
        let w = ws();
        cache.keep_key(
            cache.generation(),
            &[5; 16],
            &KeyAuth::new(key(&w), workspace(&w)),
        );
        let shared = cache.key(&[5; 16], now()).unwrap().caller;
        let from = |at: Timestamp| cache.key(&[5; 16], at).unwrap().caller;
        let copy = from(now());
        assert!(!std::ptr::eq(&*copy, &*shared));
        assert!(
            std::ptr::eq(&*from(now().plus_millis(1_000)), &*copy),
            "the copy, a second later"
        );
        let max_age = i64::try_from(MAX_AGE.as_millis()).unwrap();
        assert!(
            std::ptr::eq(&*from(now().plus_millis(max_age)), &*shared),
            "past its age: the shared entry again"
        );
        let renewed = from(now().plus_millis(max_age));
        assert!(
            std::ptr::eq(&*from(now().plus_millis(max_age - 1)), &*shared),
            "a clock set back: the shared entry"
        );
        assert!(!std::ptr::eq(&*renewed, &*shared));
    }
}
