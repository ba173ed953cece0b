//! Plans, usage and the monthly limits: the free quota, the spend cap of paid plans, settings,
//! and operator plan changes (decisions §8, §17).

use futures::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{cli, spawn_with, Backend, Res, Server};

/// A high rate limit, so that tests of the monthly limits never meet the per-minute one.
const NO_RATE_LIMIT: &[&str] = &["--rate-limit-per-minute", "1000000"];

async fn live(s: &Server, method: Method, path: &str) -> Res {
    s.req(method, path).key(&s.keys.live).send().await
}

async fn live_usage(s: &Server) -> Value {
    live(s, Method::GET, "/usage").await.ok(200).clone()
}

/// Waits until a running server sees the plan the CLI set in another process: at once on
/// Postgres (NOTIFY at commit), within the SQLite store's 100 ms poll (docs/decisions.md). At most
/// five seconds, so a change that never arrives fails the test. `GET /usage` is not counted.
async fn usage_once_plan_is(s: &Server, plan: &str) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let usage = live_usage(s).await;
        if usage["plan"] == plan || std::time::Instant::now() > deadline {
            return usage;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Sends `n` live `GET /contacts` at once; returns the statuses.
async fn burst(s: &Server, n: usize) -> Vec<Res> {
    join_all((0..n).map(|_| live(s, Method::GET, "/contacts"))).await
}

async fn the_free_plans_1001st_live_request_is_refused_while_test_mode_keeps_working(
    backend: Backend,
) {
    let s = spawn_with(backend, &[&["--plan", "free"], NO_RATE_LIMIT].concat()).await;
    let mut admitted = 0;
    for _ in 0..40 {
        admitted += burst(&s, 25)
            .await
            .iter()
            .filter(|r| r.status == 200)
            .count();
    }
    assert_eq!(
        admitted, 1_000,
        "the free plan's 1,000 live requests all pass"
    );
    let refused = live(&s, Method::GET, "/contacts").await;
    assert_eq!(refused.problem(429, "quota_exceeded")["included"], 1_000);
    assert!(
        refused.header("ratelimit-limit").is_some(),
        "a refused request still reports its rate budget"
    );
    live(&s, Method::POST, "/companies")
        .await
        .problem(429, "quota_exceeded");

    s.get("/contacts").await.ok(200);
    s.post("/companies", json!({"name": "Test mode is never capped"}))
        .await
        .ok(201);

    let usage = live_usage(&s).await;
    assert_eq!(usage["object"], "usage");
    assert_eq!(
        (usage["mode"].clone(), usage["plan"].clone()),
        (json!("live"), json!("free"))
    );
    assert_eq!(
        usage["requests"],
        json!({"used": 1_000, "included": 1_000, "overage": 0}),
        "refused requests are not counted"
    );
    assert_eq!(
        (
            usage["overage_cost_usd"].clone(),
            usage["overage_cap_usd"].clone()
        ),
        (json!(0.0), Value::Null)
    );
    assert_eq!(usage["automations"], json!({"active": 0, "limit": 2}));
    assert_eq!(usage["sequences"], json!({"count": 0, "limit": 1}));
    assert_eq!(usage["rate_limit_per_minute"], 1_000_000);
    assert!(usage["period"]["start"]
        .as_str()
        .unwrap()
        .ends_with("-01T00:00:00.000Z"));
    live(&s, Method::GET, "/settings").await.ok(200);

    let test_usage = s.get("/usage").await.ok(200).clone();
    assert_eq!(test_usage["mode"], "test");
    assert_eq!(
        test_usage["requests"],
        json!({"used": 2, "included": null, "overage": 0}),
        "test mode is counted, never metered"
    );
}

async fn a_paid_plan_with_a_zero_cap_stops_at_its_quota_and_bills_overage_once_lifted(
    backend: Backend,
) {
    let s = spawn_with(backend, &["--plan", "pro", "--included-requests", "5"]).await;
    let zero = s
        .req(Method::PATCH, "/settings")
        .key(&s.keys.live)
        .json(&json!({"overage_cap_usd": 0}))
        .send()
        .await;
    assert_eq!(
        zero.ok(200),
        &json!({"object": "settings", "overage_cap_usd": 0.0, "history_retention_days": null, "email_retention_days": null})
    );
    assert!(burst(&s, 5).await.iter().all(|r| r.status == 200));
    live(&s, Method::GET, "/contacts")
        .await
        .problem(429, "spend_cap_reached");
    let usage = live_usage(&s).await;
    assert_eq!(
        usage["requests"],
        json!({"used": 5, "included": 5, "overage": 0})
    );

    let lifted = s
        .req(Method::PATCH, "/settings")
        .key(&s.keys.live)
        .json(&json!({"overage_cap_usd": null}))
        .send()
        .await;
    assert_eq!(lifted.ok(200)["overage_cap_usd"], Value::Null);
    assert!(burst(&s, 3).await.iter().all(|r| r.status == 200));
    let usage = live_usage(&s).await;
    assert_eq!(
        usage["requests"],
        json!({"used": 8, "included": 5, "overage": 3})
    );
    assert!(
        (usage["overage_cost_usd"].as_f64().unwrap() - 0.003).abs() < 1e-12,
        "{usage}"
    );
    assert_eq!(usage["overage_cap_usd"], Value::Null);

    // $0.005 pays for five overage requests at $0.001: three are used, so two more pass.
    s.req(Method::PATCH, "/settings")
        .json(&json!({"overage_cap_usd": 0.005}))
        .send()
        .await
        .ok(200);
    assert_eq!(
        burst(&s, 4)
            .await
            .iter()
            .filter(|r| r.status == 200)
            .count(),
        2
    );
    live(&s, Method::GET, "/contacts")
        .await
        .problem(429, "spend_cap_reached");
}

async fn settings_take_a_number_at_least_zero_or_null_and_belong_to_the_workspace(
    backend: Backend,
) {
    let s = spawn_with(backend, &[]).await;
    assert_eq!(
        s.get("/settings").await.ok(200),
        &json!({"object": "settings", "overage_cap_usd": null, "history_retention_days": null, "email_retention_days": null})
    );
    for bad in [
        json!({"overage_cap_usd": -1}),
        json!({"overage_cap_usd": "10"}),
        json!({"overage_cap_usd": [1]}),
        json!({}),
    ] {
        let res = s.patch("/settings", bad.clone()).await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "overage_cap_usd",
            "{bad}"
        );
    }
    s.patch("/settings", json!({"overage_cap_usd": 1, "plan": "scale"}))
        .await
        .problem(422, "unknown_field");
    s.patch("/settings", json!({"overage_cap_usd": 12.5}))
        .await
        .ok(200);
    assert_eq!(
        live(&s, Method::GET, "/settings").await.ok(200)["overage_cap_usd"],
        12.5,
        "one setting for both modes"
    );
    assert_eq!(live_usage(&s).await["overage_cap_usd"], 12.5);
}

