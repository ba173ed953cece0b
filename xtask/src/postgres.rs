//! Finding a Postgres server for the tests, or starting a throwaway one.

use std::{
    net::{TcpListener, TcpStream, ToSocketAddrs},
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::{bail, Context, Result};

use crate::run;

pub struct Postgres {
    pub url: String,
    /// A cluster we started and must stop.
    cluster: Option<PathBuf>,
}

impl Postgres {
    pub fn redacted_url(&self) -> String {
        match self.url.split_once('@') {
            Some((scheme_user, rest)) => match scheme_user.rsplit_once(':') {
                Some((su, _password)) if su.contains("//") && su.matches(':').count() == 1 => {
                    format!("{su}:***@{rest}")
                }
                _ => self.url.clone(),
            },
            None => self.url.clone(),
        }
    }

    /// Drops the per-test databases that earlier runs left behind (best effort: needs `psql`).
    /// Only databases over an hour old go (their UUIDv7 names tell their age), so a run never
    /// drops the databases of another run in progress on the same server; one still in use makes
    /// its DROP fail, which is ignored. All drops go through one `psql` session.
    pub fn drop_leftover_test_databases(&self) {
        let list = Command::new("psql")
            .args([&self.url, "-Atc", "SELECT datname FROM pg_database WHERE datname LIKE 'crm\\_t\\_%' OR datname LIKE 'crm\\_e2e\\_%'"])
            .output();
        let Ok(out) = list else { return };
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let script: String = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|name| {
                uuid_v7_millis(name).is_some_and(|ms| now_ms.saturating_sub(ms) > 3_600_000)
            })
            .map(|name| format!("DROP DATABASE IF EXISTS \"{name}\";\n"))
            .collect();
        if script.is_empty() {
            return;
        }
        let child = Command::new("psql")
            .args([&self.url, "-q", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Ok(mut child) = child {
            if let Some(mut stdin) = child.stdin.take() {
                use std::io::Write;
                let _ = stdin.write_all(script.as_bytes());
            }
            let _ = child.wait();
        }
    }
}

/// The creation time (Unix ms) of a test database named `<prefix><32 hex digits of a UUIDv7>`.
fn uuid_v7_millis(name: &str) -> Option<u64> {
    let hex = name.get(name.len().checked_sub(32)?..)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) || hex.as_bytes()[12] != b'7' {
        return None;
    }
    u64::from_str_radix(&hex[..12], 16).ok()
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Some(dir) = &self.cluster {
            let _ = Command::new(pg_tool("pg_ctl"))
                .args(["-D"])
                .arg(dir)
                .args(["-m", "fast", "stop"])
                .output();
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn reachable(host_port: &str) -> bool {
    host_port
        .to_socket_addrs()
        .map(|mut addrs| {
            addrs.any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok())
        })
        .unwrap_or(false)
}

/// `host:port` of a postgres URL (default port 5432).
fn host_port(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?']).next()?;
    let hostport = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    if hostport.is_empty() {
        return None;
    }
    Some(if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:5432")
    })
}

/// `initdb`/`pg_ctl` from PATH, or from Debian's versioned directories.
pub(crate) fn pg_tool(name: &str) -> PathBuf {
    if crate::has_command(name, "--version") {
        return PathBuf::from(name);
    }
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin").join(name))
        .filter(|p| p.exists())
        .collect();
    candidates.sort();
    candidates.pop().unwrap_or_else(|| PathBuf::from(name))
}

pub fn find_or_start(root: &Path) -> Result<Postgres> {
    if let Ok(url) = std::env::var("CRM_TEST_DATABASE_URL") {
        let Some(hp) = host_port(&url) else {
            bail!("CRM_TEST_DATABASE_URL is not a postgres URL: {url}")
        };
        if !reachable(&hp) {
            bail!("CRM_TEST_DATABASE_URL points at {hp}, which does not answer");
        }
        return Ok(Postgres { url, cluster: None });
    }
    if reachable("127.0.0.1:5432") {
        return Ok(Postgres {
            url: "postgres://postgres@127.0.0.1:5432/postgres".into(),
            cluster: None,
        });
    }
    let initdb = pg_tool("initdb");
    if !initdb.exists() && !crate::has_command("initdb", "--version") {
        bail!(
            "the tests need Postgres and none was found: set CRM_TEST_DATABASE_URL=postgres://user@host:port/db, \
             run a server on 127.0.0.1:5432 (user postgres, trust auth), or install PostgreSQL (initdb) so that \
             `cargo xtask test` can start a throwaway cluster"
        );
    }
    start_cluster(root, &initdb)
}

fn start_cluster(root: &Path, initdb: &Path) -> Result<Postgres> {
    let dir = crate::target_dir(root).join(format!("xtask-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let mut init = Command::new(initdb);
    init.arg("-D")
        .arg(&dir)
        .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
    // initdb refuses to run as root; run it as the `postgres` user when we are root.
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if as_root {
        std::fs::create_dir_all(&dir)?;
        run(Command::new("chown").args(["-R", "postgres"]).arg(&dir))?;
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"])
            .arg(initdb)
            .arg("-D")
            .arg(&dir)
            .args(["-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
        run(&mut cmd).context("initdb")?;
    } else {
        run(&mut init).context("initdb")?;
    }
    let options = format!(
        "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300",
        dir.display()
    );
    let mut start = Command::new(pg_tool("pg_ctl"));
    start
        .arg("-D")
        .arg(&dir)
        .args(["-o", &options, "-l"])
        .arg(dir.join("log"))
        .args(["-w", "start"]);
    if as_root {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--"])
            .arg(start.get_program())
            .args(start.get_args());
        run(&mut cmd).context("pg_ctl start")?;
    } else {
        run(&mut start).context("pg_ctl start")?;
    }
    Ok(Postgres {
        url: format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        cluster: Some(dir),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_of_urls() {
        assert_eq!(
            host_port("postgres://postgres@127.0.0.1:5432/postgres").as_deref(),
            Some("127.0.0.1:5432")
        );
        assert_eq!(
            host_port("postgres://u:p@db.example/x?sslmode=disable").as_deref(),
            Some("db.example:5432")
        );
        assert_eq!(host_port("sqlite://x.db").as_deref(), Some("x.db:5432"));
        assert_eq!(host_port("nonsense"), None);
    }
}
