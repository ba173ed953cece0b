//! The in-process rate limiter: one GCRA budget per key, kept by `governor`.
//!
//! The budget is the plan's `rate_limit_per_minute` requests per minute, emitted evenly (one
//! every `60 s / limit`), with bursts of up to `limit` at once: a client that was quiet for a
//! minute may spend the whole minute's allowance immediately, and is then held to the steady
//! rate. So in any 60-second window at most `2 × limit` requests pass (the limit plus the burst).
//! This is the limiter of a single process; several processes share budgets through Redis
//! (`crm-redis`), which runs the same algorithm.

use std::{
    cell::RefCell,
    num::NonZeroU32,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
};

use crate::FastMap as HashMap;

use async_trait::async_trait;
use crm_domain::Tenant;
use governor::{
    clock::{Clock, DefaultClock},
    middleware::StateInformationMiddleware,
    state::{InMemoryState, NotKeyed},
    Quota,
};

use crm_app::ports::{RateLimiter, RateStatus};

type Gcra =
    governor::RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// Whole seconds, rounded up, for `RateLimit-Reset` and `Retry-After` (which carry integers; a
/// client that waits the rounded-down value would be refused again).
pub fn ceil_secs(nanos: u128) -> u64 {
    nanos.div_ceil(1_000_000_000) as u64
}

/// Seconds until `remaining` of `limit` is whole again, at one request per `60 s / limit`.
/// In whole seconds throughout: `missing × 60 / limit` rounded up, in 64 bits, which costs a
/// request less than going through nanoseconds in 128 bits.
pub fn reset_secs(limit: u32, remaining: u32) -> u64 {
    let missing = u64::from(limit.saturating_sub(remaining));
    (missing * 60).div_ceil(u64::from(limit.max(1)))
}

/// One tenant's budget at one limit.
struct Budget {
    limit: u32,
    gcra: Gcra,
    /// Set (under the shared map's lock) when a new limit replaced this budget: the threads'
    /// copies of it then look in the shared map again.
    replaced: AtomicBool,
}

impl Budget {
    fn new(limit: NonZeroU32) -> Budget {
        Budget {
            limit: limit.get(),
            gcra: governor::RateLimiter::direct(Quota::per_minute(limit))
                .with_middleware::<StateInformationMiddleware>(),
            replaced: AtomicBool::new(false),
        }
    }

    fn take(&self) -> Result<u32, governor::NotUntil<<DefaultClock as Clock>::Instant>> {
        self.gcra
            .check()
            .map(|snapshot| snapshot.remaining_burst_capacity())
    }
}

/// Tenants one thread keeps at most in [`THREAD_BUDGETS`]; past it each new one takes an old
/// one's place.
const THREAD_BUDGETS_MAX: usize = 4_096;

thread_local! {
    /// Per thread, by tenant: the budget this thread last took from, with its limiter's id. The
    /// shared map's mutex, taken by every worker thread on every request, would move its cache
    /// line between the cores each time; a budget itself is one atomic word, which they still
    /// share.
    static THREAD_BUDGETS: RefCell<HashMap<Tenant, (u64, Arc<Budget>)>> = RefCell::new(HashMap::default());
}

pub struct LocalRateLimiter {
    /// Tells this limiter's budgets in [`THREAD_BUDGETS`] from another's (tests run many apps).
    id: u64,
    clock: DefaultClock,
    /// Each tenant's budget at its current limit.
    budgets: Mutex<HashMap<Tenant, Arc<Budget>>>,
}

impl Default for LocalRateLimiter {
    fn default() -> LocalRateLimiter {
        LocalRateLimiter {
            id: crate::instance_id(),
            clock: DefaultClock::default(),
            budgets: Mutex::default(),
        }
    }
}

impl LocalRateLimiter {
    pub fn new() -> LocalRateLimiter {
        LocalRateLimiter::default()
    }

