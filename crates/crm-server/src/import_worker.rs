//! Bulk imports beside the HTTP server (decisions §20, §24), and `crm-server import`.
//!
//! `serve` runs one worker loop: it claims a queued import (or one whose worker stopped: its lease
//! ended) and writes it chunk after chunk (`App::run_import`, one transaction per chunk, the
//! lease renewed by each), then looks for the next. Any number of processes on one database
//! share the imports through the store's claims. A process killed mid-import leaves its last
//! chunk uncommitted; when the lease ends, the next claimer resumes at that chunk. Once an hour
//! it drops the errors of imports ended 30 days ago and uploads cut off a day ago.
//!
//! `crm-server import` streams a file into the same import path, claims that import itself and
//! runs it with the same code, with a progress bar on a terminal.

use std::{path::PathBuf, time::Duration};

use anyhow::{bail, Context, Result};
use clap::Args;
use crm_app::{
    import_run::ClaimedImport,
    imports::{ImportSettings, Received},
    App,
};
use crm_domain::{
    import::{Import, ImportStatus, OnDuplicate},
    Mode, ObjectKind,
};
use tokio::io::AsyncReadExt;

use crate::config::DatabaseArgs;

/// The worker's settings (`CRM_IMPORT_LEASE_MS`, `CRM_IMPORT_POLL_MS`).
#[derive(Debug, Clone)]
pub struct ImportWorker {
    pub token: String,
    /// How long a claim holds without a chunk written (each chunk renews it).
    pub lease_ms: i64,
    pub poll: Duration,
}

/// How often the sweep of old errors and cut-off uploads runs.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// A claim token no other process has.
fn token() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("imp-{}-{nanos}-{:08x}", std::process::id(), rand_part())
}

fn rand_part() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

impl ImportWorker {
    pub fn from_env() -> ImportWorker {
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        ImportWorker {
            token: token(),
            lease_ms: env("CRM_IMPORT_LEASE_MS")
                .unwrap_or(60_000)
                .clamp(500, 3_600_000) as i64,
            poll: Duration::from_millis(env("CRM_IMPORT_POLL_MS").unwrap_or(500).clamp(10, 60_000)),
        }
    }

    /// Runs imports until the task is aborted. A failed step is logged; its chunk is rolled back
    /// and tried again when the claim is taken again (after the lease).
    pub async fn run_forever(self, app: App) {
        let mut purged = tokio::time::Instant::now() - PURGE_EVERY;
        loop {
            if purged.elapsed() >= PURGE_EVERY {
                purged = tokio::time::Instant::now();
                if let Err(e) = app.purge_imports().await {
                    tracing::warn!(error = %e, "purging old import errors failed");
                }
            }
            match app.claim_import(&self.token, self.lease_ms).await {
                Ok(Some(claimed)) => self.run(&app, &claimed).await,
                Ok(None) => tokio::time::sleep(self.poll).await,
                Err(e) => {
                    tracing::error!(error = %e, "claiming an import failed");
                    tokio::time::sleep(self.poll).await;
                }
            }
        }
    }

    async fn run(&self, app: &App, claimed: &ClaimedImport) {
        let id = claimed.import.id.clone();
        tracing::info!(import = %id, rows = claimed.import.counts.rows_total, "import claimed");
        match app.run_import(claimed, self.lease_ms, &mut |_| {}).await {
            Ok(Some(done)) => tracing::info!(
                import = %id,
                status = done.status.as_str(),
                created = done.counts.created,
                updated = done.counts.updated,
                skipped = done.counts.skipped,
                failed = done.counts.failed,
                "import ended"
            ),
            Ok(None) => tracing::info!(import = %id, "import cancelled or taken over"),
            Err(e) => {
                tracing::error!(import = %id, error = %e, "an import chunk failed; it is retried after the lease");
                tokio::time::sleep(self.poll).await;
            }
        }
    }
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
    let worker = ImportWorker::from_env();
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
