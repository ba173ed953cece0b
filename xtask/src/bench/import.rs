//! `import_1m`: a CSV of contacts (a million in a full run; `--contacts` otherwise) with three
//! custom fields and 5 % duplicates, posted to `POST /v1/imports?on_duplicate=update` and
//! written by the server's import worker. Compared with the database's own bulk load of the same
//! contacts in the same run (COPY on Postgres, multi-row INSERTs on SQLite, into the raw
//! database), with the server's RSS peak over the whole import, and with `get_contact` tail
//! latency at a fixed rate while the import runs against the same at rest (an import must not
//! starve interactive requests).

use std::{io::Write, path::Path, process::Stdio, str::FromStr, sync::Arc, time::Instant};

use anyhow::{bail, Context, Result};
use serde_json::Value;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use super::{
    http::{call_ok, Req},
    load, procs,
    report::Row,
    scenarios::{self, name, region, Ctx, TIERS},
    Store,
};

pub const DESCRIPTION: (&str, &str) = (
    "import_1m",
    "a CSV of --contacts contacts (three custom fields, 5 % duplicates) through POST /imports with on_duplicate=update: rows/s against the database's bulk load of the same rows, RSS peak, get_contact p99 during ÷ at rest",
);

/// Targets (issue 36): import ÷ raw bulk load, per store; RSS; tail latency ratio.
const MIN_RATIO_POSTGRES: f64 = 0.40;
const MIN_RATIO_SQLITE: f64 = 0.50;
const MAX_RSS_MIB: f64 = 150.0;
const MAX_P99_GROWTH: f64 = 3.0;
/// `get_contact` while the import runs: a fixed rate on a few connections (open loop), so that
/// the latency is the server's and the load does not itself starve the import.
const PROBE_RATE: f64 = 200.0;
const PROBE_CONNECTIONS: usize = 8;
const PROBE_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);
/// The raw load's workspace in the raw database (the raw baselines use `ws_raw`).
const RAW_WORKSPACE: &str = "ws_rawimport";
const HEADER: &str = "first_name,last_name,email,phone,type,custom_fields.tier,custom_fields.score,custom_fields.region";

/// Row `i` of the file: every 20th repeats the email of the row ten before it (5 %).
fn email_of(i: u64) -> String {
    let k = if i % 20 == 19 { i - 10 } else { i };
    format!("imp{k}@import.example")
}

fn is_duplicate(i: u64) -> bool {
    i % 20 == 19
}

/// The cells of row `i`, in `HEADER`'s order, unquoted (none holds a comma or a quote).
fn cells(i: u64) -> [String; 8] {
    let (first, last) = name(i);
    [
        first.to_owned(),
        last.to_owned(),
        email_of(i),
        format!("+4930{:08}", i.wrapping_mul(2_654_435_761) % 100_000_000),
        "customer".to_owned(),
        TIERS[(i % 3) as usize].to_owned(),
        (i % 1000).to_string(),
        region(i).to_owned(),
    ]
}

fn csv_file(rows: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(rows as usize * 110);
    let _ = writeln!(out, "{HEADER}");
    for i in 0..rows {
        let _ = writeln!(out, "{}", cells(i).join(","));
    }
    out
}

