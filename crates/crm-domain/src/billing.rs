//! Billing periods: the calendar month, UTC (decisions §8).

use time::{Date, Month, OffsetDateTime, Time};

use crate::Timestamp;

/// `[start, end)` of one billing period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Period {
    pub start: Timestamp,
    pub end: Timestamp,
}

fn month_start(year: i32, month: Month) -> Timestamp {
    let date = Date::from_calendar_date(year, month, 1).unwrap_or(Date::MIN);
    let ms = date.with_time(Time::MIDNIGHT).assume_utc().unix_timestamp() * 1000;
    Timestamp::from_millis(ms)
}

impl Period {
    /// The calendar month (UTC) that holds `at`.
    pub fn containing(at: Timestamp) -> Period {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(at.millis()) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let (year, month) = (dt.year(), dt.month());
        let (next_year, next_month) = if month == Month::December {
            (year + 1, Month::January)
        } else {
            (year, month.next())
        };
        Period {
            start: month_start(year, month),
            end: month_start(next_year, next_month),
        }
    }

    pub fn contains(&self, at: Timestamp) -> bool {
        self.start <= at && at < self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        Timestamp::parse_rfc3339(s).unwrap()
    }

    #[test]
    fn a_period_is_the_utc_calendar_month() {
        let p = Period::containing(at("2026-02-14T12:00:00Z"));
        assert_eq!(p.start.to_string(), "2026-02-01T00:00:00.000Z");
        assert_eq!(p.end.to_string(), "2026-03-01T00:00:00.000Z");
        let dec = Period::containing(at("2025-12-31T23:59:59.999Z"));
        assert_eq!(dec.end.to_string(), "2026-01-01T00:00:00.000Z");
        // Midnight belongs to the month it starts; an offset is only another spelling of UTC.
        assert_eq!(
            Period::containing(at("2026-03-01T00:00:00Z"))
                .start
                .to_string(),
            "2026-03-01T00:00:00.000Z"
        );
        assert_eq!(
            Period::containing(at("2026-03-01T00:30:00+01:00"))
                .start
                .to_string(),
            "2026-02-01T00:00:00.000Z"
        );
        assert!(p.contains(p.start) && p.contains(at("2026-02-28T23:59:59.999Z")));
        assert!(!p.contains(p.end) && !p.contains(at("2026-01-31T23:59:59.999Z")));
    }
}
