//! `Idempotency-Key` (spec "Idempotency and concurrency", decisions §9).

use std::{
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crm_app::{
    idempotency::{Claim, StoredReply, LEASE_MS},
    workspaces::Overrides,
    App, AppError, Clock,
};
use crm_domain::{Mode, Plan, Tenant, Timestamp};
use crm_runtime::{system::UuidV7, Runtime};
use reqwest::Method;
use serde_json::json;

use crate::support::{Backend, Server};

async fn a_replay_returns_the_first_result(s: Server) {
    let body = json!({"first_name": "Ada", "email": "ada@example.com"});
    let first = s
        .req(Method::POST, "/contacts")
        .header("Idempotency-Key", "k-1")
        .json(&body)
        .send()
        .await;
    let created = first.ok(201).clone();
    assert_eq!(first.header("idempotent-replayed"), None);
    // Same body with keys in another order is the same request.
    let again = s
        .req(Method::POST, "/contacts")
        .header("Idempotency-Key", "k-1")
        .json(&json!({"email": "ada@example.com", "first_name": "Ada"}))
        .send()
        .await;
    assert_eq!(again.ok(201), &created);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        s.get("/contacts").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        s.get("/events").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "one event, not two"
    );
}

async fn the_same_key_with_another_body_is_refused(s: Server) {
    s.req(Method::POST, "/contacts")
        .header("Idempotency-Key", "k-2")
        .json(&json!({"first_name": "A"}))
        .send()
        .await
        .ok(201);
    let res = s
        .req(Method::POST, "/contacts")
        .header("Idempotency-Key", "k-2")
        .json(&json!({"first_name": "B"}))
        .send()
        .await;
    res.problem(409, "idempotency_key_reused");
    // The same key on another path is another request too.
    let res = s
        .req(Method::POST, "/companies")
        .header("Idempotency-Key", "k-2")
        .json(&json!({"name": "A"}))
        .send()
        .await;
    res.problem(409, "idempotency_key_reused");
}

/// The query is part of the request: an upsert matched on another key is another request.
async fn the_same_key_with_another_query_is_refused(s: Server) {
    s.post(
        "/fields",
        json!({"object": "company", "key": "code", "data_type": "text", "unique": true}),
    )
    .await
    .ok(201);
    let body = json!({"name": "Acme", "domain": "acme.example", "custom_fields": {"code": "A1"}});
    let upsert = |path: &'static str| {
        s.req(Method::POST, path)
            .header("Idempotency-Key", "k-q")
            .json(&body)
            .send()
    };
    upsert("/companies/upsert").await.ok(201);
    upsert("/companies/upsert?match=custom_fields.code")
        .await
        .problem(409, "idempotency_key_reused");
    let replay = upsert("/companies/upsert").await;
    replay.ok(201);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
}

async fn client_errors_are_stored_and_replayed(s: Server) {
    let send = || {
        s.req(Method::POST, "/contacts")
            .header("Idempotency-Key", "k-3")
            .json(&json!({"first_name": "  "}))
            .send()
    };
    send().await.problem(422, "identifier_required");
    let replay = send().await;
    replay.problem(422, "identifier_required");
}

/// A replayed 4xx says so in the header too, as a replayed success does (decisions §9).
async fn a_replayed_client_error_carries_the_replayed_header(s: Server) {
    let send = || {
        s.req(Method::POST, "/companies")
            .header("Idempotency-Key", "abc2")
            .json(&json!({"name": ""}))
            .send()
    };
    let first = send().await;
    let original = first.problem(422, "validation_failed").clone();
    assert_eq!(first.header("idempotent-replayed"), None);
    let replay = send().await;
    let body = replay.problem(422, "validation_failed");
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        (
            &body["idempotent_replayed"],
            &body["detail"],
            &body["field"]
        ),
        (&json!(true), &original["detail"], &original["field"])
    );
}

async fn keys_are_scoped_per_mode(s: Server) {
    let body = json!({"first_name": "A"});
    let test = s
        .req(Method::POST, "/contacts")
        .header("Idempotency-Key", "shared")
        .json(&body)
        .send()
        .await
        .ok(201)
        .clone();
    let live = s
        .req(Method::POST, "/contacts")
        .key(&s.keys.live)
        .header("Idempotency-Key", "shared")
        .json(&body)
        .send()
        .await;
    assert_ne!(live.ok(201)["id"], test["id"]);
    assert_eq!(live.header("idempotent-replayed"), None);
}

async fn overlong_keys_are_refused(s: Server) {
    let key = "k".repeat(256);
    s.req(Method::POST, "/contacts")
        .header("Idempotency-Key", &key)
        .json(&json!({"first_name": "A"}))
        .send()
        .await
        .problem(400, "bad_request");
}

