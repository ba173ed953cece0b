//! Dry runs (decisions §18, §23, §24): `dry_run=true` on a write runs it in full and rolls it
//! back, answering `{"object": "dry_run", "status", "result", "effects"}` with `Dry-Run: true`;
//! nothing persists (records, events, runs, emails, enrollments, deliveries, history, idempotency
//! records, plan counts); a failing dry run answers the real problem; writes whose effect is a
//! secret or a send refuse it; effects the key may not read are only counted.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{Res, Server};

fn data(v: &Value) -> Vec<Value> {
    v["data"].as_array().unwrap().clone()
}

async fn dry(s: &Server, method: Method, path: &str, body: Option<Value>) -> Res {
    let sep = if path.contains('?') { '&' } else { '?' };
    let req = s.req(method, &format!("{path}{sep}dry_run=true"));
    match body {
        Some(b) => req.json(&b).send().await,
        None => req.send().await,
    }
}

/// Asserts a dry run's envelope (200, `Dry-Run: true`) with the real call's `status`; returns it.
#[track_caller]
fn envelope(res: &Res, status: u16) -> Value {
    let body = res.ok(200).clone();
    assert_eq!(res.header("dry-run"), Some("true"));
    assert_eq!(body["object"], "dry_run", "{body:#}");
    assert_eq!(body["status"], status, "{body:#}");
    body
}

async fn count(s: &Server, path: &str) -> usize {
    data(s.get(path).await.ok(200)).len()
}

/// Everything a write could leave behind, as the API shows it.
async fn traces(s: &Server, automation: &str, sequence: &str, hook: &str) -> Vec<usize> {
    vec![
        count(s, "/deals?limit=100&include_deleted=true").await,
        count(s, "/contacts?limit=100&include_deleted=true").await,
        count(s, "/events?limit=100").await,
        count(s, &format!("/automations/{automation}/runs?limit=100")).await,
        count(s, "/emails?limit=100").await,
        count(s, "/activities?limit=100").await,
        count(s, &format!("/sequences/{sequence}/enrollments?limit=100")).await,
        count(s, &format!("/webhooks/{hook}/deliveries?limit=100")).await,
    ]
}