    /// Takes one request from `tenant`'s budget at `per_minute`: from this thread's copy of it
    /// when it has one at that limit, else from the shared map (a changed limit starts a fresh
    /// budget there), which this thread then keeps a copy of.
    fn check(
        &self,
        tenant: &Tenant,
        per_minute: NonZeroU32,
    ) -> Result<u32, governor::NotUntil<<DefaultClock as Clock>::Instant>> {
        let mine = THREAD_BUDGETS.with(|budgets| {
            let budgets = budgets.try_borrow().ok()?;
            let (limiter, budget) = budgets.get(tenant)?;
            (*limiter == self.id
                && budget.limit == per_minute.get()
                && !budget.replaced.load(Ordering::Relaxed))
            .then(|| budget.take())
        });
        if let Some(taken) = mine {
            return taken;
        }
        let budget = {
            let mut budgets = self
                .budgets
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            match budgets.get_mut(tenant) {
                Some(budget) => {
                    if budget.limit != per_minute.get() {
                        budget.replaced.store(true, Ordering::Relaxed);
                        *budget = Arc::new(Budget::new(per_minute));
                    }
                    budget.clone()
                }
                None => budgets
                    .entry(tenant.clone())
                    .or_insert_with(|| Arc::new(Budget::new(per_minute)))
                    .clone(),
            }
        };
        let taken = budget.take();
        THREAD_BUDGETS.with(|budgets| {
            if let Ok(mut budgets) = budgets.try_borrow_mut() {
                crate::insert_bounded(
                    &mut budgets,
                    THREAD_BUDGETS_MAX,
                    tenant.clone(),
                    (self.id, budget),
                );
            }
        });
        taken
    }

    /// The outcome of taking one request, as both ways of asking report it.
    fn take(&self, tenant: &Tenant, per_minute: u32) -> RateStatus {
        let Some(limit) = NonZeroU32::new(per_minute) else {
            // A limit of 0 admits nothing; the budget never refills.
            return RateStatus {
                allowed: false,
                limit: 0,
                remaining: 0,
                reset_secs: 60,
                retry_after_secs: 60,
            };
        };
        match self.check(tenant, limit) {
            Ok(remaining) => RateStatus {
                allowed: true,
                limit: per_minute,
                remaining,
                reset_secs: reset_secs(per_minute, remaining),
                retry_after_secs: 0,
            },
            Err(not_until) => {
                let wait = not_until.wait_time_from(self.clock.now());
                let retry_after_secs = ceil_secs(wait.as_nanos()).max(1);
                RateStatus {
                    allowed: false,
                    limit: per_minute,
                    remaining: 0,
                    reset_secs: reset_secs(per_minute, 0),
                    retry_after_secs,
                }
            }
        }
    }
}

#[async_trait]
impl RateLimiter for LocalRateLimiter {
    async fn acquire(&self, tenant: &Tenant, per_minute: u32) -> RateStatus {
        self.take(tenant, per_minute)
    }

