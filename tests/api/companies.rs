//! Companies through the REST API.

use reqwest::Method;
use serde_json::json;

use crate::support::Server;

async fn company_lifecycle_and_filters(s: Server) {
    let acme = s
        .post(
            "/companies",
            json!({"name": "Acme Rockets", "domain": "ACME.io"}),
        )
        .await
        .ok(201)
        .clone();
    assert!(acme["id"].as_str().unwrap().starts_with("cmp_"));
    assert_eq!(acme["domain"], "acme.io");
    // Domains are not unique: a duplicate never answers 409.
    let twin = s
        .post(
            "/companies",
            json!({"name": "Acme Twin", "domain": "acme.io"}),
        )
        .await
        .ok(201)
        .clone();
    s.post(
        "/companies",
        json!({"name": "Initech", "domain": "initech.com"}),
    )
    .await
    .ok(201);
    let ids = |v: &serde_json::Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(s.get("/companies?domain=acme.io").await.ok(200)),
        vec![twin["id"].clone(), acme["id"].clone()]
    );
    assert_eq!(
        ids(s.get("/companies?q=rocket").await.ok(200)),
        vec![acme["id"].clone()]
    );

    let id = acme["id"].as_str().unwrap();
    let res = s
        .req(Method::PATCH, &format!("/companies/{id}"))
        .header("If-Match", "1")
        .json(&json!({"name": "Acme Inc"}))
        .send()
        .await;
    assert_eq!(res.ok(200)["name"], "Acme Inc");
    let res = s
        .req(Method::PATCH, &format!("/companies/{id}"))
        .header("If-Match", "1")
        .json(&json!({"name": "Acme Two"}))
        .send()
        .await;
    res.problem(412, "version_conflict");
    let res = s
        .patch(&format!("/companies/{id}"), json!({"name": null}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "name");

    assert_eq!(
        s.delete(&format!("/companies/{id}")).await.ok(200)["deleted"],
        true
    );
    assert_eq!(
        ids(s.get("/companies?domain=acme.io").await.ok(200)),
        vec![twin["id"].clone()]
    );
    assert_eq!(
        ids(s
            .get("/companies?domain=acme.io&include_deleted=true")
            .await
            .ok(200))
        .len(),
        2
    );
    assert_eq!(
        s.post(&format!("/companies/{id}/restore"), json!({}))
            .await
            .ok(200)["deleted_at"],
        serde_json::Value::Null
    );
}

async fn company_name_is_required(s: Server) {
    let res = s.post("/companies", json!({"domain": "x.io"})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "name");
}

async fn company_changes_emit_no_events(s: Server) {
    let c = s
        .post("/companies", json!({"name": "Quiet"}))
        .await
        .ok(201)
        .clone();
    s.patch(
        &format!("/companies/{}", c["id"].as_str().unwrap()),
        json!({"name": "Still quiet"}),
    )
    .await
    .ok(200);
    assert!(s.get("/events").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
}

async fn contacts_can_reference_a_company(s: Server) {
    let c = s
        .post("/companies", json!({"name": "Acme"}))
        .await
        .ok(201)
        .clone();
    let contact = s.post("/contacts", json!({"company_id": c["id"]})).await;
    assert_eq!(contact.ok(201)["company_id"], c["id"]);
}

crate::on_both_stores!(
    company_lifecycle_and_filters,
    company_name_is_required,
    company_changes_emit_no_events,
    contacts_can_reference_a_company
);
