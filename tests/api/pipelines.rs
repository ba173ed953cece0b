//! Pipelines and stages through the REST API (spec "Pipeline and stage", decisions §3, §6).

use reqwest::Method;
use serde_json::json;

use crate::support::Server;

fn keys(p: &serde_json::Value) -> Vec<String> {
    p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_owned())
        .collect()
}

async fn a_new_workspace_has_the_default_pipeline(s: Server) {
    let list = s.get("/pipelines").await.ok(200).clone();
    let pipelines = list["data"].as_array().unwrap();
    assert_eq!(pipelines.len(), 1);
    let p = &pipelines[0];
    assert_eq!(
        (p["key"].as_str(), p["is_default"].as_bool()),
        (Some("default"), Some(true))
    );
    assert_eq!(keys(p), ["lead", "qualified", "proposal", "won", "lost"]);
    let types: Vec<_> = p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["type"].as_str().unwrap())
        .collect();
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
    assert_eq!(
        s.get(&format!("/pipelines/{}", p["id"].as_str().unwrap()))
            .await
            .ok(200)["key"],
        "hiring"
    );
    s.get("/pipelines/nope").await.problem(404, "not_found");
    let res = s
        .post("/pipelines", json!({"key": "x", "stages": []}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "stages");
    let res = s
        .post(
            "/pipelines",
            json!({"key": "y", "stages": [{"key": "a", "type": "closed"}]}),
        )
        .await;
    res.problem(422, "unknown_value");
}

