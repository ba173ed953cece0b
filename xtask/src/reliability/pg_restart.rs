//! The Postgres restart row: a throwaway cluster of this row's own (`initdb`, `pg_ctl`) under a
//! running server and a load of creates with `Idempotency-Key`, each retried until acknowledged.
//! The cluster is stopped mid-load and started again. Meanwhile every answer must be 503
//! `service_unavailable` with `Retry-After` (an unknown key too: authentication needs the
//! database); afterwards the same server process answers again, and every acknowledged create is
//! there, once. SQLite has no server to restart: its row says n/a.

use std::{
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde_json::json;

use super::{client::request, Row, Store};
use crate::bench::{load::block_on, procs};

/// How long after the restart a claim caught by the outage may still answer
/// `idempotency_in_progress`: its release is retried every second once the database is back.
const IN_PROGRESS_LIMIT: Duration = Duration::from_secs(3);

const TARGET: &str = "503 service_unavailable + Retry-After while down, answers again without a restart (a claim caught by the outage in progress for at most 3 s after it), 0 acknowledged lost";

pub fn run(bin: &Path, store: Store, run_dir: &Path, quick: bool) -> Result<Vec<Row>> {
    let check = "Postgres restart mid-load".to_owned();
    if store != Store::Postgres {
        return Ok(vec![Row {
            store,
            check,
            figures: "n/a: SQLite is a file in the server's process, with no server to restart"
                .into(),
            target: "n/a".into(),
            passed: true,
        }]);
    }
    let cluster = Cluster::init(run_dir)?;
    cluster.start()?;
    let db_url = cluster.url();
    let ws = super::workspace(bin, &db_url)?;
    let log = run_dir.join("pg-restart.log");
    let server = procs::start_server_env(bin, &db_url, &log, &[("CRM_LOG", "warn")])?;
    let pid = server.pid();
    let (before, down) = if quick {
        (Duration::from_secs(1), Duration::from_secs(2))
    } else {
        (Duration::from_secs(5), Duration::from_secs(10))
    };
    let addr = server.addr.clone();
    let cluster = Arc::new(cluster);
    let c = cluster.clone();
    let o =
        block_on(async move { restart_under_load(&addr, &ws.test_key, &c, before, down).await })?;
    let alive = Path::new(&format!("/proc/{pid}")).exists();
    drop(server);
    let passed = o.proper_503 > 0
        && o.in_progress_window.is_none_or(|w| w <= IN_PROGRESS_LIMIT)
        && o.wrong.is_empty()
        && o.unknown_key_503
        && o.recovered.is_some()
        && alive
        && o.lost == 0
        && o.duplicated == 0;
    if !passed {
        show_server_errors(&log);
    }
    Ok(vec![Row {
        store,
        check,
        figures: format!(
            "{} creates acknowledged ({} after retries through the {:.0} s outage); while down {} answers 503 service_unavailable with Retry-After, an unknown key {}, {} other answers{}; answering again {} after the restart, same process {}; {} answers 409 idempotency_in_progress (claims caught by the outage), the last {} after the restart; acknowledged lost {}, duplicated {}",
            o.acked,
            o.retried,
            down.as_secs_f64(),
            o.proper_503,
            if o.unknown_key_503 { "503 too".to_owned() } else { format!("{} (NOT 503)", o.unknown_status) },
            o.wrong.len(),
            if o.wrong.is_empty() { String::new() } else { format!(" ({})", o.wrong.iter().take(3).cloned().collect::<Vec<_>>().join("; ")) },
            o.recovered.map_or("never".to_owned(), |d| format!("{:.1} s", d.as_secs_f64())),
            if alive { "yes" } else { "NO" },
            o.in_progress,
            o.in_progress_window.map_or("-".to_owned(), |d| format!("{:.1} s", d.as_secs_f64())),
            o.lost,
            o.duplicated,
        ),
        target: TARGET.into(),
        passed,
    }])
}

/// The warnings and errors of a failed run's server, printed: the run directory is deleted, and
/// on CI the printed output is all that is kept.
fn show_server_errors(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("ERROR") || l.contains("WARN"))
        .collect();
    eprintln!(
        "pg-restart failed; the server's last {} of {} warnings and errors:",
        lines.len().min(40),
        lines.len()
    );
    for line in lines.iter().rev().take(40).rev() {
        eprintln!("  {line}");
    }
}