async fn a_dry_run_deal_create_reports_every_effect_and_persists_nothing(s: Server) {
    let ada = s
        .post(
            "/contacts",
            json!({"email": "ada@example.com", "first_name": "Ada"}),
        )
        .await
        .ok(201)["id"]
        .clone();
    let mail = json!({"name": "Welcome deal", "trigger_event": "deal.created",
        "actions": [{"type": "send_email", "subject": "Your deal", "body": "<p>Hi</p>"}]});
    let rule = s.post("/automations", mail).await.ok(201)["id"].clone();
    let never = json!({"name": "Huge only", "trigger_event": "deal.created",
        "conditions": [{"field": "value_cents", "op": "gt", "value": 1_000_000_000}],
        "actions": [{"type": "create_activity", "activity_type": "note", "body": "big"}]});
    let unmatched = s.post("/automations", never).await.ok(201)["id"].clone();
    let steps = json!([{"wait_days": 1, "subject": "s", "body": "b"}]);
    let seq_body =
        json!({"name": "Deal drip", "trigger": {"event": "deal.created"}, "steps": steps});
    // The free plan allows one sequence: dry runs never count toward it.
    for _ in 0..2 {
        envelope(
            &dry(&s, Method::POST, "/sequences", Some(seq_body.clone())).await,
            201,
        );
    }
    let seq = s.post("/sequences", seq_body.clone()).await.ok(201)["id"].clone();
    let real_cap = s.post("/sequences", seq_body.clone()).await;
    let dry_cap = dry(&s, Method::POST, "/sequences", Some(seq_body)).await;
    assert_same_problem(&real_cap, &dry_cap, 403, "plan_limit");
    let hook = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/hook", "events": ["deal.created"]}),
        )
        .await
        .ok(201)["id"]
        .clone();
    let (rule, unmatched, seq, hook) = (
        rule.as_str().unwrap(),
        unmatched.as_str().unwrap(),
        seq.as_str().unwrap(),
        hook.as_str().unwrap(),
    );
    let before = traces(&s, rule, seq, hook).await;

    let deal = json!({"title": "Big one", "primary_contact_id": ada, "value_cents": 500});
    let res = dry(&s, Method::POST, "/deals", Some(deal.clone())).await;
    let body = envelope(&res, 201);
    assert_eq!(
        res.header("etag"),
        None,
        "nothing was written to have a version"
    );
    let result = &body["result"];
    assert_eq!(
        (&result["object"], &result["title"]),
        (&json!("deal"), &json!("Big one"))
    );
    let fx = &body["effects"];
    assert_eq!(fx["events"], json!([{"type": "deal.created"}]));
    let automations = fx["automations"].as_array().unwrap();
    let by_id = |id: &str| {
        automations
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("{id} in {automations:?}"))
            .clone()
    };
    assert_eq!(automations.len(), 2);
    assert_eq!(
        by_id(rule),
        json!({"id": rule, "name": "Welcome deal", "matched": true,
               "actions": [{"type": "send_email", "outcome": "succeeded"}]})
    );
    assert_eq!(
        by_id(unmatched),
        json!({"id": unmatched, "name": "Huge only", "matched": false, "actions": []})
    );
    assert_eq!(
        fx["enrollments"],
        json!([{"sequence_id": seq, "contact_id": ada}])
    );
    assert_eq!(fx["exits"], json!([]));
    assert_eq!(
        fx["webhooks"],
        json!([{"id": hook, "event_type": "deal.created"}])
    );
    assert_eq!(
        fx["emails"],
        json!([{"to": "ada@example.com", "subject": "Your deal"}])
    );

    assert_eq!(
        traces(&s, rule, seq, hook).await,
        before,
        "no deal, event, run, email, activity, enrollment or delivery persists"
    );
    let id = result["id"].as_str().unwrap();
    s.get(&format!("/deals/{id}"))
        .await
        .problem(404, "not_found");
    s.get(&format!("/deals/{id}/history"))
        .await
        .problem(404, "not_found");

    // The real call does what the dry run said.
    let real = s.post("/deals", deal).await.ok(201).clone();
    assert_ne!(
        real["id"], result["id"],
        "ids shown by a dry run are never used"
    );
    let after = traces(&s, rule, seq, hook).await;
    assert_eq!(after[0], before[0] + 1);
    assert_eq!(after[4], before[4] + 1, "the email");
    assert_eq!(after[6], before[6] + 1, "the enrollment");

    // Deleting the deal would end its enrollment.
    let real_path = format!("/deals/{}", real["id"].as_str().unwrap());
    let res = dry(&s, Method::DELETE, &real_path, None).await;
    assert_eq!(
        envelope(&res, 200)["effects"]["exits"],
        json!([{"sequence_id": seq, "contact_id": ada, "reason": "source_deleted"}])
    );
    let enrolled = s
        .get(&format!("/sequences/{seq}/enrollments"))
        .await
        .ok(200)["data"][0]
        .clone();
    assert_eq!(enrolled["state"], "active", "{enrolled:#}");
    assert_eq!(s.get(&real_path).await.ok(200)["deleted_at"], Value::Null);

    // A key that may write deals but read none of the rest sees only counts.
    let narrow = s
        .post(
            "/keys",
            json!({"name": "deals only", "scopes": ["deals:write"]}),
        )
        .await
        .ok(201)["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = s
        .req(Method::POST, "/deals?dry_run=true")
        .key(&narrow)
        .json(&json!({"title": "Another", "primary_contact_id": ada}))
        .send()
        .await;
    let fx = envelope(&res, 201)["effects"].clone();
    assert_eq!(fx["events"], json!([{"type": "deal.created"}]));
    assert_eq!(fx["automations"], json!({"count": 2}));
    assert_eq!(fx["webhooks"], json!({"count": 1}));
    assert_eq!(fx["emails"], json!({"count": 1}));
    assert_eq!(
        fx["enrollments"],
        json!({"count": 0}),
        "Ada is enrolled already"
    );
    assert_eq!(fx["exits"], json!({"count": 0}));
    // A dry run needs the write's own scope.
    s.req(Method::POST, "/contacts?dry_run=true")
        .key(&narrow)
        .json(&json!({"first_name": "X"}))
        .send()
        .await
        .problem(403, "forbidden");
}

#[track_caller]
fn assert_same_problem(real: &Res, dry: &Res, status: u16, code: &str) {
    let strip = |res: &Res| {
        let mut p = res.problem(status, code).clone();
        p.as_object_mut().unwrap().remove("instance");
        p.as_object_mut().unwrap().remove("request_id");
        p
    };
    assert_eq!(strip(dry), strip(real));
    assert_eq!(dry.header("dry-run"), None);
}

