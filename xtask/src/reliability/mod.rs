//! `cargo xtask reliability [--quick] [--store sqlite|postgres]`: the reliability suite of
//! docs/reliability.md against the real server on each store, printed as that document's table.
//! `--quick` (run by `cargo xtask test`) uses the debug build and smaller numbers, and checks
//! only that the server keeps answering; the full run holds the figures to their targets.
//!
//! Rows: the tenant matrix over REST, MCP and A2A (`tenants.rs`, `tenants_agents.rs`), abuse
//! (`abuse.rs`), SIGKILL under load (`crash.rs`), a Postgres restart (`pg_restart.rs`), SSRF
//! through a resolver stub (`ssrf.rs`), secrets (`secrets.rs`) and schemathesis
//! (`schemathesis.rs`); `--only <row>` runs one.

mod abuse;
mod client;
mod crash;
mod fakes;
mod pg_restart;
mod schemathesis;
mod secrets;
mod ssrf;
mod tenants;
mod tenants_agents;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub(crate) use crate::bench::Store;
use crate::bench::{db_url, procs, raw};

/// One line of the table: what was tried, what it came to, and whether that meets the target.
pub struct Row {
    pub store: Store,
    pub check: String,
    pub figures: String,
    pub target: String,
    pub passed: bool,
}

pub fn main(root: &Path, args: &[String]) -> Result<()> {
    let quick = args.iter().any(|a| a == "--quick");
    let stores = match args
        .iter()
        .position(|a| a == "--store")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
    {
        None => vec![Store::Sqlite, Store::Postgres],
        Some("sqlite") => vec![Store::Sqlite],
        Some("postgres") => vec![Store::Postgres],
        Some(other) => bail!("--store takes sqlite or postgres, not {other}"),
    };
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(String::as_str);
    const ROWS: [&str; 7] = [
        "tenants",
        "abuse",
        "crash",
        "pg-restart",
        "ssrf",
        "secrets",
        "schemathesis",
    ];
    if let Some(row) = only.filter(|r| !ROWS.contains(r)) {
        bail!("--only takes one of {}, not {row}", ROWS.join(", "));
    }
    let wants = |row: &str| only.is_none_or(|o| o == row);
    // Installed before any server starts, so that a missing Python fails fast.
    let schemathesis = if wants("schemathesis") {
        Some(schemathesis::install(root)?)
    } else {
        None
    };
    let bin = if quick {
        build_debug_server(root)?
    } else {
        procs::build_server(root)?
    };
    let open_files = raise_open_file_limit()?;
    let run_dir = std::env::temp_dir().join(format!("crm_reliability_{}", std::process::id()));
    std::fs::create_dir_all(&run_dir)?;
    let mut rows = Vec::new();
    for store in stores {
        let db = Database::fresh(root, store, &run_dir)?;
        let mut result = Ok(Vec::new());
        if wants("tenants") {
            result = tenants::run(&bin, store, &db.url, &run_dir, &[]);
        }
        if wants("abuse") {
            if let Ok(done) = &mut result {
                match abuse::run(&bin, store, &db.url, &run_dir, quick, open_files) {
                    Ok(rows) => done.extend(rows),
                    Err(e) => result = Err(e),
                }
            }
        }
        // The rows that start servers of their own, one after another.
        type RowFn<'a> = Box<dyn Fn() -> Result<Vec<Row>> + 'a>;
        let more: [(&str, RowFn); 4] = [
            (
                "crash",
                Box::new(|| crash::run(&bin, store, &db.url, &run_dir, quick)),
            ),
            (
                "pg-restart",
                Box::new(|| pg_restart::run(&bin, store, &run_dir, quick)),
            ),
            (
                "ssrf",
                Box::new(|| ssrf::run(&bin, store, &db.url, &run_dir)),
            ),
            (
                "secrets",
                Box::new(|| secrets::run(&bin, store, &db.url, &run_dir)),
            ),
        ];
        for (name, row) in more {
            if wants(name) {
                if let Ok(done) = &mut result {
                    let began = std::time::Instant::now();
                    let outcome = row();
                    eprintln!(
                        "xtask reliability: {} {name}: {:.1} s",
                        store.name(),
                        began.elapsed().as_secs_f64()
                    );
                    match outcome {
                        Ok(rows) => done.extend(rows),
                        Err(e) => result = Err(e.context(format!("the {name} row"))),
                    }
                }
            }
        }
        if let (Ok(done), Some(st)) = (&mut result, &schemathesis) {
            match st.run(root, &bin, store, &db.url, &run_dir, quick) {
                Ok(row) => done.push(row),
                Err(e) => result = Err(e),
            }
        }
        db.drop_it();
        rows.extend(result?);
    }
    print_table(&rows, quick);
    let _ = std::fs::remove_dir_all(&run_dir);
    let failed: Vec<&Row> = rows.iter().filter(|r| !r.passed).collect();
    if !failed.is_empty() {
        bail!(
            "reliability: {} of {} checks missed their target: {}",
            failed.len(),
            rows.len(),
            failed
                .iter()
                .map(|r| format!("{} {}", r.store.name(), r.check))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(())
}

fn build_debug_server(root: &Path) -> Result<PathBuf> {
    crate::run(crate::cargo().args(["build", "-p", "crm-server", "--bin", "crm-server"]))?;
    let bin = crate::target_dir(root).join("debug/crm-server");
    if !bin.exists() {
        bail!("{} is missing after the build", bin.display());
    }
    Ok(bin)
}

/// The attackers hold thousands of sockets: the soft open-file limit goes up to the hard one.
fn raise_open_file_limit() -> Result<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    )
    .context("raising the open-file limit")?;
    Ok(limit.maximum.unwrap_or(1 << 20))
}

/// A fresh database for one store's run.
struct Database {
    url: String,
    admin: Option<(String, String)>,
}

impl Database {
    fn fresh(root: &Path, store: Store, run_dir: &Path) -> Result<Database> {
        match store {
            Store::Sqlite => Ok(Database {
                url: format!("sqlite://{}", run_dir.join("reliability.db").display()),
                admin: None,
            }),
            Store::Postgres => {
                let pg = crate::postgres::find_or_start(root)?;
                let name = format!("crm_t_reliability_{}", std::process::id());
                raw::psql(&pg.url, &format!("DROP DATABASE IF EXISTS {name}"))?;
                raw::psql(&pg.url, &format!("CREATE DATABASE {name}"))?;
                Ok(Database {
                    url: db_url(&pg.url, &name),
                    admin: Some((pg.url.clone(), name)),
                })
            }
        }
    }

    fn drop_it(&self) {
        if let Some((admin, name)) = &self.admin {
            let _ = raw::psql(
                admin,
                &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            );
        }
    }
}

/// `crm-server workspace create` on `db_url`: its id and test key.
fn workspace(bin: &Path, db_url: &str) -> Result<procs::Workspace> {
    procs::migrate(bin, db_url)?;
    procs::create_workspace(bin, db_url)
}

fn print_table(rows: &[Row], quick: bool) {
    println!();
    println!(
        "reliability ({}): the table of docs/reliability.md",
        if quick { "quick" } else { "full" }
    );
    println!("| store | check | figures | target | |");
    println!("|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} |",
            r.store.name(),
            r.check,
            r.figures,
            r.target,
            if r.passed { "pass" } else { "FAIL" }
        );
    }
    println!();
}

/// Lines of a server log that say the process ran out of file descriptors.
fn out_of_files(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("Too many open files"))
        .count()
}
