//! The audit log (decisions §25) and `PATCH /keys/{id}`: every change to configuration and access
//! leaves one entry in `GET /audit` with its actor and channel, secrets never appear in it, the
//! filters narrow it, and it needs `audit:read`.

use std::collections::BTreeMap;

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{cli, Server};

/// Every entry of `GET /audit<query>`, newest first, following the cursors.
async fn audit(s: &Server, query: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if query.is_empty() { "?" } else { "&" };
        let path = match &cursor {
            None => format!("/audit{query}{sep}limit=10"),
            Some(c) => format!("/audit{query}{sep}limit=10&cursor={c}"),
        };
        let page = s.get(&path).await.ok(200).clone();
        out.extend(page["data"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return out,
        }
    }
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

async fn every_audited_action_appears_once_without_secrets(s: Server) {
    let keys = s.get("/keys").await.ok(200).clone();
    let me = keys["data"][0].clone();
    let mut secrets: Vec<String> = Vec::new();

    // Keys: create, rename, roll, revoke.
    let key = s
        .post("/keys", json!({"name": "ci", "scopes": ["contacts:read"]}))
        .await
        .ok(201)
        .clone();
    secrets.push(key["secret"].as_str().unwrap().to_owned());
    let key_path = format!("/keys/{}", id(&key));
    let renamed = s
        .patch(&key_path, json!({"name": "ci runner"}))
        .await
        .ok(200)
        .clone();
    assert_eq!(renamed["name"], "ci runner");
    assert!(renamed.get("secret").is_none());
    assert_eq!(s.get(&key_path).await.ok(200)["name"], "ci runner");
    let rolled = s
        .post(&format!("{key_path}/roll"), json!({}))
        .await
        .ok(201)
        .clone();
    secrets.push(rolled["secret"].as_str().unwrap().to_owned());
    s.delete(&format!("/keys/{}", id(&rolled))).await.ok(200);

    // Webhooks: create, update, roll the secret, delete.
    let hook = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/hook", "events": ["*"]}),
        )
        .await
        .ok(201)
        .clone();
    secrets.push(hook["secret"].as_str().unwrap().to_owned());
    let hook_path = format!("/webhooks/{}", id(&hook));
    s.patch(&hook_path, json!({"enabled": false})).await.ok(200);
    let rolled_hook = s
        .post(&format!("{hook_path}/roll-secret"), json!({}))
        .await
        .ok(200)
        .clone();
    secrets.push(rolled_hook["secret"].as_str().unwrap().to_owned());
    s.delete(&hook_path).await.ok(200);

    // Connections: create, delete.
    let provider_key = "re_live_provider_key_0123456789";
    secrets.push(provider_key.to_owned());
    let conn = s
        .post("/connections", json!({"channel": "email", "provider": "resend", "api_key": provider_key, "from": "hi@acme.test"}))
        .await
        .ok(201)
        .clone();
    s.delete(&format!("/connections/{}", id(&conn)))
        .await
        .ok(200);

    // Templates: create, update, delete.
    let tpl = s
        .post(
            "/templates",
            json!({"name": "t", "subject": "Hi", "body": "<p>b</p>"}),
        )
        .await
        .ok(201)
        .clone();
    let tpl_path = format!("/templates/{}", id(&tpl));
    s.patch(&tpl_path, json!({"subject": "Hello"}))
        .await
        .ok(200);
    s.delete(&tpl_path).await.ok(200);

    // Automations: create, update, delete.
    let rule = s
        .post(
            "/automations",
            json!({"name": "r", "trigger_event": "contact.created",
            "actions": [{"type": "create_activity", "activity_type": "note", "body": "x"}]}),
        )
        .await
        .ok(201)
        .clone();
    let rule_path = format!("/automations/{}", id(&rule));
    s.patch(&rule_path, json!({"name": "r2"})).await.ok(200);
    s.delete(&rule_path).await.ok(200);

    // Sequences: create, update, delete.
    let seq = s
        .post(
            "/sequences",
            json!({"name": "Nudge", "trigger": {"event": "contact.updated"},
            "steps": [{"wait_days": 1, "subject": "s", "body": "b"}]}),
        )
        .await
        .ok(201)
        .clone();
    let seq_path = format!("/sequences/{}", id(&seq));
    s.patch(&seq_path, json!({"name": "Nudge 2"})).await.ok(200);
    s.delete(&seq_path).await.ok(200);

    // Pipelines and stages.
    let pl = s
        .post(
            "/pipelines",
            json!({"key": "hiring", "name": "Hiring", "stages": ["applied", "hired"]}),
        )
        .await
        .ok(201)
        .clone();
    s.patch("/pipelines/hiring", json!({"name": "Hiring 2"}))
        .await
        .ok(200);
    s.post("/pipelines/hiring/stages", json!({"key": "offer"}))
        .await
        .ok(201);
    s.patch(
        "/pipelines/hiring/stages/offer",
        json!({"label": "Offer made"}),
    )
    .await
    .ok(200);
    s.delete("/pipelines/hiring/stages/offer").await.ok(200);
    s.delete("/pipelines/hiring").await.ok(200);

    // Registry.
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    s.post("/enums", json!({"group": "contact.type", "value": "lead"}))
        .await
        .ok(201);
    s.post("/types", json!({"key": "partner"})).await.ok(201);

    // Settings (a no-op patch leaves no entry), and the operator's plan change.
    s.patch("/settings", json!({"overage_cap_usd": 5}))
        .await
        .ok(200);
    s.patch("/settings", json!({"overage_cap_usd": 5}))
        .await
        .ok(200);
    cli(
        &s.database_url,
        &[
            "workspace",
            "set-plan",
            "--workspace",
            &s.keys.workspace_id,
            "--plan",
            "pro",
        ],
    );

    // One change through MCP: its channel says so.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "svc_create_enum_value", "arguments": {"group": "contact.type", "value": "customer"}}});
    let res = s
        .anon(Method::POST, "!/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .header("request-id", "req_mcp_audit")
        .json(&body)
        .send()
        .await;
    assert_ne!(res.ok(200)["result"]["isError"], true, "{:#}", res.body);

    let entries = audit(&s, "").await;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for e in &entries {
        *counts
            .entry(e["action"].as_str().unwrap().to_owned())
            .or_default() += 1;
        assert_eq!(e["object"], "audit_entry");
        assert!(e["id"].as_str().unwrap().starts_with("aud_"));
    }
    let expected = [
        ("key.created", 1),
        ("key.renamed", 1),
        ("key.rolled", 1),
        ("key.revoked", 1),
        ("webhook.created", 1),
        ("webhook.updated", 1),
        ("webhook.secret_rolled", 1),
        ("webhook.deleted", 1),
        ("connection.created", 1),
        ("connection.deleted", 1),
        ("template.created", 1),
        ("template.updated", 1),
        ("template.deleted", 1),
        ("automation.created", 1),
        ("automation.updated", 1),
        ("automation.deleted", 1),
        ("sequence.created", 1),
        ("sequence.updated", 1),
        ("sequence.deleted", 1),
        ("pipeline.created", 1),
        ("pipeline.updated", 1),
        ("pipeline.deleted", 1),
        ("stage.created", 1),
        ("stage.updated", 1),
        ("stage.deleted", 1),
        ("field.created", 1),
        ("enum_value.created", 2),
        ("type.created", 1),
        ("settings.updated", 1),
        ("plan.changed", 1),
    ];
    let expected: BTreeMap<String, usize> =
        expected.iter().map(|(a, n)| (a.to_string(), *n)).collect();
    assert_eq!(counts, expected);

    for e in &entries {
        let action = e["action"].as_str().unwrap();
        if action == "plan.changed" {
            assert_eq!(
                e["actor"],
                json!({"type": "system", "id": null, "name": "operator"})
            );
            assert_eq!(e["channel"], "cli");
            assert_eq!(
                e["target"],
                json!({"object": "workspace", "id": s.keys.workspace_id})
            );
        } else {
            assert_eq!(e["actor"]["type"], "api_key", "{e:#}");
            assert_eq!(e["actor"]["id"], me["id"], "{e:#}");
            assert_eq!(e["actor"]["name"], me["name"], "{e:#}");
            let channel = if e["request_id"] == "req_mcp_audit" {
                "mcp"
            } else {
                "rest"
            };
            assert_eq!(e["channel"], channel, "{e:#}");
            assert!(e["request_id"].is_string(), "{e:#}");
        }
    }
    let find = |action: &str| {
        entries
            .iter()
            .find(|e| e["action"] == action)
            .unwrap()
            .clone()
    };
    assert_eq!(
        find("key.renamed")["changes"],
        json!([{"field": "name", "from": "ci", "to": "ci runner"}])
    );
    assert_eq!(
        find("key.created")["target"],
        json!({"object": "key", "id": id(&key)})
    );
    assert_eq!(
        find("settings.updated")["changes"],
        json!([{"field": "overage_cap_usd", "from": null, "to": 5.0}])
    );
    assert_eq!(
        find("plan.changed")["changes"][0],
        json!({"field": "plan", "from": "free", "to": "pro"})
    );
    assert_eq!(find("pipeline.created")["target"]["id"], pl["id"]);
    let secret_changes = find("webhook.secret_rolled")["changes"].clone();
    assert_eq!(
        secret_changes,
        json!([{"field": "secret", "from": "[redacted]", "to": "[redacted]"}])
    );

    // No secret anywhere in the log.
    let text = serde_json::to_string(&entries).unwrap();
    for secret in &secrets {
        assert!(
            !text.contains(secret.as_str()),
            "{secret} leaked into the audit log"
        );
    }
    assert!(text.contains("[redacted]"));

    // The filters.
    let by_action = audit(&s, "?action=webhook.updated").await;
    assert_eq!(by_action.len(), 1);
    assert_eq!(by_action[0]["target"]["id"], hook["id"]);
    let by_target = audit(&s, &format!("?target_id={}", id(&hook))).await;
    assert_eq!(by_target.len(), 4);
    assert!(by_target.iter().all(|e| e["target"]["id"] == hook["id"]));
    let by_actor = audit(&s, &format!("?actor_id={}", id(&me))).await;
    assert_eq!(by_actor.len(), entries.len() - 1, "all but the operator's");
    assert!(audit(&s, "?actor_id=key_nobody").await.is_empty());
    s.get("/audit?acton=x").await.problem(400, "bad_request");
    s.get("/audit?limit=0")
        .await
        .problem(422, "validation_failed");

    // Settings are the workspace's: the live mode's log shows them too, not the test mode's keys.
    let live = s
        .req(Method::GET, "/audit?limit=100")
        .key(&s.keys.live)
        .send()
        .await
        .ok(200)
        .clone();
    let live_actions: Vec<&str> = live["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(live_actions, ["plan.changed", "settings.updated"]);
}

async fn the_log_needs_audit_read_and_keys_rename_checks_input(s: Server) {
    let reader = s
        .post(
            "/keys",
            json!({"name": "auditor", "scopes": ["audit:read"]}),
        )
        .await
        .ok(201)
        .clone();
    let other = s
        .post("/keys", json!({"name": "writer", "scopes": ["keys:write"]}))
        .await
        .ok(201)
        .clone();
    let as_key = |k: &Value| k["secret"].as_str().unwrap().to_owned();
    let res = s
        .req(Method::GET, "/audit")
        .key(&as_key(&other))
        .send()
        .await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "audit:read");
    let res = s
        .req(Method::GET, "/audit")
        .key(&as_key(&reader))
        .send()
        .await;
    assert_eq!(res.ok(200)["data"].as_array().unwrap().len(), 2);

    // PATCH /keys/{id}: a blank name, an unknown field, an unknown id; a rename by another key
    // names that key as the actor.
    let path = format!("/keys/{}", id(&reader));
    s.patch(&path, json!({"name": "  "}))
        .await
        .problem(422, "validation_failed");
    s.patch(&path, json!({"nom": "x"}))
        .await
        .problem(422, "unknown_field");
    s.patch("/keys/key_7zzzzzzzzzzzzzzzzzzzzzzzzz", json!({"name": "x"}))
        .await
        .problem(404, "not_found");
    let res = s
        .req(Method::PATCH, &path)
        .key(&as_key(&other))
        .json(&json!({"name": "auditor 2"}))
        .send()
        .await;
    assert_eq!(res.ok(200)["name"], "auditor 2");
    // The same name again changes nothing and leaves no entry.
    s.patch(&path, json!({"name": "auditor 2"})).await.ok(200);
    let renames = audit(&s, "?action=key.renamed").await;
    assert_eq!(renames.len(), 1);
    assert_eq!(renames[0]["actor"]["id"], other["id"]);
    // The renamed key still works, and its new name is what history and the log copy.
    let res = s
        .req(Method::GET, "/audit")
        .key(&as_key(&reader))
        .send()
        .await;
    res.ok(200);
}

async fn retention_settings_are_checked(s: Server) {
    let settings = s.get("/settings").await.ok(200).clone();
    assert_eq!(settings["history_retention_days"], Value::Null);
    assert_eq!(settings["email_retention_days"], Value::Null);
    let res = s
        .patch("/settings", json!({"history_retention_days": 29}))
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "history_retention_days"
    );
    let res = s
        .patch("/settings", json!({"email_retention_days": 30.5}))
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "email_retention_days"
    );
    s.patch("/settings", json!({}))
        .await
        .problem(422, "validation_failed");
    let set = s
        .patch(
            "/settings",
            json!({"history_retention_days": 30, "email_retention_days": 365}),
        )
        .await
        .ok(200)
        .clone();
    assert_eq!(
        set,
        json!({"object": "settings", "overage_cap_usd": null, "history_retention_days": 30, "email_retention_days": 365})
    );
    let cleared = s
        .patch("/settings", json!({"history_retention_days": null}))
        .await
        .ok(200)
        .clone();
    assert_eq!(cleared["history_retention_days"], Value::Null);
    assert_eq!(cleared["email_retention_days"], 365);
    let entries = audit(&s, "?action=settings.updated").await;
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0]["changes"],
        json!([{"field": "history_retention_days", "from": 30, "to": null}])
    );
}

