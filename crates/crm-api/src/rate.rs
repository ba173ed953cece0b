//! The rate budget a call reports, for the `RateLimit-*` headers every admitted answer carries
//! (decisions §8, §17).

use crm_app::RateStatus;

/// The rate budget an agent transport learns while running a call, to report as `RateLimit-*`
/// headers on the HTTP response that carries it (decisions §8: every response carries them).
#[derive(Debug, Default)]
pub struct RateSlot(std::sync::Mutex<Option<RateStatus>>);

impl RateSlot {
    pub fn set(&self, rate: Option<RateStatus>) {
        if rate.is_some() {
            *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = rate;
        }
    }

    pub fn get(&self) -> Option<RateStatus> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The `RateLimit-*` headers (plain integers, decisions §17) for `rate`, plus `Retry-After` when
/// the call was refused. Transports turn these into HTTP headers.
pub fn rate_limit_headers(rate: &RateStatus) -> impl Iterator<Item = (&'static str, u64)> {
    let headers = [
        ("ratelimit-limit", u64::from(rate.limit)),
        ("ratelimit-remaining", u64::from(rate.remaining)),
        ("ratelimit-reset", rate.reset_secs),
        ("retry-after", rate.retry_after_secs),
    ];
    headers.into_iter().take(if rate.allowed { 3 } else { 4 })
}
