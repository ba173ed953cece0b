//! Deals through the REST API: stages, pipelines, events (spec "Deal", the deal rows of "States
//! and transitions", "Events").

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

async fn events_of(s: &Server, deal_id: &str) -> Vec<(String, Value)> {
    let list = s.get("/events?limit=100").await.ok(200).clone();
    let mut events: Vec<(String, Value)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["data"]["id"] == deal_id)
        .map(|e| (e["type"].as_str().unwrap().to_owned(), e.clone()))
        .collect();
    events.reverse();
    events
}

async fn a_deal_without_a_stage_enters_the_default_pipeline(s: Server) {
    let deal = s.post("/deals", json!({"title": "Big order", "value_cents": 125000.0, "currency": "eur", "close_date": "2026-12-31"})).await.ok(201).clone();
    assert!(deal["id"].as_str().unwrap().starts_with("deal_"));
    assert_eq!(
        (
            deal["pipeline"].as_str(),
            deal["stage"].as_str(),
            deal["stage_type"].as_str()
        ),
        (Some("default"), Some("lead"), Some("open"))
    );
    assert!(deal["pipeline_id"].as_str().unwrap().starts_with("pl_"));
    assert_eq!(
        (deal["value_cents"].as_i64(), deal["currency"].as_str()),
        (Some(125000), Some("EUR"))
    );
    let types: Vec<String> = events_of(&s, deal["id"].as_str().unwrap())
        .await
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(types, ["deal.created"], "no stage given: deal.created only");
}

async fn a_deal_created_with_a_stage_emits_stage_changed(s: Server) {
    let deal = s
        .post("/deals", json!({"title": "Warm", "stage": "qualified"}))
        .await
        .ok(201)
        .clone();
    let events = events_of(&s, deal["id"].as_str().unwrap()).await;
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, ["deal.created", "deal.stage_changed"]);
    assert_eq!(events[1].1["previous_stage"], Value::Null);
    assert_eq!(events[1].1["data"]["stage"], "qualified");
}

async fn moving_a_deal_emits_updated_and_stage_changed(s: Server) {
    let deal = s
        .post("/deals", json!({"title": "Move me"}))
        .await
        .ok(201)
        .clone();
    let id = deal["id"].as_str().unwrap();
    let moved = s
        .req(Method::PATCH, &format!("/deals/{id}"))
        .header("If-Match", "\"1\"")
        .json(&json!({"stage": "won"}))
        .send()
        .await;
    assert_eq!(moved.ok(200)["stage_type"], "won");
    let events = events_of(&s, id).await;
    let types: Vec<&str> = events.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        ["deal.created", "deal.updated", "deal.stage_changed"]
    );
    assert_eq!(events[1].1["changed_fields"], json!(["stage"]));
    assert_eq!(events[2].1["previous_stage"], "lead");
    // A title change alone emits deal.updated only.
    s.patch(&format!("/deals/{id}"), json!({"title": "Moved"}))
        .await
        .ok(200);
    let types: Vec<String> = events_of(&s, id)
        .await
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    assert_eq!(
        types,
        [
            "deal.created",
            "deal.updated",
            "deal.stage_changed",
            "deal.updated"
        ]
    );
    s.req(Method::PATCH, &format!("/deals/{id}"))
        .header("If-Match", "1")
        .json(&json!({"title": "x"}))
        .send()
        .await
        .problem(412, "version_conflict");
}

async fn an_invalid_stage_lists_the_valid_keys(s: Server) {
    let res = s
        .post("/deals", json!({"title": "T", "stage": "negotiation"}))
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["field"], "stage");
    assert_eq!(
        p["valid_options"],
        json!(["lead", "qualified", "proposal", "won", "lost"])
    );
    let deal = s
        .post("/deals", json!({"title": "T"}))
        .await
        .ok(201)
        .clone();
    let res = s
        .patch(
            &format!("/deals/{}", deal["id"].as_str().unwrap()),
            json!({"stage": "negotiation"}),
        )
        .await;
    res.problem(422, "unknown_value");
    let res = s
        .post("/deals", json!({"title": "T", "pipeline": "nope"}))
        .await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!(["default"])
    );
}

async fn stage_keys_repeat_across_pipelines_without_confusion(s: Server) {
    s.post(
        "/pipelines",
        json!({"key": "hiring", "stages": ["lead", "hired"]}),
    )
    .await
    .ok(201);
    let sales_lead = s
        .post("/deals", json!({"title": "Sale"}))
        .await
        .ok(201)
        .clone();
    let hiring_lead = s
        .post("/deals", json!({"title": "Hire", "pipeline": "hiring"}))
        .await
        .ok(201)
        .clone();
    assert_eq!(hiring_lead["stage"], "lead");
    let ids = |v: &Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(s.get("/deals?stage=lead").await.ok(200)),
        vec![hiring_lead["id"].clone(), sales_lead["id"].clone()],
        "all pipelines merge"
    );
    assert_eq!(
        ids(s.get("/deals?pipeline=hiring&stage=lead").await.ok(200)),
        vec![hiring_lead["id"].clone()]
    );
    let pl_id = hiring_lead["pipeline_id"].as_str().unwrap();
    assert_eq!(
        ids(s
            .get(&format!("/deals?pipeline_id={pl_id}&stage=lead"))
            .await
            .ok(200)),
        vec![hiring_lead["id"].clone()]
    );
    assert_eq!(
        ids(s.get("/deals?pipeline=default&stage=lead").await.ok(200)),
        vec![sales_lead["id"].clone()]
    );
    let res = s.get("/deals?pipeline=hiring&stage=won").await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!(["lead", "hired"])
    );
    // "won" exists in the default pipeline only: it is not a hiring stage.
    let res = s
        .patch(
            &format!("/deals/{}", hiring_lead["id"].as_str().unwrap()),
            json!({"stage": "won"}),
        )
        .await;
    res.problem(422, "unknown_value");
}