/// The instant `days` days from now, as `retention run --at` takes it.
fn days_from_now(days: i64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    crm_domain::Timestamp::from_millis(now + days * 86_400_000).to_string()
}

fn retention_run(s: &Server, days: i64) -> Value {
    let out = cli(
        &s.database_url,
        &["retention", "run", "--at", &days_from_now(days)],
    );
    serde_json::from_str(out.trim()).unwrap()
}

async fn the_retention_job_deletes_what_is_due(s: Server) {
    let other = crate::support::create_workspace(&s.database_url, &[]);
    s.post(
        "/automations",
        json!({"name": "w", "trigger_event": "contact.created",
        "actions": [{"type": "send_email", "subject": "s", "body": "b"}]}),
    )
    .await
    .ok(201);
    let c = s
        .post("/contacts", json!({"email": "old@example.com"}))
        .await
        .ok(201)
        .clone();
    let history = format!("/contacts/{}/history", id(&c));
    let kept = s
        .req(Method::POST, "/contacts")
        .key(&other.test)
        .json(&json!({"email": "kept@example.com"}))
        .send()
        .await
        .ok(201)
        .clone();
    let kept_history = format!("/contacts/{}/history", id(&kept));
    assert_eq!(
        s.get("/emails").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Nothing is due yet: no settings, and the audit log is young.
    assert_eq!(
        retention_run(&s, 31),
        json!({"audit_entries": 0, "history_entries": 0, "emails": 0})
    );
    s.patch(
        "/settings",
        json!({"history_retention_days": 30, "email_retention_days": 60}),
    )
    .await
    .ok(200);
    assert_eq!(
        retention_run(&s, 29),
        json!({"audit_entries": 0, "history_entries": 0, "emails": 0}),
        "not 30 days old yet"
    );
    assert_eq!(
        retention_run(&s, 31),
        json!({"audit_entries": 0, "history_entries": 1, "emails": 0})
    );
    assert!(s.get(&history).await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        s.get("/emails").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        retention_run(&s, 61),
        json!({"audit_entries": 0, "history_entries": 0, "emails": 1})
    );
    assert!(s.get("/emails").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    // Another workspace without settings keeps its history.
    let res = s
        .req(Method::GET, &kept_history)
        .key(&other.test)
        .send()
        .await;
    assert_eq!(res.ok(200)["data"].as_array().unwrap().len(), 1);
    // Audit entries go after 400 days (the automation, and the settings in both modes).
    assert_eq!(audit(&s, "").await.len(), 2);
    assert_eq!(
        retention_run(&s, 401),
        json!({"audit_entries": 3, "history_entries": 0, "emails": 0})
    );
    assert!(audit(&s, "").await.is_empty());
}

crate::on_both_stores!(
    every_audited_action_appears_once_without_secrets,
    the_log_needs_audit_read_and_keys_rename_checks_input,
    retention_settings_are_checked,
    the_retention_job_deletes_what_is_due,
);
