//! The SIGKILL row: clients create contacts with `Idempotency-Key` (each retried, same key, until
//! acknowledged), half in test mode, where a webhook sends every `contact.created` to a local
//! receiver, half in live mode, where a sequence of two steps sends each new contact two emails
//! through a local fake provider. Meanwhile the server is killed with SIGKILL several times and
//! started again. When the last server has finished the work, the row counts: acknowledged
//! creates missing, creates made twice, records without their event and events without their
//! record, and events delivered or steps sent never or more than once.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::{client::request, fakes::FakeHttp, Row, Store};
use crate::bench::{load::block_on, procs};

const ENV: &[(&str, &str)] = &[
    ("CRM_LOG", "warn"),
    ("CRM_WEBHOOK_POLL", "20ms"),
    ("CRM_WEBHOOK_BACKOFF", "100ms,100ms,100ms,100ms,100ms"),
    ("CRM_WEBHOOK_TIMEOUT", "1s"),
    ("CRM_WEBHOOK_LEASE", "2s"),
    ("CRM_SEQUENCE_POLL_MS", "20"),
    ("CRM_EMAIL_POLL_MS", "20"),
    ("CRM_EMAIL_BACKOFF", "100ms,100ms"),
];

const STEPS: [&str; 2] = ["Step one", "Step two"];

pub fn run(
    bin: &Path,
    store: Store,
    db_url: &str,
    run_dir: &Path,
    quick: bool,
) -> Result<Vec<Row>> {
    let ws = super::workspace(bin, db_url)?;
    let plan = if quick {
        Plan {
            kills: 3,
            every: Duration::from_millis(1500),
            workers: 4,
            pause: Duration::from_millis(100),
            quick,
        }
    } else {
        Plan {
            kills: 10,
            every: Duration::from_secs(3),
            workers: 8,
            pause: Duration::from_millis(20),
            quick,
        }
    };
    let bin = bin.to_owned();
    let db_url = db_url.to_owned();
    let logs = run_dir.join(format!("crash-{}", store.name()));
    std::fs::create_dir_all(&logs)?;
    let c = block_on(async move { kill_under_load(&bin, &db_url, &logs, &ws, &plan).await })?;
    let problems = c.lost
        + c.duplicated
        + c.records_without_event
        + c.events_without_record
        + c.deliveries_lost
        + c.deliveries_doubled
        + c.sends_lost
        + c.sends_doubled;
    Ok(vec![Row {
        store,
        check: "SIGKILL during creates, fan-out, sends".into(),
        figures: format!(
            "{} SIGKILLs ({} with work in flight); {} creates acknowledged ({} after a retry): lost {}, made twice {}; records without their event {}, events without their record {}; {} deliveries: lost {}, doubled {} ({} the same delivery again, in flight at a kill: at least once); {} sequence sends: lost {}, doubled {} ({} sent again, in flight at a kill), {} still queued when the row stopped waiting (claimed by a killed process, due again when its lease ends); drained in {:.1} s after the load",
            c.kills,
            c.kills_mid_work,
            c.acked,
            c.retried,
            c.lost,
            c.duplicated,
            c.records_without_event,
            c.events_without_record,
            c.deliveries,
            c.deliveries_lost,
            c.deliveries_doubled,
            c.deliveries_redelivered,
            c.sends,
            c.sends_lost,
            c.sends_doubled,
            c.sends_resent,
            c.sends_pending,
            c.drained.as_secs_f64(),
        ),
        target: if quick {
            "0 acknowledged lost, 0 records without events or the reverse, 0 deliveries or sends lost or doubled (sends may be pending)".into()
        } else {
            "0 acknowledged lost, 0 records without events or the reverse, 0 deliveries or sends lost or doubled".into()
        },
        passed: problems == 0 && c.kills_mid_work > 0 && (quick || c.sends_pending == 0),
    }])
}

/// How hard the row pushes: kills, the time between them, load workers and each worker's
/// pause between creates; the quick run does not wait out the email lease.
#[derive(Clone, Copy)]
struct Plan {
    kills: usize,
    every: Duration,
    workers: usize,
    pause: Duration,
    quick: bool,
}