async fn changing_pipeline_lands_in_its_entry_stage(s: Server) {
    s.post(
        "/pipelines",
        json!({"key": "hiring", "stages": ["applied", "hired"]}),
    )
    .await
    .ok(201);
    let deal = s
        .post("/deals", json!({"title": "T", "stage": "proposal"}))
        .await
        .ok(201)
        .clone();
    let id = deal["id"].as_str().unwrap();
    let moved = s
        .patch(&format!("/deals/{id}"), json!({"pipeline": "hiring"}))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (moved["pipeline"].as_str(), moved["stage"].as_str()),
        (Some("hiring"), Some("applied"))
    );
    let events = events_of(&s, id).await;
    assert_eq!(events.last().unwrap().0, "deal.stage_changed");
    assert_eq!(events.last().unwrap().1["previous_stage"], "proposal");
    let explicit = s
        .patch(
            &format!("/deals/{id}"),
            json!({"pipeline": "default", "stage": "won"}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (explicit["pipeline"].as_str(), explicit["stage"].as_str()),
        (Some("default"), Some("won"))
    );
}

async fn references_and_money_are_checked(s: Server) {
    let res = s
        .post(
            "/deals",
            json!({"title": "T", "primary_contact_id": "con_00000000000000000000000000"}),
        )
        .await;
    assert_eq!(
        res.problem(422, "invalid_reference")["field"],
        "primary_contact_id"
    );
    let res = s
        .post(
            "/deals",
            json!({"title": "T", "company_id": "cmp_00000000000000000000000000"}),
        )
        .await;
    assert_eq!(res.problem(422, "invalid_reference")["field"], "company_id");
    let res = s
        .post("/deals", json!({"title": "T", "value_cents": 10.5}))
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "value_cents"
    );
    let res = s
        .post("/deals", json!({"title": "T", "currency": "dollars"}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "currency");
    let res = s
        .post("/deals", json!({"title": "T", "close_date": "31/12/2026"}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "close_date");
    let res = s.post("/deals", json!({"stage": "won"})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "title");
    let contact = s
        .post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201)
        .clone();
    let company = s
        .post("/companies", json!({"name": "Acme"}))
        .await
        .ok(201)
        .clone();
    let deal = s
        .post(
            "/deals",
            json!({"title": "T", "primary_contact_id": contact["id"], "company_id": company["id"]}),
        )
        .await
        .ok(201)
        .clone();
    let ids = |v: &Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(s
            .get(&format!(
                "/deals?company_id={}",
                company["id"].as_str().unwrap()
            ))
            .await
            .ok(200)),
        vec![deal["id"].clone()]
    );
    assert_eq!(
        ids(s
            .get(&format!(
                "/deals?primary_contact_id={}",
                contact["id"].as_str().unwrap()
            ))
            .await
            .ok(200)),
        vec![deal["id"].clone()]
    );
    assert_eq!(
        ids(s.get("/deals?q=t").await.ok(200)),
        vec![deal["id"].clone()]
    );
}

async fn deals_are_soft_deleted_and_restored(s: Server) {
    let deal = s
        .post("/deals", json!({"title": "T"}))
        .await
        .ok(201)
        .clone();
    let id = deal["id"].as_str().unwrap();
    assert_eq!(
        s.delete(&format!("/deals/{id}")).await.ok(200),
        &json!({"id": id, "object": "deal", "deleted": true})
    );
    assert!(s.get("/deals").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        s.get("/deals?include_deleted=true").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    s.patch(&format!("/deals/{id}"), json!({"title": "x"}))
        .await
        .problem(409, "conflict");
    assert_eq!(
        s.post(&format!("/deals/{id}/restore"), json!({}))
            .await
            .ok(200)["deleted_at"],
        Value::Null
    );
}

crate::on_both_stores!(
    a_deal_without_a_stage_enters_the_default_pipeline,
    a_deal_created_with_a_stage_emits_stage_changed,
    moving_a_deal_emits_updated_and_stage_changed,
    an_invalid_stage_lists_the_valid_keys,
    stage_keys_repeat_across_pipelines_without_confusion,
    changing_pipeline_lands_in_its_entry_stage,
    references_and_money_are_checked,
    deals_are_soft_deleted_and_restored,
);
