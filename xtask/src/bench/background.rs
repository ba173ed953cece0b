//! The background-work scenarios: `webhook_fanout` (deliveries per second to a local receiver and
//! event-to-delivery latency) and `sequence_steps` (due sequence steps sent per second). Neither is
//! a request/response loop, so each has its own driver here instead of an entry in
//! [`super::scenarios::SCENARIOS`].

use std::{
    collections::HashSet,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{
    http::{call_ok, Req},
    load::{self, Stats},
    procs,
    scenarios::{self, Ctx},
};

/// Webhooks registered by `webhook_fanout`, each subscribed to `contact.created`.
pub const WEBHOOKS: usize = 10;
/// Contacts created per second while `webhook_fanout` runs: × [`WEBHOOKS`] = 3,000 deliveries/s
/// offered, 1.5 × the target, at a create rate both stores sustain on a loaded 2-core machine.
pub const CONTACTS_PER_SEC: f64 = 300.0;
pub const FANOUT_MIN_PER_SEC: f64 = 2000.0;
pub const FANOUT_MAX_P99_MS: f64 = 1000.0;
pub const SEQUENCE_MIN_PER_SEC: f64 = 10_000.0;

/// The background-work scenarios, for the run's JSON.
pub const DESCRIPTIONS: [(&str, &str); 2] = [
    (
        "webhook_fanout",
        "10 test-mode webhooks on contact.created at a local receiver, contacts created at 300/s: deliveries/s and event created_at → receipt",
    ),
    (
        "sequence_steps",
        "10,000 due sequence steps (500 contacts × 20 sequences) sent by one test-mode server, its start included",
    ),
];

/// One delivery as the receiver saw it.
struct Delivery {
    id: String,
    event: String,
    received_ms: f64,
    event_ms: Option<f64>,
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// Milliseconds since the epoch of an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SS[.fff…]Z`).
fn rfc3339_ms(s: &str) -> Option<f64> {
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|v| v.parse::<i64>().ok());
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + n(11..13)? * 3600 + n(14..16)? * 60 + n(17..19)?;
    let frac = s
        .get(19..)
        .and_then(|r| r.strip_prefix('.'))
        .map(|f| {
            f.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
        })
        .and_then(|d| format!("0.{d}").parse::<f64>().ok())
        .unwrap_or(0.0);
    Some((secs as f64 + frac) * 1000.0)
}

/// A minimal HTTP/1.1 receiver: answers every request 204 (keep-alive) and records its
/// `Svc-Delivery` (or `webhook-id`) header, the receipt time and the event's `created_at`.
async fn receiver(listener: TcpListener, seen: Arc<Mutex<Vec<Delivery>>>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            return;
        };
        let seen = seen.clone();
        tokio::spawn(async move {
            let _ = serve_conn(sock, seen).await;
        });
    }
}

async fn serve_conn(mut sock: TcpStream, seen: Arc<Mutex<Vec<Delivery>>>) -> Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    loop {
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 8192];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let header = |name: &str| {
            head.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim()
                    .eq_ignore_ascii_case(name)
                    .then(|| v.trim().to_owned())
            })
        };
        let len: usize = header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let mut chunk = [0u8; 8192];
            let n = sock.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let received_ms = now_ms();
        let body: Value =
            serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or(Value::Null);
        let id = header("svc-delivery")
            .or_else(|| header("webhook-id"))
            .unwrap_or_default();
        let event = body["id"].as_str().unwrap_or_default().to_owned();
        let event_ms = body["created_at"].as_str().and_then(rfc3339_ms);
        buf.drain(..head_end + len);
        seen.lock().expect("receiver lock").push(Delivery {
            id,
            event,
            received_ms,
            event_ms,
        });
        sock.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await?;
    }
}

fn quantile(sorted: &[f64], f: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * f).round() as usize]
}

pub struct Fanout {
    pub stats: Stats,
    pub contacts: u64,
    pub deliveries: usize,
    pub duplicates: usize,
    pub expected: u64,
    /// Deliveries of events written before the webhooks existed (left out of every figure).
    pub older: usize,
}

