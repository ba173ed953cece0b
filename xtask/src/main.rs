//! `cargo xtask <task>`: the project's automation.
//!
//! - `test`: every test of the workspace, on SQLite and Postgres. Postgres is found through
//!   `CRM_TEST_DATABASE_URL`, else the server on 127.0.0.1:5432 (user postgres), else a throwaway
//!   cluster started with `initdb`; if none can be had, it fails saying how to provide one. Then
//!   the agent suite (`tests/agents`): the official Python MCP and A2A clients against the server;
//!   then the console suite (`tests/console`): the web console in a headless Chromium; then
//!   `reliability --quick`.
//! - `agents`: the agent suite alone.
//! - `console`: the console suite alone: Debian's `chromium` and `chromium-driver` (installed with
//!   apt-get when missing), Selenium and pytest against the server on SQLite and on Postgres, with
//!   a workspace and an admin, a member and a viewer; the SQLite run writes `docs/console/*.png`.
//! - `tidy`: the architecture's rules alone (the tests in `tidy.rs`, which `test` runs too).
//! - `openapi`: writes `docs/openapi.json` from the operation catalog.
//! - `deny`: runs `cargo deny check` (when cargo-deny is installed); `.ci/run` installs it.
//! - `lint`: clippy on every target, warnings denied.
//! - `bench [--quick] [--long] [--store sqlite|postgres] [--only a,b] [--contacts N] [--seconds S]`:
//!   the release server against the database's own ceiling (docs/performance.md).
//! - `reliability [--quick] [--store sqlite|postgres]`: the server under abuse (docs/reliability.md).
//! - `schemathesis [--quick] [--store sqlite|postgres]`: the reliability suite's schemathesis row
//!   alone: the OpenAPI document against what the server accepts.

mod agents;
mod bench;
mod console;
mod postgres;
mod reliability;
mod tidy;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

/// The workspace. `cargo run` sets `CARGO_MANIFEST_DIR` for the process too, and that one wins
/// over the path compiled in: two checkouts sharing one `CARGO_TARGET_DIR` share one xtask
/// binary, built from whichever checkout built it last.
fn root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    manifest_dir
        .parent()
        .expect("xtask sits in the workspace")
        .to_path_buf()
}

/// Where cargo puts what it builds: `CARGO_TARGET_DIR`, else the workspace's `target`.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let status = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

pub(crate) fn has_command(name: &str, arg: &str) -> bool {
    Command::new(name)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn test(args: &[String]) -> Result<()> {
    let pg = postgres::find_or_start(&root())?;
    eprintln!("xtask: Postgres for tests at {}", pg.redacted_url());
    pg.drop_leftover_test_databases();
    let mut cmd = cargo();
    if has_command("cargo-nextest", "--version") {
        cmd.args(["nextest", "run", "--workspace", "--no-fail-fast"]);
    } else {
        cmd.args(["test", "--workspace", "--no-fail-fast"]);
    }
    cmd.args(args).env("CRM_TEST_DATABASE_URL", &pg.url);
    let rust = run(&mut cmd);
    // The agent suite, the console suite and the quick reliability run go on even when a Rust
    // test failed, so one run reports all four.
    let agents = agents::test(&root(), &pg);
    let console = console::test(&root(), &pg);
    let reliability = reliability::main(&root(), &["--quick".to_owned()]);
    pg.drop_leftover_test_databases();
    rust.and(agents).and(console).and(reliability)
}

fn agents_only() -> Result<()> {
    let pg = postgres::find_or_start(&root())?;
    agents::test(&root(), &pg)
}

fn console_only() -> Result<()> {
    let pg = postgres::find_or_start(&root())?;
    console::test(&root(), &pg)
}

fn openapi() -> Result<()> {
    let out = cargo()
        .args(["run", "--quiet", "-p", "crm-server", "--", "openapi"])
        .output()
        .context("running crm-server openapi")?;
    if !out.status.success() {
        bail!(
            "crm-server openapi failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = root().join("docs/openapi.json");
    std::fs::write(&path, out.stdout).with_context(|| format!("writing {}", path.display()))?;
    eprintln!("xtask: wrote {}", path.display());
    Ok(())
}

fn deny() -> Result<()> {
    if !has_command("cargo-deny", "--version") {
        bail!("cargo-deny is not installed: `cargo install --locked cargo-deny`, then run `cargo xtask deny` again");
    }
    run(cargo().args(["deny", "check"]))
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        Some("agents") => agents_only(),
        Some("console") => console_only(),
        Some("tidy") => run(cargo().args(["test", "-p", "xtask", "--", "tidy::"])),
        Some("openapi") => openapi(),
        Some("deny") => deny(),
        Some("lint") => run(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ])),
        Some("bench") => bench::main(&root(), &args[1..]),
        Some("reliability") => reliability::main(&root(), &args[1..]),
        Some("schemathesis") => reliability::main(
            &root(),
            &[
                &["--only".to_owned(), "schemathesis".to_owned()],
                &args[1..],
            ]
            .concat(),
        ),
        Some("bench-hello") => bench::hello_main(),
        _ => {
            eprintln!("usage: cargo xtask <test [cargo test/nextest args] | agents | console | tidy | openapi | deny | lint | bench [--quick] [--long] [--store sqlite|postgres] | reliability [--quick] [--store sqlite|postgres] [--only abuse|schemathesis] | schemathesis [--quick] [--store sqlite|postgres]>");
            std::process::exit(2);
        }
    }
}