async fn fifty_concurrent_clients_racing_the_quota_boundary_get_exactly_the_quota(
    backend: Backend,
) {
    let s = spawn_with(
        backend,
        &[
            &["--plan", "free", "--included-requests", "20"],
            NO_RATE_LIMIT,
        ]
        .concat(),
    )
    .await;
    let results = burst(&s, 50).await;
    let admitted = results.iter().filter(|r| r.status == 200).count();
    assert_eq!(admitted, 20);
    for r in results.iter().filter(|r| r.status != 200) {
        r.problem(429, "quota_exceeded");
    }
    assert_eq!(live_usage(&s).await["requests"]["used"], 20);
}

async fn set_plan_applies_to_a_running_server(backend: Backend) {
    let s = spawn_with(backend, &["--plan", "free", "--included-requests", "2"]).await;
    assert!(burst(&s, 2).await.iter().all(|r| r.status == 200));
    live(&s, Method::GET, "/contacts")
        .await
        .problem(429, "quota_exceeded");

    let ws = s.keys.workspace_id.as_str();
    let out = cli(
        &s.database_url,
        &["workspace", "set-plan", "--workspace", ws, "--plan", "pro"],
    );
    assert!(out.contains("pro"), "{out}");
    assert_eq!(usage_once_plan_is(&s, "pro").await["plan"], "pro");
    live(&s, Method::GET, "/contacts").await.ok(200);
    let usage = live_usage(&s).await;
    assert_eq!(
        (usage["plan"].clone(), usage["requests"].clone()),
        (
            json!("pro"),
            json!({"used": 3, "included": 2, "overage": 1})
        )
    );
    assert_eq!(
        (
            usage["rate_limit_per_minute"].clone(),
            usage["sequences"]["limit"].clone()
        ),
        (json!(1_200), json!(10))
    );

    cli(
        &s.database_url,
        &[
            "workspace",
            "set-plan",
            "--workspace",
            ws,
            "--plan",
            "scale",
            "--clear-overrides",
            "--rate-limit-per-minute",
            "7",
        ],
    );
    let usage = usage_once_plan_is(&s, "scale").await;
    assert_eq!(
        (usage["plan"].clone(), usage["requests"]["included"].clone()),
        (json!("scale"), json!(1_000_000))
    );
    assert_eq!(
        (
            usage["rate_limit_per_minute"].clone(),
            usage["sequences"]["limit"].clone()
        ),
        (json!(7), Value::Null)
    );
    let res = live(&s, Method::GET, "/contacts").await;
    assert_eq!(res.header("ratelimit-limit"), Some("7"));
}

