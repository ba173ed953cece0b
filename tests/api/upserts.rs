//! Upserts (decisions §18, §23, §24): `POST /contacts/upsert` creates or updates by normalised
//! email, says which in `Upsert-Outcome` (also on an idempotent replay), emits what a create or
//! an update would and nothing when unchanged; concurrent upserts of one email create one
//! contact; `POST /batch` takes `{"op": "upsert"}` with `outcome` in its results.

use futures::future::join_all;
use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{Res, Server};

async fn upsert(s: &Server, body: Value) -> Res {
    s.post("/contacts/upsert", body).await
}

async fn events(s: &Server) -> Vec<String> {
    s.get("/events?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

async fn an_upsert_creates_updates_or_changes_nothing(s: Server) {
    let first = upsert(&s, json!({"email": "Ada@Example.com", "first_name": "Ada"})).await;
    let created = first.ok(201).clone();
    assert_eq!(first.header("upsert-outcome"), Some("created"));
    assert_eq!(first.header("etag"), Some("\"1\""));
    assert_eq!(created["email"], "ada@example.com");

    let same = upsert(&s, json!({"email": "ada@EXAMPLE.com", "first_name": "Ada"})).await;
    assert_eq!(same.header("upsert-outcome"), Some("unchanged"));
    assert_eq!(
        same.ok(200)["version"],
        1,
        "an unchanged upsert keeps the version"
    );
    assert_eq!(same.body["id"], created["id"]);
    assert_eq!(events(&s).await, ["contact.created"], "nothing emitted");

    let changed = upsert(
        &s,
        json!({"email": "ada@example.com", "last_name": "Lovelace", "phone": null}),
    )
    .await;
    assert_eq!(changed.header("upsert-outcome"), Some("updated"));
    let body = changed.ok(200).clone();
    assert_eq!(
        (&body["first_name"], &body["last_name"], &body["version"]),
        (&json!("Ada"), &json!("Lovelace"), &json!(2)),
        "the fields sent are applied as a PATCH: the others stay"
    );
    assert_eq!(events(&s).await, ["contact.updated", "contact.created"]);

    // If-Match is checked against the match.
    let stale = s
        .req(Method::POST, "/contacts/upsert")
        .header("If-Match", "\"1\"")
        .json(&json!({"email": "ada@example.com", "first_name": "X"}))
        .send()
        .await;
    stale.problem(412, "version_conflict");

    // A soft-deleted match is restored and updated.
    let path = format!("/contacts/{}", created["id"].as_str().unwrap());
    s.delete(&path).await.ok(200);
    let back = upsert(&s, json!({"email": "ada@example.com"})).await;
    assert_eq!(back.header("upsert-outcome"), Some("updated"));
    assert_eq!(back.ok(200)["deleted_at"], Value::Null);
    assert_eq!(back.body["id"], created["id"]);

    // Its history: created, updated, deleted, restored (the restore's update changed nothing).
    let history = s.get(&format!("{path}/history")).await.ok(200).clone();
    let actions: Vec<&str> = history["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["restored", "deleted", "updated", "created"]);

    // The email is required, and must be one.
    upsert(&s, json!({"first_name": "No email"}))
        .await
        .problem(422, "validation_failed");
    let bad = upsert(&s, json!({"email": "not an email"})).await;
    assert_eq!(bad.problem(422, "validation_failed")["field"], "email");
}

async fn a_replayed_upsert_says_its_outcome_again(s: Server) {
    let send = |key: &'static str, body: Value| {
        s.req(Method::POST, "/contacts/upsert")
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let first = send("u-1", json!({"email": "ada@example.com"})).await;
    assert_eq!(first.header("upsert-outcome"), Some("created"));
    let again = send("u-1", json!({"email": "ada@example.com"})).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("upsert-outcome"), Some("created"));
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.header("etag"), Some("\"1\""));
    assert_eq!(again.body, first.body);

    let unchanged = send("u-2", json!({"email": "ada@example.com"})).await;
    assert_eq!(unchanged.header("upsert-outcome"), Some("unchanged"));
    let replayed = send("u-2", json!({"email": "ada@example.com"})).await;
    assert_eq!(replayed.status, 200);
    assert_eq!(replayed.header("upsert-outcome"), Some("unchanged"));
    assert_eq!(replayed.body, unchanged.body);
}

async fn concurrent_upserts_of_one_email_create_one_contact(s: Server) {
    let sends = (0..32).map(|i| {
        s.post(
            "/contacts/upsert",
            json!({"email": "race@example.com", "custom_fields": {}, "first_name": format!("N{}", i % 2)}),
        )
    });
    let answers = join_all(sends).await;
    let mut outcomes: Vec<&str> = answers
        .iter()
        .map(|r| {
            assert!(
                r.status == 200 || r.status == 201,
                "{} {:#}",
                r.status,
                r.body
            );
            r.header("upsert-outcome").unwrap()
        })
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes.iter().filter(|o| **o == "created").count(),
        1,
        "{outcomes:?}"
    );
    assert!(outcomes
        .iter()
        .all(|o| ["created", "updated", "unchanged"].contains(o)));
    let list = s
        .get("/contacts?email=race@example.com")
        .await
        .ok(200)
        .clone();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
}