async fn record_writes_dry_run_without_a_trace(s: Server) {
    // Create: nothing persists, and the idempotency key stays free.
    let res = s
        .req(Method::POST, "/contacts?dry_run=true")
        .header("Idempotency-Key", "k1")
        .json(&json!({"email": "grace@example.com", "first_name": "Dry"}))
        .send()
        .await;
    let body = envelope(&res, 201);
    assert_eq!(body["result"]["email"], "grace@example.com");
    assert_eq!(
        body["effects"]["events"],
        json!([{"type": "contact.created"}])
    );
    assert_eq!(count(&s, "/contacts?include_deleted=true").await, 0);
    assert_eq!(count(&s, "/events").await, 0);
    let real = s
        .req(Method::POST, "/contacts")
        .header("Idempotency-Key", "k1")
        .json(&json!({"email": "grace@example.com", "first_name": "Grace"}))
        .send()
        .await;
    let grace = real.ok(201).clone();
    assert_eq!(
        real.header("idempotent-replayed"),
        None,
        "the key was never claimed"
    );
    // A dry run neither reads the key's stored answer.
    let res = s
        .req(Method::POST, "/contacts?dry_run=true")
        .header("Idempotency-Key", "k1")
        .json(&json!({"email": "other@example.com"}))
        .send()
        .await;
    envelope(&res, 201);
    let path = format!("/contacts/{}", grace["id"].as_str().unwrap());

    // Update: the would-be record, its event with the changed fields; nothing changes.
    let res = dry(
        &s,
        Method::PATCH,
        &path,
        Some(json!({"last_name": "Hopper"})),
    )
    .await;
    let body = envelope(&res, 200);
    assert_eq!(
        (&body["result"]["last_name"], &body["result"]["version"]),
        (&json!("Hopper"), &json!(2))
    );
    assert_eq!(
        body["effects"]["events"],
        json!([{"type": "contact.updated", "changed_fields": ["last_name"]}])
    );
    let now = s.get(&path).await.ok(200).clone();
    assert_eq!(
        (&now["last_name"], &now["version"]),
        (&Value::Null, &json!(1))
    );

    // Delete and restore.
    let res = dry(&s, Method::DELETE, &path, None).await;
    envelope(&res, 200);
    assert_eq!(s.get(&path).await.ok(200)["deleted_at"], Value::Null);

    // Upsert: its outcome too.
    let res = dry(
        &s,
        Method::POST,
        "/contacts/upsert",
        Some(json!({"email": "GRACE@example.com", "phone": "+1 555"})),
    )
    .await;
    assert_eq!(res.header("upsert-outcome"), Some("updated"));
    assert_eq!(envelope(&res, 200)["result"]["phone"], "+1 555");
    let res = dry(
        &s,
        Method::POST,
        "/companies/upsert",
        Some(json!({"domain": "https://www.Acme.io/x", "name": "Acme"})),
    )
    .await;
    assert_eq!(res.header("upsert-outcome"), Some("created"));
    assert_eq!(envelope(&res, 201)["result"]["domain"], "acme.io");

    // Batch.
    let res = dry(
        &s,
        Method::POST,
        "/batch",
        Some(json!({"operations": [
            {"op": "create", "object": "contact", "data": {"email": "b1@example.com"}},
            {"op": "update", "object": "contact", "id": grace["id"], "data": {"first_name": "G"}},
        ]})),
    )
    .await;
    let body = envelope(&res, 200);
    assert_eq!(body["result"]["results"].as_array().unwrap().len(), 2);

    // Configuration: a field registered in a dry run does not exist afterwards.
    let res = dry(
        &s,
        Method::POST,
        "/fields",
        Some(json!({"object": "contact", "key": "tier", "data_type": "text"})),
    )
    .await;
    envelope(&res, 201);
    s.patch(&path, json!({"custom_fields": {"tier": "gold"}}))
        .await
        .problem(422, "unknown_field");

    // Nothing of it all persisted.
    assert_eq!(count(&s, "/contacts?include_deleted=true").await, 1);
    assert_eq!(count(&s, "/companies?include_deleted=true").await, 0);
    assert_eq!(count(&s, "/events").await, 1, "Grace's contact.created");
    let history = s.get(&format!("{path}/history")).await.ok(200).clone();
    assert_eq!(data(&history).len(), 1, "only the real create: {history:#}");
    let now = s.get(&path).await.ok(200).clone();
    assert_eq!(
        (&now["first_name"], &now["phone"], &now["version"]),
        (&json!("Grace"), &Value::Null, &json!(1))
    );

    // The same over MCP: the argument `dry_run`.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "svc_update_contact",
        "arguments": {"id": grace["id"], "first_name": "Amazing", "dry_run": true}}});
    let res = s
        .anon(Method::POST, "!/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/call")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .json(&call)
        .send()
        .await;
    let result = res.ok(200)["result"].clone();
    assert_ne!(result["isError"], true, "{result:#}");
    let content = &result["structuredContent"];
    assert_eq!(
        (&content["object"], &content["status"]),
        (&json!("dry_run"), &json!(200))
    );
    assert_eq!(content["result"]["first_name"], "Amazing");
    assert_eq!(s.get(&path).await.ok(200)["first_name"], "Grace");
}

