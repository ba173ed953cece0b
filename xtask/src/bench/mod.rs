//! `cargo xtask bench [--quick] [--long] [--store sqlite|postgres]`: the release server against
//! the database's own ceiling, in one run. See docs/performance.md.
//!
//! Per store: the raw baselines first (server not running), then the server on a fresh database,
//! its data set (API + bulk load), the search query plans, every scenario of
//! [`scenarios::SCENARIOS`] closed-loop at 8/32/128 connections (and open-loop at a fixed rate for
//! tail latency where the scenario asks), and a mixed run with the SQLite WAL sampled. The
//! hello-world ceiling runs once at the start for its own rows, and again just before and just
//! after each scenario compared with it. Prints a table and writes `target/bench/bench-<time>.json`
//! (and `latest.json`).

mod ab;
mod background;
mod console;
mod data;
mod export;
pub(crate) mod http;
mod import;
pub(crate) mod load;
mod opts;
mod plans;
pub(crate) mod procs;
pub(crate) mod raw;
mod report;
mod runs;
mod scenarios;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    str::FromStr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use ab::{alternate_with_hello, alternate_with_scenario};
use opts::Opts;
use plans::{explain_postgres, explain_sqlite};
pub use procs::hello_main;
use report::{git_commit, machine, percent, print_table, utc_now, Row};
use runs::{mixed, sequence_steps, webhook_fanout};
use scenarios::{Baseline, Ctx, Scenario, Target};

const CONCURRENCIES: [usize; 3] = [8, 32, 128];
/// Open-loop runs send this share of the closed-loop throughput at 32 connections.
const OPEN_LOOP_LOAD: f64 = 0.6;
const OPEN_LOOP_CONNECTIONS: usize = 32;
const IDLE_RSS_MIB: f64 = 30.0;
const LOADED_RSS_MIB: f64 = 100.0;
const WAL_MAX_MIB: f64 = 256.0;
/// pgbench clients at most (see `run_store`).
const PG_MAX_CLIENTS: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Store {
    Sqlite,
    Postgres,
}

impl Store {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Store::Sqlite => "sqlite",
            Store::Postgres => "postgres",
        }
    }
}

