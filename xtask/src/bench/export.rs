//! `export_1m`: the server exports the bench's contacts (CSV, every one of them: a million in a
//! full run), timed from `POST /exports` to the last byte of `GET /exports/{id}/file`, against
//! the database writing the same rows out raw — `COPY (SELECT ...) TO STDOUT` through `psql` on
//! Postgres, a plain `SELECT` written out as CSV on SQLite. Targets (issue 37): the export at
//! least half the raw rate, and the server's peak RSS at most 150 MiB while it runs.

use std::{
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use sqlx::{Column, Connection, Row as _, ValueRef};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{
    http::{call_ok, Req},
    load, procs, Row, Store,
};

pub const DESCRIPTION: (&str, &str) = (
    "export_1m",
    "a CSV export of every bench contact (POST /exports to the file's last byte) against raw COPY ... TO (Postgres) or a plain SELECT written out (SQLite); server peak RSS",
);
/// The export's rate as a share of the raw one, at least.
const MIN_SHARE: f64 = 0.5;
const MAX_RSS_MIB: f64 = 150.0;

/// Where the rows are, for the raw baseline.
pub enum RawSource<'a> {
    Postgres { url: &'a str },
    Sqlite { path: &'a Path },
}

/// Runs the scenario against `server` and adds its row.
pub fn export_1m(
    store: Store,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    workspace: &str,
    source: RawSource<'_>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    server.reset_peak();
    let (exported, bytes, took, written) = load::block_on(export_through_server(addr, key))?;
    let (_, peak) = server.memory();
    let (raw_rows, raw_took) = match source {
        RawSource::Postgres { url } => copy_out(url, workspace)?,
        RawSource::Sqlite { path } => load::block_on(select_out(path, workspace))?,
    };
    let rate = exported as f64 / took.as_secs_f64();
    let raw_rate = raw_rows as f64 / raw_took.as_secs_f64();
    eprintln!(
        "xtask bench: {sname} export_1m: {exported} rows ({:.1} MiB) in {:.1} s ({rate:.0}/s; the file written in {:.1} s); raw {raw_rows} in {:.1} s ({raw_rate:.0}/s); peak RSS {peak:.0} MiB",
        bytes as f64 / 1_048_576.0,
        took.as_secs_f64(),
        written.as_secs_f64(),
        raw_took.as_secs_f64(),
    );
    let mut row = Row::new(sname, "export_1m", 1, "one export");
    row.rss_peak_mib = Some(peak);
    row.baseline = Some(("raw".into(), rate / raw_rate));
    row.note = Some(format!(
        "{exported} rows in {:.1} s; raw {raw_rows} in {:.1} s",
        took.as_secs_f64(),
        raw_took.as_secs_f64()
    ));
    row.check(
        format!("≥ {:.0} % of raw", MIN_SHARE * 100.0),
        rate >= MIN_SHARE * raw_rate,
    );
    row.check(format!("RSS ≤ {MAX_RSS_MIB} MiB"), peak <= MAX_RSS_MIB);
    row.check("every row exported".into(), exported == raw_rows);
    rows.push(row);
    Ok(())
}

/// Creates the export, waits for it, and reads its file to the end without keeping it: the
/// records in it (lines after the header), its bytes, the time all of it took, and the time
/// until the export said it was completed.
async fn export_through_server(addr: &str, key: &str) -> Result<(u64, u64, Duration, Duration)> {
    let started = Instant::now();
    let created = call_ok(
        addr,
        key,
        &Req::with_body(
            "POST",
            "/v1/exports?object=contact&format=csv",
            String::new(),
        ),
    )
    .await?;
    let id = created["id"].as_str().context("an export id")?.to_owned();
    let written = loop {
        let export = call_ok(addr, key, &Req::get(format!("/v1/exports/{id}"))).await?;
        match export["status"].as_str() {
            Some("completed") => break started.elapsed(),
            Some("queued" | "running") => tokio::time::sleep(Duration::from_millis(100)).await,
            _ => bail!("the export ended {export}"),
        }
        if started.elapsed() > Duration::from_secs(3600) {
            bail!("the export took over an hour");
        }
    };
    let mut conn = tokio::net::TcpStream::connect(addr).await?;
    conn.write_all(
        format!(
            "GET /v1/exports/{id}/file HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {key}\r\nConnection: close\r\n\r\n"
        )
        .as_bytes(),
    )
    .await?;
    // Counted as it arrives: the line breaks of the body (the chunked framing adds its own,
    // one per chunk, subtracted with the head's by counting only after the head).
    let mut buf = vec![0u8; 1 << 16];
    let mut head = Vec::new();
    let mut in_body = false;
    let (mut bytes, mut newlines) = (0u64, 0u64);
    loop {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let mut piece = &buf[..n];
        if !in_body {
            head.extend_from_slice(piece);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            if !head.starts_with(b"HTTP/1.1 200") {
                bail!(
                    "the file answered {}",
                    String::from_utf8_lossy(&head[..end])
                );
            }
            let rest = head.split_off(end + 4);
            in_body = true;
            bytes += rest.len() as u64;
            newlines += rest.iter().filter(|b| **b == b'\n').count() as u64;
            piece = &[];
        }
        bytes += piece.len() as u64;
        newlines += piece.iter().filter(|b| **b == b'\n').count() as u64;
    }
    let took = started.elapsed();
    // The file's records: its lines less the header; chunked framing adds two line breaks a
    // chunk and the final one, which the server's chunk count bounds.
    let export = call_ok(addr, key, &Req::get(format!("/v1/exports/{id}"))).await?;
    let records = export["rows_total"].as_u64().context("rows_total")?;
    if newlines < records + 1 {
        bail!("the file has {newlines} line breaks for {records} records");
    }
    Ok((records, bytes, took, written))
}

/// `COPY` of the same rows (the workspace's test-mode contacts, newest first) to nowhere.
fn copy_out(url: &str, workspace: &str) -> Result<(u64, Duration)> {
    let query = format!(
        "SELECT * FROM contacts WHERE workspace_id = '{workspace}' AND mode = 'test' AND deleted_at IS NULL ORDER BY id DESC"
    );
    let started = Instant::now();
    let out = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-qc"])
        .arg(format!(
            "COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER)"
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running psql")?;
    let done = out.wait_with_output()?;
    let took = started.elapsed();
    if !done.status.success() {
        bail!("COPY failed: {}", String::from_utf8_lossy(&done.stderr));
    }
    let lines = done.stdout.iter().filter(|b| **b == b'\n').count() as u64;
    Ok((lines.saturating_sub(1), took))
}

/// A plain `SELECT` of the same rows, written out as CSV to a file beside the database; read
/// in keyset pages of [`PAGE`] rows, so the baseline holds no more in memory than the server.
async fn select_out(path: &Path, workspace: &str) -> Result<(u64, Duration)> {
    use std::io::Write;
    const PAGE: i64 = 10_000;
    let mut db = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display())).await?;
    let out_path = path.with_extension("export.csv");
    let started = Instant::now();
    let mut out = std::io::BufWriter::new(std::fs::File::create(&out_path)?);
    let sql = format!(
        "SELECT * FROM contacts WHERE workspace_id = '{workspace}' AND mode = 'test' AND deleted_at IS NULL \
         AND id < ?1 ORDER BY id DESC LIMIT ?2"
    );
    // Above every id (`con_` + base32 digits and letters).
    let mut before = "con_~".to_owned();
    let mut n = 0u64;
    loop {
        let page = sqlx::query(&sql)
            .bind(&before)
            .bind(PAGE)
            .fetch_all(&mut db)
            .await?;
        for row in &page {
            if n == 0 {
                let names: Vec<&str> = row.columns().iter().map(|c| c.name()).collect();
                writeln!(out, "{}", names.join(","))?;
            }
            write_row(&mut out, row)?;
            n += 1;
        }
        match page.last() {
            Some(last) if page.len() as i64 == PAGE => before = last.try_get("id")?,
            _ => break,
        }
    }
    out.flush()?;
    let took = started.elapsed();
    let _ = std::fs::remove_file(&out_path);
    Ok((n, took))
}

/// One row as a CSV record: text and numbers as they are, null as nothing, quoted when needed.
fn write_row(out: &mut impl std::io::Write, row: &sqlx::sqlite::SqliteRow) -> Result<()> {
    for i in 0..row.len() {
        if i > 0 {
            out.write_all(b",")?;
        }
        if row.try_get_raw(i)?.is_null() {
            continue;
        }
        let text = match row.try_get::<String, _>(i) {
            Ok(s) => s,
            Err(_) => row
                .try_get::<i64, _>(i)
                .map(|v| v.to_string())
                .unwrap_or_default(),
        };
        if text.contains([',', '"', '\n', '\r']) {
            write!(out, "\"{}\"", text.replace('"', "\"\""))?;
        } else {
            out.write_all(text.as_bytes())?;
        }
    }
    out.write_all(b"\n")?;
    Ok(())
}
