//! The live email sending worker: claims due `queued` emails with a lease and sends them through
//! each workspace's connection (crm-email), retrying provider errors on a backoff schedule.

use std::{sync::Arc, time::Duration};

use crm_app::{ports::EmailSender, App};

/// Emails claimed per step; they are sent one after another within the lease.
pub const BATCH: u32 = 10;
/// How long a claim holds: longer than a whole batch of attempts that time out (10 s each), so a
/// live worker never loses its claim to another; a dead worker's claims expire after it.
pub const LEASE_MS: i64 = 180_000;

/// Parses a backoff schedule such as `30s,2m,10m,1h,6h` (units ms, s, m, h) into milliseconds.
pub fn parse_schedule(raw: &str) -> Result<Vec<i64>, String> {
    raw.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let split = item
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(item.len());
            let (n, unit) = item.split_at(split);
            let n: i64 = n
                .parse()
                .map_err(|_| format!("`{item}` is not a duration such as 30s or 2m"))?;
            let factor = match unit {
                "ms" => 1,
                "s" | "" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                _ => return Err(format!("`{item}`: the unit must be ms, s, m or h")),
            };
            Ok(n * factor)
        })
        .collect()
}

/// Runs until aborted. An email being sent when the task is aborted is claimed again when its
/// lease expires (delivery is at least once).
pub async fn deliver_emails_forever(
    app: App,
    sender: Arc<dyn EmailSender>,
    backoff_ms: Vec<i64>,
    poll: Duration,
) {
    loop {
        match app
            .deliver_due_emails(&*sender, &backoff_ms, BATCH, LEASE_MS)
            .await
        {
            // A full batch: more may be due right away.
            Ok(n) if n as u32 == BATCH => continue,
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "email worker step failed"),
        }
        tokio::time::sleep(poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_parse() {
        assert_eq!(
            parse_schedule("30s,2m,10m,1h,6h").unwrap(),
            vec![30_000, 120_000, 600_000, 3_600_000, 21_600_000]
        );
        assert_eq!(parse_schedule("200ms, 1").unwrap(), vec![200, 1_000]);
        assert!(parse_schedule("5 days").is_err());
        assert_eq!(parse_schedule("").unwrap(), Vec::<i64>::new());
    }
}