/// `webhook_fanout`: registers [`WEBHOOKS`] test-mode webhooks at a local receiver, creates
/// contacts open-loop at [`CONTACTS_PER_SEC`] for `duration`, waits for the deliveries to drain
/// (until none arrive for 3 s, at most 60 s) and measures deliveries per second (first to last
/// receipt) and event `created_at` → receipt latency.
pub async fn webhook_fanout(
    addr: &str,
    key: &str,
    ctx: Arc<Ctx>,
    duration: Duration,
) -> Result<Fanout> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let server = tokio::spawn(receiver(listener, seen.clone()));
    let mut hooks = Vec::new();
    for i in 0..WEBHOOKS {
        let body = json!({"url": format!("http://127.0.0.1:{port}/hook/{i}"), "events": ["contact.created"], "description": "bench"});
        let hook = call_ok(
            addr,
            key,
            &Req::with_body("POST", "/v1/webhooks", body.to_string()),
        )
        .await
        .context("creating a webhook")?;
        hooks.push(hook["id"].as_str().context("webhook id")?.to_owned());
    }
    // Events older than this were written before every webhook existed (the data set's, still in
    // the outbox): their deliveries are not this run's and are left out.
    let since_ms = now_ms();
    let stats = load::open(
        addr,
        Some(key),
        ctx,
        &scenarios::WEBHOOK_CREATES,
        32,
        CONTACTS_PER_SEC,
        Duration::ZERO,
        duration,
    )
    .await;
    let expected = stats.requests * WEBHOOKS as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    // Creates still in flight when the window closed are not in `stats.requests`: once the
    // expected count has arrived, wait until nothing more comes for 1 s (3 s before that).
    let (mut last_count, mut last_change) = (0, Instant::now());
    loop {
        let count = seen
            .lock()
            .expect("receiver lock")
            .iter()
            .filter(|d| d.event_ms.is_some_and(|e| e >= since_ms))
            .count();
        if count != last_count {
            (last_count, last_change) = (count, Instant::now());
        }
        let quiet = last_change.elapsed();
        if (count as u64 >= expected && quiet > Duration::from_secs(1))
            || quiet > Duration::from_secs(3)
            || Instant::now() > deadline
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.abort();
    // The webhooks go again, so nothing later in the run is delivered.
    // `CRM_BENCH_KEEP_HOOKS` leaves them (with `--keep`), to read their deliveries afterwards.
    if std::env::var_os("CRM_BENCH_KEEP_HOOKS").is_some() {
        hooks.clear();
    }
    for id in &hooks {
        call_ok(
            addr,
            key,
            &Req {
                method: "DELETE",
                path: format!("/v1/webhooks/{id}"),
                body: None,
                headers: Vec::new(),
            },
        )
        .await
        .ok();
    }
    let all = std::mem::take(&mut *seen.lock().expect("receiver lock"));
    let older = all
        .iter()
        .filter(|d| d.event_ms.is_none_or(|e| e < since_ms))
        .count();
    let seen: Vec<Delivery> = all
        .into_iter()
        .filter(|d| d.event_ms.is_some_and(|e| e >= since_ms))
        .collect();
    if let Ok(path) = std::env::var("CRM_BENCH_FANOUT_CSV") {
        let text: String = seen
            .iter()
            .map(|d| {
                format!(
                    "{},{},{}\n",
                    d.event,
                    d.event_ms.unwrap_or(0.0),
                    d.received_ms
                )
            })
            .collect();
        std::fs::write(path, text)?;
    }
    let mut ids = HashSet::new();
    let duplicates = seen.iter().filter(|d| !ids.insert(d.id.as_str())).count();
    let first = seen
        .iter()
        .map(|d| d.received_ms)
        .fold(f64::INFINITY, f64::min);
    let last = seen.iter().map(|d| d.received_ms).fold(0.0, f64::max);
    let mut lat: Vec<f64> = seen
        .iter()
        .filter_map(|d| d.event_ms.map(|e| (d.received_ms - e).max(0.0)))
        .collect();
    lat.sort_by(f64::total_cmp);
    let secs = if seen.len() > 1 {
        (last - first) / 1000.0
    } else {
        duration.as_secs_f64()
    };
    // Every event seen must have reached every webhook; creates that finished after the window
    // closed count too.
    let events: HashSet<&str> = seen.iter().map(|d| d.event.as_str()).collect();
    let expected = expected.max((events.len() * WEBHOOKS) as u64);
    let missing = expected.saturating_sub(ids.len() as u64);
    let out = Stats {
        requests: seen.len() as u64,
        errors: stats.errors + missing,
        secs: secs.max(0.001),
        p50_ms: quantile(&lat, 0.50),
        p99_ms: quantile(&lat, 0.99),
        first_error: stats
            .first_error
            .or_else(|| (missing > 0).then(|| format!("{missing} deliveries not received"))),
        ..Stats::default()
    };
    Ok(Fanout {
        stats: out,
        contacts: stats.requests,
        deliveries: seen.len(),
        duplicates,
        expected,
        older,
    })
}

