//! Merges (decisions §18, §23, §24): `POST /contacts/{id}/merge` and `/companies/{id}/merge`.
//! The survivor keeps its values and fills its empty ones from the merged records in order;
//! activities, deals, contacts' company, reference custom fields and enrollments move to it (a
//! duplicate enrollment exits `merged`); the merged records become tombstones, never listed,
//! their email released, writes to them 409 with the survivor; checks in the order of §24;
//! `If-Match`, `Idempotency-Key`, the survivor's event and the history of every record touched.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{spawn_with, Backend, Res, Server};

/// Sequences need a plan that allows them.
async fn serve(backend: Backend) -> Server {
    spawn_with(backend, &["--plan", "pro"]).await
}

async fn create(s: &Server, path: &str, body: Value) -> String {
    s.post(path, body).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn data(v: &Value) -> Vec<Value> {
    v["data"].as_array().unwrap().clone()
}

async fn merge(s: &Server, path: &str, ids: &[&str]) -> Res {
    s.post(&format!("{path}/merge"), json!({"merge_ids": ids}))
        .await
}

async fn history(s: &Server, path: &str) -> Vec<Value> {
    data(s.get(&format!("{path}/history")).await.ok(200))
}

fn changes(entry: &Value) -> Vec<(String, Value, Value)> {
    entry["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["field"].as_str().unwrap().to_owned(),
                c["from"].clone(),
                c["to"].clone(),
            )
        })
        .collect()
}

fn change(field: &str, from: &str, to: &str) -> (String, Value, Value) {
    (field.to_owned(), json!(from), json!(to))
}

