//! `crm-server`: the binary. Reads configuration, builds the adapters, and runs the HTTP server
//! (`serve`), the migrations (`migrate`), the operator's workspace and user commands
//! (`workspace`, `user`) or an import of a CSV file (`import`).

mod allocator;
mod config;
mod database;
mod email_worker;
mod export_worker;
mod import_worker;
mod job_loop;
mod log_format;
mod retention_worker;
mod secrets;
mod sequence_worker;
mod user_command;
mod webhooks;

use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use crm_api::Api;
use crm_app::{
    plans::PlanChange,
    workspaces::{CreatedWorkspace, Overrides},
    App, Store,
};
use crm_domain::Plan;
use crm_runtime::{
    system::{SystemClock, UuidV7},
    Runtime, FLUSH_INTERVAL_MS,
};

use config::{DatabaseArgs, ServeArgs};
use database::{open_store, open_store_waiting};

/// glibc's allocator took a quarter of the CPU of a cached request in profiles (arena locks,
/// consolidation); mimalloc's thread-local free lists serve the many small, short-lived
/// allocations of a request (JSON values, headers, log lines) far more cheaply.
#[global_allocator]
static ALLOCATOR: allocator::Mimalloc = allocator::Mimalloc;

#[derive(Parser)]
#[command(
    name = "crm-server",
    version,
    about = "An API-first CRM: REST, MCP and A2A over one operation catalog"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP server (applies pending migrations first).
    Serve(Box<ServeArgs>),
    /// Apply pending migrations (and encrypt secrets stored before encryption) and exit.
    Migrate {
        #[command(flatten)]
        db: DatabaseArgs,
        #[command(flatten)]
        secrets: secrets::SecretArgs,
    },
    /// Workspaces and plans (an operator's job).
    #[command(subcommand)]
    Workspace(WorkspaceCommand),
    /// Users of a workspace (decisions §21).
    #[command(subcommand)]
    User(user_command::UserCommand),
    /// Stored webhook secrets and email provider keys (an operator's job).
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// Import a CSV file into a workspace (decisions §20): streamed into an import, written here
    /// with the server's worker code, a progress bar on a terminal, a summary at the end.
    Import(Box<import_worker::ImportArgs>),
    /// Retention (decisions §25): the daily job, run now.
    #[command(subcommand)]
    Retention(RetentionCommand),
    /// Print the OpenAPI document generated from the operation catalog.
    Openapi {
        #[arg(long, env = "CRM_PUBLIC_URL", default_value = "http://127.0.0.1:8080")]
        public_url: String,
    },
}

#[derive(Subcommand)]
enum WorkspaceCommand {
    /// Create a workspace and print its id and one full-scope test key and live key.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "free", value_parser = parse_plan)]
        plan: Plan,
        /// Print one JSON line `{"workspace_id", "test_key", "live_key"}`.
        #[arg(long)]
        json: bool,
        #[arg(long)]
        rate_limit_per_minute: Option<u32>,
        #[arg(long)]
        included_requests: Option<u64>,
        #[command(flatten)]
        db: DatabaseArgs,
    },
    /// Move a workspace to another plan; running servers apply it from their next request.
    /// Overrides not given are kept; `--clear-overrides` drops them (before applying any given).
    SetPlan {
        #[arg(long)]
        workspace: String,
        #[arg(long, value_parser = parse_plan)]
        plan: Plan,
        #[arg(long)]
        rate_limit_per_minute: Option<u32>,
        #[arg(long)]
        included_requests: Option<u64>,
        #[arg(long)]
        clear_overrides: bool,
        #[command(flatten)]
        db: DatabaseArgs,
    },
}

#[derive(Subcommand)]
enum RetentionCommand {
    /// Delete what retention says is due (audit entries past 400 days, history and emails past
    /// each workspace's settings) and print the counts as one JSON line.
    Run {
        /// Run as of this instant (RFC 3339) instead of now.
        #[arg(long, value_parser = parse_instant)]
        at: Option<crm_domain::Timestamp>,
        #[command(flatten)]
        db: DatabaseArgs,
    },
}

fn parse_instant(s: &str) -> Result<crm_domain::Timestamp, String> {
    crm_domain::Timestamp::parse_rfc3339(s)
        .ok_or_else(|| format!("`{s}` is not an RFC 3339 instant such as 2027-01-01T00:00:00Z"))
}

#[derive(Subcommand)]
enum SecretsCommand {
    /// Re-encrypt every stored secret under the first key of CRM_SECRET_KEYS (the others must
    /// still open what they sealed); docs/operations.md, "Secrets at rest".
    Rotate {
        #[command(flatten)]
        db: DatabaseArgs,
        #[command(flatten)]
        secrets: secrets::SecretArgs,
    },
}

