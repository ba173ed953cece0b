//! Instants with millisecond precision, and calendar dates. Both render in the wire format of
//! decisions §2 (`2026-01-02T03:04:05.678Z`, `2026-01-02`).

use std::fmt;

use time::{format_description::well_known::Rfc3339, macros::format_description, OffsetDateTime};

/// Milliseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

impl Timestamp {
    pub fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    pub fn millis(self) -> i64 {
        self.0
    }

    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(1000)
    }

    pub fn plus_millis(self, ms: i64) -> Self {
        Self(self.0.saturating_add(ms))
    }

    /// Parses an RFC 3339 instant with any offset and precision; keeps milliseconds.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        let dt = OffsetDateTime::parse(s, &Rfc3339).ok()?;
        Some(Self((dt.unix_timestamp_nanos() / 1_000_000) as i64))
    }
}

/// The wire format, as `time` describes it: the fallback for years outside 0-9999, and what the
/// tests hold [`Timestamp`]'s own writing to.
const WIRE_FORMAT: &[time::format_description::BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

impl fmt::Display for Timestamp {
    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, its digits written into place: `time` does the calendar, but
    /// its formatter interprets the description on every call, and every record body formats two
    /// or three of these (a third of a contact body's rendering).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(self.0 as i128 * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let (year, month, day) = dt.to_calendar_date();
        let year = match u32::try_from(year) {
            Ok(year) if year <= 9999 => year,
            _ => return f.write_str(&dt.format(WIRE_FORMAT).map_err(|_| fmt::Error)?),
        };
        let (hour, minute, second, milli) = dt.to_hms_milli();
        let mut out = *b"0000-00-00T00:00:00.000Z";
        for (range, n) in [
            (0..4, year),
            (5..7, month as u32),
            (8..10, u32::from(day)),
            (11..13, u32::from(hour)),
            (14..16, u32::from(minute)),
            (17..19, u32::from(second)),
            (20..23, u32::from(milli)),
        ] {
            put_digits(&mut out[range], n);
        }
        f.write_str(std::str::from_utf8(&out).map_err(|_| fmt::Error)?)
    }
}

/// `n` in decimal, right-aligned and zero-padded to fill `slot`.
fn put_digits(slot: &mut [u8], mut n: u32) {
    for digit in slot.iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// A calendar date, `YYYY-MM-DD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(time::Date);

impl Date {
    pub fn parse(s: &str) -> Option<Self> {
        let format = format_description!("[year]-[month]-[day]");
        // The format is fixed-width, so reject anything longer/shorter than 10 chars up front.
        (s.len() == 10)
            .then(|| time::Date::parse(s, &format).ok().map(Self))
            .flatten()
    }

    /// The first instant of the day, UTC.
    pub fn midnight_utc(self) -> Timestamp {
        Timestamp(self.0.midnight().assume_utc().unix_timestamp() * 1000)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        write!(
            f,
            "{:04}-{:02}-{:02}",
            d.year(),
            u8::from(d.month()),
            d.day()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Written digit by digit, a timestamp reads as `time`'s formatter writes it, from before
        /// the epoch to the years `time` stops at.
        #[test]
        fn writes_what_the_wire_format_describes(ms in -62_135_596_800_000i64..253_402_300_800_000i64) {
            let dt = OffsetDateTime::from_unix_timestamp_nanos(ms as i128 * 1_000_000).unwrap();
            proptest::prop_assert_eq!(
                Timestamp::from_millis(ms).to_string(),
                dt.format(WIRE_FORMAT).unwrap()
            );
        }
    }

    #[test]
    fn formats_with_millis_and_z() {
        assert_eq!(
            Timestamp::from_millis(1_700_000_000_123).to_string(),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(
            Timestamp::from_millis(0).to_string(),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn parses_offsets_into_utc_millis() {
        let t = Timestamp::parse_rfc3339("2023-11-14T23:13:20.123456+01:00").unwrap();
        assert_eq!(t.millis(), 1_700_000_000_123);
        assert!(Timestamp::parse_rfc3339("yesterday").is_none());
    }

    #[test]
    fn dates_round_trip_and_reject_garbage() {
        assert_eq!(Date::parse("2026-02-28").unwrap().to_string(), "2026-02-28");
        assert!(Date::parse("2026-02-30").is_none());
        assert!(Date::parse("2026-2-3").is_none());
        assert!(Date::parse("2026-02-03T00:00:00Z").is_none());
    }
}