async fn a_contact_merge_moves_everything_and_leaves_tombstones(s: Server) {
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    s.post(
        "/fields",
        json!({"object": "deal", "key": "referrer", "data_type": "reference"}),
    )
    .await
    .ok(201);
    let acme = create(&s, "/companies", json!({"name": "Acme"})).await;
    let ada = create(
        &s,
        "/contacts",
        json!({"first_name": "Ada", "email": "ada@a.test"}),
    )
    .await;
    let b = create(
        &s,
        "/contacts",
        json!({"first_name": "Augusta", "email": "ada@b.test", "phone": "+1",
               "company_id": acme, "custom_fields": {"tier": "gold"}}),
    )
    .await;
    let c = create(
        &s,
        "/contacts",
        json!({"last_name": "Lovelace", "phone": "+2"}),
    )
    .await;
    let note = create(
        &s,
        "/activities",
        json!({"type": "note", "contact_id": b, "body": "met"}),
    )
    .await;
    let deal = create(
        &s,
        "/deals",
        json!({"title": "Engine", "primary_contact_id": b}),
    )
    .await;
    let referred = create(
        &s,
        "/deals",
        json!({"title": "Loom", "custom_fields": {"referrer": c}}),
    )
    .await;
    let steps = json!([{"wait_days": 3, "subject": "Hi", "body": "<p>Hi</p>"}]);
    let seq1 = create(&s, "/sequences", json!({"name": "One", "steps": steps})).await;
    let seq2 = create(&s, "/sequences", json!({"name": "Two", "steps": steps})).await;
    for (seq, who) in [(&seq1, &b), (&seq2, &b), (&seq2, &ada)] {
        s.post(
            &format!("/sequences/{seq}/enroll"),
            json!({"contact_id": who}),
        )
        .await
        .ok(201);
    }

    let res = s
        .req(Method::POST, &format!("/contacts/{ada}/merge"))
        .header("If-Match", "\"1\"")
        .json(&json!({"merge_ids": [b, c]}))
        .send()
        .await;
    let survivor = res.ok(200).clone();
    assert_eq!(res.header("etag"), Some("\"2\""));
    assert_eq!(
        (
            &survivor["first_name"],
            &survivor["last_name"],
            &survivor["email"],
            &survivor["phone"],
            &survivor["company_id"],
            &survivor["custom_fields"],
            &survivor["version"],
        ),
        (
            &json!("Ada"),
            &json!("Lovelace"),
            &json!("ada@a.test"),
            &json!("+1"),
            &json!(acme),
            &json!({"tier": "gold"}),
            &json!(2),
        ),
        "kept values stay; empty ones come from the first merged record that has them"
    );
    assert_eq!(survivor.get("merged_into"), None);

    // References moved, each record at version + 1.
    let activity = s.get(&format!("/activities/{note}")).await.ok(200).clone();
    assert_eq!(
        (&activity["contact_id"], &activity["version"]),
        (&json!(ada), &json!(2))
    );
    let listed = data(
        s.get(&format!("/activities?contact_id={ada}"))
            .await
            .ok(200),
    );
    assert_eq!(listed.len(), 1);
    let moved = s.get(&format!("/deals/{deal}")).await.ok(200).clone();
    assert_eq!(
        (&moved["primary_contact_id"], &moved["version"]),
        (&json!(ada), &json!(2))
    );
    let moved = s.get(&format!("/deals/{referred}")).await.ok(200).clone();
    assert_eq!(moved["custom_fields"]["referrer"], json!(ada));

    // Enrollments: seq1 moves to the survivor; seq2 would duplicate the survivor's: it exits.
    let one = data(
        s.get(&format!("/sequences/{seq1}/enrollments"))
            .await
            .ok(200),
    );
    assert_eq!(
        (&one[0]["contact_id"], &one[0]["state"]),
        (&json!(ada), &json!("active"))
    );
    let two = data(
        s.get(&format!("/sequences/{seq2}/enrollments"))
            .await
            .ok(200),
    );
    let of = |who: &str| two.iter().find(|e| e["contact_id"] == who).cloned();
    assert_eq!(of(&ada).unwrap()["state"], "active");
    let dup = of(&b).expect("the duplicate stays with the tombstone");
    assert_eq!(
        (&dup["state"], &dup["exit_reason"]),
        (&json!("exited"), &json!("merged"))
    );

    // Tombstones: readable, never listed, their email shown but released.
    let tomb = s.get(&format!("/contacts/{b}")).await.ok(200).clone();
    assert_eq!(tomb["merged_into"], json!(ada));
    assert!(tomb["deleted_at"].is_string());
    assert_eq!(tomb["email"], "ada@b.test");
    for list in [
        "/contacts?limit=100",
        "/contacts?limit=100&include_deleted=true",
    ] {
        let ids: Vec<Value> = data(s.get(list).await.ok(200))
            .iter()
            .map(|c| c["id"].clone())
            .collect();
        assert!(ids.contains(&json!(ada)));
        assert!(
            !ids.contains(&json!(b)) && !ids.contains(&json!(c)),
            "{list}"
        );
    }
    create(&s, "/contacts", json!({"email": "ADA@b.test"})).await;

    // Writes to a tombstone: 409 with the survivor.
    let path = format!("/contacts/{b}");
    for res in [
        s.patch(&path, json!({"first_name": "X"})).await,
        s.delete(&path).await,
        s.req(Method::POST, &format!("{path}/restore")).send().await,
        merge(&s, &path, &[&c]).await,
        merge(&s, &format!("/contacts/{ada}"), &[&b]).await,
    ] {
        assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(ada));
    }

    // The survivor's event: contact.updated with changed_fields and merged_ids.
    let events = data(s.get("/events?limit=100").await.ok(200));
    let merged: Vec<&Value> = events
        .iter()
        .filter(|e| e.get("merged_ids").is_some())
        .collect();
    assert_eq!(merged.len(), 1, "one event, the survivor's: {events:#?}");
    assert_eq!(merged[0]["type"], "contact.updated");
    assert_eq!(merged[0]["data"]["id"], json!(ada));
    assert_eq!(merged[0]["merged_ids"], json!([b, c]));
    assert_eq!(
        merged[0]["changed_fields"],
        json!(["last_name", "phone", "company_id", "custom_fields"])
    );
    assert!(
        !events
            .iter()
            .any(|e| e["data"]["id"] == json!(deal) && e["type"] == "deal.updated"),
        "moved records emit nothing"
    );

    // History: the survivor's entry, each tombstone's, each moved record's.
    let entries = history(&s, &format!("/contacts/{ada}")).await;
    let top = &entries[0];
    assert_eq!(
        (&top["action"], &top["via"]),
        (&json!("merged"), &json!("merge"))
    );
    assert_eq!(top["merged_ids"], json!([b, c]));
    let fields: Vec<String> = changes(top).into_iter().map(|c| c.0).collect();
    assert_eq!(
        fields,
        ["last_name", "phone", "company_id", "custom_fields.tier"]
    );
    for tomb in [&b, &c] {
        let entries = history(&s, &format!("/contacts/{tomb}")).await;
        assert_eq!(
            (&entries[0]["action"], &entries[0]["via"]),
            (&json!("merged"), &json!("merge"))
        );
        assert_eq!(
            changes(&entries[0]),
            [(String::from("merged_into"), Value::Null, json!(ada))]
        );
    }
    let entries = history(&s, &format!("/deals/{deal}")).await;
    assert_eq!(
        (&entries[0]["action"], &entries[0]["via"]),
        (&json!("updated"), &json!("merge"))
    );
    assert_eq!(
        changes(&entries[0]),
        [change("primary_contact_id", &b, &ada)]
    );
    let entries = history(&s, &format!("/deals/{referred}")).await;
    assert_eq!(
        changes(&entries[0]),
        [change("custom_fields.referrer", &c, &ada)]
    );
}