pub fn main(root: &Path, args: &[String]) -> Result<()> {
    let opts = Opts::parse(args)?;
    // The load generator and the hello-world ceiling must be optimised like the server they
    // measure: a debug xtask rebuilds itself in release and hands over.
    if cfg!(debug_assertions) {
        crate::run(crate::cargo().args(["build", "--release", "-p", "xtask", "-p", "crm-server"]))?;
        let mut cmd = std::process::Command::new(crate::target_dir(root).join("release/xtask"));
        cmd.arg("bench").args(args);
        return crate::run(&mut cmd);
    }
    let out_dir = crate::target_dir(root).join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let bin = procs::build_server(root)?;
    let run_dir = out_dir.join(format!("run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&run_dir);
    std::fs::create_dir_all(&run_dir)?;

    let mut rows: Vec<Row> = Vec::new();
    let mut explains: BTreeMap<&str, Value> = BTreeMap::new();

    // The hello-world ceiling (when a selected scenario compares with it): its rows now, and
    // kept running to bracket each scenario compared with it.
    let wants_hello = scenarios::SCENARIOS
        .iter()
        .any(|s| opts.wants(s.name) && matches!(s.baseline, Baseline::Hello(_)));
    let hello = Ceiling::start(&run_dir, wants_hello)?;
    if let Some(proc) = &hello.proc {
        for scenario in [&scenarios::HELLO, &scenarios::HELLO_BODY] {
            for &c in &CONCURRENCIES {
                proc.reset_peak();
                let stats = hello.stats_of(scenario, c, &opts)?;
                eprintln!("xtask bench: {} c={c}: {:.0}/s", scenario.name, stats.rps());
                let mut row = Row::new("-", scenario.name, c, "closed");
                row.stats = Some(stats);
                row.rss_peak_mib = Some(proc.memory().1);
                rows.push(row);
            }
        }
    }

    for &store in &opts.stores {
        let result = run_store(store, &opts, &bin, root, &run_dir, &hello, &mut rows);
        match result {
            Ok(explain) => {
                explains.insert(store.name(), explain);
            }
            Err(e) => {
                eprintln!("xtask bench: {} failed: {e:#}", store.name());
                let mut row = Row::new(store.name(), "(run failed)", 0, "-");
                row.note = Some(format!("{e:#}"));
                row.pass = Some(false);
                rows.push(row);
            }
        }
    }

    print_table(&rows);
    if !scenarios::PENDING.is_empty() {
        println!("\nPending scenarios:");
        for (name, why) in scenarios::PENDING {
            println!("  {name}: {why}");
        }
    }
    let report = json!({
        "date": utc_now(),
        "machine": machine(),
        "git_commit": git_commit(root),
        "options": {
            "quick": opts.quick, "long": opts.long, "contacts": opts.contacts,
            "warmup_s": opts.warmup.as_secs_f64(), "duration_s": opts.duration.as_secs_f64(), "mixed_s": opts.mixed.as_secs_f64(),
            "open_loop": {"connections": OPEN_LOOP_CONNECTIONS, "share_of_closed_loop_throughput": OPEN_LOOP_LOAD},
        },
        "scenarios": scenarios::SCENARIOS.iter().map(|s| json!({"name": s.name, "description": s.description})).chain(background::DESCRIPTIONS.iter().chain([&import::DESCRIPTION, &export::DESCRIPTION]).map(|(n, d)| json!({"name": n, "description": d}))).collect::<Vec<_>>(),
        "pending": scenarios::PENDING.iter().map(|(n, w)| json!({"name": n, "waiting_for": w})).collect::<Vec<_>>(),
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        "explain": explains,
    });
    let stamp = utc_now().replace([':', '-'], "");
    let path = out_dir.join(format!("bench-{stamp}.json"));
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(&path, &text)?;
    std::fs::write(out_dir.join("latest.json"), &text)?;
    eprintln!("xtask bench: wrote {}", path.display());
    if opts.keep {
        eprintln!("xtask bench: kept {}", run_dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&run_dir);
    }
    Ok(())
}

/// Everything for one store. Returns the search query plans.
/// The hello-world server, when a selected scenario is compared with it.
struct Ceiling {
    proc: Option<procs::Proc>,
    ctx: Arc<Ctx>,
}

impl Ceiling {
    fn start(run_dir: &Path, wanted: bool) -> Result<Ceiling> {
        let proc = if wanted {
            Some(procs::start_hello(&run_dir.join("hello.log"))?)
        } else {
            None
        };
        let ctx = Arc::new(Ctx::new(
            vec![String::new()],
            vec![String::new()],
            vec![(String::new(), 1)],
            vec![String::new()],
        ));
        Ok(Ceiling { proc, ctx })
    }

    /// A closed-loop run of one of the hello-world server's scenarios, for its own rows.
    fn stats_of(&self, scenario: &'static Scenario, c: usize, opts: &Opts) -> Result<load::Stats> {
        self.closed(scenario, c, opts.warmup, opts.duration)
    }

    fn closed(
        &self,
        scenario: &'static Scenario,
        c: usize,
        warmup: Duration,
        duration: Duration,
    ) -> Result<load::Stats> {
        let proc = self
            .proc
            .as_ref()
            .context("the hello-world ceiling is not running")?;
        load::block_on(async {
            Ok(load::closed(
                &proc.addr,
                None,
                self.ctx.clone(),
                scenario,
                c,
                warmup,
                duration,
                Some(proc.pid()),
            )
            .await)
        })
    }
}

fn run_store(
    store: Store,
    opts: &Opts,
    bin: &Path,
    root: &Path,
    run_dir: &Path,
    hello: &Ceiling,
    rows: &mut Vec<Row>,
) -> Result<Value> {
    let sname = store.name();
    eprintln!("xtask bench: === {sname} ===");
    // Databases: one for the server, one for the raw baselines, same migrations.
    let pg = if store == Store::Postgres {
        Some(crate::postgres::find_or_start(root)?)
    } else {
        None
    };
    let tag = format!("crm_bench_{}", std::process::id());
    let (api_url, raw_url, sqlite_api, sqlite_raw) = match &pg {
        Some(pg) => {
            let api_db = format!("{tag}_api");
            let raw_db = format!("{tag}_raw");
            for db in [&api_db, &raw_db] {
                raw::psql(&pg.url, &format!("DROP DATABASE IF EXISTS {db}"))?;
                raw::psql(&pg.url, &format!("CREATE DATABASE {db}"))?;
            }
            (
                db_url(&pg.url, &api_db),
                db_url(&pg.url, &raw_db),
                None,
                None,
            )
        }
        None => {
            let api = run_dir.join("api.db");
            let rawp = run_dir.join("raw.db");
            (
                format!("sqlite://{}", api.display()),
                format!("sqlite://{}", rawp.display()),
                Some(api),
                Some(rawp),
            )
        }
    };
    let cleanup = || {
        if opts.keep {
            return;
        }
        if let Some(pg) = &pg {
            for db in [format!("{tag}_api"), format!("{tag}_raw")] {
                let _ = raw::psql(
                    &pg.url,
                    &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
                );
            }
        }
    };
    let result = (|| -> Result<Value> {
        // Raw ceilings, with nothing else running (when a selected scenario compares with them).
        procs::migrate(bin, &raw_url)?;
        let raw_rows = opts.contacts.min(1_000_000);
        let mut raw_insert: BTreeMap<usize, f64> = BTreeMap::new();
        let mut raw_get: BTreeMap<usize, f64> = BTreeMap::new();
        let secs = opts.duration.as_secs().max(1);
        let wants_raw = scenarios::SCENARIOS.iter().any(|s| {
            opts.wants(s.name) && matches!(s.baseline, Baseline::RawInsert | Baseline::RawGet)
        });
        match store {
            _ if !wants_raw => {}
            Store::Postgres => {
                raw::pg_prepare(&raw_url, raw_rows)?;
                for &c in &CONCURRENCIES {
                    // A shared server allows 100 connections in all (and other users hold some):
                    // pgbench's clients stop at PG_MAX_CLIENTS, past Postgres' own peak on 2 cores.
                    let clients = c.min(PG_MAX_CLIENTS);
                    let s = raw::pgbench(
                        &raw_url,
                        run_dir,
                        "insert",
                        &raw::pg_insert_script(),
                        clients,
                        secs,
                        None,
                    )?;
                    raw_insert.insert(c, s.rps());
                    push_raw(rows, sname, "raw_insert_contact_event", c, s, clients);
                    let s = raw::pgbench(
                        &raw_url,
                        run_dir,
                        "get",
                        &raw::pg_get_script(raw_rows),
                        clients,
                        secs,
                        None,
                    )?;
                    raw_get.insert(c, s.rps());
                    push_raw(rows, sname, "raw_get_by_pk", c, s, clients);
                }
            }
            Store::Sqlite => {
                let path = sqlite_raw.clone().context("raw path")?;
                load::block_on(async {
                    let r = raw::RawSqlite::open(&path, raw_rows).await?;
                    for &c in &CONCURRENCIES {
                        let s = r.insert(c, opts.warmup, opts.duration).await;
                        raw_insert.insert(c, s.rps());
                        push_raw(rows, sname, "raw_insert_contact_event", c, s, c);
                        let s = r.get(c, opts.warmup, opts.duration).await;
                        raw_get.insert(c, s.rps());
                        push_raw(rows, sname, "raw_get_by_pk", c, s, c);
                    }
                    r.close().await;
                    Ok(())
                })?;
            }
        }

        // The server.
        let ws = procs::create_workspace(bin, &api_url)?;
        // On Postgres the server gets as many connections as pgbench's clients at most, so
        // that both sides of a ratio use the database at the same concurrency (the default, 16,
        // is sized for several processes sharing one database: docs/operations.md).
        // `CRM_BENCH_PG_CONNECTIONS` overrides it, to measure another pool size.
        let pg_connections = std::env::var("CRM_BENCH_PG_CONNECTIONS")
            .unwrap_or_else(|_| PG_MAX_CLIENTS.to_string());
        let server_env: &[(&str, &str)] = if sname == "postgres" {
            &[("CRM_DATABASE_MAX_CONNECTIONS", &pg_connections)]
        } else {
            &[]
        };
        let server = procs::start_server_env(
            bin,
            &api_url,
            &run_dir.join(format!("server-{sname}.log")),
            server_env,
        )?;
        std::thread::sleep(Duration::from_secs(2));
        let (idle, _) = server.memory();
        let mut row = Row::new(sname, "idle_rss", 0, "-");
        row.rss_peak_mib = Some(idle);
        row.check(
            format!("idle RSS ≤ {IDLE_RSS_MIB} MiB"),
            idle <= IDLE_RSS_MIB,
        );
        rows.push(row);

        let addr = server.addr.clone();
        let key = ws.test_key.clone();
        let started = std::time::Instant::now();
        let db = match (&pg, &sqlite_api) {
            (Some(_), _) => data::Db::Postgres { url: &api_url },
            (None, Some(p)) => data::Db::Sqlite { path: p },
            _ => bail!("no database"),
        };
        let mut ctx = load::block_on(data::load(&addr, &key, &ws.id, db, opts.contacts))?;
        ctx.console_session = console::session(bin, &api_url, &ws.id, &addr)?;
        if opts.wants("console_board") || opts.wants("console_contacts") {
            console::weights(sname, &addr, &ctx.console_session, rows)?;
        }
        let ctx = Arc::new(ctx);
        eprintln!(
            "xtask bench: data set ready in {:.1}s ({} contacts)",
            started.elapsed().as_secs_f64(),
            opts.contacts
        );
        let explain = match store {
            Store::Postgres => explain_postgres(&api_url, &ws.id)?,
            Store::Sqlite => load::block_on(explain_sqlite(
                sqlite_api.as_deref().context("api path")?,
                &ws.id,
            ))?,
        };

        // The webhook outbox after each scenario: whether the fan-out keeps up under load.
        let outbox = |after: &str| {
            let left = load::block_on(async {
                background::BenchDb::open(sname, &api_url)
                    .await?
                    .undispatched_events()
                    .await
            });
            if let Ok(left) = left {
                eprintln!("xtask bench: {sname} outbox after {after}: {left} undispatched events");
            }
        };
        for sc in scenarios::SCENARIOS.iter().filter(|s| opts.wants(s.name)) {
            let raw_pg = (store == Store::Postgres && wants_raw).then(|| RawPg {
                url: &raw_url,
                dir: run_dir,
                rows: raw_rows,
            });
            run_scenario(
                sc,
                store,
                opts,
                &server,
                &addr,
                &key,
                &ctx,
                hello,
                &raw_insert,
                &raw_get,
                raw_pg.as_ref(),
                rows,
            )?;
            outbox(sc.name);
        }
        if opts.wants("mixed") {
            mixed(
                store,
                opts,
                &server,
                &addr,
                &key,
                &ctx,
                sqlite_api.as_deref(),
                rows,
            )?;
            outbox("mixed");
        }
        if opts.wants("import_1m") {
            let raw_sqlite = sqlite_raw.as_deref();
            import::import_1m(
                store,
                opts.contacts,
                &server,
                &key,
                &ctx,
                &raw_url,
                raw_sqlite,
                rows,
            )?;
        }
        if opts.wants("webhook_fanout") || opts.wants("sequence_steps") {
            let (backlog, took) = load::block_on(background::drain_outbox(
                sname,
                &api_url,
                Duration::from_secs(300),
            ))?;
            eprintln!("xtask bench: {sname} outbox drained before the background scenarios: {backlog} events in {:.1} s", took.as_secs_f64());
        }
        if opts.wants("webhook_fanout") {
            webhook_fanout(store, opts, &server, &addr, &key, &ctx, rows)?;
        }
        if opts.wants("export_1m") {
            let source = match &sqlite_api {
                Some(path) => export::RawSource::Sqlite { path },
                None => export::RawSource::Postgres { url: &api_url },
            };
            export::export_1m(store, &server, &addr, &key, &ws.id, source, rows)?;
        }
        drop(server);
        if opts.wants("sequence_steps") {
            sequence_steps(store, bin, &api_url, run_dir, rows)?;
        }
        Ok(explain)
    })();
    cleanup();
    result
}

/// The raw Postgres database of the run, for the open-loop baselines measured beside a scenario.
struct RawPg<'a> {
    url: &'a str,
    dir: &'a Path,
    rows: u64,
}

fn push_raw(
    rows: &mut Vec<Row>,
    store: &'static str,
    name: &str,
    c: usize,
    s: load::Stats,
    clients: usize,
) {
    eprintln!(
        "xtask bench: {store} {name} c={c}: {:.0}/s p50 {:.2} ms p99 {:.2} ms",
        s.rps(),
        s.p50_ms,
        s.p99_ms
    );
    let mode = if clients == c {
        "closed".to_owned()
    } else {
        format!("closed, {clients} conns")
    };
    let mut row = Row::new(store, name, c, &mode);
    row.stats = Some(s);
    rows.push(row);
}

#[allow(clippy::too_many_arguments)]
fn run_scenario(
    sc: &'static Scenario,
    store: Store,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    hello: &Ceiling,
    raw_insert: &BTreeMap<usize, f64>,
    raw_get: &BTreeMap<usize, f64>,
    raw_pg: Option<&RawPg>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    let concurrencies: &[usize] = if sc.all_concurrencies {
        &CONCURRENCIES
    } else {
        &[32]
    };
    let mut closed32 = None;
    for &c in concurrencies {
        server.reset_peak();
        let ab = match sc.baseline {
            Baseline::Hello(ceiling) => Some(alternate_with_hello(
                sc, ceiling, opts, server, addr, key, ctx, hello, c,
            )?),
            Baseline::Scenario(name) => {
                let other = scenarios::named(name).context("no such baseline scenario")?;
                Some(alternate_with_scenario(
                    sc, other, opts, server, addr, key, ctx, c,
                )?)
            }
            _ => None,
        };
        let (stats, hello_ab) = if let Some(ab) = ab {
            (ab.median_round.clone(), Some(ab))
        } else {
            (
                load::block_on(async {
                    Ok(load::closed(
                        addr,
                        Some(key),
                        ctx.clone(),
                        sc,
                        c,
                        opts.warmup,
                        opts.duration,
                        Some(server.pid()),
                    )
                    .await)
                })?,
                None,
            )
        };
        eprintln!(
            "xtask bench: {sname} {} c={c}: {:.0}/s p50 {:.2} ms p99 {:.2} ms errors {}{}",
            sc.name,
            stats.rps(),
            stats.p50_ms,
            stats.p99_ms,
            stats.errors,
            stats
                .first_error
                .as_deref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        );
        let mut row = Row::new(sname, sc.name, c, "closed");
        row.per_request = sc.per_request;
        row.rss_peak_mib = Some(server.memory().1);
        row.baseline = match sc.baseline {
            Baseline::None => None,
            Baseline::RawInsert => raw_insert
                .get(&c)
                .map(|v| ("raw_insert_contact_event".to_owned(), *v)),
            Baseline::RawGet => raw_get.get(&c).map(|v| ("raw_get_by_pk".to_owned(), *v)),
            Baseline::Hello(_) | Baseline::Scenario(_) => hello_ab
                .as_ref()
                .map(|ab| (ab.ceiling.to_owned(), ab.median_base)),
        };
        if let Some(ab) = &hello_ab {
            row.note = Some(ab.note());
        }
        if c == 32 {
            closed32 = Some(stats.rps());
        }
        row.stats = Some(stats);
        for t in sc.targets {
            if let Target::Ratio {
                concurrency,
                postgres,
                sqlite,
            } = *t
            {
                if concurrency == c {
                    let min = if store == Store::Postgres {
                        postgres
                    } else {
                        sqlite
                    };
                    let ratio = row.ratio().unwrap_or(0.0);
                    row.check(format!("ratio ≥ {:.0} %", min * 100.0), ratio >= min);
                }
            }
        }
        if c == 128 {
            let peak = row.rss_peak_mib.unwrap_or(0.0);
            row.check(
                format!("peak RSS ≤ {LOADED_RSS_MIB} MiB"),
                peak <= LOADED_RSS_MIB,
            );
        }
        if row.stats.as_ref().is_some_and(|s| s.errors > 0) {
            row.note = row.stats.as_ref().and_then(|s| s.first_error.clone());
        }
        rows.push(row);
    }
    if sc.open_loop {
        let rate = closed32.unwrap_or(100.0) * OPEN_LOOP_LOAD;
        server.reset_peak();
        let stats = load::block_on(async {
            Ok(load::open(
                addr,
                Some(key),
                ctx.clone(),
                sc,
                OPEN_LOOP_CONNECTIONS,
                rate,
                opts.warmup,
                opts.duration,
            )
            .await)
        })?;
        eprintln!(
            "xtask bench: {sname} {} open-loop {rate:.0}/s: p50 {:.2} ms p99 {:.2} ms",
            sc.name, stats.p50_ms, stats.p99_ms
        );
        let mut row = Row::new(
            sname,
            sc.name,
            OPEN_LOOP_CONNECTIONS,
            &format!("open@{rate:.0}/s"),
        );
        row.rss_peak_mib = Some(server.memory().1);
        let (p50, p99) = (stats.p50_ms, stats.p99_ms);
        row.stats = Some(stats);
        // The database's own tail at the same offered load, with the server idle: whether a
        // tail figure is the API's or the machine's (docs/performance.md).
        let raw_script = match (sc.baseline, raw_pg) {
            (Baseline::RawInsert, Some(pg)) => {
                Some(("raw_insert_contact_event", raw::pg_insert_script(), pg))
            }
            (Baseline::RawGet, Some(pg)) => {
                Some(("raw_get_by_pk", raw::pg_get_script(pg.rows), pg))
            }
            _ => None,
        };
        if let Some((name, script, pg)) = raw_script {
            let secs = opts.duration.as_secs().max(1);
            let raw = raw::pgbench(
                pg.url,
                pg.dir,
                &format!("{name}-open"),
                &script,
                OPEN_LOOP_CONNECTIONS.min(PG_MAX_CLIENTS),
                secs,
                Some(rate),
            )?;
            eprintln!(
                "xtask bench: {sname} {name} open-loop {rate:.0}/s: p50 {:.2} ms p99 {:.2} ms",
                raw.p50_ms, raw.p99_ms
            );
            row.note = Some(format!(
                "raw at the same rate: p50 {:.2} ms, p99 {:.2} ms",
                raw.p50_ms, raw.p99_ms
            ));
            let mut raw_row = Row::new(
                sname,
                name,
                OPEN_LOOP_CONNECTIONS,
                &format!("open@{rate:.0}/s"),
            );
            raw_row.stats = Some(raw);
            rows.push(raw_row);
        }
        for t in sc.targets {
            match *t {
                Target::PostgresOpenP99 { max_ms } if store == Store::Postgres => {
                    row.check(format!("p99 ≤ {max_ms} ms"), p99 <= max_ms)
                }
                Target::OpenLatency { p50_ms, p99_ms } => row.check(
                    format!("p50 ≤ {p50_ms} ms, p99 ≤ {p99_ms} ms"),
                    p50 <= p50_ms && p99 <= p99_ms,
                ),
                Target::OpenP99 { max_ms } => {
                    row.check(format!("p99 ≤ {max_ms} ms"), p99 <= max_ms)
                }
                _ => {}
            }
        }
        rows.push(row);
    }
    Ok(())
}

pub(crate) fn db_url(server_url: &str, db: &str) -> String {
    match server_url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{db}"),
        None => format!("{server_url}/{db}"),
    }
}
