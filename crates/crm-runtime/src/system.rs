//! The real clock and id source.

use std::time::{SystemTime, UNIX_EPOCH};

use crm_domain::Timestamp;
use uuid::Uuid;

use crm_app::ports::{Clock, IdSource};

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        Timestamp::from_millis(ms)
    }

    #[cfg(target_os = "linux")]
    fn now_coarse(&self) -> Timestamp {
        // CLOCK_REALTIME_COARSE: the time of the kernel's last tick, read from the vDSO's data.
        let t = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
        Timestamp::from_millis(
            t.tv_sec
                .saturating_mul(1_000)
                .saturating_add(t.tv_nsec / 1_000_000),
        )
    }
}

pub struct UuidV7;

impl IdSource for UuidV7 {
    fn new_uuid(&self) -> Uuid {
        Uuid::now_v7()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_coarse_clock_is_never_ahead_and_at_most_a_few_ticks_behind() {
        for _ in 0..1_000 {
            let coarse = SystemClock.now_coarse();
            let precise = SystemClock.now();
            assert!(coarse <= precise, "{coarse:?} ahead of {precise:?}");
            // A tick is 1-10 ms; a descheduled test thread may add more.
            assert!(
                precise.millis() - coarse.millis() < 200,
                "{coarse:?} far behind {precise:?}"
            );
        }
    }
}
