//! The database's own ceiling for the same work, measured in the same run: the INSERT of a
//! contact plus its event row in one transaction, and a primary-key SELECT of a contact — with
//! `pgbench` (prepared statements) on Postgres, and a minimal sqlx loop on SQLite (WAL,
//! synchronous=NORMAL, one writer connection as SQLite allows, a pool of readers).

use std::{path::Path, process::Command, str::FromStr, time::Duration};

use anyhow::{bail, Context, Result};
use sqlx::{
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
    SqlitePool,
};
use tokio::time::Instant;

use super::load::{run_workers, Recorder, Stats};

pub const RAW_WORKSPACE: &str = "ws_raw";

/// The event body the API writes for a created contact is the contact's snapshot; this is one
/// of about the same size.
const EVENT_BODY: &str = r#"{"id":"evt_raw","object":"event","type":"contact.created","created_at":"2026-01-01T00:00:00.000Z","data":{"object":{"id":"con_raw","object":"contact","first_name":"anna","last_name":"novak","email":"anna.novak@bench.example","phone":"+493012345678","linkedin_url":null,"company_id":"cmp_raw","type":"customer","custom_fields":{"tier":"gold","score":42,"region":"emea"},"created_at":"2026-01-01T00:00:00.000Z","updated_at":"2026-01-01T00:00:00.000Z","version":1}}}"#;
const CUSTOM: &str = r#"{"tier":"gold","score":42,"region":"emea"}"#;
const CONTACT_COLUMNS: &str =
    "workspace_id, mode, id, first_name, last_name, email, phone, linkedin_url, company_id, type, custom_fields, created_at, updated_at, version, deleted_at";

/// The id of raw contact `n` (the rows the SELECT baseline reads).
fn raw_id(n: u64) -> String {
    format!("con_{n:026}")
}

// ---------------------------------------------------------------- Postgres (pgbench)

pub fn pg_prepare(url: &str, rows: u64) -> Result<()> {
    let sql = format!(
        "INSERT INTO contacts ({CONTACT_COLUMNS}) SELECT '{RAW_WORKSPACE}', 'test', 'con_' || lpad(g::text, 26, '0'), 'anna', 'novak', \
         'raw' || g || '@bench.example', '+493012345678', NULL, 'cmp_raw', 'customer', '{CUSTOM}'::jsonb, g, g, 1, NULL \
         FROM generate_series(1, {rows}) g; ANALYZE contacts;"
    );
    psql(url, &sql)?;
    // As after the server's data set (data.rs): the INSERT baseline must not pay for this load's
    // checkpoint either.
    if let Err(e) = psql(url, "CHECKPOINT") {
        eprintln!("xtask bench: no CHECKPOINT after the raw load ({e:#})");
    }
    Ok(())
}

