//! Pipelines and stages through the REST API (spec "Pipeline and stage", decisions §3, §6).

use reqwest::Method;
use serde_json::json;

use crate::support::Server;

fn keys(p: &serde_json::Value) -> Vec<String> {
    p["stages"].as_array().unwrap().iter().map(|s| s["key"].as_str().unwrap().to_owned()).collect()
}

async fn a_new_workspace_has_the_default_pipeline(s: Server) {
    let list = s.get("/pipelines").await.ok(200).clone();
    let pipelines = list["data"].as_array().unwrap();
    assert_eq!(pipelines.len(), 1);
    let p = &pipelines[0];
    assert_eq!((p["key"].as_str(), p["is_default"].as_bool()), (Some("default"), Some(true)));
    assert_eq!(keys(p), ["lead", "qualified", "proposal", "won", "lost"]);
    let types: Vec<_> = p["stages"].as_array().unwrap().iter().map(|s| s["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["open", "open", "open", "won", "lost"]);
    assert!(p["id"].as_str().unwrap().starts_with("pl_"));
    assert!(p["stages"][0]["id"].as_str().unwrap().starts_with("stg_"));
    assert_eq!(p["stages"][4]["ordinal"], 4);
}

async fn pipelines_take_string_or_object_stages_and_keys_are_unique(s: Server) {
    let body = json!({"key": "hiring", "name": "Hiring", "stages": ["applied", {"key": "hired", "label": "Hired!", "type": "won"}, {"key": "rejected", "type": "lost"}]});
    let p = s.post("/pipelines", body.clone()).await.ok(201).clone();
    assert_eq!(p["stages"][0]["label"], "applied");
    assert_eq!(p["stages"][1]["label"], "Hired!");
    assert_eq!(p["stages"][1]["type"], "won");
    assert_eq!(p["is_default"], false);
    let dup = s.post("/pipelines", body).await;
    assert_eq!(dup.problem(409, "conflict")["existing"]["id"], p["id"]);
    // Addressed by id or key.
    assert_eq!(s.get("/pipelines/hiring").await.ok(200)["id"], p["id"]);
    assert_eq!(s.get(&format!("/pipelines/{}", p["id"].as_str().unwrap())).await.ok(200)["key"], "hiring");
    s.get("/pipelines/nope").await.problem(404, "not_found");
    let res = s.post("/pipelines", json!({"key": "x", "stages": []})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "stages");
    let res = s.post("/pipelines", json!({"key": "y", "stages": [{"key": "a", "type": "closed"}]})).await;
    res.problem(422, "unknown_value");
}

async fn a_new_default_unsets_the_old_one(s: Server) {
    s.post("/pipelines", json!({"key": "sales", "stages": ["new"], "is_default": true})).await.ok(201);
    let old = s.get("/pipelines/default").await.ok(200).clone();
    assert_eq!(old["is_default"], false);
    s.patch("/pipelines/default", json!({"is_default": true})).await.ok(200);
    assert_eq!(s.get("/pipelines/sales").await.ok(200)["is_default"], false);
    let res = s.patch("/pipelines/default", json!({"is_default": false})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "is_default");
    s.delete("/pipelines/default").await.problem(409, "conflict");
    assert_eq!(s.patch("/pipelines/sales", json!({"name": "Sales"})).await.ok(200)["name"], "Sales");
    assert_eq!(s.delete("/pipelines/sales").await.ok(200)["deleted"], true);
    s.get("/pipelines/sales").await.problem(404, "not_found");
}

async fn stages_are_managed_through_the_three_routes(s: Server) {
    s.post("/pipelines", json!({"key": "sales", "stages": ["new", "won"]})).await.ok(201);
    let p = s.post("/pipelines/sales/stages", json!({"key": "demo", "position": 1})).await.ok(201).clone();
    assert_eq!(keys(&p), ["new", "demo", "won"]);
    let p = s.patch("/pipelines/sales/stages/won", json!({"type": "won", "label": "Closed won", "position": 0})).await.ok(200).clone();
    assert_eq!(keys(&p), ["won", "new", "demo"]);
    assert_eq!(p["stages"][0]["label"], "Closed won");
    // A stage holding deals is removed only with move_to, which moves them.
    let deal = s.post("/deals", json!({"title": "T", "pipeline": "sales", "stage": "demo"})).await.ok(201).clone();
    s.delete("/pipelines/sales/stages/demo").await.problem(409, "conflict");
    let res = s.delete("/pipelines/sales/stages/demo?move_to=nope").await;
    assert_eq!(res.problem(422, "unknown_value")["valid_options"], json!(["won", "new", "demo"]));
    let p = s.delete("/pipelines/sales/stages/demo?move_to=won").await.ok(200).clone();
    assert_eq!(keys(&p), ["won", "new"]);
    let moved = s.get(&format!("/deals/{}", deal["id"].as_str().unwrap())).await.ok(200).clone();
    assert_eq!((moved["stage"].as_str(), moved["stage_type"].as_str()), (Some("won"), Some("won")));
    s.delete("/pipelines/sales/stages/zzz").await.problem(422, "unknown_value");
    // Pipelines holding deals are not deleted.
    s.delete("/pipelines/sales").await.problem(409, "conflict");
}

async fn changing_a_stage_type_updates_its_deals(s: Server) {
    s.post("/pipelines", json!({"key": "sales", "stages": ["new", "signed"]})).await.ok(201);
    let deal = s.post("/deals", json!({"title": "T", "pipeline": "sales", "stage": "signed"})).await.ok(201).clone();
    assert_eq!(deal["stage_type"], "open");
    s.req(Method::PATCH, "/pipelines/sales/stages/signed").json(&json!({"type": "won"})).send().await.ok(200);
    let got = s.get(&format!("/deals/{}", deal["id"].as_str().unwrap())).await.ok(200).clone();
    assert_eq!(got["stage_type"], "won");
}

crate::on_both_stores!(
    a_new_workspace_has_the_default_pipeline,
    pipelines_take_string_or_object_stages_and_keys_are_unique,
    a_new_default_unsets_the_old_one,
    stages_are_managed_through_the_three_routes,
    changing_a_stage_type_updates_its_deals,
);

/// Tests that run concurrent requests, on a workspace whose rate limit does not get in the way.
mod concurrent {
    use futures::future::join_all;
    use serde_json::json;

    use crate::support::{spawn_with, Backend};

    /// A deal update locks the deal, then reads its pipeline under a share lock; removing a stage
    /// changes that stage's deals under the pipeline's lock. Side by side they must not deadlock
    /// (on Postgres a deadlock aborts one of them after a second: a 500).
    async fn removing_a_stage_while_its_deals_are_updated_never_fails(backend: Backend) {
        // Its ~200 requests in a few seconds are over the free plan's rate limit.
        let s = spawn_with(backend, &["--rate-limit-per-minute", "100000"]).await;
        for round in 0..10 {
            let key = format!("p{round}");
            s.post("/pipelines", json!({"key": key, "stages": ["a", "b"]})).await.ok(201);
            let mut ids = Vec::new();
            for i in 0..8 {
                let deal = s.post("/deals", json!({"title": format!("D{i}"), "pipeline": key, "stage": "a"})).await.ok(201).clone();
                ids.push(deal["id"].as_str().unwrap().to_owned());
            }
            let paths: Vec<String> = ids.iter().map(|id| format!("/deals/{id}")).collect();
            let updates = join_all(paths.iter().map(|path| s.patch(path, json!({"title": "renamed"}))));
            let stage = format!("/pipelines/{key}/stages/a?move_to=b");
            let remove = s.delete(&stage);
            let (removed, updated) = tokio::join!(remove, updates);
            removed.ok(200);
            for res in updated {
                res.ok(200);
            }
            for id in &ids {
                let deal = s.get(&format!("/deals/{id}")).await.ok(200).clone();
                assert_eq!((deal["stage"].as_str(), deal["title"].as_str()), (Some("b"), Some("renamed")));
            }
        }
    }

    crate::on_both_backends!(removing_a_stage_while_its_deals_are_updated_never_fails);
}