struct Counts {
    kills: usize,
    kills_mid_work: usize,
    acked: usize,
    retried: usize,
    lost: usize,
    duplicated: usize,
    records_without_event: usize,
    events_without_record: usize,
    deliveries: usize,
    deliveries_lost: usize,
    deliveries_doubled: usize,
    /// The same delivery again after a kill landed while it was in flight.
    deliveries_redelivered: usize,
    sends: usize,
    sends_lost: usize,
    sends_doubled: usize,
    /// Sent again after a kill landed between the provider's answer and its record.
    sends_resent: usize,
    /// Not sent yet when the row stopped waiting, still queued: claimed by a killed process.
    sends_pending: usize,
    drained: Duration,
}

/// Whether a kill landed within [`IN_FLIGHT`] after `first` arrived: the window between a
/// receiver or provider taking a request and the server recording its answer.
fn in_flight_at_a_kill(first: Instant, killed_at: &[Instant]) -> bool {
    killed_at
        .iter()
        .any(|k| *k >= first && k.duration_since(first) <= IN_FLIGHT)
}

const IN_FLIGHT: Duration = Duration::from_secs(2);

/// An acknowledged create: its mode (`true`: live), idempotency key and contact id.
type Acked = (bool, String, String);

struct Load {
    addr: Mutex<String>,
    acked: Mutex<Vec<Acked>>,
    retried: Mutex<usize>,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn start(bin: &Path, db_url: &str, log: &Path) -> Result<procs::Proc> {
    let (bin, db_url, log) = (bin.to_owned(), db_url.to_owned(), log.to_owned());
    tokio::task::spawn_blocking(move || procs::start_server_env(&bin, &db_url, &log, ENV))
        .await
        .context("starting the server")?
}

async fn must(addr: &str, key: &str, method: &str, path: &str, body: &Value) -> Result<Value> {
    let a = request(addr, Some(key), method, path, &[], Some(body)).await?;
    if !a.ok() {
        bail!(
            "{method} {path} answered {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        );
    }
    Ok(a.json())
}

async fn kill_under_load(
    bin: &Path,
    db_url: &str,
    logs: &Path,
    ws: &procs::Workspace,
    plan: &Plan,
) -> Result<Counts> {
    let Plan {
        kills,
        every,
        workers,
        pause,
        quick,
    } = *plan;
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let receiver = FakeHttp::start(loopback, "{}").await?;
    let provider = FakeHttp::start(loopback, r#"{"id":"msg_crash"}"#).await?;
    let mut server = start(bin, db_url, &logs.join("0.log")).await?;
    let addr = server.addr.clone();
    must(
        &addr,
        &ws.test_key,
        "POST",
        "/v1/webhooks",
        &json!({"url": format!("{}/hook", receiver.url()), "events": ["contact.created"]}),
    )
    .await?;
    must(&addr, &ws.live_key, "POST", "/v1/connections",
        &json!({"provider": "resend", "api_key": "re_crash_row", "from": "crash@reliability.example", "base_url": provider.url()})).await?;
    let steps: Vec<Value> = STEPS
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"wait_seconds": i, "subject": s, "body": "b"}))
        .collect();
    must(
        &addr,
        &ws.live_key,
        "POST",
        "/v1/sequences",
        &json!({"name": "crash", "trigger": {"event": "contact.created"}, "steps": steps}),
    )
    .await?;

