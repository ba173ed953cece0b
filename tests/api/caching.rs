//! What a server keeps in memory between requests (API keys with their workspace, registries,
//! active automations and sequences) is forgotten when it changes, on the server that changed it
//! before it answers, and on every other server on the same database as the change commits
//! (Postgres NOTIFY; on SQLite a 100 ms poll, for the CLI). Each case warms the cache on a
//! second server first, so a stale copy would be served if invalidation failed.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{start, Server};

/// Retries `f` until it returns `Some`, for at most five seconds (the change has to travel to
/// another process); a change that never arrives fails the test.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not seen by the other server within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn twin(s: &Server) -> Server {
    start(s.backend, s.database_url.clone(), s.keys.clone(), &[])
}

async fn a_key_revoked_on_one_server_is_refused_by_another(s: Server) {
    let other = twin(&s);
    let key = s
        .post("/keys", json!({"name": "doomed", "scopes": ["*"]}))
        .await
        .ok(201)
        .clone();
    let (id, secret) = (key["id"].as_str().unwrap(), key["secret"].as_str().unwrap());
    for server in [&s, &other] {
        server
            .req(Method::GET, "/contacts")
            .key(secret)
            .send()
            .await
            .ok(200);
    }
    s.delete(&format!("/keys/{id}")).await.ok(200);
    // The server that revoked it refuses it at once.
    s.req(Method::GET, "/contacts")
        .key(secret)
        .send()
        .await
        .problem(401, "unauthorized");
    eventually("the revocation", || async {
        let res = other.req(Method::GET, "/contacts").key(secret).send().await;
        (res.status == 401).then_some(())
    })
    .await;
}

async fn a_field_registered_on_one_server_is_accepted_by_another(s: Server) {
    let other = twin(&s);
    let body = json!({"first_name": "Ada", "custom_fields": {"tier": "gold"}});
    other
        .post("/contacts", body.clone())
        .await
        .problem(422, "unknown_field");
    s.post(
        "/fields",
        json!({"object": "contact", "key": "tier", "data_type": "text"}),
    )
    .await
    .ok(201);
    // Accepted at once where it was registered...
    s.post("/contacts", body.clone()).await.ok(201);
    // ...and by the other server once it hears of it; until then it refuses, writing nothing.
    let created: Value = eventually("the new field", || async {
        let res = other.post("/contacts", body.clone()).await;
        (res.status == 201).then(|| res.body.clone())
    })
    .await;
    assert_eq!(created["custom_fields"]["tier"], "gold");
}

async fn an_automation_created_on_one_server_runs_on_another(s: Server) {
    let other = twin(&s);
    // Warm the other server's (empty) rule list.
    other
        .post("/contacts", json!({"first_name": "Before"}))
        .await
        .ok(201);
    let rule = s.post(
        "/automations",
        json!({"name": "welcome", "trigger_event": "contact.created", "conditions": [],
               "actions": [{"type": "create_activity", "activity_type": "note", "body": "hello {{first_name}}"}]}),
    )
    .await;
    let rule_id = rule.ok(201)["id"].as_str().unwrap().to_owned();
    let mut n = 0;
    eventually("the new automation", || {
        n += 1;
        let (other, rule_id) = (&other, rule_id.clone());
        async move {
            let contact = other
                .post("/contacts", json!({"first_name": format!("After{n}")}))
                .await
                .ok(201)
                .clone();
            let runs = other
                .get(&format!("/automations/{rule_id}/runs"))
                .await
                .ok(200)
                .clone();
            let ran = runs["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["record_id"] == contact["id"]);
            ran.then_some(())
        }
    })
    .await;
}

async fn a_spend_cap_changed_on_one_server_applies_on_another(s: Server) {
    let other = twin(&s);
    assert_eq!(
        other.get("/settings").await.ok(200)["overage_cap_usd"],
        Value::Null
    );
    s.patch("/settings", json!({"overage_cap_usd": 25}))
        .await
        .ok(200);
    assert_eq!(s.get("/settings").await.ok(200)["overage_cap_usd"], 25.0);
    eventually("the new cap", || async {
        let settings = other.get("/settings").await.ok(200).clone();
        (settings["overage_cap_usd"] == 25.0).then_some(())
    })
    .await;
}

crate::on_both_stores!(
    a_key_revoked_on_one_server_is_refused_by_another,
    a_field_registered_on_one_server_is_accepted_by_another,
    an_automation_created_on_one_server_runs_on_another,
    a_spend_cap_changed_on_one_server_applies_on_another,
);
