//! The processes under test: the release `crm-server` and the hello-world ceiling, started on a
//! free port, with their memory read from `/proc/<pid>/status`.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{bail, Context, Result};

pub struct Proc {
    child: Child,
    pub addr: String,
    /// Killed and reaped already: nothing left to stop.
    killed: bool,
}

impl Proc {
    /// Starts `cmd`, whose stdout announces `listening on http://<addr>`; stderr goes to `log`.
    pub fn start(mut cmd: Command, log: &Path) -> Result<Proc> {
        let err =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdout(Stdio::piped()).stderr(err).stdin(Stdio::null());
        let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
        let stdout = child.stdout.take().context("stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let addr = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(a) = line.strip_prefix("listening on http://") {
                        break a.trim().to_owned();
                    }
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("{cmd:?} exited before listening; see {}", log.display());
                }
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Ok(Proc {
            child,
            addr,
            killed: false,
        })
    }

    /// SIGKILL, as a crash: the process dies at once, whatever it was doing.
    pub fn sigkill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.killed = true;
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `(VmRSS, VmHWM)` in MiB.
    pub fn memory(&self) -> (f64, f64) {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(0.0, |kb| kb / 1024.0)
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// Resets the peak (VmHWM) to the current RSS, so the next peak is the next scenario's.
    pub fn reset_peak(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.killed {
            return;
        }
        // Our own child, by its pid: SIGTERM for a clean shutdown, then wait a little.
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Builds the release server and returns its path; `CRM_BENCH_SERVER` names a binary to use
/// instead (another build, measured by the same load generator: a before-and-after comparison).
pub fn build_server(root: &Path) -> Result<PathBuf> {
    if let Ok(given) = std::env::var("CRM_BENCH_SERVER") {
        let bin = PathBuf::from(given);
        if !bin.exists() {
            bail!("CRM_BENCH_SERVER: {} does not exist", bin.display());
        }
        return Ok(bin);
    }
    crate::run(crate::cargo().args([
        "build",
        "--release",
        "-p",
        "crm-server",
        "--bin",
        "crm-server",
    ]))?;
    let bin = crate::target_dir(root).join("release/crm-server");
    if !bin.exists() {
        bail!("{} is missing after the build", bin.display());
    }
    Ok(bin)
}

pub struct Workspace {
    pub id: String,
    pub test_key: String,
    pub live_key: String,
}

/// `crm-server workspace create --plan scale` with a rate limit nothing reaches; the test key
/// is unmetered.
pub fn create_workspace(bin: &Path, db_url: &str) -> Result<Workspace> {
    let out = Command::new(bin)
        .args([
            "workspace",
            "create",
            "--name",
            "bench",
            "--plan",
            "scale",
            "--rate-limit-per-minute",
            "1000000000",
            "--json",
            "--database-url",
            db_url,
        ])
        .output()
        .context("crm-server workspace create")?;
    if !out.status.success() {
        bail!(
            "crm-server workspace create failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(line.trim()).context("workspace create --json output")?;
    Ok(Workspace {
        id: v["workspace_id"]
            .as_str()
            .context("workspace_id")?
            .to_owned(),
        test_key: v["test_key"].as_str().context("test_key")?.to_owned(),
        live_key: v["live_key"].as_str().context("live_key")?.to_owned(),
    })
}

/// The key benchmark servers encrypt stored secrets with (Postgres has no key file).
pub const SECRET_KEYS: &str = "YmVuY2gtc2VjcmV0LWtleS1ub3QtZm9yLXVzZS0zMmI=";

pub fn migrate(bin: &Path, db_url: &str) -> Result<()> {
    crate::run(
        Command::new(bin)
            .args(["migrate", "--database-url", db_url])
            .env("CRM_SECRET_KEYS", SECRET_KEYS)
            .stdout(Stdio::null()),
    )
}

/// `crm-server serve` on a free port, with extra environment (pool size, the sequence
/// scheduler's settings).
pub fn start_server_env(
    bin: &Path,
    db_url: &str,
    log: &Path,
    env: &[(&str, &str)],
) -> Result<Proc> {
    let mut cmd = Command::new(bin);
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--database-url", db_url]);
    cmd.env("CRM_SECRET_KEYS", SECRET_KEYS);
    cmd.envs(env.iter().copied());
    Proc::start(cmd, log)
}

/// The hello-world ceiling: this same xtask binary, `bench-hello`.
pub fn start_hello(log: &Path) -> Result<Proc> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("bench-hello");
    Proc::start(cmd, log)
}

/// The size of `GET /v1/automations-capabilities`' body.
pub const BODY_BYTES: usize = 4051;

/// `cargo xtask bench-hello`: an axum hello-world on a free port, on the same tokio runtime
/// shape as crm-server (`#[tokio::main]`, one worker per core).
pub fn hello_main() -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        // `/body`: the same, answering the size of `middleware_only`'s body (automations-capabilities),
        // to show what the body alone costs against `/` (docs/performance.md).
        static BODY: [u8; BODY_BYTES] = [b' '; BODY_BYTES];
        let body = || async {
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                &BODY[..],
            )
        };
        let app = axum::Router::new()
            .route("/", axum::routing::get(|| async { "Hello, World!" }))
            .route("/body", axum::routing::get(body));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}", listener.local_addr()?);
        axum::serve(listener, app).await?;
        Ok(())
    })
}