/// A connection in a transaction that holds writes to the usage counters: on SQLite the one
/// writer (`BEGIN IMMEDIATE`, as an import chunk's transaction holds it), on Postgres the table
/// against writers. Dropping it rolls back.
enum HeldWrites {
    Sqlite(#[allow(dead_code)] sqlx::SqliteConnection),
    Postgres(#[allow(dead_code)] sqlx::PgConnection),
}

async fn hold_usage_writes(backend: Backend, database_url: &str) -> HeldWrites {
    use sqlx::Connection;
    match backend {
        Backend::Sqlite => {
            let mut db = sqlx::SqliteConnection::connect(database_url).await.unwrap();
            sqlx::query("BEGIN IMMEDIATE")
                .execute(&mut db)
                .await
                .unwrap();
            HeldWrites::Sqlite(db)
        }
        Backend::Postgres => {
            let mut db = sqlx::PgConnection::connect(database_url).await.unwrap();
            for sql in ["BEGIN", "LOCK TABLE usage_counters IN EXCLUSIVE MODE"] {
                sqlx::query(sql).execute(&mut db).await.unwrap();
            }
            HeldWrites::Postgres(db)
        }
    }
}

/// Requests count in memory while the usage flush waits for the database: a flush that cannot
/// write yet holds up neither the tenant's requests nor its count (it is written once the
/// database lets it).
async fn a_flush_waiting_for_the_database_holds_up_no_request(backend: Backend) {
    let s = spawn_with(backend, &[]).await;
    s.get("/contacts").await.ok(200);
    let held = hold_usage_writes(backend, &s.database_url).await;
    // Counted after the lock: the next flush (within a second) has this to write, and waits.
    s.get("/contacts").await.ok(200);
    tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
    for _ in 0..3 {
        let answered =
            tokio::time::timeout(std::time::Duration::from_secs(2), s.get("/contacts")).await;
        assert!(
            answered.is_ok(),
            "a request waited for the flush that waits for the database"
        );
        answered.unwrap().ok(200);
    }
    drop(held);
    // The waiting flush wrote once the lock was gone: test-mode requests are counted too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let usage = s.get("/usage").await.ok(200).clone();
        if usage["requests"]["used"].as_u64().unwrap_or(0) >= 5 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{usage}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

crate::on_both_backends!(
    a_flush_waiting_for_the_database_holds_up_no_request,
    the_free_plans_1001st_live_request_is_refused_while_test_mode_keeps_working,
    a_paid_plan_with_a_zero_cap_stops_at_its_quota_and_bills_overage_once_lifted,
    settings_take_a_number_at_least_zero_or_null_and_belong_to_the_workspace,
    fifty_concurrent_clients_racing_the_quota_boundary_get_exactly_the_quota,
    set_plan_applies_to_a_running_server,
);
