//! No delivery is lost when servers die: 2,000 events fan out to 5 webhooks while the server is
//! killed with SIGKILL six times and restarted (on Postgres, two server processes share the
//! database throughout). At the end every (event, webhook) pair was answered 2xx at least once,
//! or its delivery is dead-lettered after six recorded attempts.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use futures::{stream, StreamExt};
use serde_json::json;

use crate::{
    support::{self, Backend, Server},
    webhooks::Receiver,
};

const EVENTS: usize = 2000;
const HOOKS: usize = 5;
const KILLS: usize = 6;

/// Deliveries are slowed down a little (a receiver that answers after 2 ms, 16 attempts in flight
/// per process) so that the kills land while the work is under way; every 13th request fails.
const ENV: &[(&str, &str)] = &[
    ("CRM_WEBHOOK_BACKOFF", "100ms,100ms,100ms,100ms,100ms"),
    ("CRM_WEBHOOK_POLL", "20ms"),
    ("CRM_WEBHOOK_TIMEOUT", "1s"),
    ("CRM_WEBHOOK_LEASE", "2s"),
    ("CRM_WEBHOOK_CONCURRENCY", "16"),
];

fn start(backend: Backend, db: &str, keys: &support::Keys, worker: bool) -> Server {
    let mut env = ENV.to_vec();
    if !worker {
        env.push(("CRM_WEBHOOK_WORKER", "false"));
    }
    support::start(backend, db.to_owned(), keys.clone(), &env)
}

/// Every `contact.created` event id, by paging `GET /events`.
async fn all_event_ids(s: &Server) -> Vec<String> {
    let mut ids = Vec::new();
    let mut path = "/events?type=contact.created&limit=100".to_owned();
    loop {
        let page = s.get(&path).await.ok(200).clone();
        ids.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["id"].as_str().unwrap().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/events?type=contact.created&limit=100&cursor={c}"),
            None => return ids,
        }
    }
}

/// The event ids each receiver answered 2xx, folded in incrementally.
struct Tally {
    seen: Vec<usize>,
    ok: Vec<HashSet<String>>,
    requests: usize,
}

impl Tally {
    fn update(&mut self, rx: &[Receiver]) {
        for (i, r) in rx.iter().enumerate() {
            let new = r.received_since(self.seen[i]);
            self.seen[i] += new.len();
            self.requests += new.len();
            for req in new {
                if (200..300).contains(&req.answered) {
                    let id = req.json()["id"].as_str().unwrap().to_owned();
                    self.ok[i].insert(id);
                }
            }
        }
    }

    fn complete(&self, events: usize) -> bool {
        self.ok.iter().all(|s| s.len() >= events)
    }
}

async fn no_delivery_is_lost_when_servers_are_killed(backend: Backend) {
    let began = std::time::Instant::now();
    let db = support::fresh_database(backend).await;
    let keys = support::create_workspace(
        &db,
        &["--plan", "scale", "--rate-limit-per-minute", "1000000"],
    );

    // The webhooks, and the events, written while no worker runs (the outbox keeps them).
    let quiet = start(backend, &db, &keys, false);
    let mut receivers = Vec::new();
    let mut hook_ids = Vec::new();
    for _ in 0..HOOKS {
        let rx = Receiver::start_with(&[], 200, Duration::from_millis(2), 13).await;
        let hook = quiet
            .post(
                "/webhooks",
                json!({"url": rx.url, "events": ["contact.created"]}),
            )
            .await
            .ok(201)
            .clone();
        hook_ids.push(hook["id"].as_str().unwrap().to_owned());
        receivers.push(rx);
    }
    let created = stream::iter(0..EVENTS)
        .map(|i| {
            let s = &quiet;
            async move {
                s.post("/contacts", json!({"email": format!("k{i}@example.com")}))
                    .await
                    .status
                    .as_u16()
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<u16>>()
        .await;
    assert!(created.iter().all(|s| *s == 201));
    let events = all_event_ids(&quiet).await;
    assert_eq!(events.len(), EVENTS);
    drop(quiet);
    eprintln!(
        "{backend:?}: {EVENTS} events written in {:?}",
        began.elapsed()
    );

    // Workers, killed (SIGKILL) and restarted while they fan out and deliver.
    let processes = if backend == Backend::Postgres { 2 } else { 1 };
    let mut servers: Vec<Server> = (0..processes)
        .map(|_| start(backend, &db, &keys, true))
        .collect();
    let mut tally = Tally {
        seen: vec![0; HOOKS],
        ok: vec![HashSet::new(); HOOKS],
        requests: 0,
    };
    let mut kills_mid_work = 0;
    for k in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(300)).await;
        tally.update(&receivers);
        if !tally.complete(EVENTS) {
            kills_mid_work += 1;
        }
        let victim = k % processes;
        drop(std::mem::replace(
            &mut servers[victim],
            start(backend, &db, &keys, true),
        ));
    }

    // The survivors finish the work, including what the killed processes held.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while !tally.complete(EVENTS) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        tally.update(&receivers);
        if std::env::var_os("CRM_KILL_TEST_PROGRESS").is_some() {
            let ok: usize = tally.ok.iter().map(HashSet::len).sum();
            eprintln!(
                "{:?}: {} requests, {ok} pairs done",
                began.elapsed(),
                tally.requests
            );
        }
    }
    eprintln!(
        "{backend:?}: after {:?}, {} requests for {} pairs, {kills_mid_work} of {KILLS} kills while work was pending",
        began.elapsed(),
        tally.requests,
        EVENTS * HOOKS
    );

    // Any pair never answered 2xx must be dead-lettered after six recorded attempts.
    let s = &servers[0];
    for (i, hook_id) in hook_ids.iter().enumerate() {
        let missing: Vec<&String> = events
            .iter()
            .filter(|e| !tally.ok[i].contains(*e))
            .collect();
        if missing.is_empty() {
            continue;
        }
        let mut dead: HashMap<String, u64> = HashMap::new();
        let mut path = format!("/webhooks/{hook_id}/deliveries?limit=100");
        loop {
            let page = s.get(&path).await.ok(200).clone();
            for a in page["data"].as_array().unwrap() {
                if a["status"] == "dead_lettered" {
                    dead.insert(
                        a["event_id"].as_str().unwrap().to_owned(),
                        a["attempt"].as_u64().unwrap(),
                    );
                }
            }
            match page["next_cursor"].as_str() {
                Some(c) => path = format!("/webhooks/{hook_id}/deliveries?limit=100&cursor={c}"),
                None => break,
            }
        }
        for e in missing {
            assert_eq!(
                dead.get(e.as_str()),
                Some(&6),
                "event {e} to webhook {hook_id}: neither received nor dead-lettered after 6 attempts"
            );
        }
    }
}

crate::on_both_backends!(no_delivery_is_lost_when_servers_are_killed);
