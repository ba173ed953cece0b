//! The agent endpoints driven by the official Python clients (`tests/agents`): the MCP SDK over
//! Streamable HTTP and the A2A SDK over JSON-RPC. A virtualenv at `target/venv` holds the pinned
//! `tests/agents/requirements.txt`; `crm-server` is started on a fresh SQLite database and on a
//! fresh Postgres database, each with a new workspace, and pytest runs once against each.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use anyhow::{bail, Context, Result};

use crate::{postgres::Postgres, run, target_dir};

const REQUIREMENTS: &str = "tests/agents/requirements.txt";

pub fn test(root: &Path, pg: &Postgres) -> Result<()> {
    let python = venv(root)?;
    let bin = server_binary(root)?;
    let mut failed = Vec::new();
    for backend in ["sqlite", "postgres"] {
        eprintln!(
            "xtask: agents: the official MCP and A2A clients against crm-server on {backend}"
        );
        let database = Database::fresh(root, "agents", backend, pg)?;
        let passed = suite(root, &python, &bin, backend, &database.url)?;
        drop(database);
        if !passed {
            failed.push(backend);
        }
    }
    if !failed.is_empty() {
        bail!(
            "the agent suite (tests/agents) failed on {}",
            failed.join(" and ")
        );
    }
    Ok(())
}

/// Builds `crm-server` (debug) and answers the path of its binary.
pub(crate) fn server_binary(root: &Path) -> Result<PathBuf> {
    run(crate::cargo().args([
        "build",
        "--quiet",
        "-p",
        "crm-server",
        "--bin",
        "crm-server",
    ]))?;
    Ok(target_dir(root).join("debug").join("crm-server"))
}

/// `target/venv/bin/python`, with the requirements installed; reinstalled when they change.
fn venv(root: &Path) -> Result<PathBuf> {
    venv_with(root, "venv", REQUIREMENTS)
}

/// `target/<name>/bin/python`, with the pinned `requirements` (relative to the root) installed;
/// reinstalled when they change.
pub(crate) fn venv_with(root: &Path, name: &str, requirements: &str) -> Result<PathBuf> {
    let dir = target_dir(root).join(name);
    let python = dir.join("bin").join("python");
    if !python.exists() {
        run(Command::new("python3").args(["-m", "venv"]).arg(&dir)).context(
            "creating the virtualenv (python3 -m venv; on Debian: apt-get install python3-venv)",
        )?;
    }
    let wanted = std::fs::read_to_string(root.join(requirements))
        .with_context(|| format!("reading {requirements}"))?;
    let marker = dir.join("crm-requirements.txt");
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(wanted.as_str()) {
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(root.join(requirements)))
        .with_context(|| format!("installing {requirements}"))?;
        std::fs::write(&marker, &wanted)?;
    }
    Ok(python)
}

/// A database that exists for one suite run; removed (file) or dropped (Postgres) when dropped.
pub(crate) struct Database {
    pub(crate) url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    File(PathBuf),
    Drop { admin_url: String, name: String },
}

impl Database {
    /// A new empty database for the suite `suite` (a name part: `crm_e2e_<suite>_<pid>`) on
    /// `backend` (`sqlite`: a file under the target directory; `postgres`: a database on `pg`).
    pub(crate) fn fresh(
        root: &Path,
        suite: &str,
        backend: &str,
        pg: &Postgres,
    ) -> Result<Database> {
        let name = format!("crm_e2e_{suite}_{}", std::process::id());
        if backend == "sqlite" {
            let path = target_dir(root).join(format!("{name}.db"));
            for suffix in ["", "-shm", "-wal"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
            }
            return Ok(Database {
                url: format!("sqlite://{}?mode=rwc", path.display()),
                cleanup: Cleanup::File(path),
            });
        }
        let admin_url = pg.url.clone();
        let sql = |statement: String| {
            Command::new("psql")
                .args([admin_url.as_str(), "-qc", &statement])
                .output()
        };
        let _ = sql(format!("DROP DATABASE IF EXISTS \"{name}\""));
        let out = sql(format!("CREATE DATABASE \"{name}\"")).with_context(|| {
            format!("running psql (the {suite} suite creates its Postgres database with it)")
        })?;
        if !out.status.success() {
            bail!(
                "creating database {name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let base = admin_url
            .split('?')
            .next()
            .and_then(|u| u.rsplit_once('/'))
            .map(|(b, _)| b.to_owned())
            .unwrap_or_default();
        Ok(Database {
            url: format!("{base}/{name}"),
            cleanup: Cleanup::Drop { admin_url, name },
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        match &self.cleanup {
            Cleanup::File(path) => {
                for suffix in ["", "-shm", "-wal"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::Drop { admin_url, name } => {
                let _ = Command::new("psql")
                    .args([
                        admin_url.as_str(),
                        "-qc",
                        &format!("DROP DATABASE IF EXISTS \"{name}\""),
                    ])
                    .output();
            }
        }
    }
}

/// A running `crm-server serve`, stopped when dropped.
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:<port>`, as the server printed it.
    pub(crate) base_url: String,
}

impl Server {
    /// Starts `bin serve` on a free local port over `database_url` and waits until it listens.
    pub(crate) fn start(bin: &Path, database_url: &str) -> Result<Server> {
        let mut child = Command::new(bin)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                database_url,
            ])
            // rmcp logs every refused call at warn; the suite makes such calls on purpose.
            .env("CRM_LOG", "warn,rmcp=error")
            // Postgres has no key file to fall back on.
            .env(
                "CRM_SECRET_KEYS",
                "YWdlbnQtdGVzdHMtc2VjcmV0LWtleS1ub3QtNC11c2U=",
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let Some(stdout) = child.stdout.take() else {
            bail!("no stdout from crm-server")
        };
        let mut lines = BufReader::new(stdout).lines();
        let base_url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(addr) = line.strip_prefix("listening on ") {
                        break addr.trim().to_owned();
                    }
                }
                _ => {
                    let _ = child.kill();
                    bail!("crm-server exited before listening");
                }
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Ok(Server { child, base_url })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `crm-server workspace create --json` on `database_url`: the JSON line it printed
/// (`workspace_id`, `test_key`, `live_key`).
pub(crate) fn create_workspace(
    bin: &Path,
    name: &str,
    database_url: &str,
) -> Result<serde_json::Value> {
    let out = Command::new(bin)
        .args([
            "workspace",
            "create",
            "--name",
            name,
            "--json",
            "--database-url",
            database_url,
        ])
        .env("CRM_LOG", "warn")
        .output()
        .context("running crm-server workspace create")?;
    if !out.status.success() {
        bail!(
            "crm-server workspace create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the JSON line of workspace create")
}

/// Creates a workspace, starts the server and runs pytest; whether every test passed.
fn suite(
    root: &Path,
    python: &Path,
    bin: &Path,
    backend: &str,
    database_url: &str,
) -> Result<bool> {
    let created = create_workspace(bin, "agents", database_url)?;
    let key = |name: &str| {
        created[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no `{name}` in {created}"))
    };
    let (test_key, live_key) = (key("test_key")?, key("live_key")?);
    let server = Server::start(bin, database_url)?;
    let status = Command::new(python)
        .args([
            "-m",
            "pytest",
            "tests/agents",
            "-p",
            "no:cacheprovider",
            "-rs",
        ])
        .current_dir(root)
        .env("CRM_BASE_URL", &server.base_url)
        .env("CRM_TEST_KEY", test_key)
        .env("CRM_LIVE_KEY", live_key)
        .env("CRM_BACKEND", backend)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .status()
        .context("running pytest")?;
    drop(server);
    Ok(status.success())
}
