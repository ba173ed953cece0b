//! The SSRF row, driven from outside: the server runs in a private mount namespace of its own
//! (`unshare --mount`) where `/etc/resolv.conf` names a DNS stub this row runs, so the server's
//! own resolver asks the stub. An internal target listens on loopback ports 443 and 8443 (the
//! ports the corpus's URLs name) and counts every TCP connection it gets.
//!
//! - At registration (live mode, whose policy refuses internal destinations): every URL of the
//!   corpus of `crm-domain`'s `ssrf` tests, names the stub resolves to loopback (alone, or beside
//!   a public address) must be refused.
//! - At delivery: webhooks registered to public names have their stored URL changed behind the
//!   API to each URL of the corpus (as if the row had been written before a policy tightened);
//!   and names whose DNS answer changes after the check (`rebind`: public at registration, then
//!   loopback; `flip`: public and loopback by turns, so a second lookup between check and connect
//!   would be caught) are registered while public. A live event then makes every webhook deliver.
//!
//! The "public" answer is an IPv6 global unicast address this host has no route to, so no
//! connection leaves it. Target: every registration refused, and 0 connections at the target.

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, Ipv6Addr, SocketAddr},
    path::Path,
    process::Command,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use tokio::net::UdpSocket;

use super::{client::request, fakes::FakeHttp, Row, Store};
use crate::bench::{load::block_on, procs};

/// Where the stub listens (resolv.conf names no port: DNS's own, 53).
const STUB: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 153);
/// A global unicast address this host has no route to: "public" for the check, unreachable.
const PUBLIC_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0x4860, 0x4860, 0, 0, 0, 0, 0x8888);