pub struct SequenceRun {
    pub steps: usize,
    pub secs: f64,
    /// From the first email's `created_at` to the last's: the scheduler alone, without the
    /// server's start and the polling.
    pub span_secs: f64,
}

const SEQ_CONTACTS: usize = 500;
const SEQ_SEQUENCES: usize = 20;

/// `sequence_steps` (the former hand-run test `sends_per_second`): in a fresh workspace, a server
/// whose scheduler is idle makes 500 contacts and 20 sequences enrolling them all with one step
/// due at once (10,000 due steps); a second server (scheduler polling every 20 ms) sends them.
/// Measured from its start (included) until the database holds all 10,000 emails: a `COUNT` on
/// the workspace's emails polled every 10 ms on a connection of the bench's own, which costs the
/// server nothing. (Polling `GET /v1/emails` instead paged through every email each time: up to
/// 100 requests per poll competing for the same two cores, and up to 0.4 s after the last email
/// before it knew.) The API then has to list all 10,000, checked once, untimed.
pub fn sequence_steps(
    bin: &Path,
    db_url: &str,
    run_dir: &Path,
    store: &str,
) -> Result<SequenceRun> {
    let ws = procs::create_workspace(bin, db_url)?;
    let key = ws.test_key.clone();
    {
        let setup = procs::start_server_env(
            bin,
            db_url,
            &run_dir.join(format!("server-{store}-seq-setup.log")),
            &[("CRM_SEQUENCE_POLL_MS", "3600000")],
        )?;
        let addr = setup.addr.clone();
        load::block_on(async {
            for chunk in 0..SEQ_CONTACTS / 100 {
                let ops: Vec<Value> = (0..100)
                    .map(|i| json!({"op": "create", "object": "contact", "data": {"first_name": "C", "email": format!("seq{chunk}-{i}@bench.example")}}))
                    .collect();
                call_ok(
                    &addr,
                    &key,
                    &Req::with_body("POST", "/v1/batch", json!({"operations": ops}).to_string()),
                )
                .await?;
            }
            let steps = json!([{"wait_seconds": 0, "subject": "Hi {{first_name}}", "body": "<p>Hello {{first_name}}</p>"}]);
            for i in 0..SEQ_SEQUENCES {
                let body = json!({"name": format!("S{i}"), "enroll_existing": true, "trigger": {"event": "contact.created"}, "steps": steps});
                call_ok(
                    &addr,
                    &key,
                    &Req::with_body("POST", "/v1/sequences", body.to_string()),
                )
                .await?;
            }
            Ok(())
        })?;
    }
    let total = SEQ_CONTACTS * SEQ_SEQUENCES;
    let started = Instant::now();
    let server = procs::start_server_env(
        bin,
        db_url,
        &run_dir.join(format!("server-{store}-seq.log")),
        &[("CRM_SEQUENCE_POLL_MS", "20")],
    )?;
    let addr = server.addr.clone();
    let deadline = started + Duration::from_secs(300);
    let (secs, steps, span_secs): (f64, usize, f64) = load::block_on(async {
        let db = BenchDb::open(store, db_url).await?;
        while db.emails(&ws.id).await? < total as i64 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        let (n, span) = count_emails(&addr, &key).await?;
        Ok((secs, n, span))
    })?;
    drop(server);
    Ok(SequenceRun {
        steps,
        secs,
        span_secs,
    })
}

