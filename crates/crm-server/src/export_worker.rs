//! Exports beside the HTTP server (decisions §25), on the shared job loop
//! ([`crate::job_loop`]): a worker claims a queued export (or one whose worker stopped) and
//! writes its file chunk after chunk (`App::run_export`); once an hour (`CRM_EXPORT_SWEEP_MS`)
//! it drops the exports whose files expired. Settings: `CRM_EXPORT_LEASE_MS`,
//! `CRM_EXPORT_POLL_MS`, `CRM_EXPORT_SWEEP_MS`, and `CRM_EXPORT_CHUNK_ROWS` (records per chunk
//! and per transaction, 5,000).

use crm_app::{
    export_run::{ClaimedExport, ExportPace, ROWS_PER_CHUNK},
    App, AppError,
};

use crate::job_loop::{self, Lease, LeasedJobs};

/// The export job kind, writing this many records per chunk.
pub struct Exports {
    rows_per_chunk: u32,
}

impl LeasedJobs for Exports {
    type Claimed = ClaimedExport;
    const KIND: &'static str = "export";

    async fn claim(
        &self,
        app: &App,
        token: &str,
        lease_ms: i64,
    ) -> Result<Option<ClaimedExport>, AppError> {
        app.claim_export(token, lease_ms).await
    }

    async fn run(&self, app: &App, claimed: &ClaimedExport, lease_ms: i64) -> Result<(), AppError> {
        let id = &claimed.export.id;
        tracing::info!(export = %id, "export claimed");
        let pace = ExportPace {
            lease_ms,
            rows_per_chunk: self.rows_per_chunk,
        };
        match app.run_export(claimed, pace, &mut |_| {}).await? {
            Some(done) => tracing::info!(
                export = %id,
                status = done.status.as_str(),
                rows = done.rows_done,
                "export ended"
            ),
            None => tracing::info!(export = %id, "export taken over"),
        }
        Ok(())
    }

    async fn sweep(&self, app: &App) -> Result<u64, AppError> {
        app.purge_exports().await
    }
}

/// Runs exports until the task is aborted.
pub async fn run_forever(app: App) {
    let rows_per_chunk = std::env::var("CRM_EXPORT_CHUNK_ROWS")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(ROWS_PER_CHUNK)
        .clamp(1, 50_000);
    let jobs = Exports { rows_per_chunk };
    job_loop::run_forever(jobs, Lease::from_env("CRM_EXPORT", "exp"), app).await
}