/// Every URL the `crm-domain` `ssrf` tests hold refused under the live policy: the corpus they
/// read, grouped by kind.
fn corpus(root: &Path) -> Result<Vec<String>> {
    let path = root.join("crates/crm-domain/src/ssrf_blocked.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let groups: BTreeMap<String, Vec<String>> =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    Ok(groups.into_values().flatten().collect())
}

/// Names the stub answers, and how.
const INTERNAL: &str = "internal.ssrf.test";
const MIXED: &str = "mixed.ssrf.test";
const REBIND: &str = "rebind.ssrf.test";
const FLIP: &str = "flip.ssrf.test";

pub fn run(bin: &Path, store: Store, db_url: &str, run_dir: &Path) -> Result<Vec<Row>> {
    let ws = super::workspace(bin, db_url)?;
    let dir = run_dir.join(format!("ssrf-{}", store.name()));
    std::fs::create_dir_all(&dir)?;
    let resolv = dir.join("resolv.conf");
    std::fs::write(
        &resolv,
        format!("nameserver {STUB}\noptions timeout:1 attempts:2\n"),
    )?;
    let (bin, db_url) = (bin.to_owned(), db_url.to_owned());
    let o = block_on(async move { probe(&bin, &db_url, &dir, &resolv, &ws).await })?;
    let passed = o.accepted.is_empty()
        && o.connections == 0
        && o.delivery_refused == o.delivery_webhooks
        && o.stub_queries > 0;
    Ok(vec![Row {
        store,
        check: "SSRF at registration and delivery".into(),
        figures: format!(
            "registration: {} URLs (the corpus, and names the stub resolves to loopback), {} accepted{}; delivery: {} webhooks (each corpus URL written behind the API, and 2 names rebound after their check), {} refused before connecting{}; stub answered {} queries; connections at the internal target {}",
            o.registrations,
            o.accepted.len(),
            if o.accepted.is_empty() { String::new() } else { format!(" ({})", o.accepted.join(", ")) },
            o.delivery_webhooks,
            o.delivery_refused,
            if o.not_refused.is_empty() { String::new() } else { format!(" (not: {})", o.not_refused.join("; ")) },
            o.stub_queries,
            o.connections,
        ),
        target: "every registration refused, every delivery refused, 0 connections reach the target".into(),
        passed,
    }])
}

struct Outcome {
    registrations: usize,
    accepted: Vec<String>,
    delivery_webhooks: usize,
    delivery_refused: usize,
    not_refused: Vec<String>,
    stub_queries: usize,
    connections: usize,
}

/// The server in a mount namespace of its own, whose `/etc/resolv.conf` is `resolv`.
fn start_server(bin: &Path, db_url: &str, log: &Path, resolv: &Path) -> Result<procs::Proc> {
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg("mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"")
        .arg(resolv)
        .arg(bin)
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", db_url])
        .env("CRM_SECRET_KEYS", procs::SECRET_KEYS)
        .env("CRM_LOG", "warn")
        .env("CRM_WEBHOOK_POLL", "50ms")
        .env("CRM_WEBHOOK_BACKOFF", "200ms,200ms,200ms")
        .env("CRM_WEBHOOK_TIMEOUT", "1s");
    procs::Proc::start(cmd, log)
}

async fn probe(
    bin: &Path,
    db_url: &str,
    dir: &Path,
    resolv: &Path,
    ws: &procs::Workspace,
) -> Result<Outcome> {
    let stub = Stub::start().await?;
    let mut targets = Vec::new();
    for bind in [
        SocketAddr::from((Ipv4Addr::LOCALHOST, 443)),
        SocketAddr::from((Ipv4Addr::LOCALHOST, 8443)),
        SocketAddr::from((Ipv6Addr::LOCALHOST, 443)),
    ] {
        targets.push(
            FakeHttp::start(bind, "{}")
                .await
                .with_context(|| format!("the internal target on {bind}"))?,
        );
    }
    let (b, d, l, r) = (
        bin.to_owned(),
        db_url.to_owned(),
        dir.join("server.log"),
        resolv.to_owned(),
    );
    let server = tokio::task::spawn_blocking(move || start_server(&b, &d, &l, &r))
        .await
        .context("starting the server")??;
    let addr = server.addr.clone();
    let live = ws.live_key.as_str();
    let register = |url: String| {
        let addr = addr.clone();
        async move {
            request(
                &addr,
                Some(live),
                "POST",
                "/v1/webhooks",
                &[],
                Some(&json!({"url": url, "events": ["contact.created"]})),
            )
            .await
        }
    };

    // Registration: all refused.
    let mut accepted = Vec::new();
    let corpus = corpus(&crate::root())?;
    let mut urls: Vec<String> = corpus.clone();
    urls.push(format!("https://{INTERNAL}/hook"));
    urls.push(format!("https://{MIXED}/hook"));
    for url in &urls {
        let a = register(url.clone()).await?;
        if a.ok() || a.status >= 500 {
            accepted.push(format!("{url:?} ({})", a.status));
        }
    }

    // Delivery: webhooks whose stored URL is each corpus URL, and the two rebinding names.
    let mut hooks: Vec<(String, String)> = Vec::new();
    for (i, url) in corpus.iter().enumerate() {
        let a = register(format!("https://public-{i}.ssrf.test/hook")).await?;
        let id = a.json()["id"]
            .as_str()
            .with_context(|| {
                format!(
                    "registering a public name answered {}: {}",
                    a.status,
                    String::from_utf8_lossy(&a.body)
                )
            })?
            .to_owned();
        hooks.push((id, (*url).to_owned()));
    }
    set_urls(db_url, &hooks).await?;
    for name in [REBIND, FLIP] {
        let a = register(format!("https://{name}/hook")).await?;
        let id = a.json()["id"]
            .as_str()
            .with_context(|| format!("registering {name} while public answered {}", a.status))?
            .to_owned();
        hooks.push((id, name.to_owned()));
    }
    let event = request(
        &addr,
        Some(live),
        "POST",
        "/v1/contacts",
        &[],
        Some(&json!({"email": "ssrf@reliability.example"})),
    )
    .await?;
    if !event.ok() {
        bail!("the live contact answered {}", event.status);
    }
    // Wait until every webhook has made an attempt, then a little longer for retries.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut refused = BTreeMap::new();
    loop {
        refused.clear();
        let mut attempted = 0;
        for (id, url) in &hooks {
            let a = request(
                &addr,
                Some(live),
                "GET",
                &format!("/v1/webhooks/{id}/deliveries"),
                &[],
                None,
            )
            .await?;
            let attempts = a.json()["data"].as_array().cloned().unwrap_or_default();
            if !attempts.is_empty() {
                attempted += 1;
            }
            let all_refused =
                !attempts.is_empty() && attempts.iter().all(refused_before_connecting);
            let note = (!all_refused).then(|| {
                format!(
                    "{url:?}: {}",
                    attempts.first().map(Value::to_string).unwrap_or_default()
                )
            });
            refused.insert(id.clone(), note);
        }
        if attempted == hooks.len() || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(server);
    Ok(Outcome {
        registrations: urls.len(),
        accepted,
        delivery_webhooks: hooks.len(),
        delivery_refused: refused.values().filter(|r| r.is_none()).count(),
        not_refused: refused.values().flatten().cloned().collect(),
        stub_queries: stub.queries.load(Ordering::SeqCst),
        connections: targets
            .iter()
            .map(|t| t.connections.load(Ordering::SeqCst))
            .sum(),
    })
}

/// An attempt stopped by the SSRF check, or one that found no route to the "public" address:
/// either way, no connection to an internal address was made.
fn refused_before_connecting(attempt: &Value) -> bool {
    let error = attempt["error"].as_str().unwrap_or_default();
    attempt["response_status"].is_null()
        && [
            "refused",
            "resolves to",
            "is a",
            "is an",
            "unreachable",
            "No route",
        ]
        .iter()
        .any(|why| error.contains(why))
}

/// Writes each webhook's URL straight into the database, past the API's check.
async fn set_urls(db_url: &str, hooks: &[(String, String)]) -> Result<()> {
    use sqlx::Connection;
    const SQL: &str = "UPDATE webhooks SET url = $1 WHERE id = $2";
    if db_url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(db_url).await?;
        for (id, url) in hooks {
            sqlx::query(SQL)
                .bind(url)
                .bind(id)
                .execute(&mut conn)
                .await?;
        }
    } else {
        let mut conn = sqlx::PgConnection::connect(db_url).await?;
        for (id, url) in hooks {
            sqlx::query(SQL)
                .bind(url)
                .bind(id)
                .execute(&mut conn)
                .await?;
        }
    }
    Ok(())
}

/// A DNS server on UDP `STUB:53` for the `.ssrf.test` names: every answer has TTL 0.
struct Stub {
    queries: Arc<AtomicUsize>,
}

impl Stub {
    async fn start() -> Result<Stub> {
        let socket = UdpSocket::bind(SocketAddr::from((STUB, 53)))
            .await
            .context("the DNS stub on port 53 (the row needs root)")?;
        let queries = Arc::new(AtomicUsize::new(0));
        let count = queries.clone();
        let lookups: Arc<Mutex<BTreeMap<(String, u16), usize>>> = Arc::default();
        tokio::spawn(async move {
            let mut buf = [0u8; 1500];
            while let Ok((n, from)) = socket.recv_from(&mut buf).await {
                count.fetch_add(1, Ordering::SeqCst);
                if let Some(answer) = answer(&buf[..n], &lookups) {
                    let _ = socket.send_to(&answer, from).await;
                }
            }
        });
        Ok(Stub { queries })
    }
}

/// What the stub says for `name`'s `nth` lookup of `qtype` (1: A, 28: AAAA), or `None` for
/// NXDOMAIN.
fn records(name: &str, qtype: u16, nth: usize) -> Option<Vec<Vec<u8>>> {
    let loopback = || vec![Ipv4Addr::LOCALHOST.octets().to_vec()];
    let public = || vec![PUBLIC_V6.octets().to_vec()];
    // (A, AAAA) answers.
    let (a, aaaa) = match name {
        INTERNAL => (loopback(), vec![]),
        MIXED => (loopback(), public()),
        REBIND if nth == 1 => (vec![], public()),
        REBIND => (loopback(), vec![]),
        FLIP if nth % 2 == 1 => (vec![], public()),
        FLIP => (loopback(), vec![]),
        n if n.starts_with("public-") && n.ends_with(".ssrf.test") => (vec![], public()),
        _ => return None,
    };
    Some(match qtype {
        1 => a,
        28 => aaaa,
        _ => vec![],
    })
}

/// The reply to one query (RFC 1035 §4.1): the question echoed, then its records.
fn answer(query: &[u8], lookups: &Mutex<BTreeMap<(String, u16), usize>>) -> Option<Vec<u8>> {
    if query.len() < 12 || u16::from_be_bytes([query[4], query[5]]) != 1 {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *query.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        labels.push(String::from_utf8_lossy(query.get(at..at + len)?).to_ascii_lowercase());
        at += len;
    }
    let qtype = u16::from_be_bytes([*query.get(at)?, *query.get(at + 1)?]);
    let question_end = at + 4;
    query.get(..question_end)?;
    let name = labels.join(".");
    let nth = {
        let mut l = lookups.lock().unwrap_or_else(|e| e.into_inner());
        let n = l.entry((name.clone(), qtype)).or_default();
        *n += 1;
        *n
    };
    let found = records(&name, qtype, nth);
    let rcode = if found.is_some() { 0 } else { 3 };
    let found = found.unwrap_or_default();
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(&query[..2]);
    // QR, opcode 0, RD copied; RA; the rcode.
    out.push(0x80 | (query[2] & 0x01));
    out.push(0x80 | rcode);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(found.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&query[12..question_end]);
    for rdata in found {
        // The name by pointer to the question's, the type, class IN, TTL 0.
        out.extend_from_slice(&[0xc0, 0x0c]);
        out.extend_from_slice(&qtype.to_be_bytes());
        out.extend_from_slice(&[0, 1, 0, 0, 0, 0]);
        out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        out.extend_from_slice(&rdata);
    }
    Some(out)
}
