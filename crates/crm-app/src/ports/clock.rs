//! The clock and the id source: time and identity come from these, never from the system
//! inside rules.

use crm_domain::Timestamp;
use uuid::Uuid;

pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;

    /// The time to within a clock tick (a few milliseconds, never ahead of [`Clock::now`]), for
    /// the checks every request makes: a key's expiry, the billing period, a reservation's
    /// lease. The system clock answers this one without reading the time-stamp counter, which is
    /// a noticeable share of a cached request's work. Where a tick could change the answer (within
    /// [`COARSE_SLACK_MS`] of an expiry or a period's end) the caller asks [`Clock::now`] too.
    fn now_coarse(&self) -> Timestamp {
        self.now()
    }
}

/// How far [`Clock::now_coarse`] may be behind [`Clock::now`], with room to spare (a tick is
/// 1 to 10 ms).
pub const COARSE_SLACK_MS: i64 = 1_000;

pub trait IdSource: Send + Sync {
    /// A fresh, time-ordered UUID (v7).
    fn new_uuid(&self) -> Uuid;
}