/// Upserts of a held email update it without the key's lock (a read finds the holder, the
/// update applies only to the version read); those a concurrent write overtakes fall back to the
/// locked upsert. None may fail or be lost: 32 upserts each naming the contact differently make
/// 32 versions.
async fn concurrent_upserts_of_a_held_email_each_update_it(s: Server) {
    let created = s
        .post("/contacts", json!({"email": "held@example.com"}))
        .await
        .ok(201)
        .clone();
    let sends = (0..32).map(|i| {
        s.post(
            "/contacts/upsert",
            json!({"email": "held@example.com", "first_name": format!("N{i}")}),
        )
    });
    for r in join_all(sends).await {
        assert_eq!(r.status, 200, "{:#}", r.body);
        assert_eq!(r.header("upsert-outcome"), Some("updated"));
    }
    let now = s
        .get(&format!("/contacts/{}", created["id"].as_str().unwrap()))
        .await
        .ok(200)
        .clone();
    assert_eq!(now["version"], 33, "{now:#}");
}

async fn a_batch_upserts_and_says_each_outcome(s: Server) {
    s.post(
        "/contacts",
        json!({"email": "old@example.com", "first_name": "Old"}),
    )
    .await
    .ok(201);
    let body = json!({"operations": [
        {"op": "upsert", "object": "contact", "data": {"email": "new@example.com", "first_name": "New"}},
        {"op": "upsert", "object": "contact", "data": {"email": "old@example.com", "first_name": "Older"}},
        {"op": "upsert", "object": "contact", "data": {"email": "OLD@example.com", "first_name": "Older"}},
        {"op": "upsert", "object": "contact", "data": {"first_name": "No email"}},
    ]});
    let res = s.post("/batch", body).await.ok(200).clone();
    let rows: Vec<(Value, Value)> = res["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["status"].clone(), r["outcome"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (json!(201), json!("created")),
            (json!(200), json!("updated")),
            (json!(200), json!("unchanged")),
            (json!(422), Value::Null),
        ]
    );
    assert_eq!(res["results"][1]["data"]["first_name"], "Older");
    assert_eq!(
        events(&s).await,
        ["contact.created"],
        "batch writes are silent"
    );
}

async fn a_company_upsert_matches_the_normalised_domain(s: Server) {
    let first = s
        .post(
            "/companies/upsert",
            json!({"domain": "https://WWW.Acme.io/about", "name": "Acme"}),
        )
        .await;
    assert_eq!(first.header("upsert-outcome"), Some("created"));
    let acme = first.ok(201).clone();
    assert_eq!(acme["domain"], "acme.io", "stored normalised");

    let same = s
        .post("/companies/upsert", json!({"domain": "acme.io."}))
        .await;
    assert_eq!(same.header("upsert-outcome"), Some("unchanged"));
    assert_eq!(same.ok(200)["id"], acme["id"]);
    let renamed = s
        .post(
            "/companies/upsert",
            json!({"domain": "www.acme.io", "name": "Acme Inc"}),
        )
        .await;
    assert_eq!(renamed.header("upsert-outcome"), Some("updated"));
    assert_eq!(renamed.ok(200)["name"], "Acme Inc");

    // Creating needs a name; the domain is required.
    s.post("/companies/upsert", json!({"domain": "new.io"}))
        .await
        .problem(422, "validation_failed");
    s.post("/companies/upsert", json!({"name": "No domain"}))
        .await
        .problem(422, "validation_failed");

    // Several active holders: 409 with their ids.
    let twin = s
        .post("/companies", json!({"name": "Twin", "domain": "ACME.io"}))
        .await
        .ok(201)
        .clone();
    let res = s
        .post("/companies/upsert", json!({"domain": "acme.io"}))
        .await;
    let mut candidates: Vec<Value> = res.problem(409, "conflict")["candidates"]
        .as_array()
        .unwrap()
        .clone();
    candidates.sort_by_key(|v| v.to_string());
    let mut expected = vec![acme["id"].clone(), twin["id"].clone()];
    expected.sort_by_key(|v| v.to_string());
    assert_eq!(candidates, expected);

    // A soft-deleted holder is restored when no active one has the domain.
    let gone = s
        .post("/companies", json!({"name": "Gone", "domain": "gone.io"}))
        .await
        .ok(201)
        .clone();
    s.delete(&format!("/companies/{}", gone["id"].as_str().unwrap()))
        .await
        .ok(200);
    let back = s
        .post("/companies/upsert", json!({"domain": "gone.io"}))
        .await;
    assert_eq!(back.header("upsert-outcome"), Some("updated"));
    assert_eq!(back.ok(200)["id"], gone["id"]);
    assert_eq!(back.body["deleted_at"], Value::Null);
}