async fn a_failing_dry_run_answers_the_real_problem(s: Server) {
    s.post("/contacts", json!({"email": "taken@example.com"}))
        .await
        .ok(201);
    let body = json!({"email": "taken@example.com"});
    let real = s.post("/contacts", body.clone()).await;
    let dry_res = dry(&s, Method::POST, "/contacts", Some(body)).await;
    assert_same_problem(&real, &dry_res, 409, "conflict");

    let body = json!({"email": "x@example.com", "colour": "red"});
    let real = s.post("/contacts", body.clone()).await;
    let dry_res = dry(&s, Method::POST, "/contacts", Some(body)).await;
    assert_same_problem(&real, &dry_res, 422, "unknown_field");

    let body = json!({"title": "Orphan", "primary_contact_id": "con_00000000000000000000000000"});
    let real = s.post("/deals", body.clone()).await;
    let dry_res = dry(&s, Method::POST, "/deals", Some(body)).await;
    assert_same_problem(&real, &dry_res, 422, "invalid_reference");

    // Only `true` or `false`, and only on writes.
    dry(&s, Method::GET, "/contacts", None)
        .await
        .problem(400, "bad_request");
    s.req(Method::POST, "/contacts?dry_run=maybe")
        .json(&json!({"first_name": "A"}))
        .send()
        .await
        .problem(422, "validation_failed");
    let res = s
        .req(Method::POST, "/contacts?dry_run=false")
        .json(&json!({"first_name": "Real"}))
        .send()
        .await;
    assert_eq!(res.ok(201)["first_name"], "Real");
}

async fn secrets_and_sends_refuse_a_dry_run(s: Server) {
    let refused = [
        (
            Method::POST,
            "/keys",
            Some(json!({"name": "k", "scopes": ["*"]})),
        ),
        (
            Method::POST,
            "/connections",
            Some(
                json!({"channel": "email", "provider": "resend", "api_key": "re_123456", "from": "hi@acme.io"}),
            ),
        ),
    ];
    for (method, path, body) in refused {
        let p = dry(&s, method, path, body).await;
        assert_eq!(p.problem(400, "bad_request")["field"], "dry_run");
    }
    assert_eq!(count(&s, "/connections").await, 0);
    let keys = count(&s, "/keys").await;
    let hook = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/h", "events": ["*"]}),
        )
        .await
        .ok(201)["id"]
        .clone();
    let roll = format!("/webhooks/{}/roll-secret", hook.as_str().unwrap());
    let p = dry(&s, Method::POST, &roll, None).await;
    assert_eq!(p.problem(400, "bad_request")["field"], "dry_run");
    assert_eq!(count(&s, "/keys").await, keys);

    // The catalog says which: /schema and OpenAPI.
    let schema = s.get("/schema").await.ok(200).clone();
    let listed = |which: &str, name: &str| {
        schema["dry_run"][which]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == name)
    };
    assert!(listed("offered", "svc_create_deal") && listed("offered", "svc_manage_stage"));
    assert!(listed("refused", "svc_create_key") && listed("refused", "svc_create_connection"));
    assert!(!listed("offered", "svc_list_deals") && !listed("refused", "svc_list_deals"));
    let openapi = s.get("!/v1/openapi.json").await.ok(200).clone();
    let create_deal = &openapi["paths"]["/deals"]["post"];
    assert!(create_deal["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "dry_run"));
    assert_eq!(create_deal["x-dry-run"], true);
    assert_eq!(openapi["paths"]["/keys"]["post"]["x-dry-run"], false);
}

crate::on_both_stores!(
    a_dry_run_deal_create_reports_every_effect_and_persists_nothing,
    record_writes_dry_run_without_a_trace,
    a_failing_dry_run_answers_the_real_problem,
    secrets_and_sends_refuse_a_dry_run,
);