/// What `import_1m` measured.
struct Measured {
    raw_secs: f64,
    import_secs: f64,
    import: Value,
    rss_peak_mib: f64,
    rest: load::Stats,
    during: Vec<load::Stats>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn import_1m(
    store: Store,
    rows_total: u64,
    server: &procs::Proc,
    key: &str,
    ctx: &Arc<Ctx>,
    raw_url: &str,
    raw_sqlite: Option<&Path>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    let file = csv_file(rows_total);
    let raw_started = Instant::now();
    match (store, raw_sqlite) {
        (Store::Postgres, _) => raw_copy(raw_url, rows_total)?,
        (Store::Sqlite, Some(path)) => load::block_on(raw_inserts(path, rows_total))?,
        (Store::Sqlite, None) => bail!("no raw SQLite database"),
    }
    let raw_secs = raw_started.elapsed().as_secs_f64();
    eprintln!("xtask bench: {sname} raw bulk load of {rows_total} rows: {raw_secs:.1} s");
    let m = measure(server, key, ctx, file, raw_secs)?;
    let expected_dups = (0..rows_total).filter(|i| is_duplicate(*i)).count() as i64;
    let counts = ["created", "updated", "failed"].map(|k| m.import[k].as_i64().unwrap_or(-1));
    let ok = m.import["status"] == "completed"
        && counts == [rows_total as i64 - expected_dups, expected_dups, 0];

    let mut raw_row = Row::new(
        sname,
        "raw_bulk_load",
        1,
        if store == Store::Postgres {
            "COPY"
        } else {
            "INSERT ×500"
        },
    );
    raw_row.stats = Some(stats_of(rows_total, m.raw_secs));
    rows.push(raw_row);

    let mut row = Row::new(sname, "import_1m", 1, "POST /imports");
    row.stats = Some(stats_of(rows_total, m.import_secs));
    row.baseline = Some(("raw_bulk_load".to_owned(), rows_total as f64 / m.raw_secs));
    row.rss_peak_mib = Some(m.rss_peak_mib);
    let min = if store == Store::Postgres {
        MIN_RATIO_POSTGRES
    } else {
        MIN_RATIO_SQLITE
    };
    let ratio = row.ratio().unwrap_or(0.0);
    row.check(format!("ratio ≥ {:.0} %", min * 100.0), ratio >= min);
    row.check(
        format!("peak RSS ≤ {MAX_RSS_MIB} MiB"),
        m.rss_peak_mib <= MAX_RSS_MIB,
    );
    row.check("counts exact".to_owned(), ok);
    if !ok {
        row.note = Some(format!("import ended as {}", m.import));
    }
    rows.push(row);

    let worst = m
        .during
        .iter()
        .max_by(|a, b| a.p99_ms.total_cmp(&b.p99_ms))
        .cloned()
        .unwrap_or_default();
    let mode = format!("open@{PROBE_RATE:.0}/s");
    let mut rest_row = Row::new(sname, "get_contact_at_rest", PROBE_CONNECTIONS, &mode);
    let rest_p99 = m.rest.p99_ms;
    rest_row.stats = Some(m.rest);
    rows.push(rest_row);
    let mut during_row = Row::new(sname, "get_contact_during_import", PROBE_CONNECTIONS, &mode);
    during_row.note = Some(format!(
        "worst of {} windows of {} s; at rest p99 {rest_p99:.2} ms",
        m.during.len(),
        PROBE_WINDOW.as_secs()
    ));
    during_row.check(
        format!("p99 ≤ {MAX_P99_GROWTH} × at rest"),
        worst.p99_ms <= MAX_P99_GROWTH * rest_p99,
    );
    during_row.stats = Some(worst);
    rows.push(during_row);
    Ok(())
}

/// `rows` in `secs`, as a throughput row shows it.
fn stats_of(rows: u64, secs: f64) -> load::Stats {
    load::Stats {
        requests: rows,
        secs,
        ..Default::default()
    }
}

/// The import itself, with `get_contact` probed at rest first and in windows while it runs.
fn measure(
    server: &procs::Proc,
    key: &str,
    ctx: &Arc<Ctx>,
    file: Vec<u8>,
    raw_secs: f64,
) -> Result<Measured> {
    let get = scenarios::SCENARIOS
        .iter()
        .find(|s| s.name == "get_contact")
        .context("the get_contact scenario")?;
    let probe = || {
        load::block_on(async {
            Ok(load::open(
                &server.addr,
                Some(key),
                ctx.clone(),
                get,
                PROBE_CONNECTIONS,
                PROBE_RATE,
                std::time::Duration::from_secs(1),
                PROBE_WINDOW,
            )
            .await)
        })
    };
    let rest = probe()?;
    server.reset_peak();
    let started = Instant::now();
    let (addr, key_owned) = (server.addr.clone(), key.to_owned());
    let importer = std::thread::spawn(move || load::block_on(run_import(&addr, &key_owned, file)));
    let mut during = Vec::new();
    while !importer.is_finished() {
        during.push(probe()?);
    }
    let import = importer
        .join()
        .map_err(|_| anyhow::anyhow!("the import thread panicked"))??;
    let import_secs = started.elapsed().as_secs_f64();
    Ok(Measured {
        raw_secs,
        import_secs,
        import,
        rss_peak_mib: server.memory().1,
        rest,
        during,
    })
}

/// Posts the file and waits for the import to end; returns it as it ended.
async fn run_import(addr: &str, key: &str, file: Vec<u8>) -> Result<Value> {
    let (status, body) = post_csv(
        addr,
        key,
        "/v1/imports?object=contact&on_duplicate=update",
        &file,
    )
    .await?;
    if status != 202 {
        bail!("POST /v1/imports answered {status}: {body}");
    }
    let id = body["id"].as_str().context("import id")?.to_owned();
    loop {
        let import = call_ok(addr, key, &Req::get(format!("/v1/imports/{id}"))).await?;
        if !matches!(import["status"].as_str(), Some("queued" | "running")) {
            return Ok(import);
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// One `text/csv` POST on a connection of its own (the load generator's client sends JSON).
async fn post_csv(addr: &str, key: &str, path: &str, body: &[u8]) -> Result<(u16, Value)> {
    let mut conn = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: text/csv\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    for piece in body.chunks(1 << 20) {
        conn.write_all(piece).await?;
    }
    let mut answer = Vec::new();
    conn.read_to_end(&mut answer).await?;
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").context("an HTTP answer")?;
    let status = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .context("a status")?;
    Ok((status, serde_json::from_str(body).unwrap_or(Value::Null)))
}

/// The columns the raw loads fill, after the tenant's.
const RAW_COLUMNS: &str =
    "id, first_name, last_name, email, phone, type, custom_fields, created_at, updated_at, version";

/// The contacts the file amounts to (a duplicate updates its earlier row's contact), as raw
/// columns: `RAW_COLUMNS` in order.
fn raw_rows(rows: u64) -> impl Iterator<Item = [String; 10]> {
    (0..rows).filter(|i| !is_duplicate(*i)).map(|i| {
        let [first, last, email, phone, kind, tier, score, region] = cells(i);
        [
            format!("con_1{i:025}"),
            first,
            last,
            email,
            phone,
            kind,
            format!(r#"{{"tier":"{tier}","score":{score},"region":"{region}"}}"#),
            "1".to_owned(),
            "1".to_owned(),
            "1".to_owned(),
        ]
    })
}

/// Postgres: `COPY` straight into the contacts table.
fn raw_copy(url: &str, rows: u64) -> Result<()> {
    let mut child = std::process::Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("starting psql")?;
    {
        let mut stdin =
            std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().context("psql stdin")?);
        writeln!(
            stdin,
            "\\copy contacts (workspace_id, mode, {RAW_COLUMNS}) FROM STDIN WITH (FORMAT csv)"
        )?;
        for row in raw_rows(rows) {
            let quoted: Vec<String> = row
                .iter()
                .map(|f| format!("\"{}\"", f.replace('"', "\"\"")))
                .collect();
            writeln!(stdin, "{RAW_WORKSPACE},test,{}", quoted.join(","))?;
        }
        writeln!(stdin, "\\.")?;
        stdin.flush()?;
    }
    if !child.wait()?.success() {
        bail!("the raw COPY failed");
    }
    Ok(())
}

/// SQLite: multi-row INSERTs of 500 contacts, 50,000 a transaction, as the store's settings.
async fn raw_inserts(path: &Path, rows: u64) -> Result<()> {
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
        .synchronous(sqlx::sqlite::SqliteSynchronous::Normal);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await?;
    let all: Vec<[String; 10]> = raw_rows(rows).collect();
    for tx_rows in all.chunks(50_000) {
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
        for part in tx_rows.chunks(500) {
            let mut qb = sqlx::QueryBuilder::new(format!(
                "INSERT INTO contacts (workspace_id, mode, {RAW_COLUMNS}) "
            ));
            qb.push_values(part, |mut b, row| {
                b.push_bind(RAW_WORKSPACE).push_bind("test");
                for (i, f) in row.iter().enumerate() {
                    if i >= 7 {
                        b.push_bind(f.parse::<i64>().unwrap_or(1));
                    } else {
                        b.push_bind(f.clone());
                    }
                }
            });
            qb.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
    }
    pool.close().await;
    Ok(())
}
