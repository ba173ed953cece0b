//! The loop every background job kind runs beside the HTTP server (imports, exports): claim a
//! due job under a lease, run it step by step (each step a transaction that renews the lease),
//! look for the next; sleep when there is none; sweep the kind's leftovers now and then. Any
//! number of processes on one database share the jobs through the store's claims, and a job
//! whose process died is claimed again once its lease ends and resumes where its last step
//! committed.

use std::{future::Future, time::Duration};

use crm_app::{App, AppError};

/// How a job kind is claimed, run and swept.
pub trait LeasedJobs: Send + Sync + 'static {
    type Claimed: Send + Sync;
    /// The kind, for the logs (`import`, `export`).
    const KIND: &'static str;
    /// Claims one due job for `token` until `lease_ms` from now.
    fn claim(
        &self,
        app: &App,
        token: &str,
        lease_ms: i64,
    ) -> impl Future<Output = Result<Option<Self::Claimed>, AppError>> + Send;
    /// Runs a claimed job to its end or until its claim is lost, logging how it went; an error
    /// is a step that failed and is retried by whoever claims the job after the lease.
    fn run(
        &self,
        app: &App,
        claimed: &Self::Claimed,
        lease_ms: i64,
    ) -> impl Future<Output = Result<(), AppError>> + Send;
    /// Drops what the kind keeps past its time (old errors, expired files).
    fn sweep(&self, app: &App) -> impl Future<Output = Result<u64, AppError>> + Send;
}

/// A worker's claim settings: its token, the lease, how often it looks for work and sweeps.
#[derive(Debug, Clone)]
pub struct Lease {
    pub token: String,
    /// How long a claim holds without a step committed (each step renews it).
    pub lease_ms: i64,
    pub poll: Duration,
    pub sweep_every: Duration,
}

impl Lease {
    /// Settings from `<prefix>_LEASE_MS` (60 s), `<prefix>_POLL_MS` (500 ms) and
    /// `<prefix>_SWEEP_MS` (an hour), with a token no other process has.
    pub fn from_env(prefix: &str, kind: &str) -> Lease {
        let env = |k: &str| {
            std::env::var(format!("{prefix}_{k}"))
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
        };
        Lease {
            token: token(kind),
            lease_ms: env("LEASE_MS").unwrap_or(60_000).clamp(500, 3_600_000) as i64,
            poll: Duration::from_millis(env("POLL_MS").unwrap_or(500).clamp(10, 60_000)),
            sweep_every: Duration::from_millis(
                env("SWEEP_MS").unwrap_or(3_600_000).clamp(100, 86_400_000),
            ),
        }
    }
}

/// A claim token no other process has.
fn token(kind: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!(
        "{kind}-{}-{nanos}-{:08x}",
        std::process::id(),
        h.finish() as u32
    )
}

/// Runs `jobs` until the task is aborted.
pub async fn run_forever<J: LeasedJobs>(jobs: J, lease: Lease, app: App) {
    let mut swept = tokio::time::Instant::now() - lease.sweep_every;
    loop {
        if swept.elapsed() >= lease.sweep_every {
            swept = tokio::time::Instant::now();
            if let Err(e) = jobs.sweep(&app).await {
                tracing::warn!(kind = J::KIND, error = %e, "the sweep failed");
            }
        }
        match jobs.claim(&app, &lease.token, lease.lease_ms).await {
            Ok(Some(claimed)) => {
                if let Err(e) = jobs.run(&app, &claimed, lease.lease_ms).await {
                    tracing::error!(kind = J::KIND, error = %e, "a step failed; it is retried after the lease");
                    tokio::time::sleep(lease.poll).await;
                }
            }
            Ok(None) => tokio::time::sleep(lease.poll).await,
            Err(e) => {
                tracing::error!(kind = J::KIND, error = %e, "claiming a job failed");
                tokio::time::sleep(lease.poll).await;
            }
        }
    }
}
