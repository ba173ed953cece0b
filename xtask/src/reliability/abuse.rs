//! The abuse row: while attackers on 127.0.0.1 hold idle sockets, send heads and bodies slowly,
//! and send bodies built to hurt (too large, chunked, deeply nested, thousands of fields,
//! invalid UTF-8, NUL), a normal client on 127.0.0.2 keeps asking for a page of contacts. It
//! must keep being answered (full run: p99 under 50 ms), nothing may answer 5xx, the server's
//! memory must stay under 200 MiB, and its log must never say it ran out of files.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use anyhow::{Context, Result};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

use super::{Row, Store};
use crate::bench::{
    http::{Conn, Req},
    load::block_on,
    procs,
};

const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const P99_TARGET_MS: f64 = 50.0;
const RSS_TARGET_MIB: f64 = 200.0;

struct Sizes {
    idle_sockets: usize,
    slow_connections: usize,
    phase: Duration,
    bad_bodies_each: usize,
}

pub fn run(
    bin: &Path,
    store: Store,
    db_url: &str,
    run_dir: &Path,
    quick: bool,
    open_files: u64,
) -> Result<Vec<Row>> {
    let ws = super::workspace(bin, db_url)?;
    let log = run_dir.join(format!("abuse-{}.log", store.name()));
    // The quick run's phases last seconds: its timers are as short, so that they act in them.
    let env: &[(&str, &str)] = if quick {
        &[
            ("CRM_LOG", "warn"),
            ("CRM_HTTP_HEAD_TIMEOUT", "1s"),
            ("CRM_HTTP_BODY_TIMEOUT", "1s"),
        ]
    } else {
        &[("CRM_LOG", "warn")]
    };
    let server = procs::start_server_env(bin, db_url, &log, env)?;
    // Room for the client's own sockets and files beside the attackers'.
    let fd_room = usize::try_from(open_files.saturating_sub(512)).unwrap_or(usize::MAX);
    let sizes = if quick {
        Sizes {
            idle_sockets: 2_000.min(fd_room),
            slow_connections: 100,
            phase: Duration::from_secs(3),
            bad_bodies_each: 3,
        }
    } else {
        Sizes {
            idle_sockets: 20_000.min(fd_room),
            slow_connections: 1_000,
            // Past the head timeout (10 s), so the held sockets are cut while the client runs.
            phase: Duration::from_secs(15),
            bad_bodies_each: 50,
        }
    };
    let addr = server.addr.clone();
    let key = ws.test_key.clone();
    let phases = block_on(async move { all_phases(&addr, &key, &sizes).await })?;
    let (_, peak_mib) = server.memory();
    let out_of_files = super::out_of_files(&log);
    drop(server);

    let mut rows = Vec::new();
    for p in phases {
        let answered = p.client_errors == 0 && p.client_requests > 0;
        let passed = answered && p.server_errors == 0 && (quick || p.p99_ms < P99_TARGET_MS);
        rows.push(Row {
            store,
            check: format!("abuse: {}", p.name),
            figures: format!(
                "{} attacks; client {} requests, {} failed, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; 5xx {}{}",
                p.attacks,
                p.client_requests,
                p.client_errors,
                p.p50_ms,
                p.p99_ms,
                p.max_ms,
                p.server_errors,
                if p.notes.is_empty() { String::new() } else { format!("; {}", p.notes) },
            ),
            target: if quick {
                "client answered, no 5xx".into()
            } else {
                format!("client answered, p99 < {P99_TARGET_MS} ms, no 5xx")
            },
            passed,
        });
    }
    rows.push(Row {
        store,
        check: "abuse: server memory and files".into(),
        figures: format!("peak RSS {peak_mib:.1} MiB; \"Too many open files\" {out_of_files}"),
        target: format!("RSS < {RSS_TARGET_MIB} MiB, never out of files"),
        passed: out_of_files == 0 && (quick || peak_mib < RSS_TARGET_MIB),
    });
    Ok(rows)
}

