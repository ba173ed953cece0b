//! The schemathesis row: the OpenAPI document against the server. schemathesis (pinned in
//! `tests/schemathesis/requirements.txt`, installed into `target/venv-schemathesis`) generates
//! requests from the document, valid and invalid, runs every check on the answers, then walks
//! the links between operations (stateful phase). Any failure fails the row: a schema-valid
//! request refused, a schema-invalid one accepted, an answer the document does not describe, a
//! 5xx. What the run may forgive, and why, is in `tests/schemathesis/` (schemathesis.toml and
//! hooks.py); its report is kept in `target/schemathesis/<store>.txt`.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, Result};

use super::{Row, Store};
use crate::bench::procs;

const REQUIREMENTS: &str = "tests/schemathesis/requirements.txt";
const CONFIG: &str = "tests/schemathesis/schemathesis.toml";

/// Cases per operation and phase, and the fewest cases a run must have made to count. The
/// coverage phase makes about 6,900 cases whatever the examples; each example per operation adds
/// about 93 more (100 made 15,519 on SQLite), so 160 clears 20,000 with room.
const QUICK: (u32, u64) = (8, 2_000);
const FULL: (u32, u64) = (160, 20_000);

pub struct Schemathesis {
    bin: PathBuf,
}

/// The virtualenv with schemathesis, made or updated.
pub fn install(root: &Path) -> Result<Schemathesis> {
    let python = crate::agents::venv_with(root, "venv-schemathesis", REQUIREMENTS)?;
    Ok(Schemathesis {
        bin: python.with_file_name("schemathesis"),
    })
}

impl Schemathesis {
    pub fn run(
        &self,
        root: &Path,
        server_bin: &Path,
        store: Store,
        db_url: &str,
        run_dir: &Path,
        quick: bool,
    ) -> Result<Row> {
        let ws = super::workspace(server_bin, db_url)?;
        let log = run_dir.join(format!("schemathesis-server-{}.log", store.name()));
        let server = procs::start_server_env(server_bin, db_url, &log, &[("CRM_LOG", "warn")])?;
        let base = format!("http://{}/v1", server.addr);
        let (examples, min_cases) = if quick { QUICK } else { FULL };
        let report_dir = crate::target_dir(root).join("schemathesis");
        std::fs::create_dir_all(&report_dir)?;
        let report = report_dir.join(format!("{}.txt", store.name()));
        let out = std::fs::File::create(&report)
            .with_context(|| format!("creating {}", report.display()))?;
        let status = Command::new(&self.bin)
            .current_dir(root.join("tests/schemathesis"))
            .arg("--config-file")
            .arg(root.join(CONFIG))
            .args(["run", &format!("{base}/openapi.json"), "--url", &base])
            .args(["-H", &format!("Authorization: Bearer {}", ws.test_key)])
            .args(["--checks", "all", "--max-examples", &examples.to_string()])
            // One worker: generation under two threads crashed inside CPython's compiler.
            .args(["--workers", "1", "--no-color"])
            .env("CRM_ST_URL", &base)
            .env("CRM_ST_KEY", &ws.test_key)
            // hooks.py lives in the source tree: no __pycache__ beside it.
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .status()
            .context("running schemathesis")?;
        drop(server);
        let text = std::fs::read_to_string(&report).unwrap_or_default();
        let summary = Summary::read(&text);
        let passed = status.success() && summary.cases >= min_cases;
        if !passed {
            eprintln!("{}", tail(&text, 60));
        }
        Ok(Row {
            store,
            check: "schemathesis: every check, stateful links".into(),
            figures: format!(
                "{} cases; failures: {}; forgiven as live state: {}; exit {}; report {}",
                summary.cases,
                summary.failures.as_deref().unwrap_or("none"),
                summary.filtered,
                status.code().map_or("signal".to_owned(), |c| c.to_string()),
                report.display(),
            ),
            target: format!("≥ {min_cases} cases, no failure"),
            passed,
        })
    }
}

/// What the run's summary says.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    cases: u64,
    filtered: u64,
    /// `ST202 Schema-valid request rejected: 3, …`
    failures: Option<String>,
}

impl Summary {
    fn read(text: &str) -> Summary {
        let mut s = Summary::default();
        let mut in_failures = false;
        let mut failures = Vec::new();
        for line in text.lines() {
            let t = line.trim();
            if t == "Failures:" {
                in_failures = true;
                continue;
            }
            if in_failures {
                match t.strip_prefix("❌ ") {
                    Some(f) => failures.push(f.to_owned()),
                    None if t.is_empty() => {}
                    None => in_failures = false,
                }
            }
            if let Some(n) = t
                .split(" generated")
                .next()
                .filter(|_| t.contains(" generated"))
            {
                s.cases = n.trim().parse().unwrap_or(s.cases);
            }
            if let Some(rest) = t.strip_prefix("Filtered: ") {
                s.filtered = rest
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
            }
        }
        s.failures = (!failures.is_empty()).then(|| failures.join(", "));
        s
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_summary() {
        let text = "Failures:\n  ❌ ST301 Deleted resource still available: 1\n  ❌ ST202 Schema-valid request rejected: 11\n\nFor more information\n\nFiltered: 317 (dropped by `filter_failure`)\n\nTest cases:\n  4549 generated, 12 found 12 unique failures, 106 skipped\n";
        assert_eq!(
            Summary::read(text),
            Summary {
                cases: 4549,
                filtered: 317,
                failures: Some(
                    "ST301 Deleted resource still available: 1, ST202 Schema-valid request rejected: 11"
                        .into()
                ),
            }
        );
    }
}
