//! `POST /batch` (decisions §10): per-operation results, `atomic`, idempotency, event silence.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

async fn each_operation_stands_alone_without_atomic(s: Server) {
    let existing = s
        .post("/contacts", json!({"email": "taken@example.com"}))
        .await
        .ok(201)
        .clone();
    let body = json!({"operations": [
        {"op": "create", "object": "contact", "data": {"first_name": "Ada"}},
        {"op": "create", "object": "contact", "data": {"email": "taken@example.com"}},
        {"op": "create", "object": "deal", "data": {"title": "Big", "stage": "won"}},
        {"op": "update", "object": "contact", "id": existing["id"], "data": {"first_name": "Renamed"}},
        {"op": "create", "object": "contact", "data": {"frist_name": "typo"}},
        {"op": "delete", "object": "deal", "id": "deal_00000000000000000000000000"},
    ]});
    let res = s.post("/batch", body).await.ok(200).clone();
    assert_eq!(res["object"], "batch");
    assert_eq!(
        (res["succeeded"].as_u64(), res["failed"].as_u64()),
        (Some(3), Some(3))
    );
    let results = res["results"].as_array().unwrap();
    assert_eq!(
        results
            .iter()
            .map(|r| r["index"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 1, 2, 3, 4, 5]
    );
    assert_eq!(results[0]["status"], 201);
    assert_eq!(results[1]["error"]["code"], "conflict");
    assert_eq!(results[1]["error"]["existing"]["id"], existing["id"]);
    assert_eq!(results[2]["data"]["stage"], "won");
    assert_eq!(results[3]["data"]["first_name"], "Renamed");
    assert_eq!(results[4]["error"]["code"], "unknown_field");
    assert_eq!(results[5]["error"]["code"], "not_found");
    assert_eq!(
        s.get("/contacts").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

async fn an_atomic_batch_with_a_failure_writes_nothing(s: Server) {
    let body = json!({"atomic": true, "operations": [
        {"op": "create", "object": "contact", "data": {"first_name": "Ada"}},
        {"op": "create", "object": "deal", "data": {"title": "T", "stage": "nope"}},
    ]});
    let res = s.post("/batch", body).await;
    let p = res.problem(422, "validation_failed");
    assert_eq!(p["errors"][0]["index"], 1);
    assert_eq!(p["errors"][0]["error"]["code"], "unknown_value");
    assert!(s.get("/contacts").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let ok = json!({"atomic": true, "operations": [{"op": "create", "object": "contact", "data": {"first_name": "Ada"}}]});
    assert_eq!(s.post("/batch", ok).await.ok(200)["succeeded"], 1);
}

async fn batch_writes_emit_no_events(s: Server) {
    let deal = s
        .post("/deals", json!({"title": "Seen"}))
        .await
        .ok(201)
        .clone();
    let before = s.get("/events?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .len();
    let body = json!({"operations": [
        {"op": "create", "object": "contact", "data": {"first_name": "Quiet"}},
        {"op": "create", "object": "deal", "data": {"title": "Quiet", "stage": "won"}},
        {"op": "update", "object": "deal", "id": deal["id"], "data": {"stage": "lost"}},
    ]});
    assert_eq!(s.post("/batch", body).await.ok(200)["succeeded"], 3);
    let after = s.get("/events?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(before, after, "batch writes are event-silent");
}

async fn batch_size_is_bounded(s: Server) {
    let res = s.post("/batch", json!({"operations": []})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "operations");
    // A missing member is named as the field, not as the body's root (`.`).
    let res = s.post("/batch", json!({})).await;
    let p = res.problem(422, "validation_failed");
    assert_eq!(
        (&p["field"], &p["detail"]),
        (&json!("operations"), &json!("operations is required")),
        "{p:#}"
    );
    let ops: Vec<Value> = (0..101).map(|i| json!({"op": "create", "object": "contact", "data": {"first_name": format!("c{i}")}})).collect();
    s.post("/batch", json!({"operations": ops}))
        .await
        .problem(422, "validation_failed");
    let ops: Vec<Value> = (0..100).map(|i| json!({"op": "create", "object": "contact", "data": {"first_name": format!("c{i}")}})).collect();
    assert_eq!(
        s.post("/batch", json!({"operations": ops})).await.ok(200)["succeeded"],
        100
    );
    let res = s
        .post(
            "/batch",
            json!({"operations": [{"op": "create", "object": "company", "data": {"name": "x"}}]}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(res["results"][0]["error"]["code"], "unknown_value");
}

async fn batches_are_idempotent(s: Server) {
    let body = json!({"operations": [{"op": "create", "object": "contact", "data": {"first_name": "Once"}}]});
    let first = s
        .req(Method::POST, "/batch")
        .header("Idempotency-Key", "b1")
        .json(&body)
        .send()
        .await
        .ok(200)
        .clone();
    let again = s
        .req(Method::POST, "/batch")
        .header("Idempotency-Key", "b1")
        .json(&body)
        .send()
        .await;
    assert_eq!(again.ok(200), &first);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        s.get("/contacts").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

crate::on_both_stores!(
    each_operation_stands_alone_without_atomic,
    an_atomic_batch_with_a_failure_writes_nothing,
    batch_writes_emit_no_events,
    batch_size_is_bounded,
    batches_are_idempotent,
);