async fn a_new_default_unsets_the_old_one(s: Server) {
    s.post(
        "/pipelines",
        json!({"key": "sales", "stages": ["new"], "is_default": true}),
    )
    .await
    .ok(201);
    let old = s.get("/pipelines/default").await.ok(200).clone();
    assert_eq!(old["is_default"], false);
    s.patch("/pipelines/default", json!({"is_default": true}))
        .await
        .ok(200);
    assert_eq!(s.get("/pipelines/sales").await.ok(200)["is_default"], false);
    let res = s
        .patch("/pipelines/default", json!({"is_default": false}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "is_default");
    s.delete("/pipelines/default")
        .await
        .problem(409, "conflict");
    assert_eq!(
        s.patch("/pipelines/sales", json!({"name": "Sales"}))
            .await
            .ok(200)["name"],
        "Sales"
    );
    assert_eq!(s.delete("/pipelines/sales").await.ok(200)["deleted"], true);
    s.get("/pipelines/sales").await.problem(404, "not_found");
}

async fn stages_are_managed_through_the_three_routes(s: Server) {
    s.post(
        "/pipelines",
        json!({"key": "sales", "stages": ["new", "won"]}),
    )
    .await
    .ok(201);
    let p = s
        .post(
            "/pipelines/sales/stages",
            json!({"key": "demo", "position": 1}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(keys(&p), ["new", "demo", "won"]);
    let p = s
        .patch(
            "/pipelines/sales/stages/won",
            json!({"type": "won", "label": "Closed won", "position": 0}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(keys(&p), ["won", "new", "demo"]);
    assert_eq!(p["stages"][0]["label"], "Closed won");
    // A stage holding deals is removed only with move_to, which moves them.
    let deal = s
        .post(
            "/deals",
            json!({"title": "T", "pipeline": "sales", "stage": "demo"}),
        )
        .await
        .ok(201)
        .clone();
    s.delete("/pipelines/sales/stages/demo")
        .await
        .problem(409, "conflict");
    let res = s.delete("/pipelines/sales/stages/demo?move_to=nope").await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!(["won", "new", "demo"])
    );
    let p = s
        .delete("/pipelines/sales/stages/demo?move_to=won")
        .await
        .ok(200)
        .clone();
    assert_eq!(keys(&p), ["won", "new"]);
    let moved = s
        .get(&format!("/deals/{}", deal["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (moved["stage"].as_str(), moved["stage_type"].as_str()),
        (Some("won"), Some("won"))
    );
    s.delete("/pipelines/sales/stages/zzz")
        .await
        .problem(422, "unknown_value");
    // Pipelines holding deals are not deleted.
    s.delete("/pipelines/sales").await.problem(409, "conflict");
}

async fn changing_a_stage_type_updates_its_deals(s: Server) {
    s.post(
        "/pipelines",
        json!({"key": "sales", "stages": ["new", "signed"]}),
    )
    .await
    .ok(201);
    let deal = s
        .post(
            "/deals",
            json!({"title": "T", "pipeline": "sales", "stage": "signed"}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(deal["stage_type"], "open");
    s.req(Method::PATCH, "/pipelines/sales/stages/signed")
        .json(&json!({"type": "won"}))
        .send()
        .await
        .ok(200);
    let got = s
        .get(&format!("/deals/{}", deal["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(got["stage_type"], "won");
}

/// docs/decisions.md: a PATCH that changes nothing keeps the version. A stage update is a PATCH of
/// its pipeline, over either route.
async fn a_stage_update_that_changes_nothing_keeps_the_version(s: Server) {
    let created = s
        .post(
            "/pipelines",
            json!({"key": "sales", "stages": ["a", {"key": "b", "label": "Bee"}]}),
        )
        .await
        .ok(201)
        .clone();
    let unchanged = |p: &serde_json::Value, what: &str| {
        assert_eq!(
            (&p["version"], &p["updated_at"]),
            (&created["version"], &created["updated_at"]),
            "{what}"
        );
    };
    for same in [
        json!({}),
        json!({"label": "a"}),
        json!({"label": " a "}),
        json!({"type": "open", "position": 0}),
        json!({"label": ""}),
    ] {
        unchanged(
            s.patch("/pipelines/sales/stages/a", same.clone())
                .await
                .ok(200),
            &same.to_string(),
        );
    }
    unchanged(
        s.req(Method::PATCH, "/pipelines/sales/stages/b")
            .send()
            .await
            .ok(200),
        "no body",
    );
    let same = json!({"action": "update", "key": "b", "label": "Bee", "position": 1});
    unchanged(
        s.post("/pipelines/sales/stages", same).await.ok(200),
        "POST action update",
    );
    unchanged(s.get("/pipelines/sales").await.ok(200), "as stored");
    // A change bumps the version once.
    let renamed = s
        .patch("/pipelines/sales/stages/a", json!({"label": "Ay"}))
        .await
        .ok(200)
        .clone();
    assert_eq!(renamed["version"], created["version"].as_i64().unwrap() + 1);
    assert_eq!(
        s.get("/pipelines/sales").await.ok(200)["version"],
        renamed["version"]
    );
}

/// decisions §5: no error body leaks internals, such as the name of a Rust type.
async fn a_malformed_stage_says_what_a_stage_may_be(s: Server) {
    let res = s
        .post("/pipelines", json!({"key": "zz1", "stages": ["a", 5]}))
        .await;
    let p = res.problem(422, "validation_failed");
    assert_eq!(p["field"], "stages[1]");
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains("a stage key (string) or an object {key, label?, type?}"),
        "{detail}"
    );
    assert!(
        !detail.contains("StageIn") && !detail.contains("untagged"),
        "{detail}"
    );
    let res = s
        .post(
            "/pipelines",
            json!({"key": "zz1", "stages": [{"label": "No key"}]}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "stages[0].key"
    );
    let res = s
        .post(
            "/pipelines",
            json!({"key": "zz1", "stages": [{"key": "a", "colour": "red"}]}),
        )
        .await;
    let detail = res.problem(422, "validation_failed")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("colour") && !detail.contains("StageIn"),
        "{detail}"
    );
    let res = s
        .post(
            "/pipelines",
            json!({"key": "zz1", "stages": [{"key": "a", "label": 5}]}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "stages[0].label"
    );
    s.get("/pipelines/zz1").await.problem(404, "not_found");
}

/// A stage's errors name the member of the body that carries the bad value: `key` and `type` of
/// an added stage, `stages[i].key` of a pipeline's.
async fn stage_errors_name_the_field_of_the_body(s: Server) {
    let res = s
        .post(
            "/pipelines/default/stages",
            json!({"action": "add", "key": "Bad Key"}),
        )
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "key");
    let res = s
        .post(
            "/pipelines/default/stages",
            json!({"key": "demo", "type": "closed"}),
        )
        .await;
    assert_eq!(res.problem(422, "unknown_value")["field"], "type");
    let res = s
        .post(
            "/pipelines",
            json!({"key": "sales", "stages": ["a", "Bad Key"]}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "stages[1].key"
    );
    let res = s
        .post(
            "/pipelines",
            json!({"key": "sales", "stages": ["a", {"key": "b", "type": "closed"}]}),
        )
        .await;
    assert_eq!(res.problem(422, "unknown_value")["field"], "stages[1].type");
}

/// A stage key taken in the pipeline is a uniqueness conflict (spec, Errors: `conflict`), with the
/// existing stage; the same key twice in one new pipeline is invalid input.
async fn adding_a_taken_stage_key_is_a_conflict(s: Server) {
    let before = s.get("/pipelines/default").await.ok(200).clone();
    let res = s
        .post(
            "/pipelines/default/stages",
            json!({"action": "add", "key": "lead"}),
        )
        .await;
    let p = res.problem(409, "conflict");
    assert_eq!(p["existing"], before["stages"][0]);
    assert!(p["detail"].as_str().unwrap().contains("`lead`"));
    let after = s.get("/pipelines/default").await.ok(200).clone();
    assert_eq!(after, before);
    let res = s
        .post("/pipelines", json!({"key": "sales", "stages": ["a", "a"]}))
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "stages[1].key"
    );
}

async fn totals_count_and_sum_each_stages_active_deals_per_currency(s: Server) {
    let deal = |title: &str, stage: &str, value: Option<i64>, currency: Option<&str>| json!({"title": title, "stage": stage, "value_cents": value, "currency": currency});
    for body in [
        deal("a", "lead", Some(1_000), Some("USD")),
        deal("b", "lead", Some(250), Some("USD")),
        deal("c", "lead", Some(700), Some("EUR")),
        deal("d", "lead", None, None),
        deal("e", "won", Some(5_000), Some("USD")),
    ] {
        s.post("/deals", body).await.ok(201);
    }
    let gone = s
        .post("/deals", deal("f", "won", Some(9_999), Some("USD")))
        .await;
    let gone = gone.ok(201)["id"].as_str().unwrap().to_owned();
    s.delete(&format!("/deals/{gone}")).await.ok(200);
    let totals = s.get("/pipelines/default/totals").await.ok(200).clone();
    assert_eq!(totals["object"], "pipeline_totals");
    let stages = totals["stages"].as_array().unwrap();
    let keys: Vec<&str> = stages
        .iter()
        .map(|t| t["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        keys,
        ["lead", "qualified", "proposal", "won", "lost"],
        "every stage, in order"
    );
    assert_eq!(stages[0]["deals"], 4);
    assert_eq!(
        stages[0]["values"],
        json!([{"currency": "EUR", "value_cents": 700}, {"currency": "USD", "value_cents": 1_250}])
    );
    assert_eq!(
        stages[1],
        json!({"stage": "qualified", "deals": 0, "values": []})
    );
    assert_eq!(stages[3]["deals"], 1, "the deleted deal is not counted");
    assert_eq!(
        stages[3]["values"],
        json!([{"currency": "USD", "value_cents": 5_000}])
    );
    // The totals disclose deals: a key that reads pipelines but not deals is refused.
    let key = s
        .post(
            "/keys",
            json!({"name": "pipelines only", "scopes": ["pipelines:read"]}),
        )
        .await;
    let key = key.ok(201)["secret"].as_str().unwrap().to_owned();
    let res = s
        .req(Method::GET, "/pipelines/default/totals")
        .key(&key)
        .send()
        .await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "deals:read");
    s.get("/pipelines/nope/totals")
        .await
        .problem(404, "not_found");
}

crate::on_both_stores!(
    totals_count_and_sum_each_stages_active_deals_per_currency,
    a_new_workspace_has_the_default_pipeline,
    pipelines_take_string_or_object_stages_and_keys_are_unique,
    a_new_default_unsets_the_old_one,
    stages_are_managed_through_the_three_routes,
    changing_a_stage_type_updates_its_deals,
    a_stage_update_that_changes_nothing_keeps_the_version,
    a_malformed_stage_says_what_a_stage_may_be,
    stage_errors_name_the_field_of_the_body,
    adding_a_taken_stage_key_is_a_conflict,
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
            s.post("/pipelines", json!({"key": key, "stages": ["a", "b"]}))
                .await
                .ok(201);
            let mut ids = Vec::new();
            for i in 0..8 {
                let deal = s
                    .post(
                        "/deals",
                        json!({"title": format!("D{i}"), "pipeline": key, "stage": "a"}),
                    )
                    .await
                    .ok(201)
                    .clone();
                ids.push(deal["id"].as_str().unwrap().to_owned());
            }
            let paths: Vec<String> = ids.iter().map(|id| format!("/deals/{id}")).collect();
            let updates = join_all(
                paths
                    .iter()
                    .map(|path| s.patch(path, json!({"title": "renamed"}))),
            );
            let stage = format!("/pipelines/{key}/stages/a?move_to=b");
            let remove = s.delete(&stage);
            let (removed, updated) = tokio::join!(remove, updates);
            removed.ok(200);
            for res in updated {
                res.ok(200);
            }
            for id in &ids {
                let deal = s.get(&format!("/deals/{id}")).await.ok(200).clone();
                assert_eq!(
                    (deal["stage"].as_str(), deal["title"].as_str()),
                    (Some("b"), Some("renamed"))
                );
            }
        }
    }

    crate::on_both_backends!(removing_a_stage_while_its_deals_are_updated_never_fails);
}
