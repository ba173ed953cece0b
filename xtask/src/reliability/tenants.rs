//! The tenant matrix over REST: workspace A's records, each operation of the catalog that names
//! a record (every path with a parameter, from the live OpenAPI document) tried with keys that
//! must not reach them: workspace B's, A's other mode's, a revoked key of A, no key, and a key of
//! A without the scope. None may succeed. Then every list, the search and the event feed read
//! with B's key and A's live key must hold none of A's ids, a batch of B must not touch A's
//! contact, and A's records must still be at version 1. The same records and keys go through MCP
//! and A2A (`tenants_agents.rs`) first, so that the version check at the end covers the agent
//! calls too.

use std::{collections::BTreeMap, path::Path, time::Duration};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::{Row, Store};
use crate::bench::{
    http::{Conn, Req},
    load::block_on,
    procs,
};

pub fn run(
    bin: &Path,
    store: Store,
    db_url: &str,
    run_dir: &Path,
    env: &[(&str, &str)],
) -> Result<Vec<Row>> {
    let a = super::workspace(bin, db_url)?;
    let b = procs::create_workspace(bin, db_url)?;
    let log = run_dir.join(format!("tenants-{}.log", store.name()));
    let mut server_env = vec![("CRM_LOG", "warn"), ("CRM_WEBHOOK_POLL", "50ms")];
    server_env.extend_from_slice(env);
    let server = procs::start_server_env(bin, db_url, &log, &server_env)?;
    let addr = server.addr.clone();
    let outcome = block_on(async move { matrix(&addr, &a, &b).await })?;
    drop(server);
    let passed =
        outcome.successes.is_empty() && outcome.leaks.is_empty() && outcome.changed.is_empty();
    let mut notes = Vec::new();
    notes.extend(outcome.successes.iter().take(5).cloned());
    notes.extend(outcome.leaks.iter().take(5).cloned());
    notes.extend(outcome.changed.iter().cloned());
    Ok(vec![
        Row {
        store,
        check: "tenant matrix (REST)".into(),
        figures: format!(
            "{} operations × 5 keys = {} attempts, {} succeeded; {} lists read as B and as A live, {} leaked an id of A{}",
            outcome.operations,
            outcome.attempts,
            outcome.successes.len(),
            outcome.lists,
            outcome.leaks.len(),
            if notes.is_empty() { String::new() } else { format!(": {}", notes.join("; ")) }
        ),
        target: "0 successes, 0 foreign ids".into(),
        passed,
    }, agents_row(store, &outcome.agents)])
}

fn agents_row(store: Store, o: &super::tenants_agents::Outcome) -> Row {
    let notes: Vec<String> = o
        .successes
        .iter()
        .chain(&o.leaks)
        .take(8)
        .cloned()
        .collect();
    Row {
        store,
        check: "tenant matrix (MCP, A2A)".into(),
        figures: format!(
            "{} tools × 5 keys × 2 transports + A's A2A task × 5 keys = {} attempts, {} succeeded; {} list, search, event and usage results read as B and as A live, {} leaked an id of A{}",
            o.operations,
            o.attempts,
            o.successes.len(),
            o.lists,
            o.leaks.len(),
            if notes.is_empty() { String::new() } else { format!(": {}", notes.join("; ")) }
        ),
        target: "0 successes, 0 foreign ids".into(),
        passed: o.successes.is_empty() && o.leaks.is_empty(),
    }
}

struct Outcome {
    operations: usize,
    attempts: usize,
    successes: Vec<String>,
    lists: usize,
    leaks: Vec<String>,
    changed: Vec<String>,
    agents: super::tenants_agents::Outcome,
}

async fn call(
    addr: &str,
    key: Option<&str>,
    method: &'static str,
    path: &str,
    body: Option<Value>,
) -> Result<(u16, Value)> {
    let mut conn = Conn::open(addr, key).await?;
    let req = match body {
        Some(body) => Req::with_body(method, path, body.to_string()),
        None => Req {
            method,
            path: path.to_owned(),
            body: None,
            headers: Vec::new(),
        },
    };
    let res = conn.send(&req).await?;
    let body = serde_json::from_slice(res.body).unwrap_or(Value::Null);
    Ok((res.status, body))
}

/// A's request that must succeed; its answer.
async fn seed(
    addr: &str,
    key: &str,
    method: &'static str,
    path: &str,
    body: Value,
) -> Result<Value> {
    let (status, answer) = call(addr, Some(key), method, path, Some(body)).await?;
    if !(200..300).contains(&status) {
        bail!("seeding {method} {path} answered {status}: {answer}");
    }
    Ok(answer)
}