async fn updates_ignore_the_header(s: Server) {
    let c = s
        .post("/contacts", json!({"first_name": "A"}))
        .await
        .ok(201)
        .clone();
    let path = format!("/contacts/{}", c["id"].as_str().unwrap());
    s.req(Method::PATCH, &path)
        .header("Idempotency-Key", "u")
        .json(&json!({"first_name": "B"}))
        .send()
        .await
        .ok(200);
    let res = s
        .req(Method::PATCH, &path)
        .header("Idempotency-Key", "u")
        .json(&json!({"first_name": "C"}))
        .send()
        .await;
    assert_eq!(res.ok(200)["first_name"], "C");
}

crate::on_both_stores!(
    a_replay_returns_the_first_result,
    the_same_key_with_another_body_is_refused,
    the_same_key_with_another_query_is_refused,
    client_errors_are_stored_and_replayed,
    a_replayed_client_error_carries_the_replayed_header,
    keys_are_scoped_per_mode,
    overlong_keys_are_refused,
    updates_ignore_the_header,
);

/// A clock the test moves by hand.
pub(crate) struct ManualClock(AtomicI64);

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(Ordering::SeqCst))
    }
}

/// An application on a fresh database of `backend`, with a clock the test moves.
pub(crate) async fn app_on(backend: Backend) -> (App, Arc<ManualClock>) {
    let (runtime, clock) = runtime_on(backend).await;
    (runtime.app, clock)
}

/// [`app_on`], with the rest of the process's infrastructure (the outbox signal).
pub(crate) async fn runtime_on(backend: Backend) -> (Runtime, Arc<ManualClock>) {
    let url = crate::support::fresh_database(backend).await;
    runtime_at(backend, &url).await
}

/// An application on the database at `url` (migrated), with a clock the test moves: another
/// process, as far as the database can tell.
async fn app_at(backend: Backend, url: &str) -> (App, Arc<ManualClock>) {
    let (runtime, clock) = runtime_at(backend, url).await;
    (runtime.app, clock)
}

async fn runtime_at(backend: Backend, url: &str) -> (Runtime, Arc<ManualClock>) {
    let url = url.to_owned();
    let store: Arc<dyn crm_app::Store> = match backend {
        Backend::Sqlite => {
            let s = crm_store_sqlite::SqliteStore::connect(&url).await.unwrap();
            s.migrate().await.unwrap();
            Arc::new(s)
        }
        Backend::Postgres => {
            let s = crm_store_postgres::PostgresStore::connect(&url)
                .await
                .unwrap();
            s.migrate().await.unwrap();
            Arc::new(s)
        }
    };
    let clock = Arc::new(ManualClock(AtomicI64::new(1_800_000_000_000)));
    (
        Runtime::new(
            store,
            clock.clone(),
            Arc::new(UuidV7),
            Arc::new(crm_api::bodies::BodyViews),
        ),
        clock,
    )
}

