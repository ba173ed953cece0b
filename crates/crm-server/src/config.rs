//! Configuration (flags and `CRM_*` environment variables), logging and shutdown signals.

use std::time::Duration;

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct DatabaseArgs {
    /// `sqlite://crm.db` (default, created on first start), `sqlite:///abs/path.db`, or `postgres://…`.
    #[arg(long, env = "CRM_DATABASE_URL", default_value = "sqlite://crm.db")]
    pub database_url: String,
    /// Postgres only: connections this process keeps at most (the server's `max_connections` is
    /// shared by every process).
    #[arg(long, env = "CRM_DATABASE_MAX_CONNECTIONS", default_value_t = crm_store_postgres::DEFAULT_MAX_CONNECTIONS)]
    pub database_max_connections: u32,
}

#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed at start).
    #[arg(long, env = "CRM_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// The URL clients reach this server at (problem `type`s, OpenAPI servers). Default: http://<listen>.
    #[arg(long, env = "CRM_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Share rate limits with every server process through this Redis (`redis://host:port`);
    /// without it each process limits on its own.
    #[arg(long, env = "CRM_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Waits between delivery attempts of a live email that the provider refused or could not
    /// take, e.g. `30s,2m,10m,1h,6h` (the default); after the last, the email is `failed`.
    #[arg(long, env = "CRM_EMAIL_BACKOFF", default_value = "30s,2m,10m,1h,6h")]
    pub email_backoff: String,
    /// How often the email worker looks for due emails, in milliseconds.
    #[arg(long, env = "CRM_EMAIL_POLL_MS", default_value_t = 1000)]
    pub email_poll_ms: u64,
    /// How often the retention job runs, in seconds (decisions §25: daily); its first run is a
    /// minute after start.
    #[arg(long, env = "CRM_RETENTION_INTERVAL_SECS", default_value_t = 86_400)]
    pub retention_interval_secs: u64,
    /// Contact create transactions in flight before further creates queue to be committed
    /// together (0 turns grouping off; docs/operations.md).
    #[arg(long, env = "CRM_CREATE_SLOTS", default_value_t = 8, value_parser = clap::value_parser!(u16).range(0..=256))]
    pub create_slots: u16,
    /// Contact creates per grouped transaction, at most (0 counts as 1).
    #[arg(long, env = "CRM_CREATE_GROUP_MAX", default_value_t = 64, value_parser = clap::value_parser!(u16).range(0..=1000))]
    pub create_group_max: u16,
    #[command(flatten)]
    pub db: DatabaseArgs,
    #[command(flatten)]
    pub secrets: crate::secrets::SecretArgs,
    #[command(flatten)]
    pub webhooks: crate::webhooks::WebhookArgs,
    #[command(flatten)]
    pub edge: EdgeArgs,
    /// Addresses of reverse proxies in front of this server, comma-separated: only from these
    /// is `X-Forwarded-For` believed, for the console's sign-in throttle.
    #[arg(long, env = "CRM_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

/// The HTTP edge's timers and caps (decisions §22-24; docs/operations.md, "The HTTP edge").
#[derive(Args, Debug, Clone)]
pub struct EdgeArgs {
    /// A new connection's first byte, and a whole request head after its first byte, within this
    /// (else closed without an answer).
    #[arg(long, env = "CRM_HTTP_HEAD_TIMEOUT", default_value = "10s", value_parser = duration)]
    pub http_head_timeout: Duration,
    /// A kept-alive connection's next request within this (else closed).
    #[arg(long, env = "CRM_HTTP_IDLE_TIMEOUT", default_value = "75s", value_parser = duration)]
    pub http_idle_timeout: Duration,
    /// A request body without a byte for this long answers 408; a whole body may take twice it.
    #[arg(long, env = "CRM_HTTP_BODY_TIMEOUT", default_value = "30s", value_parser = duration)]
    pub http_body_timeout: Duration,
    /// A response the client takes none of for this long is dropped.
    #[arg(long, env = "CRM_HTTP_WRITE_TIMEOUT", default_value = "30s", value_parser = duration)]
    pub http_write_timeout: Duration,
    /// Connections served at once (the rest wait in the accept queue); lowered to fit the
    /// process's open-file limit.
    #[arg(long, env = "CRM_HTTP_MAX_CONNECTIONS", default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_connections: u32,
    /// Connections from one client address at once; one more is closed at once.
    #[arg(long, env = "CRM_HTTP_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_connections_per_address: u32,
}

