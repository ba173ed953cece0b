//! Field history (decisions §18, §23, §24): one entry per change of a contact, company or deal,
//! with the actor as it was, the transport (`channel`), how (`via`), the request id and the
//! fields from/to; batch and automation writes too; newest first, paged, readable after delete.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{Res, Server};

async fn history(s: &Server, path: &str) -> Vec<Value> {
    s.get(&format!("{path}/history")).await.ok(200)["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// The test key's id and name, as `GET /keys` shows them.
async fn test_key(s: &Server) -> (String, String) {
    let keys = s.get("/keys").await.ok(200).clone();
    let key = &keys["data"][0];
    (
        key["id"].as_str().unwrap().to_owned(),
        key["name"].as_str().unwrap().to_owned(),
    )
}

async fn send_with_id(s: &Server, method: Method, path: &str, body: Value, id: &str) -> Res {
    s.req(method, path)
        .header("request-id", id)
        .json(&body)
        .send()
        .await
}

fn fields(entry: &Value) -> Vec<(String, Value, Value)> {
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

fn change(field: &str, from: Value, to: Value) -> (String, Value, Value) {
    (field.to_owned(), from, to)
}

async fn mcp_call(s: &Server, tool: &str, arguments: Value, request_id: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": tool, "arguments": arguments}});
    let res = s
        .anon(Method::POST, "!/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/call")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .header("request-id", request_id)
        .json(&body)
        .send()
        .await;
    let result = res.ok(200)["result"].clone();
    assert_ne!(result["isError"], true, "{result:#}");
    result
}

async fn a2a_call(s: &Server, tool: &str, arguments: Value, request_id: &str) {
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER",
                               "parts": [{"data": {"tool": tool, "arguments": arguments}}]}}});
    let res = s
        .anon(Method::POST, "!/a2a")
        .header("a2a-version", "1.0")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .header("request-id", request_id)
        .json(&body)
        .send()
        .await;
    assert_eq!(
        res.ok(200)["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED",
        "{:#}",
        res.body
    );
}

async fn every_transport_and_way_of_writing_leaves_its_entry(s: Server) {
    let (key_id, key_name) = test_key(&s).await;
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    let created = send_with_id(
        &s,
        Method::POST,
        "/contacts",
        json!({"first_name": "Ada", "email": "ada@example.com", "custom_fields": {"tier": "silver"}}),
        "req_create",
    )
    .await
    .ok(201)
    .clone();
    let path = format!("/contacts/{}", created["id"].as_str().unwrap());

    // REST
    send_with_id(
        &s,
        Method::PATCH,
        &path,
        json!({"first_name": "Grace", "custom_fields": {"tier": null}}),
        "req_rest",
    )
    .await
    .ok(200);
    // MCP
    mcp_call(
        &s,
        "svc_update_contact",
        json!({"id": created["id"], "last_name": "Hopper"}),
        "req_mcp",
    )
    .await;
    // A2A
    a2a_call(
        &s,
        "svc_update_contact",
        json!({"id": created["id"], "phone": "+1 555 0100"}),
        "req_a2a",
    )
    .await;
    // A batch (no events, but history)
    let batch = json!({"operations": [{"op": "update", "object": "contact", "id": created["id"], "data": {"first_name": "Batched"}}]});
    assert_eq!(
        send_with_id(&s, Method::POST, "/batch", batch, "req_batch")
            .await
            .ok(200)["succeeded"],
        1
    );
    // An automation acting on a REST update
    let rule = s
        .post(
            "/automations",
            json!({"name": "Goldify", "trigger_event": "contact.updated",
                   "actions": [{"type": "set_field", "field": "tier", "value": "gold"}]}),
        )
        .await
        .ok(201)
        .clone();
    send_with_id(
        &s,
        Method::PATCH,
        &path,
        json!({"first_name": "Auto"}),
        "req_trigger",
    )
    .await
    .ok(200);

    let entries = history(&s, &path).await;
    let key_actor = json!({"type": "api_key", "id": key_id, "name": key_name});
    let summary: Vec<(Value, Value, Value, Value, Value)> = entries
        .iter()
        .map(|e| {
            (
                e["action"].clone(),
                e["actor"]["type"].clone(),
                e["channel"].clone(),
                e["via"].clone(),
                e["request_id"].clone(),
            )
        })
        .collect();
    let row = |action: &str, actor: &str, channel: &str, via: &str, req: &str| {
        (
            json!(action),
            json!(actor),
            json!(channel),
            json!(via),
            json!(req),
        )
    };
    // Newest first; the automation's entry and its trigger's share a write (either order).
    let mut newest: Vec<_> = summary[..2].to_vec();
    newest.sort_by_key(|r| r.1.to_string());
    assert_eq!(
        newest,
        [
            row("updated", "api_key", "rest", "direct", "req_trigger"),
            row("updated", "automation", "rest", "automation", "req_trigger"),
        ]
    );
    assert_eq!(
        summary[2..],
        [
            row("updated", "api_key", "rest", "batch", "req_batch"),
            row("updated", "api_key", "a2a", "direct", "req_a2a"),
            row("updated", "api_key", "mcp", "direct", "req_mcp"),
            row("updated", "api_key", "rest", "direct", "req_rest"),
            row("created", "api_key", "rest", "direct", "req_create"),
        ]
    );
    for e in &entries {
        assert_eq!(e["object"], "change");
        assert!(e["id"].as_str().unwrap().starts_with("chg_"), "{e}");
        assert_eq!(e["record_id"], created["id"]);
        if e["actor"]["type"] == "api_key" {
            assert_eq!(e["actor"], key_actor);
        }
    }
    let by_automation = entries
        .iter()
        .find(|e| e["actor"]["type"] == "automation")
        .unwrap();
    assert_eq!(
        by_automation["actor"],
        json!({"type": "automation", "id": rule["id"], "name": "Goldify"})
    );
    assert_eq!(
        fields(by_automation),
        [change("custom_fields.tier", Value::Null, json!("gold"))]
    );
    assert_eq!(
        fields(&entries[6]),
        [
            change("first_name", Value::Null, json!("Ada")),
            change("email", Value::Null, json!("ada@example.com")),
            change("custom_fields.tier", Value::Null, json!("silver")),
        ],
        "a create lists every non-null writable field from null"
    );
    assert_eq!(
        fields(&entries[5]),
        [
            change("first_name", json!("Ada"), json!("Grace")),
            change("custom_fields.tier", json!("silver"), Value::Null),
        ]
    );
    assert_eq!(
        fields(&entries[4]),
        [change("last_name", Value::Null, json!("Hopper"))]
    );
    assert_eq!(
        fields(&entries[2]),
        [change("first_name", json!("Grace"), json!("Batched"))]
    );
}