/// A key whose first request is still running answers `idempotency_in_progress`; once its lease
/// runs out (the process died), a retry takes it over; a finished one replays.
async fn in_progress_then_abandoned_then_replayed(backend: Backend) {
    let (app, clock) = app_on(backend).await;
    let ws = app
        .create_workspace("w", Plan::Free, Overrides::default())
        .await
        .unwrap();
    let tenant = Tenant {
        workspace_id: ws.workspace.id,
        mode: Mode::Test,
    };
    let Claim::Fresh(claim) = app
        .claim_idempotency(&tenant, "k", "fp", 201)
        .await
        .unwrap()
    else {
        panic!("fresh")
    };
    assert!(matches!(
        app.claim_idempotency(&tenant, "k", "fp", 201).await,
        Err(AppError::IdempotencyInProgress)
    ));
    assert!(matches!(
        app.claim_idempotency(&tenant, "k", "other", 201).await,
        Err(AppError::IdempotencyKeyReused)
    ));
    clock.0.fetch_add(LEASE_MS + 1, Ordering::SeqCst);
    let Claim::Fresh(taken) = app
        .claim_idempotency(&tenant, "k", "fp", 201)
        .await
        .unwrap()
    else {
        panic!("taken over")
    };
    assert_eq!(taken.key, claim.key);
    let reply = StoredReply {
        status: 201,
        body: b"{}".to_vec(),
    };
    app.finish_idempotency(&tenant, &taken, &reply)
        .await
        .unwrap();
    match app
        .claim_idempotency(&tenant, "k", "fp", 201)
        .await
        .unwrap()
    {
        Claim::Replay(r) => assert_eq!(r, reply),
        Claim::Fresh(_) => panic!("should replay"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_progress_then_abandoned_then_replayed_on_sqlite() {
    in_progress_then_abandoned_then_replayed(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_progress_then_abandoned_then_replayed_on_postgres() {
    in_progress_then_abandoned_then_replayed(Backend::Postgres).await;
}

/// Claims whose process is gone (decisions §24, "Idempotency, corrected").
mod owners {
    use super::*;

    /// Two processes on one database (on SQLite, a second store on the same file): a claim of the
    /// first is in progress to the second while the first runs, however long, and the second takes
    /// it over within a second of the first being gone, long before the lease would end.
    async fn a_claim_is_taken_over_as_soon_as_its_process_is_gone(backend: Backend) {
        let url = crate::support::fresh_database(backend).await;
        let (first, _) = app_at(backend, &url).await;
        let ws = first
            .create_workspace("w", Plan::Free, Overrides::default())
            .await
            .unwrap();
        let tenant = Tenant {
            workspace_id: ws.workspace.id,
            mode: Mode::Test,
        };
        assert!(matches!(
            first.claim_idempotency(&tenant, "k", "fp", 201).await,
            Ok(Claim::Fresh(_))
        ));
        let (second, _) = app_at(backend, &url).await;
        for _ in 0..3 {
            assert!(matches!(
                second.claim_idempotency(&tenant, "k", "fp", 201).await,
                Err(AppError::IdempotencyInProgress)
            ));
        }
        drop(first);
        let gone = Instant::now();
        loop {
            match second.claim_idempotency(&tenant, "k", "fp", 201).await {
                Ok(Claim::Fresh(_)) => break,
                Err(AppError::IdempotencyInProgress) if gone.elapsed() < Duration::from_secs(1) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                other => panic!("after {:?}: {other:?}", gone.elapsed()),
            }
        }
        // Now the second's own: in progress to it as to anyone.
        assert!(matches!(
            second.claim_idempotency(&tenant, "k", "fp", 201).await,
            Err(AppError::IdempotencyInProgress)
        ));
    }

    /// The keys whose claim is unfinished (no reply stored), read from the database directly.
    async fn unfinished_claims(backend: Backend, url: &str) -> Vec<String> {
        use sqlx::Connection;
        const SQL: &str = "SELECT key FROM idempotency_keys WHERE reply_status IS NULL";
        match backend {
            Backend::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
                sqlx::query_scalar(SQL).fetch_all(&mut conn).await.unwrap()
            }
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                sqlx::query_scalar(SQL).fetch_all(&mut conn).await.unwrap()
            }
        }
    }

    fn contact_body(key: &str) -> serde_json::Value {
        json!({"email": format!("{key}@example.com")})
    }

    /// A server killed (SIGKILL) in the middle of creates leaves their keys claimed; a retry of each
    /// on the restarted server is served at once (created, or the first create's reply replayed)
    /// instead of answering `idempotency_in_progress` until the claims' 60-second lease ends.
    async fn a_retry_after_the_server_was_killed_mid_create_is_served_at_once(backend: Backend) {
        let db = crate::support::fresh_database(backend).await;
        let keys = crate::support::create_workspace(
            &db,
            &["--plan", "scale", "--rate-limit-per-minute", "1000000"],
        );
        let client = reqwest::Client::new();
        let mut left = Vec::new();
        for round in 0..5 {
            let server = crate::support::start(backend, db.clone(), keys.clone(), &[]);
            let (base, key) = (server.base.clone(), keys.test.clone());
            let answered = Arc::new(AtomicI64::new(0));
            let flood = tokio::spawn({
                let (client, answered) = (client.clone(), answered.clone());
                async move {
                    use futures::StreamExt;
                    futures::stream::iter(0..2000)
                        .for_each_concurrent(32, |i| {
                            let idem = format!("r{round}-{i}");
                            let req = client
                                .post(format!("{base}/v1/contacts"))
                                .bearer_auth(&key)
                                .header("Idempotency-Key", &idem)
                                .json(&contact_body(&idem))
                                .send();
                            let answered = answered.clone();
                            async move {
                                if req.await.is_ok() {
                                    answered.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                        })
                        .await;
                }
            });
            while answered.load(Ordering::SeqCst) < 50 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            drop(server); // SIGKILL, with creates in flight
            flood.abort();
            left = unfinished_claims(backend, &db).await;
            if !left.is_empty() {
                break;
            }
        }
        assert!(
            !left.is_empty(),
            "no kill landed between a claim and its create's commit"
        );

        let server = crate::support::start(backend, db.clone(), keys.clone(), &[]);
        let restarted = Instant::now();
        for idem in &left {
            let res = server
                .req(Method::POST, "/contacts")
                .header("Idempotency-Key", idem)
                .json(&contact_body(idem))
                .send()
                .await;
            assert_eq!(res.status.as_u16(), 201, "retry of {idem}: {:#}", res.body);
            assert_eq!(res.body["email"], format!("{idem}@example.com"));
        }
        let took = restarted.elapsed();
        assert!(
            took < Duration::from_secs(1),
            "{} retries took {took:?}",
            left.len()
        );
        assert!(unfinished_claims(backend, &db).await.is_empty());
        // Each created once: a replay or a fresh create, never a second contact.
        for idem in &left {
            let page = server
                .get(&format!("/contacts?email={idem}@example.com"))
                .await
                .ok(200)
                .clone();
            assert_eq!(page["data"].as_array().unwrap().len(), 1, "{idem}");
        }
        eprintln!(
            "{backend:?}: {} claims left by the kill, all retried in {took:?}",
            left.len()
        );
    }

    crate::on_both_backends!(
        a_claim_is_taken_over_as_soon_as_its_process_is_gone,
        a_retry_after_the_server_was_killed_mid_create_is_served_at_once,
    );
}