impl EdgeArgs {
    /// The edge's settings, its connection cap kept below `open_files` (the process's limit)
    /// with room for the database, logs and outbound connections.
    pub fn config(&self, open_files: u64) -> crm_http::server::EdgeConfig {
        const OTHER_FILES: u64 = 512;
        let fits =
            usize::try_from(open_files.saturating_sub(OTHER_FILES).max(1)).unwrap_or(usize::MAX);
        let wanted = self.http_max_connections as usize;
        if wanted > fits {
            tracing::warn!(
                wanted,
                open_files,
                "CRM_HTTP_MAX_CONNECTIONS is above what the open-file limit allows; serving {fits} at once"
            );
        }
        crm_http::server::EdgeConfig {
            head_timeout: self.http_head_timeout,
            idle_timeout: self.http_idle_timeout,
            body_timeout: self.http_body_timeout,
            write_timeout: self.http_write_timeout,
            max_connections: wanted.min(fits),
            max_connections_per_address: self.http_max_connections_per_address as usize,
            address_paths: crm_console::CLIENT_ADDRESS_PATHS,
        }
    }
}

fn duration(raw: &str) -> Result<Duration, String> {
    crm_domain::webhook::parse_duration_ms(raw)
        .and_then(|ms| u64::try_from(ms).ok())
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("`{raw}` is not a positive duration (e.g. 500ms, 10s, 1m)"))
}

/// Raises the soft open-file limit to the hard one (each connection is a file) and returns the
/// limit in force.
pub fn raise_open_file_limit() -> u64 {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    let in_force = match setrlimit(Resource::Nofile, raised) {
        Ok(()) => limit.maximum,
        Err(e) => {
            tracing::warn!(error = %e, "could not raise the open-file limit");
            limit.current
        }
    };
    in_force.unwrap_or(u64::MAX)
}

/// Structured logs on stderr. `CRM_LOG` is an env-filter (default `info`: warnings, errors, and
/// responses that are 5xx or slow; `crm_http=debug` adds a line per request); `CRM_LOG_FORMAT=json`
/// switches to JSON lines. Keys and secrets are never logged: every line a request writes carries
/// its request id (`log_format`), and response lines the method, path, status and latency.
///
/// Lines are written by a dedicated thread, never by the request's runtime thread (a write to
/// stderr can block); if that thread falls 128k lines behind, logging waits rather than drops.
/// Colours only when stderr is a terminal. Keep the returned guard alive: dropping it flushes.
pub fn init_tracing() -> tracing_appender::non_blocking::WorkerGuard {
    use std::io::IsTerminal;
    use tracing_subscriber::{
        filter::Targets, fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer,
    };

    use crate::log_format::WithRequestId;
    let spec = std::env::var("CRM_LOG").unwrap_or_else(|_| "info".to_owned());
    // A plain `target=level` list is a static `Targets` filter; `EnvFilter` (for span and field
    // directives) takes a lock on every span enter and exit, twice per request.
    let filter = match spec.parse::<Targets>() {
        Ok(targets) => targets.boxed(),
        Err(_) => EnvFilter::try_new(&spec)
            .unwrap_or_else(|_| EnvFilter::new("info"))
            .boxed(),
    };
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .finish(std::io::stderr());
    let layer = fmt::layer()
        .with_writer(writer)
        .with_ansi(std::io::stderr().is_terminal());
    let layer = if std::env::var("CRM_LOG_FORMAT").is_ok_and(|f| f == "json") {
        layer.json().map_event_format(WithRequestId::json).boxed()
    } else {
        layer.map_event_format(WithRequestId::text).boxed()
    };
    tracing_subscriber::registry()
        .with(layer)
        .with(filter)
        .init();
    guard
}

/// Resolves on SIGINT or SIGTERM; the server then stops accepting and finishes in-flight requests.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