fn parse_plan(s: &str) -> Result<Plan, String> {
    Plan::parse(s).ok_or_else(|| format!("unknown plan `{s}` (free, pro or scale)"))
}

#[tokio::main]
async fn main() -> Result<()> {
    // Before anything opens a SQLite connection (which initialises SQLite).
    let sqlite_on_mimalloc = allocator::route_sqlite_allocations();
    let cli = Cli::parse();
    let _flush_logs_at_exit = config::init_tracing();
    if !sqlite_on_mimalloc {
        tracing::warn!("SQLite refused the process's allocator; it keeps the C library's");
    }
    match cli.command {
        Command::Serve(args) => serve(*args).await,
        Command::Import(args) => {
            let app = app(open_store_waiting(&args.db, None).await?);
            import_worker::import_file(app, *args).await
        }
        Command::Openapi { public_url } => {
            println!("{:#}", crm_api::openapi::document(&public_url));
            Ok(())
        }
        Command::Migrate { db, secrets } => {
            let ring = secrets::keyring(&db.database_url, &secrets)?;
            let store = open_store_waiting(&db, Some(ring.clone())).await?;
            secrets::prepare(&*store, &ring).await?;
            println!("migrations applied");
            Ok(())
        }
        Command::Secrets(SecretsCommand::Rotate { db, secrets }) => {
            let ring = secrets::keyring(&db.database_url, &secrets)?;
            let store = open_store(&db, Some(ring.clone())).await?;
            secrets::prepare(&*store, &ring).await?;
            let count = secrets::rotate(&*store, &ring).await?;
            println!(
                "re-encrypted {count} stored secrets under key {}",
                crm_app::secrets::SecretBox::key_ids(&*ring)
                    .first()
                    .map_or("", String::as_str)
            );
            Ok(())
        }
        Command::User(command) => {
            let app = app(open_store(command.db(), None).await?);
            user_command::run(app, command).await
        }
        Command::Retention(RetentionCommand::Run { at, db }) => {
            let app = app(open_store(&db, None).await?);
            let now = at.unwrap_or_else(|| app.clock.now());
            let r = app
                .enforce_retention(now)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            println!(
                "{}",
                serde_json::json!({"audit_entries": r.audit_entries, "history_entries": r.history_entries, "emails": r.emails})
            );
            Ok(())
        }
        Command::Workspace(WorkspaceCommand::Create {
            name,
            plan,
            json,
            rate_limit_per_minute,
            included_requests,
            db,
        }) => {
            let app = app(open_store(&db, None).await?);
            let created = app
                .create_workspace(
                    &name,
                    plan,
                    Overrides {
                        rate_limit_per_minute,
                        included_requests,
                    },
                )
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            print_workspace(&created, json);
            Ok(())
        }
        Command::Workspace(WorkspaceCommand::SetPlan {
            workspace,
            plan,
            rate_limit_per_minute,
            included_requests,
            clear_overrides,
            db,
        }) => {
            let app = app(open_store(&db, None).await?);
            let change = PlanChange {
                plan,
                overrides: Overrides {
                    rate_limit_per_minute,
                    included_requests,
                },
                clear_overrides,
            };
            let ws = app
                .set_plan(&workspace, change)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let limits = ws.limits();
            println!(
                "workspace {} is on plan {}: {} included live requests per month, {} requests per minute",
                ws.id,
                ws.plan.as_str(),
                limits.included_requests,
                limits.rate_limit_per_minute
            );
            Ok(())
        }
    }
}

/// The application over `store` with this process's infrastructure (`crm-runtime`).
fn runtime(store: Arc<dyn Store>) -> Runtime {
    Runtime::new(
        store,
        Arc::new(SystemClock),
        Arc::new(UuidV7),
        Arc::new(crm_api::bodies::BodyViews),
    )
}

/// The application of an operator's command: nothing cached, nothing grouped, no workers.
fn app(store: Arc<dyn Store>) -> App {
    runtime(store).app
}

fn print_workspace(created: &CreatedWorkspace, json: bool) {
    if json {
        let line = serde_json::json!({
            "workspace_id": created.workspace.id.as_str(),
            "test_key": created.test_key,
            "live_key": created.live_key,
        });
        println!("{line}");
    } else {
        println!(
            "workspace {} ({}) on plan {}",
            created.workspace.id,
            created.workspace.name,
            created.workspace.plan.as_str()
        );
        println!("  test key: {}", created.test_key);
        println!("  live key: {}", created.live_key);
        println!("  (keys are shown once; store them now)");
    }
}

