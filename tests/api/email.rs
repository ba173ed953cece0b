//! Email (decisions §3, §13): connections with a write-only key, templates, `send_email` actions
//! recorded in `GET /emails` (simulated in test mode) with an `email` activity, and live-mode
//! rules that need a connection first.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

async fn emails(s: &Server, query: &str) -> Vec<Value> {
    s.get(&format!("/emails{query}")).await.ok(200)["data"]
        .as_array()
        .unwrap()
        .clone()
}

async fn connections_keep_their_key_write_only(s: Server) {
    let body = json!({"channel": "email", "provider": "postmark", "api_key": "pm-server-token-9876", "from": "Acme <hello@acme.com>"});
    let created = s.post("/connections", body).await.ok(201).clone();
    assert!(created["id"].as_str().unwrap().starts_with("conn_"));
    assert_eq!(created["api_key_last4"], "9876");
    assert!(
        created.get("api_key").is_none() && !created.to_string().contains("pm-server-token"),
        "{created:#}"
    );
    let id = created["id"].as_str().unwrap();
    assert_eq!(s.get(&format!("/connections/{id}")).await.ok(200), &created);
    assert_eq!(
        s.get("/connections").await.ok(200)["data"],
        json!([created.clone()])
    );

    let res = s
        .post(
            "/connections",
            json!({"provider": "mailgun", "api_key": "k", "from": "a@b.co"}),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!(["resend", "postmark", "sendgrid", "smtp"])
    );
    s.post(
        "/connections",
        json!({"provider": "smtp", "api_key": "k", "from": "a@b.co"}),
    )
    .await
    .problem(422, "validation_failed");
    s.post(
        "/connections",
        json!({"provider": "resend", "from": "a@b.co"}),
    )
    .await
    .problem(422, "validation_failed");
    s.post(
        "/connections",
        json!({"provider": "resend", "api_key": "k", "from": "nobody"}),
    )
    .await
    .problem(422, "validation_failed");

    s.delete(&format!("/connections/{id}")).await.ok(200);
    s.get(&format!("/connections/{id}"))
        .await
        .problem(404, "not_found");
}

