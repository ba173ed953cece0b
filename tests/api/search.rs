//! `GET /search` across contacts, companies and deals.

use serde_json::json;

use crate::support::Server;

async fn search_finds_each_object_by_its_text(s: Server) {
    s.post(
        "/contacts",
        json!({"first_name": "Rocky", "last_name": "Balboa", "email": "rocky@example.com"}),
    )
    .await
    .ok(201);
    s.post(
        "/contacts",
        json!({"phone": "+1 555 0199", "linkedin_url": "https://linkedin.com/in/rocketman"}),
    )
    .await
    .ok(201);
    s.post(
        "/companies",
        json!({"name": "Acme Rockets", "domain": "rockets.io"}),
    )
    .await
    .ok(201);
    s.post("/deals", json!({"title": "Rocket fuel order"}))
        .await
        .ok(201);
    s.post("/deals", json!({"title": "Unrelated"}))
        .await
        .ok(201);
    let res = s.get("/search?q=ROCK").await.ok(200).clone();
    assert_eq!(res["object"], "search");
    assert_eq!(res["contacts"]["data"].as_array().unwrap().len(), 2);
    assert_eq!(res["companies"]["data"].as_array().unwrap().len(), 1);
    assert_eq!(res["deals"]["data"].as_array().unwrap().len(), 1);
    assert_eq!(res["has_more"], false);
    let two = s.get("/search?q=0199").await.ok(200).clone();
    assert_eq!(two["contacts"]["data"].as_array().unwrap().len(), 1);
    assert!(two["companies"]["data"].as_array().unwrap().is_empty());
}

async fn limit_cuts_each_section_and_sets_has_more(s: Server) {
    for i in 0..3 {
        s.post("/contacts", json!({"first_name": format!("Zed {i}")}))
            .await
            .ok(201);
    }
    let res = s.get("/search?q=zed&limit=2").await.ok(200).clone();
    assert_eq!(res["contacts"]["data"].as_array().unwrap().len(), 2);
    assert_eq!(res["contacts"]["has_more"], true);
    assert_eq!(res["companies"]["has_more"], false);
    assert_eq!(res["has_more"], true);
}

async fn q_is_required_and_limit_bounded(s: Server) {
    assert_eq!(
        s.get("/search").await.problem(422, "validation_failed")["field"],
        "q"
    );
    assert_eq!(
        s.get("/search?q=").await.problem(422, "validation_failed")["field"],
        "q"
    );
    assert_eq!(
        s.get("/search?q=a&limit=101")
            .await
            .problem(422, "validation_failed")["field"],
        "limit"
    );
    s.get("/search?q=a&limit=100").await.ok(200);
    s.get("/search?q=a&page=2")
        .await
        .problem(400, "bad_request");
}

crate::on_both_stores!(
    search_finds_each_object_by_its_text,
    limit_cuts_each_section_and_sets_has_more,
    q_is_required_and_limit_bounded
);
