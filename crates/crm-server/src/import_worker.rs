//! Bulk imports beside the HTTP server (decisions §20, §24), and `crm-server import`.
//!
//! `serve` runs one worker loop (the shared [`crate::job_loop`]): it claims a queued import (or
//! one whose worker stopped: its lease ended) and writes it chunk after chunk (`App::run_import`,
//! one transaction per chunk, the lease renewed by each), then looks for the next. Any number of
//! processes on one database share the imports through the store's claims. A process killed
//! mid-import leaves its last chunk uncommitted; when the lease ends, the next claimer resumes at
//! that chunk. Once an hour it drops the errors of imports ended 30 days ago and uploads cut off
//! a day ago.
//!
//! `crm-server import` streams a file into the same import path, claims that import itself and
//! runs it with the same code, with a progress bar on a terminal.

use std::{path::PathBuf, time::Duration};

use anyhow::{bail, Context, Result};
use clap::Args;
use crm_app::{
    import_run::ClaimedImport,
    imports::{ImportSettings, Received},
    App, AppError,
};
use crm_domain::{
    import::{Import, ImportStatus, OnDuplicate},
    Mode, ObjectKind,
};
use tokio::io::AsyncReadExt;

use crate::{
    config::DatabaseArgs,
    job_loop::{self, Lease, LeasedJobs},
};

/// The import job kind, on the shared job loop ([`crate::job_loop`]). Settings:
/// `CRM_IMPORT_LEASE_MS` (each chunk renews the lease), `CRM_IMPORT_POLL_MS`,
/// `CRM_IMPORT_SWEEP_MS` (the sweep of old errors and cut-off uploads, hourly).
pub struct Imports;

impl LeasedJobs for Imports {
    type Claimed = ClaimedImport;
    const KIND: &'static str = "import";

    async fn claim(
        &self,
        app: &App,
        token: &str,
        lease_ms: i64,
    ) -> Result<Option<ClaimedImport>, AppError> {
        app.claim_import(token, lease_ms).await
    }

    async fn run(&self, app: &App, claimed: &ClaimedImport, lease_ms: i64) -> Result<(), AppError> {
        let id = claimed.import.id.clone();
        tracing::info!(import = %id, rows = claimed.import.counts.rows_total, "import claimed");
        match app.run_import(claimed, lease_ms, &mut |_| {}).await? {
            Some(done) => tracing::info!(
                import = %id,
                status = done.status.as_str(),
                created = done.counts.created,
                updated = done.counts.updated,
                skipped = done.counts.skipped,
                failed = done.counts.failed,
                "import ended"
            ),
            None => tracing::info!(import = %id, "import cancelled or taken over"),
        }
        Ok(())
    }

    async fn sweep(&self, app: &App) -> Result<u64, AppError> {
        app.purge_imports().await
    }
}

/// The import worker's lease settings.
fn lease() -> Lease {
    Lease::from_env("CRM_IMPORT", "imp")
}

/// Runs imports until the task is aborted.
pub async fn run_forever(app: App) {
    job_loop::run_forever(Imports, lease(), app).await
}

/// `crm-server import`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The workspace (`ws_...`).
    #[arg(long)]
    pub workspace: String,
    /// `test` or `live`.
    #[arg(long, default_value = "test", value_parser = parse_mode)]
    pub mode: Mode,
    /// `contact`, `company` or `deal`.
    #[arg(long, value_parser = parse_object)]
    pub object: ObjectKind,
    /// What a row whose email (companies: domain) is taken does: skip, update or error.
    #[arg(long, default_value = "error", value_parser = parse_on_duplicate)]
    pub on_duplicate: OnDuplicate,
    /// A JSON object renaming CSV columns to target fields.
    #[arg(long)]
    pub mapping: Option<String>,
    /// Validate every row and write none.
    #[arg(long)]
    pub dry_run: bool,
    /// The CSV file (UTF-8, header row).
    pub file: PathBuf,
    #[command(flatten)]
    pub db: DatabaseArgs,
}