fn id_of(v: &Value) -> Result<String> {
    Ok(v["id"].as_str().context("an id")?.to_owned())
}

async fn matrix(addr: &str, a: &procs::Workspace, b: &procs::Workspace) -> Result<Outcome> {
    let key = a.test_key.as_str();
    // A's records, one of each kind, named by the path parameter that addresses them.
    let mut ids: BTreeMap<&str, String> = BTreeMap::new();
    let hook = seed(
        addr,
        key,
        "POST",
        "/v1/webhooks",
        json!({"url": "http://127.0.0.1:9/hook", "events": ["*"]}),
    )
    .await?;
    ids.insert("webhooks", id_of(&hook)?);
    let template = seed(
        addr,
        key,
        "POST",
        "/v1/templates",
        json!({"name": "t", "subject": "s", "body": "b"}),
    )
    .await?;
    ids.insert("templates", id_of(&template)?);
    let automation = seed(
        addr,
        key,
        "POST",
        "/v1/automations",
        json!({"name": "a", "trigger_event": "contact.created",
        "actions": [{"type": "send_email", "subject": "s", "body": "b"}]}),
    )
    .await?;
    ids.insert("automations", id_of(&automation)?);
    let sequence = seed(
        addr,
        key,
        "POST",
        "/v1/sequences",
        json!({"name": "S", "trigger": {"event": "contact.updated"},
        "steps": [{"wait_days": 1, "subject": "s", "body": "b"}]}),
    )
    .await?;
    ids.insert("sequences", id_of(&sequence)?);
    let pipeline = seed(
        addr,
        key,
        "POST",
        "/v1/pipelines",
        json!({"key": "tenancy", "name": "T", "stages": ["one", "two"]}),
    )
    .await?;
    ids.insert("pipelines", id_of(&pipeline)?);
    let company = seed(addr, key, "POST", "/v1/companies", json!({"name": "A Co"})).await?;
    ids.insert("companies", id_of(&company)?);
    let contact = seed(
        addr,
        key,
        "POST",
        "/v1/contacts",
        json!({"first_name": "A", "email": "a@tenant-a.example"}),
    )
    .await?;
    ids.insert("contacts", id_of(&contact)?);
    let deal = seed(
        addr,
        key,
        "POST",
        "/v1/deals",
        json!({"title": "D", "pipeline": "tenancy"}),
    )
    .await?;
    ids.insert("deals", id_of(&deal)?);
    let activity = seed(
        addr,
        key,
        "POST",
        "/v1/activities",
        json!({"type": "note", "body": "x", "contact_id": ids["contacts"]}),
    )
    .await?;
    ids.insert("activities", id_of(&activity)?);
    let other_key = seed(
        addr,
        key,
        "POST",
        "/v1/keys",
        json!({"name": "k", "scopes": ["*"]}),
    )
    .await?;
    ids.insert("keys", id_of(&other_key)?);
    let connection = seed(addr, key, "POST", "/v1/connections", json!({"channel": "email", "provider": "postmark", "api_key": "pm-tenant-a", "from": "a@tenant-a.example"})).await?;
    ids.insert("connections", id_of(&connection)?);
    let enrollment = seed(
        addr,
        key,
        "POST",
        &format!("/v1/sequences/{}/enroll", ids["sequences"]),
        json!({"contact_id": ids["contacts"]}),
    )
    .await?;
    ids.insert("enrollment_id", id_of(&enrollment)?);
    let (_, emails) = call(addr, Some(key), "GET", "/v1/emails", None).await?;
    ids.insert(
        "emails",
        id_of(&emails["data"][0]).context("the automation's email")?,
    );
    // The webhook's delivery of contact.created, once the worker has made it.
    let mut delivery = None;
    for _ in 0..100 {
        let (_, list) = call(
            addr,
            Some(key),
            "GET",
            &format!("/v1/webhooks/{}/deliveries", ids["webhooks"]),
            None,
        )
        .await?;
        if let Some(d) = list["data"][0]["delivery_id"].as_str() {
            delivery = Some(d.to_owned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ids.insert("dlv_id", delivery.context("a webhook delivery of A")?);

    // The keys that must not reach A's records.
    let revoked = seed(
        addr,
        key,
        "POST",
        "/v1/keys",
        json!({"name": "revoked", "scopes": ["*"]}),
    )
    .await?;
    seed(
        addr,
        key,
        "DELETE",
        &format!("/v1/keys/{}", id_of(&revoked)?),
        json!({}),
    )
    .await?;
    let narrow = seed(
        addr,
        key,
        "POST",
        "/v1/keys",
        json!({"name": "narrow", "scopes": ["usage:read"]}),
    )
    .await?;
    let revoked_secret = revoked["secret"]
        .as_str()
        .context("the revoked key's secret")?
        .to_owned();
    let narrow_secret = narrow["secret"]
        .as_str()
        .context("the narrow key's secret")?
        .to_owned();
    let attackers: [(&str, Option<&str>); 5] = [
        ("workspace B", Some(&b.test_key)),
        ("A's live mode", Some(&a.live_key)),
        ("a revoked key", Some(&revoked_secret)),
        ("no key", None),
        ("a key without the scope", Some(&narrow_secret)),
    ];

    let (_, doc) = call(addr, None, "GET", "/v1/openapi.json", None).await?;
    let paths = doc["paths"].as_object().context("the document's paths")?;
    let mut outcome = Outcome {
        operations: 0,
        attempts: 0,
        successes: Vec::new(),
        lists: 0,
        leaks: Vec::new(),
        changed: Vec::new(),
        agents: super::tenants_agents::matrix(
            addr,
            paths,
            &ids,
            &attackers,
            &[Some(b.test_key.as_str()), Some(a.live_key.as_str())],
            key,
        )
        .await?,
    };
    let a_ids: Vec<String> = ids.values().cloned().collect();
    for (template, item) in paths {
        for method in ["get", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let verb: &'static str = match method {
                "get" => "GET",
                "post" => "POST",
                "patch" => "PATCH",
                _ => "DELETE",
            };
            if !template.contains('{') {
                if verb == "GET" {
                    // A list, a search, the feed: read as B and as A's live mode.
                    let path = match template.as_str() {
                        "/search" => "/v1/search?q=tenant".to_owned(),
                        other => format!("/v1{other}"),
                    };
                    for attacker in [Some(b.test_key.as_str()), Some(a.live_key.as_str())] {
                        let (status, body) = call(addr, attacker, "GET", &path, None).await?;
                        outcome.lists += 1;
                        let text = body.to_string();
                        for id in &a_ids {
                            if text.contains(id.as_str()) {
                                outcome
                                    .leaks
                                    .push(format!("GET {path} ({status}) shows {id}"));
                            }
                        }
                    }
                }
                continue;
            }
            let Some(path) = concrete(template, &ids) else {
                continue;
            };
            outcome.operations += 1;
            let body = (verb == "POST" || verb == "PATCH").then(|| json!({}));
            for (who, attacker) in attackers {
                outcome.attempts += 1;
                let (status, _) =
                    call(addr, attacker, verb, &format!("/v1{path}"), body.clone()).await?;
                if (200..300).contains(&status) {
                    outcome
                        .successes
                        .push(format!("{verb} {path} with {who}: {status}"));
                }
            }
        }
    }
    // A batch of B naming A's contact must not touch it.
    let (_, batch) = call(
        addr,
        Some(&b.test_key),
        "POST",
        "/v1/batch",
        Some(json!({"operations": [
        {"op": "update", "object": "contact", "id": ids["contacts"], "data": {"first_name": "B"}},
        {"op": "delete", "object": "deal", "id": ids["deals"]}]})),
    )
    .await?;
    if batch["succeeded"].as_u64() != Some(0) {
        outcome
            .successes
            .push(format!("POST /batch of B on A's records: {batch}"));
    }
    for (collection, id) in [
        ("contacts", &ids["contacts"]),
        ("companies", &ids["companies"]),
        ("deals", &ids["deals"]),
    ] {
        let (_, record) = call(
            addr,
            Some(key),
            "GET",
            &format!("/v1/{collection}/{id}"),
            None,
        )
        .await?;
        if record["version"] != 1 || !record["deleted_at"].is_null() {
            outcome
                .changed
                .push(format!("A's {collection} record changed: {record}"));
        }
    }
    Ok(outcome)
}

/// `template` with its parameters replaced by A's ids; `None` if one is not known.
fn concrete(template: &str, ids: &BTreeMap<&str, String>) -> Option<String> {
    let mut out = String::new();
    let mut collection = "";
    for segment in template.split('/').filter(|s| !s.is_empty()) {
        out.push('/');
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some("id" | "pipeline") => out.push_str(ids.get(collection)?),
            Some("key") => out.push_str("one"),
            Some(name) => out.push_str(ids.get(name)?),
            None => {
                collection = segment;
                out.push_str(segment);
            }
        }
    }
    Some(out)
}