struct Outcome {
    /// 409 `idempotency_in_progress`: a claim made just before the database went away, whose
    /// release waits for it to come back.
    in_progress: usize,
    /// The last of those, counted from the restart.
    in_progress_window: Option<Duration>,
    unknown_status: u16,
    acked: usize,
    /// Acknowledged only after a retry.
    retried: usize,
    proper_503: usize,
    unknown_key_503: bool,
    /// Answers that were neither a success nor a proper 503.
    wrong: Vec<String>,
    recovered: Option<Duration>,
    lost: usize,
    duplicated: usize,
}

#[derive(Default)]
struct Shared {
    acked: Mutex<Vec<(String, String)>>,
    retried: AtomicUsize,
    proper_503: AtomicUsize,
    wrong: Mutex<Vec<String>>,
    first_ok_after_start: Mutex<Option<Instant>>,
    in_progress: AtomicUsize,
    last_in_progress: Mutex<Option<Instant>>,
    started_again: Mutex<Option<Instant>>,
    stop: AtomicBool,
}

async fn restart_under_load(
    addr: &str,
    key: &str,
    cluster: &Arc<Cluster>,
    before: Duration,
    down: Duration,
) -> Result<Outcome> {
    let shared = Arc::new(Shared::default());
    let mut workers = Vec::new();
    for w in 0..8 {
        let (addr, key, shared) = (addr.to_owned(), key.to_owned(), shared.clone());
        workers.push(tokio::spawn(async move {
            worker(w, &addr, &key, &shared).await
        }));
    }
    tokio::time::sleep(before).await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.stop())
        .await
        .context("stopping the cluster")??;
    tokio::time::sleep(down / 2).await;
    // A well-formed key that is not in the database: only the database can tell.
    let unknown_key = format!("{}{}", &key[..key.len() - 8], "00000000");
    let unknown = request(addr, Some(&unknown_key), "GET", "/v1/contacts", &[], None).await?;
    let unknown_key_503 = unknown.status == 503;
    let unknown_status = unknown.status;
    tokio::time::sleep(down / 2).await;
    let c = cluster.clone();
    tokio::task::spawn_blocking(move || c.start())
        .await
        .context("starting the cluster")??;
    let started = Instant::now();
    *shared
        .started_again
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(started);
    let deadline = started + Duration::from_secs(30);
    while shared
        .first_ok_after_start
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_none()
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    shared.stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.context("a load worker")??;
    }
    let recovered = shared
        .first_ok_after_start
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .map(|t| t.saturating_duration_since(started));
    let acked = shared
        .acked
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    // Every acknowledged create is there, and once.
    let mut lost = 0;
    let mut duplicated = 0;
    for (idem, id) in &acked {
        let got = request(
            addr,
            Some(key),
            "GET",
            &format!("/v1/contacts/{id}"),
            &[],
            None,
        )
        .await?;
        if got.status != 200 {
            lost += 1;
        }
        let same = request(
            addr,
            Some(key),
            "GET",
            &format!("/v1/contacts?email={idem}@restart.example"),
            &[],
            None,
        )
        .await?;
        if same.json()["data"].as_array().map_or(0, Vec::len) > 1 {
            duplicated += 1;
        }
    }
    let wrong = shared
        .wrong
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let in_progress_window = shared
        .last_in_progress
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .map(|t| t.saturating_duration_since(started));
    Ok(Outcome {
        in_progress: shared.in_progress.load(Ordering::SeqCst),
        in_progress_window,
        unknown_status,
        acked: acked.len(),
        retried: shared.retried.load(Ordering::SeqCst),
        proper_503: shared.proper_503.load(Ordering::SeqCst),
        unknown_key_503,
        wrong,
        recovered,
        lost,
        duplicated,
    })
}