fn parse_mode(s: &str) -> Result<Mode, String> {
    Mode::parse(s).ok_or_else(|| format!("unknown mode `{s}` (test or live)"))
}

fn parse_object(s: &str) -> Result<ObjectKind, String> {
    ObjectKind::parse(s)
        .filter(|o| crm_domain::import::IMPORT_OBJECTS.contains(o))
        .ok_or_else(|| format!("unknown object `{s}` (contact, company or deal)"))
}

fn parse_on_duplicate(s: &str) -> Result<OnDuplicate, String> {
    OnDuplicate::parse(s)
        .ok_or_else(|| format!("unknown on_duplicate `{s}` (skip, update or error)"))
}

/// Streams the file into an import, runs it here (or follows the server that claimed it first)
/// and prints a summary; the progress bar shows only on a terminal.
pub async fn import_file(app: App, args: ImportArgs) -> Result<()> {
    let mapping = match &args.mapping {
        None => Default::default(),
        Some(raw) => {
            serde_json::from_str(raw).context("--mapping must be a JSON object of strings")?
        }
    };
    let settings = ImportSettings {
        object: args.object,
        on_duplicate: args.on_duplicate,
        dry_run: args.dry_run,
        mapping,
        idempotency_key: None,
        request_fingerprint: String::new(),
    };
    let problem = |e: crm_app::AppError| anyhow::anyhow!("{e}");
    let mut upload = app
        .start_operator_import(&args.workspace, args.mode, settings)
        .await
        .map_err(problem)?;
    let mut file = tokio::fs::File::open(&args.file)
        .await
        .with_context(|| format!("opening {}", args.file.display()))?;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match file.read(&mut buf).await {
            Ok(n) => n,
            Err(e) => {
                upload.abort().await;
                return Err(e).context("reading the file");
            }
        };
        if n == 0 {
            break;
        }
        if let Err(e) = upload.push(&buf[..n]).await {
            upload.abort().await;
            return Err(problem(e));
        }
    }
    let import = match upload.finish().await.map_err(problem)? {
        Received::New(import) | Received::Replayed(import) => import,
    };
    let tenant = crm_domain::Tenant {
        workspace_id: crm_domain::WorkspaceId::parse(&args.workspace)
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        mode: args.mode,
    };
    let bar = indicatif::ProgressBar::new(import.counts.rows_total.max(0) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} rows ({per_sec}, eta {eta}) {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let show = |bar: &indicatif::ProgressBar, i: &Import| {
        bar.set_position(i.counts.rows_done.max(0) as u64);
        bar.set_message(format!(
            "{} created, {} updated, {} skipped, {} failed",
            i.counts.created, i.counts.updated, i.counts.skipped, i.counts.failed
        ));
    };
    let worker = lease();
    let done = match app
        .claim_import_by_id(&tenant, &import.id, &worker.token, worker.lease_ms)
        .await
        .map_err(problem)?
    {
        Some(claimed) => app
            .run_import(&claimed, worker.lease_ms, &mut |i| show(&bar, i))
            .await
            .map_err(problem)?,
        None => None,
    };
    // Claimed by a server first, or cancelled: follow it there.
    let done = match done {
        Some(done) => done,
        None => loop {
            let Some(now) = app
                .import_status(&tenant, &import.id)
                .await
                .map_err(problem)?
            else {
                bail!("import {} disappeared", import.id);
            };
            show(&bar, &now);
            if now.status.is_finished() {
                break now;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        },
    };
    bar.finish_and_clear();
    let c = &done.counts;
    println!(
        "import {} {}: {} of {} rows; {} created, {} updated, {} skipped, {} failed",
        done.id,
        done.status.as_str(),
        c.rows_done,
        c.rows_total,
        c.created,
        c.updated,
        c.skipped,
        c.failed
    );
    if c.failed > 0 {
        println!("row errors: GET /v1/imports/{}/errors", done.id);
    }
    if let Some(error) = &done.error {
        println!("failed: {}", error["detail"].as_str().unwrap_or_default());
    }
    if matches!(done.status, ImportStatus::Failed) {
        bail!("the import failed");
    }
    Ok(())
}
