//! The database down (decisions §22): `serve` started before Postgres waits for it, and while
//! Postgres is unreachable requests answer 503 `service_unavailable` with `Retry-After`, then 200
//! again once it is back, without restarting the server. Each test runs a throwaway Postgres
//! cluster of its own (`initdb`, `pg_ctl`), stopped and started under the server.

use std::{
    io::{BufRead, BufReader},
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use reqwest::Method;

use crate::support::{self, Backend, Keys, Server, BIN};

/// A Postgres cluster in a temporary directory, on a port of its own; stopped and removed when
/// dropped.
struct Cluster {
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    /// Creates the cluster (not started).
    fn init() -> Cluster {
        let dir = std::env::temp_dir().join(format!("crm-pg-{}", uuid::Uuid::now_v7().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        if as_root() {
            run(Command::new("chown").args(["-R", "postgres"]).arg(&dir));
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        pg(&[
            "initdb",
            "-D",
            dir.to_str().unwrap(),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        ]);
        Cluster { dir, port }
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log");
        pg(&[
            "pg_ctl",
            "-D",
            self.dir.to_str().unwrap(),
            "-o",
            &options,
            "-l",
            log.to_str().unwrap(),
            "-w",
            "start",
        ]);
    }

    fn stop(&self) {
        pg(&[
            "pg_ctl",
            "-D",
            self.dir.to_str().unwrap(),
            "-m",
            "fast",
            "-w",
            "stop",
        ]);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_postgres(&[
            "pg_ctl",
            "-D",
            self.dir.to_str().unwrap(),
            "-m",
            "immediate",
            "stop",
        ])
        .output();
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
    let tool = pg_tool(args[0]);
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

fn pg(args: &[&str]) {
    run(&mut as_postgres(args));
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{cmd:?}: {e}; these tests need PostgreSQL's initdb and pg_ctl")
    });
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A PostgreSQL tool from PATH, or from Debian's versioned directories (as xtask finds them).
fn pg_tool(name: &str) -> PathBuf {
    if Command::new(name).arg("--version").output().is_ok() {
        return PathBuf::from(name);
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop().unwrap_or_else(|| PathBuf::from(name))
}

/// Lines of a child's pipe, read on a thread of their own.
fn lines(pipe: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `serve` started while nothing listens on the database's port keeps waiting, warning at each
/// try; once the database is up it migrates, creates the first workspace and serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_started_before_postgres_waits_for_it_then_serves() {
    let cluster = Cluster::init();
    let mut child = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(cluster.url())
        .env("CRM_LOG", "warn")
        .env("CRM_SECRET_KEYS", support::POSTGRES_SECRET_KEYS)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn crm-server serve");
    let stdout = lines(child.stdout.take().unwrap());
    let stderr = lines(child.stderr.take().unwrap());
    let mut server = Killed(child);

    let mut warnings = 0;
    let deadline = Instant::now() + Duration::from_secs(10);
    while warnings < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = stderr
            .recv_timeout(left)
            .expect("a warning for each try while the database is down");
        if line.contains("the database is unavailable; waiting for it") {
            warnings += 1;
        }
    }
    assert!(
        server.0.try_wait().unwrap().is_none(),
        "serve exited while the database was down"
    );

    cluster.start();
    let mut test_key = None;
    let base = loop {
        let line = stdout
            .recv_timeout(Duration::from_secs(30))
            .expect("serve listens once the database is up");
        if let Some(key) = line.trim().strip_prefix("test key: ") {
            test_key = Some(key.to_owned());
        }
        if let Some(addr) = line.strip_prefix("listening on ") {
            break addr.trim().to_owned();
        }
    };
    let res = reqwest::Client::new()
        .get(format!("{base}/v1/contacts"))
        .bearer_auth(test_key.expect("the first workspace's test key"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    drop(stderr);
}

/// A server running while its Postgres stops answers 503 `service_unavailable` with
/// `Retry-After`: for a key it has cached, for a key it would have to look up, and for an
/// idempotent create; `/readyz` says 503 too. Once Postgres is back it answers 200 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_postgres_is_down_requests_answer_503_and_recover_when_it_is_back() {
    let cluster = Cluster::init();
    cluster.start();
    let keys: Keys = support::create_workspace(&cluster.url(), &[]);
    let s: Server = support::start(Backend::Postgres, cluster.url(), keys, &[]);
    s.get("/contacts").await.ok(200);

    cluster.stop();
    let unavailable = |res: &support::Res| {
        res.problem(503, "service_unavailable");
        assert_eq!(res.header("retry-after"), Some("1"), "{:#}", res.body);
        let text = res.body.to_string();
        assert!(
            !text.contains("5432") && !text.contains(&cluster.port.to_string()),
            "{text}"
        );
    };
    unavailable(&s.get("/contacts").await);
    unavailable(&s.get("/contacts").await);
    let unknown = format!("svc_test_{}", "x".repeat(32));
    unavailable(&s.req(Method::GET, "/contacts").key(&unknown).send().await);
    unavailable(
        &s.req(Method::POST, "/contacts")
            .header("Idempotency-Key", "down")
            .json(&serde_json::json!({"email": "down@example.com"}))
            .send()
            .await,
    );
    assert_eq!(s.anon(Method::GET, "!/readyz").send().await.status, 503);

    cluster.start();
    let back = Instant::now();
    loop {
        let res = s.get("/contacts").await;
        if res.status == 200 {
            break;
        }
        unavailable(&res);
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "still unavailable 10 s after Postgres came back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let created = s
        .req(Method::POST, "/contacts")
        .header("Idempotency-Key", "down")
        .json(&serde_json::json!({"email": "down@example.com"}))
        .send()
        .await;
    created.ok(201);
    s.req(Method::GET, "/contacts")
        .key(&unknown)
        .send()
        .await
        .problem(401, "unauthorized");
}

/// An idempotent create whose database goes away after its key was claimed answers 503, and its
/// claim is given back once the database is back, so the retry runs it (not
/// `idempotency_in_progress` until the claim's lease ends). The create is held between its claim
/// and its write by a lock on the contacts table, and Postgres stopped under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_cut_off_after_its_claim_gives_the_key_back_once_postgres_is_back() {
    use sqlx::{Connection, Executor};
    let cluster = Cluster::init();
    cluster.start();
    let keys: Keys = support::create_workspace(&cluster.url(), &[]);
    let s: Server = support::start(Backend::Postgres, cluster.url(), keys, &[]);
    s.get("/contacts").await.ok(200);

    let mut blocker = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
    blocker.execute("BEGIN").await.unwrap();
    blocker
        .execute("LOCK TABLE contacts IN EXCLUSIVE MODE")
        .await
        .unwrap();
    let create = || {
        s.req(Method::POST, "/contacts")
            .header("Idempotency-Key", "cut")
            .json(&serde_json::json!({"email": "cut@example.com"}))
            .send()
    };
    let cut_off = async {
        // The claim is committed while the create waits on the lock.
        let mut probe = sqlx::PgConnection::connect(&cluster.url()).await.unwrap();
        let claimed = Instant::now();
        while sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM idempotency_keys WHERE key = 'cut'",
        )
        .fetch_one(&mut probe)
        .await
        .unwrap()
            == 0
        {
            assert!(claimed.elapsed() < Duration::from_secs(10), "never claimed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(probe);
        cluster.stop();
        drop(blocker);
    };
    let (res, ()) = futures::join!(create(), cut_off);
    res.problem(503, "service_unavailable");

    cluster.start();
    let back = Instant::now();
    loop {
        let res = create().await;
        match res.status.as_u16() {
            201 => break,
            503 => {}
            409 => assert_eq!(res.body["code"], "idempotency_in_progress"),
            _ => panic!("{:#}", res.body),
        }
        assert!(
            back.elapsed() < Duration::from_secs(10),
            "the key is still held 10 s after Postgres came back: {:#}",
            res.body
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
