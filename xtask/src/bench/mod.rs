//! `cargo xtask bench [--quick] [--long] [--store sqlite|postgres]`: the release server against
//! the database's own ceiling, in one run (issue 8). See docs/performance.md.
//!
//! Per store: the raw baselines first (server not running), then the server on a fresh database,
//! its data set (API + bulk load), the search query plans, every scenario of
//! [`scenarios::SCENARIOS`] closed-loop at 8/32/128 connections (and open-loop at a fixed rate for
//! tail latency where the scenario asks), and a mixed run with the SQLite WAL sampled. The
//! hello-world ceiling runs once at the start for its own rows, and again just before and just
//! after each scenario compared with it. Prints a table and writes `target/bench/bench-<time>.json`
//! (and `latest.json`).

mod background;
mod data;
pub(crate) mod http;
pub(crate) mod load;
pub(crate) mod procs;
pub(crate) mod raw;
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

pub use procs::hello_main;
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

const USAGE: &str =
    "usage: cargo xtask bench [--quick | --long] [--store sqlite|postgres] [--only a,b,…] \
                     [--contacts N] [--seconds S] [--keep] (docs/performance.md)";

struct Opts {
    stores: Vec<Store>,
    contacts: u64,
    warmup: Duration,
    duration: Duration,
    mixed: Duration,
    mixed_windows: u32,
    quick: bool,
    long: bool,
    only: Option<String>,
    /// Keep the databases and logs (`--keep`), for a look afterwards.
    keep: bool,
}

impl Opts {
    fn parse(args: &[String]) -> Result<Opts> {
        // A mistyped flag must not start the full half-hour run it would otherwise fall back to.
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.as_str() {
                "--quick" | "--long" | "--keep" => {}
                "--store" | "--contacts" | "--seconds" | "--only" => {
                    rest.next()
                        .with_context(|| format!("{arg} takes a value\n{USAGE}"))?;
                }
                "--help" | "-h" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other}\n{USAGE}"),
            }
        }
        let quick = args.iter().any(|a| a == "--quick");
        let long = args.iter().any(|a| a == "--long");
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
        };
        let stores = match value("--store").as_deref() {
            None => vec![Store::Sqlite, Store::Postgres],
            Some("sqlite") => vec![Store::Sqlite],
            Some("postgres") => vec![Store::Postgres],
            Some(other) => bail!("--store takes sqlite or postgres, not {other}"),
        };
        let contacts = match value("--contacts") {
            Some(n) => n.parse().context("--contacts")?,
            None if quick => 50_000,
            None => 1_000_000,
        };
        let secs = |s: u64| Duration::from_secs(s);
        let duration = match value("--seconds") {
            Some(s) => secs(s.parse().context("--seconds")?),
            None if quick => secs(3),
            None => secs(10),
        };
        let (mixed, mixed_windows) = if long {
            (secs(600), 10)
        } else if quick {
            (secs(20), 4)
        } else {
            (secs(60), 6)
        };
        Ok(Opts {
            stores,
            contacts,
            warmup: if quick { secs(1) } else { secs(2) },
            duration,
            mixed,
            mixed_windows,
            quick,
            long,
            only: value("--only"),
            keep: args.iter().any(|a| a == "--keep"),
        })
    }

    fn wants(&self, scenario: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|s| s == scenario))
    }
}

/// One line of the result table.
#[derive(Debug, Clone)]
struct Row {
    store: &'static str,
    scenario: String,
    concurrency: usize,
    mode: String,
    stats: Option<load::Stats>,
    per_request: u32,
    rss_peak_mib: Option<f64>,
    baseline: Option<(String, f64)>,
    target: Option<String>,
    pass: Option<bool>,
    note: Option<String>,
}

impl Row {
    fn new(store: &'static str, scenario: &str, concurrency: usize, mode: &str) -> Row {
        Row {
            store,
            scenario: scenario.to_owned(),
            concurrency,
            mode: mode.to_owned(),
            stats: None,
            per_request: 1,
            rss_peak_mib: None,
            baseline: None,
            target: None,
            pass: None,
            note: None,
        }
    }

    fn ratio(&self) -> Option<f64> {
        let (_, base) = self.baseline.as_ref()?;
        Some(self.stats.as_ref()?.rps() / base)
    }