/// The bench's own connection to the server's database, for what the API would be too slow or
/// too intrusive to watch.
pub enum BenchDb {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl BenchDb {
    pub async fn open(store: &str, db_url: &str) -> Result<BenchDb> {
        Ok(match store {
            "sqlite" => BenchDb::Sqlite(
                sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect(db_url)
                    .await?,
            ),
            _ => BenchDb::Postgres(
                sqlx::postgres::PgPoolOptions::new()
                    .max_connections(1)
                    .connect(db_url)
                    .await?,
            ),
        })
    }

    /// `sql`'s single count, with `bind` as `$1` when given.
    async fn count(&self, sql: &str, bind: Option<&str>) -> Result<i64> {
        Ok(match self {
            BenchDb::Sqlite(pool) => {
                let q = sqlx::query_scalar(sql);
                let q = match bind {
                    Some(b) => q.bind(b.to_owned()),
                    None => q,
                };
                q.fetch_one(pool).await?
            }
            BenchDb::Postgres(pool) => {
                let q = sqlx::query_scalar(sql);
                let q = match bind {
                    Some(b) => q.bind(b.to_owned()),
                    None => q,
                };
                q.fetch_one(pool).await?
            }
        })
    }

    /// The emails of a workspace.
    async fn emails(&self, workspace: &str) -> Result<i64> {
        self.count(
            "SELECT COUNT(*) FROM emails WHERE workspace_id = $1",
            Some(workspace),
        )
        .await
    }

    /// Events not yet turned into deliveries: the rows of the dispatch queue (migration 0011).
    pub async fn undispatched_events(&self) -> Result<i64> {
        self.count("SELECT COUNT(*) FROM event_dispatch_queue", None)
            .await
    }
}

/// Waits (at most `limit`) until the server has dispatched every event in its outbox; returns
/// how many there were and how long they took. The fan-out scenario measures new events, and a
/// backlog left by the earlier scenarios (tens of thousands of `contact.created` in a full run)
/// would otherwise be drained in its window, and in the sequence scenario's after it.
pub async fn drain_outbox(store: &str, db_url: &str, limit: Duration) -> Result<(i64, Duration)> {
    let db = BenchDb::open(store, db_url).await?;
    let started = Instant::now();
    let backlog = db.undispatched_events().await?;
    let mut left = backlog;
    while left > 0 && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(250)).await;
        left = db.undispatched_events().await?;
    }
    if left > 0 {
        anyhow::bail!("{left} of {backlog} events still undispatched after {limit:?}");
    }
    Ok((backlog, started.elapsed()))
}

/// The emails of the workspace, and the seconds from the first one's `created_at` to the last's.
async fn count_emails(addr: &str, key: &str) -> Result<(usize, f64)> {
    let (mut n, mut first, mut last) = (0, f64::INFINITY, 0.0f64);
    let mut cursor = String::new();
    loop {
        let page = call_ok(
            addr,
            key,
            &Req::get(format!("/v1/emails?limit=100{cursor}")),
        )
        .await?;
        for e in page["data"].as_array().map_or(&[][..], Vec::as_slice) {
            n += 1;
            if let Some(t) = e["created_at"].as_str().and_then(rfc3339_ms) {
                (first, last) = (first.min(t), last.max(t));
            }
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => return Ok((n, if n > 1 { (last - first) / 1000.0 } else { 0.0 })),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_parses_with_and_without_fraction() {
        assert_eq!(super::rfc3339_ms("1970-01-01T00:00:01Z"), Some(1000.0));
        assert_eq!(
            super::rfc3339_ms("1970-01-02T00:00:00.250Z"),
            Some(86_400_250.0)
        );
        assert_eq!(
            super::rfc3339_ms("2000-03-01T00:00:00.000Z"),
            Some(951_868_800_000.0)
        );
    }
}