async fn history_pages_newest_first_and_outlives_a_delete(s: Server) {
    let deal = s
        .post("/deals", json!({"title": "Big", "value_cents": 100}))
        .await
        .ok(201)
        .clone();
    let path = format!("/deals/{}", deal["id"].as_str().unwrap());
    for cents in [200, 300] {
        s.patch(&path, json!({"value_cents": cents})).await.ok(200);
    }
    // An update that changes nothing writes no entry.
    s.patch(&path, json!({"value_cents": 300})).await.ok(200);
    s.delete(&path).await.ok(200);
    s.post(&format!("{path}/restore"), json!({})).await.ok(200);
    s.delete(&path).await.ok(200);

    let all = history(&s, &path).await;
    let actions: Vec<&str> = all.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        ["deleted", "restored", "deleted", "updated", "updated", "created"]
    );
    assert!(all[..3].iter().all(|e| e["changes"] == json!([])));
    assert_eq!(
        fields(&all[3]),
        [change("value_cents", json!(200), json!(300))]
    );
    let created = fields(&all[5]);
    assert!(created.contains(&change("title", Value::Null, json!("Big"))));
    assert!(
        created
            .iter()
            .all(|(f, _, _)| f != "version" && f != "updated_at" && f != "id"),
        "{created:?}"
    );

    let first = s
        .get(&format!("{path}/history?limit=4"))
        .await
        .ok(200)
        .clone();
    assert_eq!(first["has_more"], true);
    assert_eq!(first["data"].as_array().unwrap()[..], all[..4]);
    let cursor = first["next_cursor"].as_str().unwrap();
    let rest = s
        .get(&format!("{path}/history?limit=4&cursor={cursor}"))
        .await
        .ok(200)
        .clone();
    assert_eq!(rest["has_more"], false);
    assert_eq!(rest["data"].as_array().unwrap()[..], all[4..]);
    // A cursor of one record's history does not page another's.
    let other = s
        .post("/deals", json!({"title": "Other"}))
        .await
        .ok(201)
        .clone();
    s.get(&format!(
        "/deals/{}/history?cursor={cursor}",
        other["id"].as_str().unwrap()
    ))
    .await
    .problem(400, "invalid_cursor");

    s.get("/deals/deal_00000000000000000000000000/history")
        .await
        .problem(404, "not_found");
    s.get("/contacts/nonsense/history")
        .await
        .problem(404, "not_found");
}

async fn company_history_and_its_scope(s: Server) {
    let company = s
        .post("/companies", json!({"name": "Acme", "domain": "acme.test"}))
        .await
        .ok(201)
        .clone();
    let path = format!("/companies/{}", company["id"].as_str().unwrap());
    s.patch(&path, json!({"name": "Acme Inc"})).await.ok(200);
    let entries = history(&s, &path).await;
    assert_eq!(entries.len(), 2);
    assert_eq!(
        fields(&entries[0]),
        [change("name", json!("Acme"), json!("Acme Inc"))]
    );
    assert_eq!(entries[1]["action"], "created");

    // The record's read scope: a deals-only key may not read a company's history.
    let key = s
        .post(
            "/keys",
            json!({"name": "deals only", "scopes": ["deals:read"]}),
        )
        .await
        .ok(201)
        .clone();
    let res = s
        .req(Method::GET, &format!("{path}/history"))
        .key(key["secret"].as_str().unwrap())
        .send()
        .await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "companies:read");
}

crate::on_both_stores!(
    every_transport_and_way_of_writing_leaves_its_entry,
    history_pages_newest_first_and_outlives_a_delete,
    company_history_and_its_scope,
);