    fn json(&self) -> Value {
        json!({
            "store": self.store,
            "scenario": self.scenario,
            "concurrency": self.concurrency,
            "mode": self.mode,
            "stats": self.stats.as_ref().map(load::Stats::to_json),
            "records_per_request": self.per_request,
            "rss_peak_mib": self.rss_peak_mib,
            "baseline": self.baseline.as_ref().map(|(n, v)| json!({"name": n, "throughput_per_s": v})),
            "ratio": self.ratio(),
            "target": self.target,
            "pass": self.pass,
            "note": self.note,
        })
    }

    /// Adds a target and whether it holds (a later failing target turns the row to fail).
    fn check(&mut self, target: String, pass: bool) {
        self.target = Some(match self.target.take() {
            Some(t) => format!("{t}; {target}"),
            None => target,
        });
        self.pass = Some(self.pass.unwrap_or(true) && pass);
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
        "scenarios": scenarios::SCENARIOS.iter().map(|s| json!({"name": s.name, "description": s.description})).chain(background::DESCRIPTIONS.iter().map(|(n, d)| json!({"name": n, "description": d}))).collect::<Vec<_>>(),
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
        let ctx = Arc::new(load::block_on(data::load(
            &addr,
            &key,
            &ws.id,
            db,
            opts.contacts,
        ))?);
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
        let (stats, hello_ab) = if let Baseline::Hello(ceiling) = sc.baseline {
            let ab = alternate_with_hello(sc, ceiling, opts, server, addr, key, ctx, hello, c)?;
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
            Baseline::Hello(ceiling) => hello_ab
                .as_ref()
                .map(|ab| (ceiling.name.to_owned(), ab.median_base)),
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

/// Rounds of the A/B comparison with hello-world (docs/performance.md, "Ratio").
const HELLO_ROUNDS: usize = 5;

/// A round counts only if the hello-world rates just before and just after it differ by at most
/// this share of their mean: this VM's speed changes in steps (hello-world at 32 connections
/// jumped from 170,000 to 320,000/s between two rounds of one run), and a round that straddles
/// a step compares the scenario with a rate it did not run at.
const STEADY: f64 = 0.15;

/// A scenario compared with hello-world: the two alternated, each round's ratio taken against the
/// mean of the hello-world rates just before and just after it.
struct HelloAb {
    /// The round whose ratio is the median: the row's figures.
    median_round: load::Stats,
    /// The hello-world rate that round is compared with, so the row's ratio is the median.
    median_base: f64,
    ratios: Vec<f64>,
    /// Per round: whether the machine held its speed through it ([`STEADY`]).
    steady: Vec<bool>,
    hello: Vec<f64>,
    /// The hello-world scenario compared with.
    ceiling: &'static str,
}

impl HelloAb {
    fn note(&self) -> String {
        let pct: Vec<String> = self
            .ratios
            .iter()
            .zip(&self.steady)
            .map(|(r, s)| format!("{:.0}{}", r * 100.0, if *s { "" } else { "*" }))
            .collect();
        let hello: Vec<String> = self
            .hello
            .iter()
            .map(|h| format!("{:.0}", h / 1000.0))
            .collect();
        let unsteady = if self.steady.iter().all(|s| *s) {
            String::new()
        } else {
            " (* machine changed speed: not counted)".to_owned()
        };
        format!(
            "ratio per round {} %{unsteady}; {} {} k/s",
            pct.join(" / "),
            self.ceiling,
            hello.join(" / ")
        )
    }
}

/// On this shared machine hello-world's own rate moves by up to 25 % within a minute, and a
/// single before-and-after bracket left the ratio ±8 points from run to run. So hello-world and
/// the scenario alternate in [`HELLO_ROUNDS`] rounds (`duration` split among them; the first of
/// each with the full warm-up, the rest on warm servers with a short one), and the median
/// of the steady rounds (at least three; else of all) is the row's ratio. Every round's ratio is
/// in the row's note.
#[allow(clippy::too_many_arguments)]
fn alternate_with_hello(
    sc: &'static Scenario,
    ceiling: &'static Scenario,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    hello: &Ceiling,
    c: usize,
) -> Result<HelloAb> {
    let round = (opts.duration / 2).max(Duration::from_secs(1));
    let short_warmup = Duration::from_millis(300);
    let warmup = |i: usize| if i == 0 { opts.warmup } else { short_warmup };
    let hello_run =
        |i: usize| -> Result<f64> { Ok(hello.closed(ceiling, c, warmup(i), round)?.rps()) };
    let mut hello_rates = vec![hello_run(0)?];
    let mut rounds = Vec::with_capacity(HELLO_ROUNDS);
    for i in 0..HELLO_ROUNDS {
        let stats = load::block_on(async {
            Ok(load::closed(
                addr,
                Some(key),
                ctx.clone(),
                sc,
                c,
                warmup(i),
                round,
                Some(server.pid()),
            )
            .await)
        })?;
        hello_rates.push(hello_run(i + 1)?);
        let base = (hello_rates[i] + hello_rates[i + 1]) / 2.0;
        let steady = (hello_rates[i] - hello_rates[i + 1]).abs() <= STEADY * base;
        rounds.push((stats.rps() / base, base, stats, steady));
    }
    let ratios: Vec<f64> = rounds.iter().map(|r| r.0).collect();
    let steady: Vec<bool> = rounds.iter().map(|r| r.3).collect();
    if steady.iter().filter(|s| **s).count() >= 3 {
        rounds.retain(|r| r.3);
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The lower of the two middle rounds when an even number are steady: never the kinder one.
    let (_, median_base, median_round, _) = rounds.swap_remove((rounds.len() - 1) / 2);
    Ok(HelloAb {
        median_round,
        median_base,
        ratios,
        steady,
        hello: hello_rates,
        ceiling: ceiling.name,
    })
}

/// The mixed run: closed loop at 32 connections (60 % get, 20 % create, 10 % deal stage, 10 %
/// search) in consecutive windows, with the SQLite WAL size sampled throughout.
#[allow(clippy::too_many_arguments)]
fn mixed(
    store: Store,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    sqlite: Option<&Path>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    let wal_path = sqlite.map(|p| PathBuf::from(format!("{}-wal", p.display())));
    let wal_max = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = wal_path.clone().map(|wal| {
        let (wal_max, stop) = (wal_max.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let size = std::fs::metadata(&wal).map_or(0, |m| m.len());
                wal_max.fetch_max(size, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    });
    server.reset_peak();
    let window = opts.mixed / opts.mixed_windows;
    let mut windows = Vec::new();
    for i in 0..opts.mixed_windows {
        let stats = load::block_on(async {
            Ok(load::closed(
                addr,
                Some(key),
                ctx.clone(),
                &scenarios::MIXED,
                32,
                Duration::ZERO,
                window,
                None,
            )
            .await)
        })?;
        eprintln!(
            "xtask bench: {sname} mixed window {i}: {:.0}/s p99 {:.2} ms errors {}",
            stats.rps(),
            stats.p99_ms,
            stats.errors
        );
        windows.push(stats);
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(s) = sampler {
        let _ = s.join();
    }
    let (first, last) = (
        windows.first().map_or(0.0, load::Stats::rps),
        windows.last().map_or(0.0, load::Stats::rps),
    );
    let requests: u64 = windows.iter().map(|s| s.requests).sum();
    let errors: u64 = windows.iter().map(|s| s.errors).sum();
    let p99 = windows.iter().map(|s| s.p99_ms).fold(0.0, f64::max);
    let p50 = windows.iter().map(|s| s.p50_ms).sum::<f64>() / windows.len().max(1) as f64;
    let mut row = Row::new(
        sname,
        "mixed",
        32,
        &format!("closed {}×{}s", opts.mixed_windows, window.as_secs()),
    );
    row.stats = Some(load::Stats {
        requests,
        errors,
        secs: opts.mixed.as_secs_f64(),
        p50_ms: p50,
        p99_ms: p99,
        first_error: windows.iter().find_map(|s| s.first_error.clone()),
        ..Default::default()
    });
    row.rss_peak_mib = Some(server.memory().1);
    let ratio = if first > 0.0 { last / first } else { 0.0 };
    let mut note = format!("last window ÷ first = {}", percent(ratio));
    if wal_path.is_some() {
        let wal_mib = wal_max.load(Ordering::Relaxed) as f64 / 1048576.0;
        note.push_str(&format!("; WAL max {wal_mib:.1} MiB"));
        row.check(format!("WAL ≤ {WAL_MAX_MIB} MiB"), wal_mib <= WAL_MAX_MIB);
        if opts.long {
            row.check("last minute ≥ 90 % of first".to_owned(), ratio >= 0.9);
        }
    }
    row.note = Some(note);
    rows.push(row);
    Ok(())
}

/// `webhook_fanout` (see background.rs): 5 test-mode webhooks, contacts created at a fixed rate,
/// deliveries per second at the local receiver and event-to-delivery latency.
#[allow(clippy::too_many_arguments)]
fn webhook_fanout(
    store: Store,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    server.reset_peak();
    let f = load::block_on(background::webhook_fanout(
        addr,
        key,
        ctx.clone(),
        opts.duration,
    ))?;
    eprintln!(
        "xtask bench: {sname} webhook_fanout: {} contacts, {} of {} deliveries ({} duplicates), {:.0}/s, p50 {:.2} ms p99 {:.2} ms",
        f.contacts,
        f.deliveries,
        f.expected,
        f.duplicates,
        f.stats.rps(),
        f.stats.p50_ms,
        f.stats.p99_ms
    );
    let mode = format!(
        "{}×{:.0}/s",
        background::WEBHOOKS,
        background::CONTACTS_PER_SEC
    );
    let mut row = Row::new(sname, "webhook_fanout", background::WEBHOOKS, &mode);
    row.rss_peak_mib = Some(server.memory().1);
    let (rps, p99) = (f.stats.rps(), f.stats.p99_ms);
    let mut note = format!(
        "{} contacts → {} of {} deliveries, {} duplicates ({} of older events left out); latency = event created_at → receipt",
        f.contacts, f.deliveries, f.expected, f.duplicates, f.older
    );
    if let Some(e) = &f.stats.first_error {
        note.push_str(&format!("; {e}"));
    }
    row.stats = Some(f.stats);
    row.check(
        format!(
            "≥ {} deliveries/s, p99 ≤ {} ms",
            background::FANOUT_MIN_PER_SEC,
            background::FANOUT_MAX_P99_MS
        ),
        rps >= background::FANOUT_MIN_PER_SEC && p99 <= background::FANOUT_MAX_P99_MS,
    );
    row.note = Some(note);
    rows.push(row);
    Ok(())
}

/// `sequence_steps` (see background.rs): 10,000 due steps sent by one test-mode server.
fn sequence_steps(
    store: Store,
    bin: &Path,
    db_url: &str,
    run_dir: &Path,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    let r = background::sequence_steps(bin, db_url, run_dir, sname)?;
    let rate = r.steps as f64 / r.secs;
    let span_rate = if r.span_secs > 0.0 {
        r.steps as f64 / r.span_secs
    } else {
        0.0
    };
    eprintln!(
        "xtask bench: {sname} sequence_steps: {} steps in {:.2} s (server start included): {rate:.0}/s; first to last email {:.2} s: {span_rate:.0}/s",
        r.steps, r.secs, r.span_secs
    );
    let mut row = Row::new(sname, "sequence_steps", 0, "10,000 due");
    row.stats = Some(load::Stats {
        requests: r.steps as u64,
        secs: r.secs,
        ..Default::default()
    });
    row.check(
        format!("≥ {} steps/s", background::SEQUENCE_MIN_PER_SEC),
        rate >= background::SEQUENCE_MIN_PER_SEC,
    );
    row.note = Some(format!(
        "steps ÷ seconds from the sending server's start until the database holds them all (then listed through GET /v1/emails, untimed; no latency measured); first to last email created_at: {:.2} s = {span_rate:.0}/s",
        r.span_secs
    ));
    rows.push(row);
    Ok(())
}

/// A rare needle (one contact in 5,000: the trigram index) and two common ones (the newest-first
/// walk that stops at the limit).
const SEARCH_NEEDLES: [&str; 3] = ["yxq", "kow", "ann"];

fn explain_postgres(url: &str, workspace: &str) -> Result<Value> {
    let mut out = serde_json::Map::new();
    for needle in SEARCH_NEEDLES {
        let sql = format!(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT * FROM contacts WHERE workspace_id = '{workspace}' AND mode = 'test' \
             AND deleted_at IS NULL AND search_text LIKE lower('%{needle}%') ESCAPE '\\' ORDER BY id DESC LIMIT 11"
        );
        let plan = raw::psql_out(url, &sql)?;
        println!(
            "\nPostgres search plan for {needle:?} (the store's contact search query):\n{plan}"
        );
        out.insert(needle.to_owned(), Value::String(plan));
    }
    for value in FILTER_VALUES {
        // The store's statement is prepared and kept, so after five runs Postgres may switch to
        // a generic plan that does not know the value: show that one, forced.
        let select = format!("{} LIMIT 26", filter_sql(&format!("'\"{value}\"'::jsonb")));
        let sql = format!(
            "SET plan_cache_mode = force_generic_plan; PREPARE f(jsonb) AS {} LIMIT 26;
             EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE f('\"{value}\"')",
            filter_sql("$1").replace("WORKSPACE", workspace)
        );
        let custom = raw::psql_out(
            url,
            &format!(
                "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) {}",
                select.replace("WORKSPACE", workspace)
            ),
        )?;
        let generic = raw::psql_out(url, &sql)?;
        let plan = format!("{custom}\ngeneric plan:\n{generic}");
        println!("\nPostgres custom-field filter plan for region={value:?} (the store's list query):\n{plan}");
        out.insert(format!("custom_fields.region={value}"), Value::String(plan));
    }
    Ok(Value::Object(out))
}

/// A common region (1 contact in 5) and the rare one (1 in 5,000).
const FILTER_VALUES: [&str; 2] = ["emea", scenarios::RARE_REGION];

/// The store's contact list query for `custom_fields.region = <value>` (value as SQL), first page
/// without its LIMIT; `WORKSPACE` stands for the workspace id.
fn filter_sql(value: &str) -> String {
    format!(
        "SELECT c.id, c.first_name, c.custom_fields FROM contact_field_values v JOIN contacts c \
         ON c.workspace_id = v.workspace_id AND c.mode = v.mode AND c.id = v.contact_id \
         WHERE v.workspace_id = 'WORKSPACE' AND v.mode = 'test' AND v.field_key = 'region' AND v.value = {value} \
         AND deleted_at IS NULL ORDER BY v.contact_id DESC"
    )
}

async fn explain_sqlite(path: &Path, workspace: &str) -> Result<Value> {
    use sqlx::{sqlite::SqliteConnectOptions, ConnectOptions};
    let mut conn = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
        .read_only(true)
        .connect()
        .await?;
    let mut out = serde_json::Map::new();
    // The store's three steps for the contact section of `/search?limit=10` (crm-store-sqlite's
    // `search_page`): the window of the newest 1,000 rows, the trigram matches older than it
    // (capped at 5,000), and the one statement for a needle that reaches the cap.
    let tenant = format!("workspace_id = '{workspace}' AND mode = 'test'");
    let edge =
        format!("(SELECT id FROM contacts WHERE {tenant} ORDER BY id DESC LIMIT 1 OFFSET 999)");
    for needle in SEARCH_NEEDLES {
        let steps = [
            format!(
                "SELECT * FROM contacts WHERE {tenant} AND deleted_at IS NULL AND id >= coalesce({edge}, '') \
                 AND replace(replace(search_text, '\u{212A}', 'k'), '\u{17F}', 's') LIKE '%{needle}%' ESCAPE '\\' ORDER BY id DESC LIMIT 11"
            ),
            format!(
                "WITH hits AS MATERIALIZED (SELECT * FROM (SELECT rowid AS hit FROM contacts_fts WHERE contacts_fts MATCH '\"{needle}\"') \
                 CROSS JOIN contacts ON contacts.rowid = hit WHERE {tenant} AND deleted_at IS NULL AND id < {edge} AND {edge} IS NOT NULL LIMIT 5000) \
                 SELECT *, (SELECT count(*) FROM hits) AS found FROM hits ORDER BY id DESC LIMIT 11"
            ),
            format!(
                "SELECT * FROM contacts WHERE {tenant} AND deleted_at IS NULL AND id < {edge} \
                 AND rowid IN (SELECT rowid FROM contacts_fts WHERE contacts_fts MATCH '\"{needle}\"') ORDER BY id DESC LIMIT 11"
            ),
        ];
        let mut text = String::new();
        for (i, sql) in steps.iter().enumerate() {
            text.push_str(&format!(
                "step {}:\n{}\n",
                i + 1,
                sqlite_plan(&mut conn, sql).await?
            ));
        }
        println!("\nSQLite search plan for {needle:?} (the store's contact search, each step run alone):\n{text}");
        out.insert(needle.to_owned(), Value::String(text));
    }
    for value in FILTER_VALUES {
        let sql = format!(
            "{} LIMIT 26",
            filter_sql(&format!("'{value}'")).replace("WORKSPACE", workspace)
        );
        let text = sqlite_plan(&mut conn, &sql).await?;
        println!("\nSQLite custom-field filter plan for region={value:?} (the store's list query):\n{text}");
        out.insert(format!("custom_fields.region={value}"), Value::String(text));
    }
    Ok(Value::Object(out))
}

/// `sql`'s `EXPLAIN QUERY PLAN`, then how many rows it returned and how long it took.
async fn sqlite_plan(conn: &mut sqlx::SqliteConnection, sql: &str) -> Result<String> {
    use sqlx::Row as _;
    let plan = sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
        .fetch_all(&mut *conn)
        .await?;
    let lines: Vec<String> = plan
        .iter()
        .map(|r| r.try_get::<String, _>("detail").unwrap_or_default())
        .collect();
    let t0 = std::time::Instant::now();
    let n = sqlx::query(sql).fetch_all(&mut *conn).await?.len();
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    Ok(format!("{}\n({n} rows in {ms:.1} ms)", lines.join("\n")))
}

pub(crate) fn db_url(server_url: &str, db: &str) -> String {
    match server_url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{db}"),
        None => format!("{server_url}/{db}"),
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<9} {:<26} {:>4} {:<13} {:>10} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10} {:>7}  target",
        "store",
        "scenario",
        "conc",
        "mode",
        "thr/s",
        "p50 ms",
        "p99 ms",
        "RSS MiB",
        "srv µs",
        "cli µs",
        "base/s",
        "ratio"
    );
    for r in rows {
        let (thr, p50, p99) = match &r.stats {
            // No latency measured (sequence_steps): both quantiles are 0.
            Some(s) if s.p50_ms == 0.0 && s.p99_ms == 0.0 => {
                (format!("{:.0}", s.rps()), "-".into(), "-".into())
            }
            Some(s) => (
                format!("{:.0}", s.rps()),
                format!("{:.2}", s.p50_ms),
                format!("{:.2}", s.p99_ms),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let base = r
            .baseline
            .as_ref()
            .map_or("-".into(), |(_, v)| format!("{v:.0}"));
        let ratio = r.ratio().map_or("-".into(), percent);
        let rss = r.rss_peak_mib.map_or("-".into(), |v| format!("{v:.1}"));
        let cpu = |us: Option<f64>| us.map_or("-".into(), |v| format!("{v:.1}"));
        let (srv, cli) = (
            cpu(r.stats.as_ref().and_then(|s| s.server_cpu_us)),
            cpu(r.stats.as_ref().and_then(|s| s.client_cpu_us)),
        );
        let target = match (&r.target, r.pass) {
            (Some(t), Some(true)) => format!("PASS {t}"),
            (Some(t), Some(false)) => format!("FAIL {t}"),
            (None, Some(false)) => "FAIL".into(),
            _ => String::new(),
        };
        let note = r
            .note
            .as_deref()
            .map(|n| format!("  [{}]", n.chars().take(160).collect::<String>()))
            .unwrap_or_default();
        println!(
            "{:<9} {:<26} {:>4} {:<13} {:>10} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10} {:>7}  {target}{note}",
            r.store,
            r.scenario,
            if r.concurrency == 0 { "-".into() } else { r.concurrency.to_string() },
            r.mode,
            thr,
            p50,
            p99,
            rss,
            srv,
            cli,
            base,
            ratio
        );
    }
}

fn utc_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned());
    let mem = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let total = mem
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .map(|m| m.trim().to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_model": model,
        "memory": total,
        "kernel": kernel.trim(),
        "loadavg_at_end": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
    })
}

fn git_commit(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A ratio as a percentage to a tenth: rounded to a whole number, 79.8 % printed as a failing
/// "80 %" beside a target of 80 %.
fn percent(ratio: f64) -> String {
    format!("{:.1} %", ratio * 100.0)
}
