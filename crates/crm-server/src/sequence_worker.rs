//! The sequence scheduler: every `serve` process runs one. Each round is one transaction that
//! locks due steps (`FOR UPDATE SKIP LOCKED` on Postgres, so rounds of any process on one database
//! never claim the same step), re-checks exit conditions, sends through `App::queue_email` and
//! advances the enrollments (see `crm_app::sequence_sends`). A round that claimed a full batch is followed at
//! once by the next; otherwise the worker sleeps for the poll interval.

use std::time::Duration;

use crm_app::App;

/// Settings of one scheduler loop (`CRM_SEQUENCE_POLL_MS`, `CRM_SEQUENCE_BATCH`,
/// `CRM_SEQUENCE_HOLD_BACK_MS`); a process runs
/// `CRM_SEQUENCE_WORKERS` of them (see [`spawn_all`]).
#[derive(Debug, Clone)]
pub struct SequenceWorker {
    /// This process's name (unique per process), recorded on the steps it holds back.
    pub holder: String,
    pub poll: Duration,
    pub batch: u32,
    /// How long the steps of a tenant whose sends failed wait before they are tried again.
    pub hold_back_ms: i64,
}

/// A name no other process has: host-independent randomness (std's per-process hash keys), the
/// process id and the start time.
fn holder_name() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("seq-{}-{:016x}-{nanos}", std::process::id(), h.finish())
}

/// Starts `CRM_SEQUENCE_WORKERS` (default 2) scheduler loops, so one round's database work
/// overlaps another's.
pub fn spawn_all(app: &App) -> Vec<tokio::task::JoinHandle<()>> {
    let n = std::env::var("CRM_SEQUENCE_WORKERS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(2)
        .clamp(1, 16);
    (0..n)
        .map(|_| tokio::spawn(SequenceWorker::from_env().run_forever(app.clone())))
        .collect()
}

impl SequenceWorker {
    pub fn from_env() -> SequenceWorker {
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        SequenceWorker {
            holder: holder_name(),
            poll: Duration::from_millis(env("CRM_SEQUENCE_POLL_MS").unwrap_or(1000).max(10)),
            batch: env("CRM_SEQUENCE_BATCH").unwrap_or(500).clamp(1, 5000) as u32,
            hold_back_ms: env("CRM_SEQUENCE_HOLD_BACK_MS")
                .unwrap_or(60_000)
                .clamp(100, 86_400_000) as i64,
        }
    }

    /// Runs rounds until the task is aborted. A failed round is rolled back, logged and retried
    /// next poll.
    pub async fn run_forever(self, app: App) {
        loop {
            match app
                .send_due_sequence_steps(&self.holder, self.batch, self.hold_back_ms)
                .await
            {
                Ok(round) if round.claimed as u32 >= self.batch => continue,
                Ok(round) => {
                    if round.claimed > 0 {
                        tracing::debug!(
                            claimed = round.claimed,
                            sent = round.sent,
                            exited = round.exited,
                            "sequence round"
                        );
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "sequence round failed; its steps are retried next round")
                }
            }
            tokio::time::sleep(self.poll).await;
        }
    }
}