async fn serve(args: ServeArgs) -> Result<()> {
    let ring = secrets::keyring(&args.db.database_url, &args.secrets)?;
    let store = open_store_waiting(&args.db, Some(ring.clone())).await?;
    secrets::prepare(&*store, &ring).await?;
    let Runtime {
        mut app,
        events_written,
    } = runtime(store);
    if let Some(url) = &args.redis_url {
        let limiter = crm_redis::RedisRateLimiter::connect(url)
            .await
            .context("connecting to Redis (CRM_REDIS_URL)")?;
        app = app.with_rate_limiter(Arc::new(limiter));
    }
    if let Some(created) = app.bootstrap().await.map_err(|e| anyhow::anyhow!("{e}"))? {
        println!("first start: created workspace `default` on the free plan");
        print_workspace(&created, false);
    }
    let worker_cfg = args.webhooks.config()?;
    let outbound: Arc<dyn crm_app::webhooks::Outbound> = Arc::new(
        crm_outbound::HttpOutbound::new(worker_cfg.timeout, worker_cfg.concurrency)
            .map_err(|e| anyhow::anyhow!(e))?,
    );
    app = app.with_outbound(outbound.clone());
    if args.create_slots > 0 {
        app = app.with_contact_create_grouping(crm_runtime::contact_create_slots(
            usize::from(args.create_slots),
            usize::from(args.create_group_max.max(1)),
        ));
    }
    // Keys, plans, registries and rules are cached from here on, kept true by the store's feed.
    let config_feed = tokio::spawn({
        let app = app.clone();
        async move { app.follow_config_changes().await }
    });
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let addr = listener.local_addr()?;
    let public_url = args
        .public_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let api = Arc::new(Api::new(app.clone(), &public_url));
    let router = crm_http::router(
        api.clone(),
        axum_extra_routes(api.clone(), args.trusted_proxies.clone()),
    );
    let edge = args.edge.config(config::raise_open_file_limit());
    let flusher = tokio::spawn(flush_usage_forever(app.clone()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        config::shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let worker = worker_cfg.enabled.then(|| {
        webhooks::start(
            app.clone(),
            events_written,
            outbound,
            worker_cfg,
            stop_rx.clone(),
        )
    });
    let backoff = email_worker::parse_schedule(&args.email_backoff)
        .map_err(|e| anyhow::anyhow!("CRM_EMAIL_BACKOFF: {e}"))?;
    let sender: Arc<dyn crm_app::ports::EmailSender> = Arc::new(crm_email::ProviderSender::new());
    let poll = std::time::Duration::from_millis(args.email_poll_ms.max(10));
    let emailer = tokio::spawn(email_worker::deliver_emails_forever(
        app.clone(),
        sender,
        backoff,
        poll,
    ));
    let sequences = sequence_worker::spawn_all(&app);
    let imports = tokio::spawn(import_worker::run_forever(app.clone()));
    let exports = tokio::spawn(export_worker::run_forever(app.clone()));
    let retention = tokio::spawn(retention_worker::enforce_forever(
        app.clone(),
        std::time::Duration::from_secs(args.retention_interval_secs.max(1)),
    ));
    println!("listening on http://{addr}");
    tracing::info!(%addr, %public_url, "listening");
    let served = serve_http(listener, router, &api, edge, stop_rx).await;
    if let Some(worker) = worker {
        let _ = worker.await;
    }
    flusher.abort();
    emailer.abort();
    imports.abort();
    exports.abort();
    retention.abort();
    config_feed.abort();
    for worker in &sequences {
        worker.abort();
    }
    // Counts of the last second, and reservations given back for the other processes.
    app.flush_usage(true).await;
    served
}

/// Writes usage counts and keys' `last_used_at` once a second (decisions §8: counting adds no
/// write per request, and a crash loses at most a second of it).
async fn flush_usage_forever(app: App) {
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(FLUSH_INTERVAL_MS));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        app.flush_usage(false).await;
    }
}

/// Beside REST: MCP at `/mcp`, A2A at `/a2a` with its agent card, and the console at `/`.
fn axum_extra_routes(api: Arc<Api>, trusted_proxies: Vec<std::net::IpAddr>) -> axum::Router {
    axum::Router::new()
        .merge(crm_mcp::router(api.clone()))
        .merge(crm_a2a::router(api.clone()))
        .merge(crm_console::router(api, trusted_proxies))
}

async fn serve_http(
    listener: tokio::net::TcpListener,
    app: crm_http::RequestContext<crm_http::Dispatch>,
    api: &Api,
    edge: crm_http::server::EdgeConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<()> {
    let stopped = async move {
        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                break;
            }
        }
    };
    crm_http::server::serve(listener, app, &api.errors_base_url, edge, stopped).await;
    tracing::info!("shut down cleanly");
    Ok(())
}
