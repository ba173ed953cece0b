//! `cargo xtask bench`'s flags.

use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::Store;

const USAGE: &str =
    "usage: cargo xtask bench [--quick | --long] [--store sqlite|postgres] [--only a,b,…] \
                     [--contacts N] [--seconds S] [--keep] (docs/performance.md)";

pub(super) struct Opts {
    pub(super) stores: Vec<Store>,
    pub(super) contacts: u64,
    pub(super) warmup: Duration,
    pub(super) duration: Duration,
    pub(super) mixed: Duration,
    pub(super) mixed_windows: u32,
    pub(super) quick: bool,
    pub(super) long: bool,
    pub(super) only: Option<String>,
    /// Keep the databases and logs (`--keep`), for a look afterwards.
    pub(super) keep: bool,
}

impl Opts {
    pub(super) fn parse(args: &[String]) -> Result<Opts> {
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

    pub(super) fn wants(&self, scenario: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|s| s == scenario))
    }
}