    let load = Arc::new(Load {
        addr: Mutex::new(addr),
        acked: Mutex::new(Vec::new()),
        retried: Mutex::new(0),
        stop: AtomicBool::new(false),
    });
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (load, test, live) = (load.clone(), ws.test_key.clone(), ws.live_key.clone());
        tasks.push(tokio::spawn(async move {
            worker(w, &load, &test, &live, pause).await
        }));
    }
    let mut killed_at = Vec::new();
    let mut kills_mid_work = 0;
    for k in 0..kills {
        tokio::time::sleep(every).await;
        // Work in flight: creates unanswered, deliveries or sends not yet made.
        let acked = lock(&load.acked).len();
        if acked > 0 && (receiver.requests().len() < acked / 2 || provider.requests().len() < acked)
        {
            kills_mid_work += 1;
        }
        server.sigkill();
        killed_at.push(Instant::now());
        server = start(bin, db_url, &logs.join(format!("{}.log", k + 1))).await?;
        *lock(&load.addr) = server.addr.clone();
    }
    tokio::time::sleep(every).await;
    load.stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.context("a load worker")??;
    }
    let last_kill = Instant::now();
    let acked = lock(&load.acked).clone();
    let addr = server.addr.clone();

    // Let the last server finish the fan-out and the sends.
    let live_count = acked.iter().filter(|a| a.0).count();
    // The quick run does not wait out the lease of emails a killed process had claimed (on
    // Postgres, 3 minutes: it must outlast a batch of slow sends); it counts them as pending.
    let deadline = Instant::now()
        + if quick {
            Duration::from_secs(20)
        } else {
            Duration::from_secs(240)
        };
    loop {
        let events = feed(&addr, &ws.test_key, "/v1/events?type=contact.created").await?;
        let delivered: BTreeSet<String> = receiver
            .requests()
            .iter()
            .filter_map(|r| r.json()["id"].as_str().map(str::to_owned))
            .collect();
        // Distinct (recipient, step) pairs: a send made again must not stand in for one not made.
        let sent: BTreeSet<(String, String)> = provider
            .requests()
            .iter()
            .map(|r| {
                let v = r.json();
                (
                    v["to"][0].as_str().unwrap_or("").to_owned(),
                    v["subject"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let done = events
            .iter()
            .all(|e| delivered.contains(e["id"].as_str().unwrap_or("")))
            && sent.len() >= live_count * STEPS.len();
        if done || Instant::now() > deadline {
            break;
        }
        eprintln!(
            "xtask reliability: crash: {} of {} events delivered, {} of {} sends made",
            events
                .iter()
                .filter(|e| delivered.contains(e["id"].as_str().unwrap_or("")))
                .count(),
            events.len(),
            sent.len(),
            live_count * STEPS.len()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // A moment more, so that a send or delivery made twice has the time to show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let drained = last_kill.elapsed();

    let mut c = Counts {
        kills,
        kills_mid_work,
        acked: acked.len(),
        retried: *lock(&load.retried),
        lost: 0,
        duplicated: 0,
        records_without_event: 0,
        events_without_record: 0,
        deliveries: 0,
        deliveries_lost: 0,
        deliveries_doubled: 0,
        deliveries_redelivered: 0,
        sends: 0,
        sends_lost: 0,
        sends_doubled: 0,
        sends_resent: 0,
        sends_pending: 0,
        drained,
    };
    let mut live_emails = Vec::new();
    for live in [false, true] {
        let key = if live { &ws.live_key } else { &ws.test_key };
        let contacts = feed(&addr, key, "/v1/contacts").await?;
        let ids: BTreeSet<&str> = contacts.iter().filter_map(|r| r["id"].as_str()).collect();
        let mut emails: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &contacts {
            *emails.entry(r["email"].as_str().unwrap_or("")).or_default() += 1;
        }
        c.duplicated += emails.values().filter(|n| **n > 1).count();
        c.lost += acked
            .iter()
            .filter(|a| a.0 == live && !ids.contains(a.2.as_str()))
            .count();
        let events = feed(&addr, key, "/v1/events?type=contact.created").await?;
        let mut per_record: BTreeMap<&str, usize> = BTreeMap::new();
        for e in &events {
            let id = e["data"]["id"].as_str().unwrap_or("");
            if ids.contains(id) {
                *per_record.entry(id).or_default() += 1;
            } else {
                c.events_without_record += 1;
            }
        }
        c.records_without_event += ids
            .iter()
            .filter(|id| per_record.get(*id) != Some(&1))
            .count();
        if live {
            live_emails = emails.keys().map(|e| (*e).to_owned()).collect();
        } else {
            // Each event's copies: a copy again of one delivery (the same `Svc-Delivery` id, in
            // flight when a kill landed) is at least once, as the spec says; a second delivery
            // is a double.
            let mut per_event: BTreeMap<String, Vec<(String, Instant)>> = BTreeMap::new();
            for r in receiver.requests() {
                if let Some(id) = r.json()["id"].as_str() {
                    let delivery = r.header("svc-delivery").unwrap_or("").to_owned();
                    per_event
                        .entry(id.to_owned())
                        .or_default()
                        .push((delivery, r.at));
                }
            }
            c.deliveries = events.len();
            for e in &events {
                match per_event.get(e["id"].as_str().unwrap_or("")) {
                    None => c.deliveries_lost += 1,
                    Some(copies) if copies.len() > 1 => {
                        let ids: BTreeSet<&str> = copies.iter().map(|(d, _)| d.as_str()).collect();
                        if ids.len() > 1 || !in_flight_at_a_kill(copies[0].1, &killed_at) {
                            c.deliveries_doubled += 1;
                        } else {
                            c.deliveries_redelivered += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    let mut per_send: BTreeMap<(String, String), Vec<Instant>> = BTreeMap::new();
    for r in provider.requests() {
        let v = r.json();
        let to = v["to"][0].as_str().unwrap_or("").to_owned();
        let subject = v["subject"].as_str().unwrap_or("").to_owned();
        per_send.entry((to, subject)).or_default().push(r.at);
    }
    // The emails the sequence made: one not sent yet is pending if it is still to be sent.
    let mut recorded: BTreeMap<(String, String), String> = BTreeMap::new();
    for e in feed(&addr, &ws.live_key, "/v1/emails").await? {
        recorded.insert(
            (
                e["to"].as_str().unwrap_or("").to_owned(),
                e["subject"].as_str().unwrap_or("").to_owned(),
            ),
            e["status"].as_str().unwrap_or("").to_owned(),
        );
    }
    for email in &live_emails {
        for step in STEPS {
            c.sends += 1;
            let key = (email.clone(), step.to_owned());
            match per_send.get(&key) {
                None if recorded
                    .get(&key)
                    .is_some_and(|s| s == "queued" || s == "sending") =>
                {
                    c.sends_pending += 1;
                }
                None => c.sends_lost += 1,
                Some(at)
                    if at.len() > 2
                        || (at.len() == 2 && !in_flight_at_a_kill(at[0], &killed_at)) =>
                {
                    c.sends_doubled += 1;
                }
                Some(at) if at.len() == 2 => c.sends_resent += 1,
                _ => {}
            }
        }
    }
    drop(server);
    Ok(c)
}

/// Every item of a list, page after page.
async fn feed(addr: &str, key: &str, path: &str) -> Result<Vec<Value>> {
    let mut items = Vec::new();
    let sep = if path.contains('?') { '&' } else { '?' };
    let mut next = format!("{path}{sep}limit=100");
    loop {
        let a = request(addr, Some(key), "GET", &next, &[], None).await?;
        if a.status != 200 {
            bail!(
                "GET {next} answered {}: {}",
                a.status,
                String::from_utf8_lossy(&a.body)
            );
        }
        let page = a.json();
        items.extend(page["data"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(cursor) => next = format!("{path}{sep}limit=100&cursor={cursor}"),
            None => return Ok(items),
        }
    }
}

/// Creates contacts one after another, alternating test and live mode, retrying each (same key,
/// whichever server is up) until it is acknowledged; stops at the first begun after `stop`.
async fn worker(w: usize, load: &Load, test: &str, live: &str, pause: Duration) -> Result<()> {
    let mut n = 0;
    while !load.stop.load(Ordering::SeqCst) {
        tokio::time::sleep(pause).await;
        n += 1;
        let is_live = n % 2 == 0;
        let key = if is_live { live } else { test };
        let idem = format!("w{w}-{n}");
        let body = json!({"first_name": "K", "email": format!("{idem}@crash.example")});
        let began = Instant::now();
        let mut tries = 0;
        loop {
            tries += 1;
            if began.elapsed() > Duration::from_secs(60) {
                bail!("create {idem} not acknowledged within 60 s");
            }
            let addr = lock(&load.addr).clone();
            let answer = request(
                &addr,
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
                    lock(&load.acked).push((is_live, idem.clone(), id));
                    if tries > 1 {
                        *lock(&load.retried) += 1;
                    }
                    break;
                }
                Ok(a)
                    if a.status < 500
                        && a.status != 429
                        && a.json()["code"] != "idempotency_in_progress" =>
                {
                    bail!(
                        "create {idem} answered {}: {}",
                        a.status,
                        String::from_utf8_lossy(&a.body)
                    );
                }
                // Killed mid-request, a claim of the dead process, or not up yet: retry.
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }
    Ok(())
}
