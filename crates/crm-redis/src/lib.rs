//! Rate budgets shared by every server process through Redis: the `RateLimiter` port of
//! `crm-app`, as an atomic Lua script running GCRA on Redis's clock, so N processes together
//! admit no more than the plan's rate (limit per minute, bursts of up to the limit).
//!
//! When Redis fails mid-flight the limiter falls back to the in-process one for that request
//! (logging a warning at most every few seconds): a rate limit protects the service, and an
//! outage of the limiter's store should not take the API down with it. This crate knows Redis
//! and nothing of HTTP, SQL or the CRM's rules.

use std::{
    sync::atomic::{AtomicI64, Ordering},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use async_trait::async_trait;
use crm_app::{RateLimiter, RateStatus};
use crm_domain::Tenant;
use crm_runtime::rate_limiter::{ceil_secs, LocalRateLimiter};
use redis::{aio::ConnectionManager, Script};

/// How long a request waits for Redis before it is admitted by the in-process limiter instead.
const REDIS_TIMEOUT: Duration = Duration::from_millis(500);
const WARN_EVERY_SECS: i64 = 10;

pub struct RedisRateLimiter {
    conn: ConnectionManager,
    script: Script,
    fallback: LocalRateLimiter,
    last_warning: AtomicI64,
}

impl RedisRateLimiter {
    /// Connects to `url` (`redis://host:port/db`); fails when Redis does not answer, so a
    /// misconfigured server stops at start rather than running without shared limits.
    pub async fn connect(url: &str) -> Result<RedisRateLimiter, redis::RedisError> {
        let client = redis::Client::open(url)?;
        let mut conn = ConnectionManager::new(client).await?;
        redis::cmd("PING").query_async::<String>(&mut conn).await?;
        Ok(RedisRateLimiter {
            conn,
            script: Script::new(include_str!("gcra.lua")),
            fallback: LocalRateLimiter::new(),
            last_warning: AtomicI64::new(0),
        })
    }

    async fn run(&self, tenant: &Tenant, per_minute: u32) -> Result<RateStatus, String> {
        let interval_us = 60_000_000 / u64::from(per_minute);
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key(format!(
            "crm:rate:{}:{}",
            tenant.workspace_id,
            tenant.mode.as_str()
        ));
        invocation.arg(interval_us.max(1)).arg(per_minute);
        let call = invocation.invoke_async::<(i64, i64, i64, i64)>(&mut conn);
        let (allowed, remaining, reset_us, retry_us) =
            match tokio::time::timeout(REDIS_TIMEOUT, call).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("timed out".into()),
            };
        let micros = |v: i64| u128::from(v.max(0).unsigned_abs()) * 1_000;
        Ok(RateStatus {
            allowed: allowed == 1,
            limit: per_minute,
            remaining: u32::try_from(remaining.max(0)).unwrap_or(u32::MAX),
            reset_secs: ceil_secs(micros(reset_us)),
            retry_after_secs: if allowed == 1 {
                0
            } else {
                ceil_secs(micros(retry_us)).max(1)
            },
        })
    }

    fn warn(&self, error: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let last = self.last_warning.load(Ordering::Relaxed);
        if now - last >= WARN_EVERY_SECS
            && self
                .last_warning
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(%error, "Redis rate limiter unavailable; limiting in this process only until it is back");
        }
    }
}

#[async_trait]
impl RateLimiter for RedisRateLimiter {
    async fn acquire(&self, tenant: &Tenant, per_minute: u32) -> RateStatus {
        if per_minute == 0 {
            return self.fallback.acquire(tenant, 0).await;
        }
        match self.run(tenant, per_minute).await {
            Ok(status) => status,
            Err(error) => {
                self.warn(&error);
                self.fallback.acquire(tenant, per_minute).await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the tests reach Redis; they fail (never skip) when it does not answer.
    fn redis_url() -> String {
        std::env::var("CRM_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned())
    }

    /// A tenant of its own, so runs never share a budget.
    fn tenant() -> Tenant {
        Tenant {
            workspace_id: crm_domain::WorkspaceId::from_uuid(uuid::Uuid::now_v7()),
            mode: crm_domain::Mode::Test,
        }
    }

    async fn limiter() -> RedisRateLimiter {
        RedisRateLimiter::connect(&redis_url()).await.unwrap_or_else(|e| {
            panic!("these tests need Redis: run one on 127.0.0.1:6379 or set CRM_TEST_REDIS_URL=redis://host:port ({e})")
        })
    }

    #[tokio::test]
    async fn two_limiters_share_one_budget() {
        let (a, b) = (limiter().await, limiter().await);
        let key = &tenant();
        let mut admitted = 0;
        for i in 0..40 {
            let l = if i % 2 == 0 { &a } else { &b };
            let s = l.acquire(key, 30).await;
            if s.allowed {
                admitted += 1;
                assert_eq!(s.limit, 30);
            } else {
                assert!(s.retry_after_secs >= 1 && s.remaining == 0);
            }
        }
        assert_eq!(admitted, 30, "the burst of 30 is shared, not 30 each");
        let refused = a.acquire(key, 30).await;
        assert!(!refused.allowed);
        assert_eq!(
            refused.retry_after_secs, 2,
            "one request every 2 s at 30 per minute"
        );
    }

    #[tokio::test]
    async fn remaining_counts_down_the_burst() {
        let l = limiter().await;
        let key = &tenant();
        let first = l.acquire(key, 10).await;
        assert!(first.allowed);
        assert_eq!(first.remaining, 9);
        assert_eq!(first.reset_secs, 6, "one request refills in 60/10 s");
        assert_eq!(l.acquire(key, 10).await.remaining, 8);
    }
}
