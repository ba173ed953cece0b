//! Activities through the REST API.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

async fn activities_are_listed_newest_first_by_occurrence(s: Server) {
    let contact = s
        .post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201)
        .clone();
    let cid = contact["id"].as_str().unwrap();
    let old = s.post("/activities", json!({"type": "call", "contact_id": cid, "body": "first call", "occurred_at": "2020-01-02T03:04:05Z"})).await.ok(201).clone();
    assert_eq!(old["occurred_at"], "2020-01-02T03:04:05.000Z");
    let now = s
        .post(
            "/activities",
            json!({"type": "note", "contact_id": cid, "body": "today"}),
        )
        .await
        .ok(201)
        .clone();
    let backdated = s
        .post(
            "/activities",
            json!({"type": "email", "occurred_at": "2021-06-01T00:00:00+02:00"}),
        )
        .await
        .ok(201)
        .clone();
    let ids = |v: &Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(s.get("/activities").await.ok(200)),
        vec![
            now["id"].clone(),
            backdated["id"].clone(),
            old["id"].clone()
        ]
    );
    assert_eq!(
        ids(s
            .get(&format!("/activities?contact_id={cid}"))
            .await
            .ok(200)),
        vec![now["id"].clone(), old["id"].clone()]
    );
    assert_eq!(
        ids(s.get("/activities?type=call").await.ok(200)),
        vec![old["id"].clone()]
    );
    // Paging follows occurred_at, not creation order.
    let first = s.get("/activities?limit=2").await.ok(200).clone();
    assert_eq!(
        ids(&first),
        vec![now["id"].clone(), backdated["id"].clone()]
    );
    let rest = s
        .get(&format!(
            "/activities?limit=2&cursor={}",
            first["next_cursor"].as_str().unwrap()
        ))
        .await
        .ok(200)
        .clone();
    assert_eq!(ids(&rest), vec![old["id"].clone()]);
}

async fn the_type_must_be_registered(s: Server) {
    let res = s.post("/activities", json!({"type": "meeting"})).await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["valid_options"], json!(["note", "call", "email", "task"]));
    s.post("/activities", json!({"body": "no type"}))
        .await
        .problem(422, "validation_failed");
    s.get("/activities?type=meeting")
        .await
        .problem(422, "unknown_value");
    let res = s
        .post(
            "/activities",
            json!({"type": "note", "deal_id": "deal_00000000000000000000000000"}),
        )
        .await;
    assert_eq!(res.problem(422, "invalid_reference")["field"], "deal_id");
}

async fn activities_are_updated_and_deleted_for_good(s: Server) {
    let a = s
        .post("/activities", json!({"type": "task", "body": "call back"}))
        .await
        .ok(201)
        .clone();
    let id = a["id"].as_str().unwrap();
    let updated = s
        .req(Method::PATCH, &format!("/activities/{id}"))
        .header("If-Match", "1")
        .json(&json!({"body": "called back", "type": "call"}))
        .send()
        .await;
    assert_eq!(updated.ok(200)["version"], 2);
    s.req(Method::PATCH, &format!("/activities/{id}"))
        .header("If-Match", "1")
        .json(&json!({"body": "x"}))
        .send()
        .await
        .problem(412, "version_conflict");
    assert_eq!(
        s.delete(&format!("/activities/{id}")).await.ok(200)["deleted"],
        true
    );
    s.get(&format!("/activities/{id}"))
        .await
        .problem(404, "not_found");
}

async fn activity_creates_are_idempotent(s: Server) {
    let body = json!({"type": "note", "body": "once"});
    let a = s
        .req(Method::POST, "/activities")
        .header("Idempotency-Key", "a1")
        .json(&body)
        .send()
        .await
        .ok(201)
        .clone();
    let b = s
        .req(Method::POST, "/activities")
        .header("Idempotency-Key", "a1")
        .json(&body)
        .send()
        .await;
    assert_eq!(b.ok(201), &a);
    assert_eq!(
        s.get("/activities").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

crate::on_both_stores!(
    activities_are_listed_newest_first_by_occurrence,
    the_type_must_be_registered,
    activities_are_updated_and_deleted_for_good,
    activity_creates_are_idempotent,
);