    fn acquire_now(&self, tenant: &Tenant, per_minute: u32) -> Option<RateStatus> {
        Some(self.take(tenant, per_minute))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{Mode, WorkspaceId};

    fn tenant(mode: Mode) -> Tenant {
        Tenant {
            workspace_id: WorkspaceId::from_uuid(uuid::Uuid::now_v7()),
            mode,
        }
    }

    #[tokio::test]
    async fn a_full_burst_passes_then_the_next_is_refused_with_a_retry_after() {
        let limiter = LocalRateLimiter::new();
        let live = tenant(Mode::Live);
        let test = Tenant {
            mode: Mode::Test,
            ..live.clone()
        };
        for i in 0..30 {
            let s = limiter.acquire(&live, 30).await;
            assert!(s.allowed, "request {i} of the burst");
            assert_eq!(s.remaining, 29 - i);
        }
        let refused = limiter.acquire(&live, 30).await;
        assert!(!refused.allowed);
        assert_eq!(refused.remaining, 0);
        assert_eq!(
            refused.retry_after_secs, 2,
            "one request every 2 s at 30 per minute"
        );
        assert_eq!(refused.reset_secs, 60);
        // Budgets are per tenant: the same workspace's other mode has its own.
        assert!(limiter.acquire(&test, 30).await.allowed);
    }

    #[tokio::test]
    async fn a_new_limit_applies_at_once() {
        let limiter = LocalRateLimiter::new();
        let k = &tenant(Mode::Test);
        assert!(limiter.acquire(k, 1).await.allowed);
        assert!(!limiter.acquire(k, 1).await.allowed);
        let s = limiter.acquire(k, 100).await;
        assert!(s.allowed && s.limit == 100 && s.remaining == 99);
        assert!(!limiter.acquire(k, 0).await.allowed);
    }

    /// A thread keeps its own copy of a budget; a limit changed and changed back on another
    /// thread started a fresh budget, which the first thread must take from, not its old copy.
    #[test]
    fn a_budget_replaced_on_another_thread_is_not_taken_from_a_copy() {
        use std::sync::mpsc;
        let limiter = &LocalRateLimiter::new();
        let k = &tenant(Mode::Live);
        // On a new thread each time.
        let on_other = |per_minute| {
            std::thread::scope(|s| {
                s.spawn(|| limiter.acquire_now(k, per_minute).unwrap())
                    .join()
                    .unwrap()
            })
        };
        let (to_worker, work) = mpsc::channel::<u32>();
        let (to_main, answers) = mpsc::channel::<RateStatus>();
        std::thread::scope(|s| {
            // One long-lived thread, which keeps its copy of the budget between requests.
            s.spawn(move || {
                for per_minute in work {
                    let status = limiter.acquire_now(k, per_minute).unwrap();
                    to_main.send(status).unwrap();
                }
            });
            let worker = |per_minute| {
                to_worker.send(per_minute).unwrap();
                answers.recv().unwrap()
            };
            assert_eq!(worker(2).remaining, 1);
            assert_eq!(worker(2).remaining, 0);
            assert!(!worker(2).allowed, "spent");
            assert!(on_other(5).allowed);
            assert_eq!(on_other(2).remaining, 1, "a fresh budget of 2");
            let after = worker(2);
            assert!(
                after.allowed && after.remaining == 0,
                "the worker takes from the fresh budget, not its spent copy: {after:?}"
            );
            drop(to_worker);
        });
    }

    #[tokio::test]
    async fn the_in_memory_budget_answers_at_once_and_shares_the_budget_with_acquire() {
        let limiter = LocalRateLimiter::new();
        let k = &tenant(Mode::Live);
        let first = limiter.acquire_now(k, 3).expect("in memory");
        assert!(first.allowed && first.remaining == 2);
        assert_eq!(limiter.acquire(k, 3).await.remaining, 1);
        assert_eq!(
            limiter.acquire_now(k, 3).map(|s| (s.allowed, s.remaining)),
            Some((true, 0))
        );
        assert!(!limiter.acquire_now(k, 3).unwrap().allowed);
    }

    /// A limiter whose budgets live elsewhere has no immediate answer: callers must await.
    #[tokio::test]
    async fn a_shared_limiter_answers_only_through_acquire() {
        struct Remote;
        #[async_trait]
        impl RateLimiter for Remote {
            async fn acquire(&self, _: &Tenant, per_minute: u32) -> RateStatus {
                RateStatus {
                    allowed: true,
                    limit: per_minute,
                    remaining: per_minute - 1,
                    reset_secs: 1,
                    retry_after_secs: 0,
                }
            }
        }
        let k = &tenant(Mode::Test);
        assert_eq!(Remote.acquire_now(k, 10), None);
        assert!(Remote.acquire(k, 10).await.allowed);
    }

    #[test]
    fn reset_counts_the_time_to_refill_what_is_missing() {
        assert_eq!(reset_secs(120, 120), 0);
        assert_eq!(reset_secs(120, 119), 1);
        assert_eq!(reset_secs(120, 0), 60);
        assert_eq!(reset_secs(7, 6), 9, "60/7 = 8.57 s rounds up");
    }
}