/// What one phase came to.
struct Phase {
    name: &'static str,
    attacks: usize,
    client_requests: usize,
    client_errors: usize,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    /// Attack requests answered 5xx.
    server_errors: usize,
    notes: String,
}

async fn all_phases(addr: &str, key: &str, sizes: &Sizes) -> Result<Vec<Phase>> {
    let server: SocketAddr = addr.parse().context("server address")?;
    let mut phases = Vec::new();
    phases.push(
        phase("idle sockets", addr, key, sizes.phase, {
            let n = sizes.idle_sockets;
            move |stop| idle_sockets(server, n, stop)
        })
        .await?,
    );
    phases.push(
        phase("slow heads", addr, key, sizes.phase, {
            let n = sizes.slow_connections;
            move |stop| slow_heads(server, n, stop)
        })
        .await?,
    );
    phases.push(
        phase("stalled bodies", addr, key, sizes.phase, {
            let n = sizes.slow_connections;
            let key = key.to_owned();
            move |stop| stalled_bodies(server, key, n, stop)
        })
        .await?,
    );
    phases.push(
        phase("hostile bodies", addr, key, sizes.phase, {
            let n = sizes.bad_bodies_each;
            let key = key.to_owned();
            move |stop| hostile_bodies(server, key, n, stop)
        })
        .await?,
    );
    Ok(phases)
}

/// What an attack reports: how many it made, how many were answered 5xx, and a note.
type AttackOutcome = (usize, usize, String);

/// Runs `attack` for `length` while the client measures.
async fn phase<F, Fut>(
    name: &'static str,
    addr: &str,
    key: &str,
    length: Duration,
    attack: F,
) -> Result<Phase>
where
    F: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = Result<AttackOutcome>> + Send + 'static,
{
    eprintln!("xtask reliability: abuse phase `{name}`");
    let stop = Arc::new(AtomicBool::new(false));
    let attacker = tokio::spawn(attack(stop.clone()));
    // Give the attack a moment to take hold before measuring.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (latencies, errors) = client(addr, key, length).await;
    stop.store(true, Ordering::Relaxed);
    let (attacks, server_errors, notes) = attacker.await.context("the attack task")??;
    let mut ms: Vec<f64> = latencies.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        if ms.is_empty() {
            0.0
        } else {
            ms[((ms.len() as f64 * q) as usize).min(ms.len() - 1)]
        }
    };
    Ok(Phase {
        name,
        attacks,
        client_requests: ms.len() + errors,
        client_errors: errors,
        p50_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: ms.last().copied().unwrap_or(0.0),
        server_errors,
        notes,
    })
}