pub fn psql(url: &str, sql: &str) -> Result<()> {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qc", sql])
        .output()
        .context("running psql")?;
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

pub fn psql_out(url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-Atc", sql])
        .output()
        .context("running psql")?;
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One pgbench run of `script` at `clients`; latency percentiles from its per-transaction log.
/// With `rate` (transactions per second, all clients together) the run is open-loop: pgbench
/// schedules the transactions and logs each one's latency from its scheduled start, lag
/// included, as the server's open-loop runs count theirs.
pub fn pgbench(
    url: &str,
    dir: &Path,
    name: &str,
    script: &str,
    clients: usize,
    secs: u64,
    rate: Option<f64>,
) -> Result<Stats> {
    let run_dir = dir.join(format!("pgbench-{name}-{clients}"));
    let _ = std::fs::remove_dir_all(&run_dir);
    std::fs::create_dir_all(&run_dir)?;
    let script_path = run_dir.join("script.sql");
    std::fs::write(&script_path, script)?;
    let out = Command::new("pgbench")
        .current_dir(&run_dir)
        .args(["-n", "-M", "prepared", "-j", "2", "-l", "--log-prefix=tx"])
        .arg(format!("-c{clients}"))
        .arg(format!("-T{secs}"))
        .args(rate.map(|r| format!("--rate={r:.0}")))
        .arg("-f")
        .arg(&script_path)
        .arg(url)
        .output()
        .context("running pgbench")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "pgbench failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let tps = text
        .lines()
        .find(|l| l.starts_with("tps = "))
        .and_then(|l| {
            l["tps = ".len()..]
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
        .context("no tps in pgbench output")?;
    let failed = text
        .lines()
        .find(|l| l.starts_with("number of failed transactions"))
        .and_then(|l| {
            l.split(':')
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0);
    // Per-transaction log lines: client_id transaction_no latency_us script_no epoch epoch_us.
    let mut lat: Vec<u32> = Vec::new();
    for entry in std::fs::read_dir(&run_dir)?.flatten() {
        if entry.file_name().to_string_lossy().starts_with("tx") {
            let log = std::fs::read_to_string(entry.path())?;
            lat.extend(
                log.lines()
                    .filter_map(|l| l.split_whitespace().nth(2)?.parse::<u32>().ok()),
            );
        }
    }
    let _ = std::fs::remove_dir_all(&run_dir);
    let mut rec = Recorder {
        ok: 0,
        errors: failed,
        lat_us: lat,
        first_error: None,
    };
    // pgbench's tps is over the whole run; report it as such.
    rec.ok = (tps * secs as f64).round() as u64;
    Ok(Stats::merge(vec![rec], secs as f64))
}

/// JSON text pgbench leaves alone: it takes `:name` for a variable, so every colon gets a
/// space after it (strings included; the size and the work stay the same).
fn pgbench_json(json: &str) -> String {
    json.replace(':', ": ")
}

pub fn pg_insert_script() -> String {
    let (custom, body) = (pgbench_json(CUSTOM), pgbench_json(EVENT_BODY));
    format!(
        "BEGIN;\n\
         INSERT INTO contacts ({CONTACT_COLUMNS}) VALUES ('{RAW_WORKSPACE}', 'test', 'con_' || gen_random_uuid(), 'anna', 'novak', gen_random_uuid() || '@bench.example', '+493012345678', NULL, 'cmp_raw', 'customer', '{custom}'::jsonb, 1, 1, 1, NULL);\n\
         INSERT INTO events (workspace_id, mode, id, type, created_at, body) VALUES ('{RAW_WORKSPACE}', 'test', 'evt_' || gen_random_uuid(), 'contact.created', 1, '{body}');\n\
         COMMIT;\n"
    )
}

pub fn pg_get_script(rows: u64) -> String {
    format!(
        "\\set n random(1, {rows})\n\
         SELECT {CONTACT_COLUMNS} FROM contacts WHERE workspace_id = '{RAW_WORKSPACE}' AND mode = 'test' AND id = 'con_' || lpad(:n::text, 26, '0');\n"
    )
}

// ---------------------------------------------------------------- SQLite (sqlx)

pub struct RawSqlite {
    writer: SqlitePool,
    reader: SqlitePool,
    rows: u64,
}

/// The same connection settings as the store: WAL, synchronous=NORMAL, no ping per acquire.
async fn sqlite_pool(path: &Path, connections: u32) -> Result<SqlitePool> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    Ok(SqlitePoolOptions::new()
        .max_connections(connections)
        .min_connections(connections)
        .test_before_acquire(false)
        .connect_with(options)
        .await?)
}

impl RawSqlite {
    /// Opens a database the server's migrations have built, and fills `rows` contacts to read.
    pub async fn open(path: &Path, rows: u64) -> Result<RawSqlite> {
        let writer = sqlite_pool(path, 1).await?;
        let mut tx = writer.begin().await?;
        for chunk in (1..=rows).collect::<Vec<_>>().chunks(500) {
            let mut qb =
                sqlx::QueryBuilder::new(format!("INSERT INTO contacts ({CONTACT_COLUMNS}) "));
            qb.push_values(chunk, |mut b, &n| {
                b.push_bind(RAW_WORKSPACE)
                    .push_bind("test")
                    .push_bind(raw_id(n))
                    .push_bind("anna")
                    .push_bind("novak")
                    .push_bind(format!("raw{n}@bench.example"))
                    .push_bind("+493012345678")
                    .push_bind(None::<String>)
                    .push_bind("co_raw")
                    .push_bind("customer")
                    .push_bind(CUSTOM)
                    .push_bind(n as i64)
                    .push_bind(n as i64)
                    .push_bind(1_i64)
                    .push_bind(None::<i64>);
            });
            qb.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        let cores = std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(2);
        let reader = sqlite_pool(path, cores.clamp(2, 8) * 2).await?;
        Ok(RawSqlite {
            writer,
            reader,
            rows,
        })
    }

    /// `clients` tasks inserting a contact and its event per transaction through the one writer.
    pub async fn insert(&self, clients: usize, warmup: Duration, duration: Duration) -> Stats {
        let pool = self.writer.clone();
        run_workers(clients, warmup, duration, None, move |_, window| {
            let pool = pool.clone();
            async move {
                let mut rec = Recorder::default();
                while window.running() {
                    let t0 = Instant::now();
                    let r: Result<()> = async {
                        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
                        let id = uuid_like();
                        sqlx::query(&format!("INSERT INTO contacts ({CONTACT_COLUMNS}) VALUES ($1, 'test', $2, 'anna', 'novak', $3, '+493012345678', NULL, 'cmp_raw', 'customer', $4, 1, 1, 1, NULL)"))
                            .bind(RAW_WORKSPACE)
                            .bind(format!("con_{id}"))
                            .bind(format!("{id}@bench.example"))
                            .bind(CUSTOM)
                            .execute(&mut *tx)
                            .await?;
                        sqlx::query("INSERT INTO events (workspace_id, mode, id, type, created_at, body) VALUES ($1, 'test', $2, 'contact.created', 1, $3)")
                            .bind(RAW_WORKSPACE)
                            .bind(format!("evt_{id}"))
                            .bind(EVENT_BODY)
                            .execute(&mut *tx)
                            .await?;
                        tx.commit().await?;
                        Ok(())
                    }
                    .await;
                    if let Err(e) = &r {
                        rec.error(|| format!("{e:#}"));
                    }
                    rec.record(&window, t0, r.is_ok());
                }
                rec
            }
        })
        .await
    }

    /// `clients` tasks reading contacts by primary key through the reader pool.
    pub async fn get(&self, clients: usize, warmup: Duration, duration: Duration) -> Stats {
        let pool = self.reader.clone();
        let rows = self.rows;
        run_workers(clients, warmup, duration, None, move |i, window| {
            let pool = pool.clone();
            async move {
                let mut rec = Recorder::default();
                let mut n = (i as u64).wrapping_mul(7919);
                while window.running() {
                    n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let id = raw_id(n % rows + 1);
                    let t0 = Instant::now();
                    let r = sqlx::query(&format!("SELECT {CONTACT_COLUMNS} FROM contacts WHERE workspace_id = $1 AND mode = 'test' AND id = $2"))
                        .bind(RAW_WORKSPACE)
                        .bind(id)
                        .fetch_optional(&pool)
                        .await;
                    let ok = matches!(r, Ok(Some(_)));
                    if !ok {
                        rec.error(|| match &r {
                            Err(e) => format!("{e:#}"),
                            Ok(_) => "row not found".to_owned(),
                        });
                    }
                    rec.record(&window, t0, ok);
                }
                rec
            }
        })
        .await
    }

    pub async fn close(self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

fn uuid_like() -> String {
    format!("{:032x}", rand::random::<u128>())
}