/// Creates contacts one after another, retrying each (same key) until it is acknowledged; stops
/// at the first key begun after `stop`.
async fn worker(w: usize, addr: &str, key: &str, shared: &Shared) -> Result<()> {
    let mut n = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        n += 1;
        let idem = format!("w{w}-{n}");
        let body = json!({"email": format!("{idem}@restart.example")});
        let began = Instant::now();
        let mut tries = 0;
        loop {
            tries += 1;
            if began.elapsed() > Duration::from_secs(60) {
                bail!("create {idem} not acknowledged within 60 s");
            }
            let answer = request(
                addr,
                Some(key),
                "POST",
                "/v1/contacts",
                &[("Idempotency-Key", &idem)],
                Some(&body),
            )
            .await;
            match answer {
                Ok(a) if a.ok() => {
                    let id = a.json()["id"].as_str().unwrap_or_default().to_owned();
                    shared
                        .acked
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((idem.clone(), id));
                    if tries > 1 {
                        shared.retried.fetch_add(1, Ordering::SeqCst);
                    }
                    let started = *shared
                        .started_again
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    if started.is_some() {
                        let mut first = shared
                            .first_ok_after_start
                            .lock()
                            .unwrap_or_else(|e| e.into_inner());
                        first.get_or_insert_with(Instant::now);
                    }
                    break;
                }
                Ok(a)
                    if a.status == 503
                        && a.header("retry-after").is_some()
                        && a.json()["code"] == "service_unavailable" =>
                {
                    shared.proper_503.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(a) if a.status == 409 && a.json()["code"] == "idempotency_in_progress" => {
                    shared.in_progress.fetch_add(1, Ordering::SeqCst);
                    *shared
                        .last_in_progress
                        .lock()
                        .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(a) => {
                    shared
                        .wrong
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!(
                            "{} {}",
                            a.status,
                            String::from_utf8_lossy(&a.body)
                                .chars()
                                .take(160)
                                .collect::<String>()
                        ));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => {
                    shared
                        .wrong
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(format!("no answer: {e:#}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
    Ok(())
}

/// A Postgres cluster in a directory of its own, on a port of its own; stopped and removed when
/// dropped.
pub struct Cluster {
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    pub fn init(run_dir: &Path) -> Result<Cluster> {
        let dir = run_dir.join("pg-restart-cluster");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        if as_root() {
            // The cluster's owner must reach its directory: the run directory is ours.
            crate::run(Command::new("chmod").arg("755").arg(run_dir))?;
            crate::run(Command::new("chown").args(["-R", "postgres"]).arg(&dir))?;
        }
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let cluster = Cluster { dir, port };
        cluster.pg(&[
            "initdb",
            "-D",
            &cluster.dir_str(),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        ])?;
        Ok(cluster)
    }

    fn dir_str(&self) -> String {
        self.dir.display().to_string()
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn start(&self) -> Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir_str()
        );
        let log = self.dir.join("log").display().to_string();
        self.pg(&[
            "pg_ctl",
            "-D",
            &self.dir_str(),
            "-o",
            &options,
            "-l",
            &log,
            "-w",
            "start",
        ])
    }

    pub fn stop(&self) -> Result<()> {
        self.pg(&["pg_ctl", "-D", &self.dir_str(), "-m", "fast", "-w", "stop"])
    }

    fn pg(&self, args: &[&str]) -> Result<()> {
        let out = as_postgres(args).output().with_context(|| {
            format!("{}: this row needs PostgreSQL's initdb and pg_ctl", args[0])
        })?;
        if !out.status.success() {
            bail!(
                "{} failed: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let dir = self.dir_str();
        let _ = as_postgres(&["pg_ctl", "-D", &dir, "-m", "immediate", "stop"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// `initdb` and `pg_ctl` refuse to run as root: as the `postgres` user then.
fn as_postgres(args: &[&str]) -> Command {
    let tool = crate::postgres::pg_tool(args[0]);
    if as_root() {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"])
            .arg(tool)
            .args(&args[1..]);
        cmd
    } else {
        let mut cmd = Command::new(tool);
        cmd.args(&args[1..]);
        cmd
    }
}