/// The normal client: a page of contacts every 20 ms on a kept-alive connection, and every
/// tenth request on a new one (so accepting is measured too). Each must be answered 200.
async fn client(addr: &str, key: &str, length: Duration) -> (Vec<Duration>, usize) {
    let req = Req::get("/v1/contacts?limit=5");
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut kept: Option<Conn> = None;
    let until = Instant::now() + length;
    let mut i = 0u64;
    while Instant::now() < until {
        i += 1;
        let started = Instant::now();
        let answered = tokio::time::timeout(Duration::from_secs(5), async {
            if i.is_multiple_of(10) || kept.is_none() {
                kept = Some(Conn::open_from(addr, CLIENT, Some(key)).await?);
            }
            let conn = kept.as_mut().expect("opened above");
            let status = conn.send(&req).await?.status;
            anyhow::ensure!(status == 200, "answered {status}");
            Ok(())
        })
        .await;
        match answered {
            Ok(Ok(())) => latencies.push(started.elapsed()),
            Ok(Err(e)) => {
                errors += 1;
                kept = None;
                eprintln!("xtask reliability: the client's request failed: {e:#}");
            }
            Err(_) => {
                errors += 1;
                kept = None;
                eprintln!("xtask reliability: the client's request took over 5 s");
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (latencies, errors)
}

async fn connect(server: SocketAddr) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(ATTACKER, 0))?;
    socket.connect(server).await
}

/// Opens `n` sockets that send nothing and holds them until told to stop.
async fn idle_sockets(
    server: SocketAddr,
    n: usize,
    stop: Arc<AtomicBool>,
) -> Result<AttackOutcome> {
    let mut held = Vec::with_capacity(n);
    let mut refused = 0;
    for _ in 0..n {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        match connect(server).await {
            Ok(s) => held.push(s),
            Err(_) => refused += 1,
        }
    }
    let opened = held.len();
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // How many the server still holds open (it closes those beyond the per-address cap at once,
    // and the rest after the head timeout).
    let mut open = 0;
    for s in &mut held {
        let mut byte = [0u8; 1];
        if tokio::time::timeout(Duration::from_millis(1), s.read(&mut byte))
            .await
            .is_err()
        {
            open += 1;
        }
    }
    Ok((
        opened + refused,
        0,
        format!("{opened} sockets opened, {refused} refused, {open} still open at the end"),
    ))
}

/// `n` connections, each sending its request head a byte every half second.
async fn slow_heads(server: SocketAddr, n: usize, stop: Arc<AtomicBool>) -> Result<AttackOutcome> {
    let cut = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (stop, cut) = (stop.clone(), cut.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = connect(server).await else { return };
            let head = b"GET /v1/contacts HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
            for byte in head {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                if s.write_all(&[*byte]).await.is_err() {
                    cut.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    Ok((
        n,
        0,
        format!("{} cut off by the server", cut.load(Ordering::Relaxed)),
    ))
}

/// `n` requests that declare a 900 KB body and send ten bytes of it.
async fn stalled_bodies(
    server: SocketAddr,
    key: String,
    n: usize,
    stop: Arc<AtomicBool>,
) -> Result<AttackOutcome> {
    let answers = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (stop, key, answers) = (stop.clone(), key.clone(), answers.clone());
        tasks.push(tokio::spawn(async move {
            let Ok(mut s) = connect(server).await else { return };
            let head = format!(
                "POST /v1/contacts HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: 900000\r\n\r\n{{\"first_na"
            );
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let mut out = Vec::new();
            let read = async {
                let _ = s.read_to_end(&mut out).await;
            };
            tokio::select! {
                () = read => {}
                () = async { while !stop.load(Ordering::Relaxed) { tokio::time::sleep(Duration::from_millis(50)).await } } => {}
            }
            answers.lock().expect("not poisoned").push(status_of(&out));
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let answers = answers.lock().expect("not poisoned");
    let timed_out = answers.iter().filter(|s| **s == Some(408)).count();
    let errors = answers
        .iter()
        .filter(|s| s.is_some_and(|s| s >= 500))
        .count();
    Ok((n, errors, format!("{timed_out} answered 408")))
}

/// Bodies built to hurt, each sent `each` times on fresh connections: every answer must be a 4xx.
async fn hostile_bodies(
    server: SocketAddr,
    key: String,
    each: usize,
    stop: Arc<AtomicBool>,
) -> Result<AttackOutcome> {
    let auth = format!("authorization: Bearer {key}\r\n");
    let json = "content-type: application/json\r\n";
    let mut requests: Vec<(&str, Vec<u8>)> = Vec::new();
    let two_mib = format!("{{\"first_name\": \"{}\"}}", "x".repeat(2 << 20));
    requests.push((
        "2 MiB body",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Sized(two_mib.as_bytes()),
        ),
    ));
    requests.push((
        "2 MiB chunked body",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Chunked(two_mib.as_bytes()),
        ),
    ));
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    requests.push((
        "100,000-deep JSON",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Sized(deep.as_bytes()),
        ),
    ));
    let fields: Vec<String> = (0..10_000).map(|i| format!("\"f{i}\": \"v\"")).collect();
    let many = format!(
        "{{\"first_name\": \"A\", \"custom_fields\": {{{}}}}}",
        fields.join(",")
    );
    requests.push((
        "10,000 custom fields",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Sized(many.as_bytes()),
        ),
    ));
    let long = format!("{{\"first_name\": \"{}\"}}", "x".repeat(900_000));
    requests.push((
        "900 KB name",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Sized(long.as_bytes()),
        ),
    ));
    let mut invalid = b"{\"first_name\": \"".to_vec();
    invalid.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    invalid.extend_from_slice(b"\"}");
    requests.push((
        "invalid UTF-8",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Sized(&invalid),
        ),
    ));
    for path in [
        "/v1/contacts?q=a%00b",
        "/v1/search?q=%00a",
        "/v1/contacts?q=%FF%FE",
    ] {
        requests.push((
            "NUL or bad UTF-8 in a query",
            request("GET", path, &[&auth], Body::None),
        ));
    }
    requests.push((
        "duplicate keys",
        request(
            "POST",
            "/v1/contacts",
            &[&auth, json],
            Body::Sized(br#"{"first_name": "A", "first_name": "B"}"#),
        ),
    ));

    let mut sent = 0;
    let mut errors = 0;
    let mut statuses: std::collections::BTreeMap<&str, std::collections::BTreeSet<u16>> =
        Default::default();
    'outer: for _ in 0..each {
        for (name, bytes) in &requests {
            if stop.load(Ordering::Relaxed) {
                break 'outer;
            }
            let status = send_raw(server, bytes).await;
            sent += 1;
            match status {
                Some(s) => {
                    if s >= 500 {
                        errors += 1;
                    }
                    statuses.entry(name).or_default().insert(s);
                }
                None => {
                    statuses.entry(name).or_default().insert(0);
                }
            }
        }
    }
    let notes = statuses
        .iter()
        .map(|(name, s)| {
            let list: Vec<String> = s
                .iter()
                .map(|s| {
                    if *s == 0 {
                        "closed".into()
                    } else {
                        s.to_string()
                    }
                })
                .collect();
            format!("{name}: {}", list.join("/"))
        })
        .collect::<Vec<_>>()
        .join(", ");
    Ok((sent, errors, notes))
}

enum Body<'a> {
    None,
    Sized(&'a [u8]),
    Chunked(&'a [u8]),
}

fn request(method: &str, path: &str, headers: &[&str], body: Body<'_>) -> Vec<u8> {
    let mut out =
        format!("{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n").into_bytes();
    for h in headers {
        out.extend_from_slice(h.as_bytes());
    }
    match body {
        Body::None => out.extend_from_slice(b"\r\n"),
        Body::Sized(bytes) => {
            out.extend_from_slice(format!("content-length: {}\r\n\r\n", bytes.len()).as_bytes());
            out.extend_from_slice(bytes);
        }
        Body::Chunked(bytes) => {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
            for chunk in bytes.chunks(64 * 1024) {
                out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                out.extend_from_slice(chunk);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    out
}

/// Sends `bytes` on a new connection and reads the answer's status (`None`: closed without one).
async fn send_raw(server: SocketAddr, bytes: &[u8]) -> Option<u16> {
    let mut s = connect(server).await.ok()?;
    // The server may answer (413) and close before it has read all of a large body.
    let (mut reader, mut writer) = s.split();
    let write = async {
        let _ = writer.write_all(bytes).await;
    };
    let mut out = Vec::new();
    let read = async {
        let _ = tokio::time::timeout(Duration::from_secs(10), reader.read_to_end(&mut out)).await;
    };
    tokio::join!(write, read);
    status_of(&out)
}

fn status_of(answer: &[u8]) -> Option<u16> {
    let line = answer.get(9..12)?;
    std::str::from_utf8(line).ok()?.parse().ok()
}
