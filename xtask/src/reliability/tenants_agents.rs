//! The tenant matrix over MCP and A2A: every operation that names a record is also an MCP tool
//! and an A2A skill (the same catalog, the same arguments: path parameters by name). Each is
//! called for workspace A's record with the keys that must not reach it, as `tools/call` on
//! `/mcp` and as a `SendMessage` tool call on `/a2a`; none may succeed. Every list, the search,
//! the event feed and the usage tools are called with B's key and A's live key, whose results
//! must hold no id of A; and a task A made over A2A must not be readable with those keys.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

use super::client::request;

pub struct Outcome {
    pub operations: usize,
    pub attempts: usize,
    pub successes: Vec<String>,
    pub lists: usize,
    pub leaks: Vec<String>,
}

const MCP_HEADERS: [(&str, &str); 3] = [
    ("accept", "application/json, text/event-stream"),
    ("mcp-protocol-version", "2025-11-25"),
    ("mcp-method", "tools/call"),
];

/// A tool call over MCP: whether it succeeded, and the whole answer as text.
async fn mcp(
    addr: &str,
    key: Option<&str>,
    tool: &str,
    arguments: &Value,
) -> Result<(bool, String)> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let a = request(addr, key, "POST", "/mcp", &MCP_HEADERS, Some(&body)).await?;
    let v = a.json();
    let ok = a.status == 200 && v["result"].is_object() && v["result"]["isError"] != true;
    Ok((ok, String::from_utf8_lossy(&a.body).into_owned()))
}

async fn a2a_call(
    addr: &str,
    key: Option<&str>,
    method: &str,
    params: Value,
) -> Result<(u16, Value, String)> {
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params});
    let a = request(
        addr,
        key,
        "POST",
        "/a2a",
        &[("a2a-version", "1.0")],
        Some(&body),
    )
    .await?;
    Ok((
        a.status,
        a.json(),
        String::from_utf8_lossy(&a.body).into_owned(),
    ))
}

/// A tool call as an A2A message: whether its task completed, and the whole answer as text.
async fn a2a(
    addr: &str,
    key: Option<&str>,
    tool: &str,
    arguments: &Value,
) -> Result<(bool, String)> {
    let params = json!({"message": {"messageId": "m1", "role": "ROLE_USER",
        "parts": [{"data": {"tool": tool, "arguments": arguments}}]}});
    let (status, v, text) = a2a_call(addr, key, "SendMessage", params).await?;
    let ok = status == 200 && v["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED";
    Ok((ok, text))
}

/// The tool arguments naming A's record in `template`'s parameters; `None` if one is not known.
fn arguments(template: &str, ids: &BTreeMap<&str, String>) -> Option<Map<String, Value>> {
    let mut args = Map::new();
    let mut collection = "";
    for segment in template.split('/').filter(|s| !s.is_empty()) {
        match segment.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(name @ ("id" | "pipeline")) => {
                args.insert(name.into(), ids.get(collection)?.clone().into());
            }
            Some("key") => {
                args.insert("key".into(), "one".into());
            }
            Some(name) => {
                args.insert(name.into(), ids.get(name)?.clone().into());
            }
            None => collection = segment,
        }
    }
    Some(args)
}

pub async fn matrix(
    addr: &str,
    paths: &Map<String, Value>,
    ids: &BTreeMap<&str, String>,
    attackers: &[(&str, Option<&str>)],
    readers: &[Option<&str>],
    a_key: &str,
) -> Result<Outcome> {
    let mut o = Outcome {
        operations: 0,
        attempts: 0,
        successes: Vec::new(),
        lists: 0,
        leaks: Vec::new(),
    };
    // The control: A's own key reads A's contact over both, and finds it in the list.
    let own = json!({"id": ids.get("contacts").context("A's contact")?});
    let contact = ids["contacts"].as_str();
    for (transport, (ok, text)) in [
        (
            "MCP",
            mcp(addr, Some(a_key), "svc_get_contact", &own).await?,
        ),
        (
            "A2A",
            a2a(addr, Some(a_key), "svc_get_contact", &own).await?,
        ),
        (
            "MCP",
            mcp(addr, Some(a_key), "svc_list_contacts", &json!({})).await?,
        ),
        (
            "A2A",
            a2a(addr, Some(a_key), "svc_list_contacts", &json!({})).await?,
        ),
    ] {
        if !ok || !text.contains(contact) {
            anyhow::bail!(
                "the control failed: A's key does not read A's contact over {transport}: {text}"
            );
        }
    }
    let a_ids: Vec<&String> = ids.values().collect();
    let leaks = |text: &str, what: String, leaks: &mut Vec<String>| {
        for id in &a_ids {
            if text.contains(id.as_str()) {
                leaks.push(format!("{what} shows {id}"));
            }
        }
    };
    for (template, item) in paths {
        let Some(item) = item.as_object() else {
            continue;
        };
        for (method, op) in item {
            if op.get("x-alias-of").is_some() {
                continue;
            }
            let Some(tool) = op["operationId"].as_str() else {
                continue;
            };
            if !template.contains('{') {
                if method == "get" {
                    let args = if template == "/search" {
                        json!({"q": "tenant"})
                    } else {
                        json!({})
                    };
                    for reader in readers {
                        let (_, text) = mcp(addr, *reader, tool, &args).await?;
                        leaks(&text, format!("MCP {tool}"), &mut o.leaks);
                        let (_, text) = a2a(addr, *reader, tool, &args).await?;
                        leaks(&text, format!("A2A {tool}"), &mut o.leaks);
                        o.lists += 2;
                    }
                }
                continue;
            }
            let Some(args) = arguments(template, ids) else {
                continue;
            };
            let args = Value::Object(args);
            o.operations += 1;
            for (who, key) in attackers {
                o.attempts += 2;
                if mcp(addr, *key, tool, &args).await?.0 {
                    o.successes.push(format!("MCP {tool} with {who}"));
                }
                if a2a(addr, *key, tool, &args).await?.0 {
                    o.successes.push(format!("A2A {tool} with {who}"));
                }
            }
        }
    }
    // A's A2A task: not readable by anyone else.
    let params = json!({"message": {"messageId": "m1", "role": "ROLE_USER",
        "parts": [{"data": {"tool": "svc_list_contacts", "arguments": {}}}]}});
    let (_, made, _) = a2a_call(addr, Some(a_key), "SendMessage", params).await?;
    let task = made["result"]["task"]["id"].clone();
    task.as_str().context("A's A2A task")?;
    for (who, key) in attackers {
        o.attempts += 1;
        let (status, v, _) = a2a_call(addr, *key, "GetTask", json!({"id": task})).await?;
        if status == 200 && v["result"]["id"] == task {
            o.successes
                .push(format!("A2A GetTask of A's task with {who}"));
        }
    }
    Ok(o)
}
