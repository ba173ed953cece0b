//! Admitting a request: the rate limit, then usage counting against the quota or spend cap.
//!
//! The policy (decisions §8, §17): every authenticated request is rate-limited per workspace and
//! mode; refused ones (429) count for nothing. Then every request counts toward usage, except
//! [`EXEMPT_OPERATIONS`], which also stay open when the quota or the cap is reached. Test mode is
//! counted and never capped. Live requests are capped by the period's [`Allowance`].
//!
//! The budgets and the counting are the process's infrastructure, reached through ports: the
//! [`RateLimiter`](crate::ports::RateLimiter) and the [`UsageMeter`](crate::ports::UsageMeter)
//! (which counts in memory, reserves capped allowance from the store and writes counts in
//! batches, so that admitting writes nothing per request).

use std::cell::Cell;

use crm_domain::{Allowance, Mode, Period, Refusal as CapRefusal, Timestamp};

use crate::{
    auth::Caller,
    error::AppError,
    ports::{RateStatus, COARSE_SLACK_MS},
    App,
};

/// Operations that are neither counted nor capped (they are still rate-limited), so that a
/// client at its quota or cap can see and lift it (decisions §8).
pub const EXEMPT_OPERATIONS: [&str; 3] =
    ["svc_get_usage", "svc_get_settings", "svc_update_settings"];

/// A request let through, with the rate budget the transport reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub rate: RateStatus,
}

/// A request refused (429), or a failure while admitting it; `rate` when the rate limiter ran.
#[derive(Debug)]
pub struct Refused {
    pub error: AppError,
    pub rate: Option<RateStatus>,
}

/// The billing period containing `at`. The last one found is kept per thread, without a lock:
/// its calendar arithmetic would otherwise be a good part of an admission. A period depends only
/// on the clock, so one cache serves every application.
fn period_containing(at: Timestamp) -> Period {
    thread_local! {
        static LAST: Cell<Period> = Cell::new(Period::containing(Timestamp::from_millis(0)));
    }
    LAST.with(|last| {
        if !last.get().contains(at) {
            last.set(Period::containing(at));
        }
        last.get()
    })
}

fn refusal_error(caller: &Caller, refusal: CapRefusal, included: u64) -> AppError {
    match refusal {
        CapRefusal::QuotaExceeded => AppError::QuotaExceeded {
            plan: caller.workspace.plan.as_str(),
            included,
        },
        CapRefusal::SpendCapReached => AppError::SpendCapReached {
            cap_usd: caller.workspace.overage_cap_usd.unwrap_or(0.0),
        },
    }
}

impl App {
    /// Admits one request of `operation` (a catalog name) for `caller`: rate limit first, then
    /// counting and, in live mode, the quota or spend cap. Every transport calls this once per
    /// operation call, so REST, MCP and A2A share limits and counts.
    pub async fn admit(&self, caller: &Caller, operation: &str) -> Result<Admission, Refused> {
        let limits = caller.workspace.limits();
        let limiter = &self.limiter;
        let rate = match limiter.acquire_now(&caller.tenant, limits.rate_limit_per_minute) {
            Some(rate) => rate,
            None => {
                limiter
                    .acquire(&caller.tenant, limits.rate_limit_per_minute)
                    .await
            }
        };
        if !rate.allowed {
            return Err(Refused {
                error: AppError::RateLimited {
                    retry_after_secs: rate.retry_after_secs,
                },
                rate: Some(rate),
            });
        }
        if EXEMPT_OPERATIONS.contains(&operation) {
            return Ok(Admission { rate });
        }
        let allowance = match caller.tenant.mode {
            Mode::Test => Allowance::Unlimited,
            Mode::Live => limits.live_allowance(caller.workspace.overage_cap_usd),
        };
        let mut now = self.clock.now_coarse();
        let mut period = period_containing(now);
        // A tick behind, the coarse clock could count a request of the new period's first
        // milliseconds in the one just ended: near the end, the precise clock decides.
        if period.end.millis() - now.millis() <= COARSE_SLACK_MS {
            now = self.clock.now();
            period = period_containing(now);
        }
        if self.meter.count_now(&caller.tenant, period, allowance, now) {
            return Ok(Admission { rate });
        }
        match self
            .meter
            .count(&caller.tenant, period, allowance, now)
            .await
        {
            Ok(true) => Ok(Admission { rate }),
            Ok(false) => {
                let error = match allowance {
                    Allowance::Capped { refusal, .. } => {
                        refusal_error(caller, refusal, limits.included_requests)
                    }
                    Allowance::Unlimited => {
                        AppError::Internal("the meter refused an uncapped request".into())
                    }
                };
                Err(Refused {
                    error,
                    rate: Some(rate),
                })
            }
            Err(e) => Err(Refused {
                error: e.into(),
                rate: Some(rate),
            }),
        }
    }
}