async fn templates_are_created_read_changed_and_deleted(s: Server) {
    let t = s
        .post(
            "/templates",
            json!({"name": "Welcome", "subject": "Hi {{first_name}}", "body": "<p>Hi</p>"}),
        )
        .await
        .ok(201)
        .clone();
    assert!(t["id"].as_str().unwrap().starts_with("tpl_"));
    assert_eq!(
        (t["text"].clone(), t["version"].clone()),
        (Value::Null, json!(1))
    );
    let id = t["id"].as_str().unwrap();
    let changed = s
        .patch(&format!("/templates/{id}"), json!({"text": "Hi"}))
        .await
        .ok(200)
        .clone();
    assert_eq!(
        (changed["text"].clone(), changed["version"].clone()),
        (json!("Hi"), json!(2))
    );
    let cleared = s
        .patch(&format!("/templates/{id}"), json!({"text": null}))
        .await
        .ok(200)
        .clone();
    assert_eq!(cleared["text"], Value::Null);
    s.patch(&format!("/templates/{id}"), json!({"body": ""}))
        .await
        .problem(422, "validation_failed");
    s.post("/templates", json!({"name": "x"}))
        .await
        .problem(422, "validation_failed");
    assert_eq!(
        s.get("/templates").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    s.delete(&format!("/templates/{id}")).await.ok(200);
    s.get(&format!("/templates/{id}"))
        .await
        .problem(404, "not_found");
}

async fn test_mode_sends_are_simulated_escaped_and_logged(s: Server) {
    let tpl = s.post("/templates", json!({"name": "t", "subject": "Deal {{title}}", "body": "<p>{{title}} for {{company.name}}</p>"})).await.ok(201).clone();
    s.post(
        "/automations",
        json!({"name": "welcome", "trigger_event": "contact.created",
               "actions": [{"type": "send_email", "subject": "Welcome {{first_name}}", "body": "<h1>Hi {{first_name}}</h1><p>Bye</p>"}]}),
    )
    .await
    .ok(201);
    s.post(
        "/automations",
        json!({"name": "won", "trigger_event": "deal.stage_changed", "conditions": [{"field": "stage", "op": "eq", "value": "won"}],
               "actions": [{"type": "send_email", "template_id": tpl["id"]}, {"type": "send_email", "to": "boss@acme.com", "subject": "s", "body": "b", "text": "plain {{title}}"}]}),
    )
    .await
    .ok(201);
    let company = s
        .post("/companies", json!({"name": "Acme & Sons"}))
        .await
        .ok(201)["id"]
        .clone();
    let c = s
        .post(
            "/contacts",
            json!({"first_name": "<Ada>", "email": "ada@example.com", "company_id": company}),
        )
        .await
        .ok(201)
        .clone();
    let cid = c["id"].as_str().unwrap();
    let d = s
        .post(
            "/deals",
            json!({"title": "Big <deal>", "primary_contact_id": cid, "company_id": company}),
        )
        .await
        .ok(201)
        .clone();
    let did = d["id"].as_str().unwrap();
    s.patch(&format!("/deals/{did}"), json!({"stage": "won"}))
        .await
        .ok(200);

    let all = emails(&s, "").await;
    assert_eq!(all.len(), 3, "{all:#?}");
    assert!(
        all.iter()
            .all(|e| e["status"] == "simulated" && e["attempts"] == 0),
        "test mode never delivers"
    );
    let welcome = &all[2];
    assert_eq!(
        (welcome["to"].as_str(), welcome["subject"].as_str()),
        (Some("ada@example.com"), Some("Welcome <Ada>"))
    );
    assert_eq!(
        welcome["html"], "<h1>Hi &lt;Ada&gt;</h1><p>Bye</p>",
        "values are HTML-escaped in the HTML part"
    );
    assert_eq!(
        welcome["text"], "Hi <Ada>\n\nBye",
        "the text part is derived from the HTML"
    );
    assert_eq!(welcome["contact_id"], c["id"]);
    assert_eq!(welcome["source"]["type"], "automation");
    let from_template = &all[1];
    assert_eq!(
        (
            from_template["to"].as_str(),
            from_template["subject"].as_str()
        ),
        (Some("ada@example.com"), Some("Deal Big <deal>")),
        "deal's primary contact"
    );
    assert_eq!(
        from_template["html"],
        "<p>Big &lt;deal&gt; for Acme &amp; Sons</p>"
    );
    assert_eq!(from_template["deal_id"], d["id"]);
    assert_eq!(
        (all[0]["to"].as_str(), all[0]["text"].as_str()),
        (Some("boss@acme.com"), Some("plain Big <deal>"))
    );

    assert_eq!(emails(&s, &format!("?deal_id={did}")).await.len(), 2);
    assert_eq!(emails(&s, "?status=sent").await.len(), 0);
    s.get("/emails?status=bounced")
        .await
        .problem(422, "unknown_value");
    let logged = s
        .get(&format!("/activities?contact_id={cid}&type=email"))
        .await
        .ok(200)["data"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(logged, 3, "every email is an email activity on its contact");
    let types: Vec<_> = s.get("/events").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert!(!types.iter().any(|t| t.contains("email")));
}

async fn a_live_send_email_rule_needs_a_connection_first(s: Server) {
    let rule = json!({"name": "r", "trigger_event": "contact.created", "actions": [{"type": "send_email", "subject": "s", "body": "b"}]});
    let live = |path: &str, method: Method| s.req(method, path).key(&s.keys.live);
    let res = live("/automations", Method::POST).json(&rule).send().await;
    let p = res.problem(422, "validation_failed");
    assert!(
        p["detail"].as_str().unwrap().contains("POST /connections"),
        "{p:#}"
    );
    s.post("/automations", rule.clone()).await.ok(201);
    let conn = json!({"provider": "resend", "api_key": "re_123", "from": "a@acme.com", "base_url": "http://127.0.0.1:9"});
    live("/connections", Method::POST)
        .json(&conn)
        .send()
        .await
        .ok(201);
    live("/automations", Method::POST)
        .json(&rule)
        .send()
        .await
        .ok(201);
    let bad_template = json!({"name": "r", "trigger_event": "contact.created", "actions": [{"type": "send_email", "template_id": "tpl_00000000000000000000000000"}]});
    s.post("/automations", bad_template)
        .await
        .problem(422, "invalid_reference");
}

crate::on_both_stores!(
    connections_keep_their_key_write_only,
    templates_are_created_read_changed_and_deleted,
    test_mode_sends_are_simulated_escaped_and_logged,
    a_live_send_email_rule_needs_a_connection_first,
);