async fn merge_checks_come_in_the_documented_order(s: Server) {
    let ada = create(&s, "/contacts", json!({"first_name": "Ada"})).await;
    let b = create(&s, "/contacts", json!({"first_name": "B"})).await;
    let gone = create(&s, "/contacts", json!({"first_name": "Gone"})).await;
    s.delete(&format!("/contacts/{gone}")).await.ok(200);
    let path = format!("/contacts/{ada}");
    let eleven: Vec<String> = (0..11).map(|_| b.clone()).collect();
    let missing = "con_00000000000000000000000000";
    for body in [
        json!({}),
        json!({"merge_ids": b}),
        json!({"merge_ids": []}),
        json!({"merge_ids": eleven}),
        json!({"merge_ids": [ada]}),
        json!({"merge_ids": [b, b]}),
    ] {
        let res = s.post(&format!("{path}/merge"), body.clone()).await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "merge_ids",
            "{body}"
        );
    }
    merge(&s, &path, &[missing]).await.problem(404, "not_found");
    merge(&s, &format!("/contacts/{missing}"), &[&b])
        .await
        .problem(404, "not_found");
    merge(&s, &path, &["cmp_00000000000000000000000000"])
        .await
        .problem(404, "not_found");
    // A soft-deleted record: 422, whether merged or the survivor.
    let res = merge(&s, &path, &[&gone]).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "merge_ids");
    merge(&s, &format!("/contacts/{gone}"), &[&b])
        .await
        .problem(422, "validation_failed");
    // If-Match on the survivor.
    let stale = s
        .req(Method::POST, &format!("{path}/merge"))
        .header("If-Match", "\"7\"")
        .json(&json!({"merge_ids": [b]}))
        .send()
        .await;
    assert_eq!(stale.problem(412, "version_conflict")["current_version"], 1);
    // A tombstone answers 409 before a soft-deleted record's 422; a missing id 404 before both.
    merge(&s, &path, &[&b]).await.ok(200);
    let other = create(&s, "/contacts", json!({"first_name": "Other"})).await;
    let res = merge(&s, &format!("/contacts/{other}"), &[&gone, &b]).await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(ada));
    merge(&s, &format!("/contacts/{other}"), &[&b, missing])
        .await
        .problem(404, "not_found");

    // The object's write scope.
    let key = s
        .post(
            "/keys",
            json!({"name": "read only", "scopes": ["contacts:read"]}),
        )
        .await
        .ok(201)
        .clone();
    let res = s
        .req(Method::POST, &format!("/contacts/{other}/merge"))
        .key(key["secret"].as_str().unwrap())
        .json(&json!({"merge_ids": [ada]}))
        .send()
        .await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "contacts:write");
}