async fn a_batch_upserts_companies_and_refuses_what_it_cannot_do(s: Server) {
    let acme = s
        .post("/companies", json!({"name": "Acme", "domain": "acme.io"}))
        .await
        .ok(201)
        .clone();
    let body = json!({"operations": [
        {"op": "upsert", "object": "company", "data": {"domain": "https://www.Globex.com/x", "name": "Globex"}},
        {"op": "upsert", "object": "company", "data": {"domain": "WWW.acme.io", "name": "Acme Inc"}},
        {"op": "upsert", "object": "company", "data": {"domain": "acme.io", "name": "Acme Inc"}},
        {"op": "upsert", "object": "company", "data": {"domain": "nameless.io"}},
        {"op": "upsert", "object": "company", "data": {"name": "No domain"}},
        {"op": "create", "object": "company", "data": {"name": "Not in a batch"}},
        {"op": "upsert", "object": "deal", "data": {"title": "No"}},
    ]});
    let res = s.post("/batch", body).await.ok(200).clone();
    let results = res["results"].as_array().unwrap();
    let rows: Vec<(Value, Value)> = results
        .iter()
        .map(|r| (r["status"].clone(), r["outcome"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (json!(201), json!("created")),
            (json!(200), json!("updated")),
            (json!(200), json!("unchanged")),
            (json!(422), Value::Null),
            (json!(422), Value::Null),
            (json!(422), Value::Null),
            (json!(422), Value::Null),
        ],
        "{res:#}"
    );
    assert_eq!(
        (&results[0]["data"]["object"], &results[0]["data"]["domain"]),
        (&json!("company"), &json!("globex.com"))
    );
    assert_eq!(results[1]["data"]["id"], acme["id"]);
    assert_eq!(results[1]["data"]["name"], "Acme Inc");
    assert_eq!(
        results[3]["error"]["field"], "name",
        "a create needs a name"
    );
    assert_eq!(results[4]["error"]["field"], "domain");
    let create = &results[5]["error"];
    assert_eq!(
        (&create["code"], &create["field"], &create["valid_options"]),
        (&json!("unknown_value"), &json!("op"), &json!(["upsert"]))
    );
    let deal = &results[6]["error"];
    assert_eq!(
        (&deal["code"], &deal["field"]),
        (&json!("validation_failed"), &json!("match")),
        "a deal upserts only on a unique field"
    );
    assert!(
        deal["detail"]
            .as_str()
            .unwrap()
            .contains("custom_fields.<key>"),
        "{deal:#}"
    );
    let companies = s.get("/companies?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(companies, 2, "Acme and Globex");

    // Companies need their own write scope.
    let key = s
        .post(
            "/keys",
            json!({"name": "contacts", "scopes": ["contacts:write"]}),
        )
        .await
        .ok(201)["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    s.req(Method::POST, "/batch")
        .key(&key)
        .json(&json!({"operations": [{"op": "upsert", "object": "company", "data": {"domain": "x.io", "name": "X"}}]}))
        .send()
        .await
        .problem(403, "forbidden");
}

crate::on_both_stores!(
    a_batch_upserts_companies_and_refuses_what_it_cannot_do,
    a_company_upsert_matches_the_normalised_domain,
    an_upsert_creates_updates_or_changes_nothing,
    a_replayed_upsert_says_its_outcome_again,
    concurrent_upserts_of_one_email_create_one_contact,
    concurrent_upserts_of_a_held_email_each_update_it,
    a_batch_upserts_and_says_each_outcome,
);
