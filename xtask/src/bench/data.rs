//! The data set: registry, pipelines, companies, contacts and deals created through the API
//! (so they are exactly what the server writes), then contacts bulk-loaded straight into the
//! database up to the search corpus size (a million in a full run), in the same row format.

use std::{
    io::Write,
    path::Path,
    process::{Command, Stdio},
    str::FromStr,
    sync::Arc,
    time::Duration,
};

use anyhow::{bail, Context, Result};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

use super::{
    http::{call_ok, Req},
    scenarios::{contact_body, name, needles, region, Ctx, TIERS},
};

pub const COMPANIES: usize = 200;
pub const API_CONTACTS: usize = 2_000;
pub const DEALS: usize = 1_000;
/// Contacts of type `partner`, each of its own company: one page of the reading scenarios.
const PARTNERS: usize = 25;
/// How many bulk contact ids the `get` scenario draws from (besides the API-created ones).
const BULK_SAMPLE: u64 = 50_000;

pub enum Db<'a> {
    Postgres { url: &'a str },
    Sqlite { path: &'a Path },
}

/// The id of bulk contact `n`: valid (`con_` + 26 base32 characters) and older than any id the
/// server mints.
fn bulk_id(n: u64) -> String {
    format!("con_0{n:025}")
}

async fn post(addr: &str, key: &str, path: &str, body: Value) -> Result<Value> {
    call_ok(addr, key, &Req::with_body("POST", path, body.to_string())).await
}

/// Creates the data through the API and bulk-fills contacts to `total_contacts`.
pub async fn load(
    addr: &str,
    key: &str,
    workspace: &str,
    db: Db<'_>,
    total_contacts: u64,
) -> Result<Ctx> {
    // Registry: three custom fields on contacts, the enum values they and `type` use.
    for (k, t) in [("tier", "select"), ("score", "number"), ("region", "text")] {
        post(
            addr,
            key,
            "/v1/fields",
            json!({"object": "contact", "key": k, "data_type": t}),
        )
        .await?;
    }
    for v in ["gold", "silver", "bronze"] {
        post(
            addr,
            key,
            "/v1/enums",
            json!({"group": "contact.tier", "value": v}),
        )
        .await?;
    }
    for v in ["customer", "partner"] {
        post(
            addr,
            key,
            "/v1/enums",
            json!({"group": "contact.type", "value": v}),
        )
        .await?;
    }
    post(addr, key, "/v1/pipelines", json!({"key": "partners", "name": "Partners", "stages": ["lead", "qualified", "proposal", "won", "lost"]})).await?;

    let mut rng = StdRng::seed_from_u64(42);
    let mut company_ids = Vec::with_capacity(COMPANIES);
    for i in 0..COMPANIES {
        let (_, last) = name(i as u64 * 7 + 1);
        let c = post(
            addr,
            key,
            "/v1/companies",
            json!({"name": format!("{last} {i} gmbh"), "domain": format!("{last}{i}.example")}),
        )
        .await?;
        company_ids.push(c["id"].as_str().context("company id")?.to_owned());
    }
    let pre = Ctx::new(Vec::new(), company_ids.clone(), Vec::new(), Vec::new());
    let mut contact_ids = Vec::new();
    for b in 0..API_CONTACTS / 100 {
        let ops: Vec<_> = (0..100)
            .map(|k| json!({"op": "create", "object": "contact", "data": contact_body(&pre, &mut rng, &format!("seed{b}-{k}"))}))
            .collect();
        let res = post(addr, key, "/v1/batch", json!({"operations": ops})).await?;
        collect_ids(&res, &mut contact_ids)?;
    }
    // The reading scenarios' page (scenarios.rs, `list_page`): 25 partners of 25 companies.
    let partners: Vec<_> = company_ids[..PARTNERS]
        .iter()
        .enumerate()
        .map(|(k, company)| {
            let mut data = contact_body(&pre, &mut rng, &format!("partner{k}"));
            data["type"] = "partner".into();
            data["company_id"] = company.as_str().into();
            json!({"op": "create", "object": "contact", "data": data})
        })
        .collect();
    let res = post(addr, key, "/v1/batch", json!({"operations": partners})).await?;
    collect_ids(&res, &mut contact_ids)?;
    let mut deals = Vec::new();
    for b in 0..DEALS / 100 {
        let ops: Vec<_> = (0..100)
            .map(|k| {
                let n = b * 100 + k;
                json!({"op": "create", "object": "deal", "data": {
                    "title": format!("{} deal {n}", name(n as u64).1),
                    "pipeline": if n % 2 == 0 { "default" } else { "partners" },
                    "stage": "lead",
                    "value_cents": rng.gen_range(10_000..10_000_000),
                    "currency": "EUR",
                    "primary_contact_id": contact_ids[rng.gen_range(0..contact_ids.len())],
                    "company_id": company_ids[rng.gen_range(0..company_ids.len())],
                }})
            })
            .collect();
        let res = post(addr, key, "/v1/batch", json!({"operations": ops})).await?;
        let mut ids = Vec::new();
        collect_ids(&res, &mut ids)?;
        deals.extend(ids.into_iter().map(|id| (id, 1)));
    }

    let bulk = total_contacts.saturating_sub(API_CONTACTS as u64);
    let started = std::time::Instant::now();
    match db {
        Db::Postgres { url } => {
            bulk_postgres(url, workspace, &company_ids, bulk)?;
            // Every table's statistics, as autovacuum would have them (this machine's Postgres
            // runs without it), whether or not there was a bulk load.
            super::raw::psql(url, "ANALYZE")?;
            // The load's WAL written out now, as SQLite's load ends with a checkpoint: otherwise
            // the checkpoint it is owed starts during the first write scenario (the load alone
            // is half of `max_wal_size` 1 GB at 1,000,000 contacts), and that scenario's latency
            // pays for the load (full-page images of every page it touches first). Needs the
            // `pg_checkpoint` role or a superuser; without them the run goes on as before.
            if let Err(e) = super::raw::psql(url, "CHECKPOINT") {
                eprintln!("xtask bench: no CHECKPOINT after the load ({e:#}); the first write scenario may overlap the load's checkpoint");
            }
        }
        Db::Sqlite { path } => bulk_sqlite(path, workspace, &company_ids, bulk).await?,
    }
    eprintln!(
        "xtask bench: bulk-loaded {bulk} contacts in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let step = (bulk / BULK_SAMPLE).max(1);
    contact_ids.extend((1..=bulk).step_by(step as usize).map(bulk_id));
    Ok(Ctx::new(contact_ids, company_ids, deals, needles()))
}

fn collect_ids(res: &Value, out: &mut Vec<String>) -> Result<()> {
    let results = res["results"]
        .as_array()
        .with_context(|| format!("batch answer without results: {res}"))?;
    for r in results {
        let id = r["data"]["id"]
            .as_str()
            .or_else(|| r["id"].as_str())
            .with_context(|| format!("batch result without an id: {r}"))?;
        out.push(id.to_owned());
    }
    Ok(())
}

/// One bulk contact as the store writes it (columns of `BULK_COLUMNS`).
fn bulk_row(n: u64, companies: &[String], now_ms: i64, bulk: u64) -> [String; 13] {
    let (first, mut last) = name(n);
    // One contact in RARE_EVERY has a surname with a rare trigram: the needle that shows the
    // trigram index at work (every other 3-letter needle of the corpus is common).
    if n.is_multiple_of(RARE_EVERY) {
        last = RARE_NAME;
    }
    let created = now_ms - 86_400_000 - (bulk - n) as i64;
    [
        bulk_id(n),
        first.to_owned(),
        last.to_owned(),
        format!("{first}.{last}.{n}@bulk.example"),
        format!("+4930{:08}", n.wrapping_mul(2_654_435_761) % 100_000_000),
        format!("https://www.linkedin.com/in/{first}-{last}-{n}"),
        companies[(n as usize * 31) % companies.len()].clone(),
        "customer".to_owned(),
        json!({"tier": TIERS[(n % 3) as usize], "score": n % 1000, "region": region(n)})
            .to_string(),
        created.to_string(),
        created.to_string(),
        "1".to_owned(),
        String::new(),
    ]
}

const RARE_EVERY: u64 = 5_000;
pub const RARE_NAME: &str = "yxqvist";

const BULK_COLUMNS: &str = "id, first_name, last_name, email, phone, linkedin_url, company_id, type, custom_fields, created_at, updated_at, version";

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn bulk_postgres(url: &str, workspace: &str, companies: &[String], bulk: u64) -> Result<()> {
    if bulk == 0 {
        return Ok(());
    }
    // COPY into a staging table, then one INSERT … SELECT adding the tenant columns.
    let copy = "CREATE TEMP TABLE bulk (id text, first_name text, last_name text, email text, phone text, linkedin_url text, company_id text, \
         type text, custom_fields text, created_at bigint, updated_at bigint, version bigint);\n\
         \\copy bulk FROM STDIN WITH (FORMAT csv)\n";
    let tail = format!(
        "INSERT INTO contacts (workspace_id, mode, {BULK_COLUMNS}) SELECT '{workspace}', 'test', id, first_name, last_name, email, phone, \
         linkedin_url, company_id, type, custom_fields::jsonb, created_at, updated_at, version FROM bulk;\n"
    );
    let mut child = Command::new("psql")
        .args([url, "-v", "ON_ERROR_STOP=1", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("starting psql")?;
    {
        let mut stdin =
            std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().context("psql stdin")?);
        stdin.write_all(copy.as_bytes())?;
        let now = now_ms();
        for n in 1..=bulk {
            let row = bulk_row(n, companies, now, bulk);
            let csv: Vec<String> = row[..12]
                .iter()
                .map(|f| format!("\"{}\"", f.replace('"', "\"\"")))
                .collect();
            writeln!(stdin, "{}", csv.join(","))?;
        }
        writeln!(stdin, "\\.")?;
        stdin.write_all(tail.as_bytes())?;
        stdin.flush()?;
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("bulk load into Postgres failed");
    }
    Ok(())
}

async fn bulk_sqlite(path: &Path, workspace: &str, companies: &[String], bulk: u64) -> Result<()> {
    if bulk == 0 {
        return Ok(());
    }
    let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .busy_timeout(Duration::from_secs(60));
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .context("opening the database for the bulk load")?;
    let companies = Arc::new(companies.to_vec());
    let now = now_ms();
    let mut n = 1;
    while n <= bulk {
        // 50,000 rows per transaction: few commits, and the WAL stays small.
        let end = (n + 50_000).min(bulk + 1);
        // The server writes beside the load: take the write lock up front, as the store does, so
        // that waiting for it goes through the busy timeout.
        let mut tx = pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .context("beginning a bulk-load transaction")?;
        while n < end {
            let upto = (n + 200).min(end);
            let mut qb = sqlx::QueryBuilder::new(format!(
                "INSERT INTO contacts (workspace_id, mode, {BULK_COLUMNS}) "
            ));
            qb.push_values(n..upto, |mut b, k| {
                let row = bulk_row(k, &companies, now, bulk);
                b.push_bind(workspace.to_owned()).push_bind("test");
                for (i, f) in row.into_iter().take(12).enumerate() {
                    if (9..12).contains(&i) {
                        b.push_bind(f.parse::<i64>().unwrap_or(0));
                    } else {
                        b.push_bind(f);
                    }
                }
            });
            qb.build()
                .execute(&mut *tx)
                .await
                .with_context(|| format!("bulk-loading contacts {n}..{upto}"))?;
            n = upto;
        }
        tx.commit()
            .await
            .context("committing a bulk-load transaction")?;
    }
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&pool)
        .await
        .context("checkpointing after the bulk load")?;
    pool.close().await;
    Ok(())
}