async fn a_replayed_merge_answers_the_same_without_merging_again(s: Server) {
    let ada = create(&s, "/contacts", json!({"first_name": "Ada"})).await;
    let b = create(&s, "/contacts", json!({"phone": "+1"})).await;
    let send = || {
        s.req(Method::POST, &format!("/contacts/{ada}/merge"))
            .header("Idempotency-Key", "merge-1")
            .json(&json!({"merge_ids": [b]}))
            .send()
    };
    let first = send().await.ok(200).clone();
    let again = send().await;
    assert_eq!(again.ok(200), &first);
    assert_eq!(first["version"], 2);
    assert_eq!(
        s.get(&format!("/contacts/{ada}")).await.ok(200)["version"],
        2
    );
    assert_eq!(history(&s, &format!("/contacts/{ada}")).await.len(), 2);
}

async fn a_company_merge_moves_contacts_and_deals(s: Server) {
    let acme = create(&s, "/companies", json!({"name": "Acme"})).await;
    let old = create(
        &s,
        "/companies",
        json!({"name": "Acme Ltd", "domain": "acme.test"}),
    )
    .await;
    let ada = create(
        &s,
        "/contacts",
        json!({"first_name": "Ada", "company_id": old}),
    )
    .await;
    let deal = create(&s, "/deals", json!({"title": "Engine", "company_id": old})).await;

    let survivor = merge(&s, &format!("/companies/{acme}"), &[&old])
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (&survivor["name"], &survivor["domain"], &survivor["version"]),
        (&json!("Acme"), &json!("acme.test"), &json!(2))
    );
    let contact = s.get(&format!("/contacts/{ada}")).await.ok(200).clone();
    assert_eq!(
        (&contact["company_id"], &contact["version"]),
        (&json!(acme), &json!(2))
    );
    assert_eq!(
        s.get(&format!("/deals/{deal}")).await.ok(200)["company_id"],
        json!(acme)
    );
    let entries = history(&s, &format!("/contacts/{ada}")).await;
    assert_eq!(entries[0]["via"], "merge");
    assert_eq!(changes(&entries[0]), [change("company_id", &old, &acme)]);

    let tomb = s.get(&format!("/companies/{old}")).await.ok(200).clone();
    assert_eq!(tomb["merged_into"], json!(acme));
    let ids: Vec<Value> = data(
        s.get("/companies?include_deleted=true&limit=100")
            .await
            .ok(200),
    )
    .iter()
    .map(|c| c["id"].clone())
    .collect();
    assert_eq!(ids, [json!(acme)]);
    let res = s
        .patch(&format!("/companies/{old}"), json!({"name": "X"}))
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(acme));
    let entries = history(&s, &format!("/companies/{acme}")).await;
    assert_eq!(entries[0]["action"], "merged");
    assert_eq!(entries[0]["merged_ids"], json!([old]));
    // The domain's one active holder now is the survivor.
    let res = s
        .post("/companies/upsert", json!({"domain": "acme.test"}))
        .await;
    assert_eq!(res.ok(200)["id"], json!(acme));
}

async fn an_agent_merges_over_mcp(s: Server) {
    let ada = create(&s, "/contacts", json!({"first_name": "Ada"})).await;
    let b = create(&s, "/contacts", json!({"email": "b@example.com"})).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "svc_merge_contacts", "arguments": {"id": ada, "merge_ids": [b]}}});
    let res = s
        .anon(Method::POST, "!/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/call")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .json(&body)
        .send()
        .await;
    let result = res.ok(200)["result"].clone();
    assert_ne!(result["isError"], true, "{result:#}");
    assert_eq!(result["structuredContent"]["email"], "b@example.com");
    let entries = history(&s, &format!("/contacts/{ada}")).await;
    assert_eq!(
        (&entries[0]["channel"], &entries[0]["via"]),
        (&json!("mcp"), &json!("merge"))
    );
    assert_eq!(
        s.get(&format!("/contacts/{b}")).await.ok(200)["merged_into"],
        json!(ada)
    );
}

crate::on_both_stores!(
    served_by super::serve;
    a_contact_merge_moves_everything_and_leaves_tombstones,
    merge_checks_come_in_the_documented_order,
    a_replayed_merge_answers_the_same_without_merging_again,
    a_company_merge_moves_contacts_and_deals,
    an_agent_merges_over_mcp,
);
