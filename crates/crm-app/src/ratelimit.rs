//! The in-process rate limiter: one GCRA budget per key, kept by `governor`.
//!
//! The budget is the plan's `rate_limit_per_minute` requests per minute, emitted evenly (one
//! every `60 s / limit`), with bursts of up to `limit` at once: a client that was quiet for a
//! minute may spend the whole minute's allowance immediately, and is then held to the steady
//! rate. So in any 60-second window at most `2 × limit` requests pass (the limit plus the burst).
//! This is the limiter of a single process; several processes share budgets through Redis
//! (`crm-redis`), which runs the same algorithm.

use std::{num::NonZeroU32, sync::Mutex};

use crate::FastMap as HashMap;

use async_trait::async_trait;
use crm_domain::Tenant;
use governor::{
    clock::{Clock, DefaultClock},
    middleware::StateInformationMiddleware,
    state::{InMemoryState, NotKeyed},
    Quota,
};

use crate::ports::{RateLimiter, RateStatus};

type Gcra =
    governor::RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// Whole seconds, rounded up, for `RateLimit-Reset` and `Retry-After` (which carry integers; a
/// client that waits the rounded-down value would be refused again).
pub fn ceil_secs(nanos: u128) -> u64 {
    nanos.div_ceil(1_000_000_000) as u64
}

/// Seconds until `remaining` of `limit` is whole again, at one request per `60 s / limit`.
/// In whole seconds throughout: `missing × 60 / limit` rounded up, in 64 bits (it asked for two
/// 128-bit divisions per request when it went through nanoseconds).
pub fn reset_secs(limit: u32, remaining: u32) -> u64 {
    let missing = u64::from(limit.saturating_sub(remaining));
    (missing * 60).div_ceil(u64::from(limit.max(1)))
}

#[derive(Default)]
pub struct LocalRateLimiter {
    clock: DefaultClock,
    /// Each tenant's limit and budget. A budget is checked under the map's lock (one atomic
    /// update), so a request neither clones the tenant nor counts references.
    budgets: Mutex<HashMap<Tenant, (u32, Gcra)>>,
}

impl LocalRateLimiter {
    pub fn new() -> LocalRateLimiter {
        LocalRateLimiter::default()
    }

    /// Takes one request from `tenant`'s budget at `per_minute`; a changed limit starts a fresh
    /// budget.
    fn check(
        &self,
        tenant: &Tenant,
        per_minute: NonZeroU32,
    ) -> Result<u32, governor::NotUntil<<DefaultClock as Clock>::Instant>> {
        let mut budgets = self
            .budgets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let fresh = || {
            governor::RateLimiter::direct(Quota::per_minute(per_minute))
                .with_middleware::<StateInformationMiddleware>()
        };
        let budget = match budgets.get_mut(tenant) {
            Some(budget) => {
                if budget.0 != per_minute.get() {
                    *budget = (per_minute.get(), fresh());
                }
                budget
            }
            None => budgets
                .entry(tenant.clone())
                .or_insert_with(|| (per_minute.get(), fresh())),
        };
        budget
            .1
            .check()
            .map(|snapshot| snapshot.remaining_burst_capacity())
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
