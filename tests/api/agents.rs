//! The agent endpoints over raw HTTP: MCP at `/mcp`, A2A at `/a2a` and its agent card. The
//! official Python clients drive them too (`tests/agents`, run by `cargo xtask test`); these tests
//! pin what a client library would hide: HTTP statuses, headers, Host checks, tenancy of tasks,
//! and that REST, MCP and A2A describe every operation alike.

use std::collections::BTreeSet;

use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::support::{self, Backend, Res, Server};

const MCP_ACCEPT: &str = "application/json, text/event-stream";

/// One MCP JSON-RPC request on the stateless endpoint, with `key` (or none).
async fn mcp(s: &Server, key: Option<&str>, version: &str, method: &str, params: Value) -> Res {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut req = s
        .anon(Method::POST, "!/mcp")
        .header("accept", MCP_ACCEPT)
        .header("mcp-protocol-version", version)
        .header("mcp-method", method)
        .json(&body);
    if let Some(key) = key {
        req = req.header("authorization", &format!("Bearer {key}"));
    }
    req.send().await
}

/// `tools/call` with the test key: the tool result.
async fn call_tool(s: &Server, name: &str, arguments: Value) -> Value {
    let res = mcp(
        s,
        Some(&s.keys.test),
        "2025-11-25",
        "tools/call",
        json!({"name": name, "arguments": arguments}),
    )
    .await;
    res.ok(200)["result"].clone()
}

/// One A2A JSON-RPC request with `key`.
async fn a2a(s: &Server, key: Option<&str>, method: &str, params: Value) -> Res {
    let body = json!({"jsonrpc": "2.0", "id": "r1", "method": method, "params": params});
    let mut req = s
        .anon(Method::POST, "!/a2a")
        .header("a2a-version", "1.0")
        .json(&body);
    if let Some(key) = key {
        req = req.header("authorization", &format!("Bearer {key}"));
    }
    req.send().await
}

fn tool_message(tool: &str, arguments: Value) -> Value {
    json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {"tool": tool, "arguments": arguments}}]}})
}

fn object(v: &Value) -> &Map<String, Value> {
    v.as_object().unwrap_or_else(|| panic!("an object: {v:#}"))
}

fn names<'a>(items: impl IntoIterator<Item = &'a Value>, key: &str) -> BTreeSet<String> {
    items
        .into_iter()
        .map(|i| i[key].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The flat arguments an operation of the OpenAPI document takes, by name: its path and query
/// parameters and body properties with their schemas, and the headers agents pass as arguments.
fn arguments_from_openapi(op: &Value) -> (BTreeSet<String>, Map<String, Value>, BTreeSet<String>) {
    let mut names = BTreeSet::new();
    let mut schemas = Map::new();
    let mut required = BTreeSet::new();
    for p in op["parameters"].as_array().into_iter().flatten() {
        let name = p["name"].as_str().unwrap_or_default();
        let name = match (p["in"].as_str(), name) {
            (Some("header"), "Idempotency-Key") => "idempotency_key",
            (Some("header"), "If-Match") => "if_match",
            (Some("header"), other) => panic!("header {other} has no tool argument"),
            (_, name) => name,
        };
        names.insert(name.to_owned());
        if p["in"] == "query" {
            // A JSON document in a parameter (`content`) is a string to agents.
            let schema = p.get("schema").cloned();
            schemas.insert(name.to_owned(), schema.unwrap_or(json!({"type": "string"})));
        }
        if p["required"] == true {
            required.insert(name.to_owned());
        }
    }
    // A file REST sends as the body itself (an import's CSV) is the `csv` argument of agents.
    if let Some(file) = op["requestBody"]["content"].get("text/csv") {
        names.insert("csv".to_owned());
        schemas.insert("csv".to_owned(), file["schema"].clone());
        required.insert("csv".to_owned());
    }
    let body = &op["requestBody"]["content"]["application/json"]["schema"];
    for (name, schema) in body["properties"].as_object().into_iter().flatten() {
        names.insert(name.clone());
        schemas.insert(name.clone(), schema.clone());
    }
    required.extend(
        body["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned),
    );
    (names, schemas, required)
}

/// For every operation there is a REST route (in the OpenAPI document), an MCP tool and an A2A
/// skill with the same name, and the tool's and the skill's input schemas are the same schema,
/// made of exactly the REST operation's parameters and body.
async fn rest_mcp_and_a2a_offer_the_same_operations_with_the_same_inputs(s: Server) {
    // The tools' schemas are self-contained: compared with REST's with its references inlined.
    let openapi = support::inline_refs(
        s.anon(Method::GET, "/openapi.json")
            .send()
            .await
            .ok(200)
            .clone(),
    );
    let tools = mcp(
        &s,
        Some(&s.keys.test),
        "2025-06-18",
        "tools/list",
        json!({}),
    )
    .await
    .ok(200)["result"]["tools"]
        .clone();
    let card = s
        .anon(Method::GET, "!/.well-known/agent-card.json")
        .send()
        .await
        .ok(200)
        .clone();
    let skill_schemas = &card["capabilities"]["extensions"][0]["params"]["inputSchemas"];
    assert_eq!(
        card["capabilities"]["extensions"][0]["uri"],
        crm_a2a::TOOL_CALL_EXTENSION
    );

    let mut operations: Vec<(String, &Value)> = Vec::new();
    for item in object(&openapi["paths"]).values() {
        // Alias routes (`x-alias-of`) are extra REST paths of an operation, not operations.
        for op in object(item)
            .values()
            .filter(|op| op.get("x-alias-of").is_none())
        {
            operations.push((
                op["operationId"].as_str().unwrap_or_default().to_owned(),
                op,
            ));
        }
    }
    let catalog: BTreeSet<String> = crm_api::catalog()
        .iter()
        .map(|op| op.name.to_owned())
        .collect();
    let routes: BTreeSet<String> = operations.iter().map(|(name, _)| name.clone()).collect();
    assert_eq!(routes, catalog, "every catalog operation is a REST route");
    assert_eq!(
        names(tools.as_array().unwrap(), "name"),
        catalog,
        "every catalog operation is an MCP tool"
    );
    assert_eq!(
        names(card["skills"].as_array().unwrap(), "id"),
        catalog,
        "every catalog operation is an A2A skill"
    );

    for (name, op) in operations {
        let tool = tools
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name.as_str())
            .unwrap();
        let input = &tool["inputSchema"];
        assert_eq!(
            input, &skill_schemas[&name],
            "{name}: the tool and the skill take the same input"
        );
        let (rest_names, rest_schemas, rest_required) = arguments_from_openapi(op);
        let properties = object(&input["properties"]);
        assert_eq!(
            properties.keys().cloned().collect::<BTreeSet<_>>(),
            rest_names,
            "{name}: the same arguments as REST"
        );
        // Tool schemas leave out what a model is told once elsewhere or learns from a refusal
        // (docs/decisions.md, "Reading for agents"); the rest is REST's, member for member.
        for (arg, schema) in &rest_schemas {
            assert_eq!(
                as_shown(&properties[arg], true),
                as_shown(schema, true),
                "{name}.{arg}: REST's schema, as a model is shown it"
            );
        }
        assert_eq!(
            names_of(&input["required"]),
            rest_required,
            "{name}: the same required arguments as REST"
        );
        assert_eq!(
            input.get("additionalProperties"),
            None,
            "{name}: closed without saying so (an unknown argument is refused)"
        );
        assert_eq!(
            tool["description"], op["description"],
            "{name}: one description everywhere"
        );
        let skill = card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["id"] == name.as_str())
            .unwrap();
        assert_eq!(skill["description"], op["description"]);
    }
}

/// `v` as a tool shows an argument's schema (`top`: the argument itself): no descriptions,
/// patterns, titles, formats, bounds or `additionalProperties: true|false`; below the argument,
/// no per-kind `oneOf`/`anyOf` beside listed members. Applied to both sides, it leaves what must agree.
fn as_shown(v: &Value, top: bool) -> Value {
    if let Some(nullable) = nullable_object(v) {
        return as_shown(&nullable, top);
    }
    without_empty_combinators(match v {
        Value::Object(map) => {
            let bounds = [
                "maxLength",
                "minimum",
                "maximum",
                "minItems",
                "maxItems",
                "maxProperties",
                "propertyNames",
                "uniqueItems",
            ];
            let per_kind: &[&str] = if !top && map.contains_key("properties") {
                &["oneOf", "anyOf"]
            } else {
                &[]
            };
            Value::Object(
                map.iter()
                    .filter(|(k, v)| {
                        let dropped = ["description", "pattern", "title", "format"]
                            .contains(&k.as_str())
                            || bounds.contains(&k.as_str())
                            || per_kind.contains(&k.as_str())
                            || (k.as_str() == "additionalProperties" && v.is_boolean());
                        !dropped
                    })
                    .map(|(k, v)| {
                        let value = match (k.as_str(), v) {
                            ("properties", Value::Object(members)) => Value::Object(
                                members
                                    .iter()
                                    .map(|(n, m)| (n.clone(), as_shown(m, false)))
                                    .collect(),
                            ),
                            ("items" | "additionalProperties", item) => as_shown(item, false),
                            ("anyOf" | "oneOf" | "allOf", Value::Array(branches)) => {
                                Value::Array(branches.iter().map(|b| as_shown(b, top)).collect())
                            }
                            _ => v.clone(),
                        };
                        (k.clone(), value)
                    })
                    .collect::<Map<_, _>>(),
            )
        }
        other => other.clone(),
    })
}

/// `v` without an `allOf`, `anyOf` or `oneOf` left with only empty branches (a long text's shape
/// or a date's format, once dropped), which says nothing: a tool leaves it out.
fn without_empty_combinators(mut v: Value) -> Value {
    if let Some(map) = v.as_object_mut() {
        for combinator in ["allOf", "anyOf", "oneOf"] {
            let empty = map
                .get(combinator)
                .and_then(Value::as_array)
                .is_some_and(|branches| {
                    branches
                        .iter()
                        .all(|b| b.as_object().is_some_and(Map::is_empty))
                });
            if empty {
                map.remove(combinator);
            }
        }
    }
    v
}

fn names_of(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

async fn agent_endpoints_answer_401_with_a_bearer_challenge_to_a_missing_or_bad_key(s: Server) {
    let bad = "svc_test_00000000000000000000000000000000";
    for key in [None, Some(bad)] {
        let res = mcp(&s, key, "2025-06-18", "tools/list", json!({})).await;
        res.problem(401, "unauthorized");
        assert_eq!(res.header("www-authenticate"), Some("Bearer"));
        let res = a2a(
            &s,
            key,
            "SendMessage",
            tool_message("svc_list_contacts", json!({})),
        )
        .await;
        res.problem(401, "unauthorized");
        assert_eq!(res.header("www-authenticate"), Some("Bearer"));
    }
    // The agent card is public.
    let card = s
        .anon(Method::GET, "!/.well-known/agent-card.json")
        .send()
        .await;
    assert_eq!(
        card.ok(200)["supportedInterfaces"][0]["url"],
        format!("{}/a2a", s.base)
    );
}

async fn mcp_negotiates_each_supported_revision(s: Server) {
    for version in ["2025-06-18", "2025-11-25"] {
        let params = json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
        let res = mcp(&s, Some(&s.keys.test), version, "initialize", params).await;
        assert_eq!(res.ok(200)["result"]["protocolVersion"], version);
        assert!(res.body["result"]["capabilities"]["tools"].is_object());
        assert!(
            res.header("mcp-session-id").is_none(),
            "the endpoint is stateless"
        );
    }
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
    let res = mcp(
        &s,
        Some(&s.keys.test),
        "2026-07-28",
        "server/discover",
        json!({"_meta": meta}),
    )
    .await;
    let versions = names_of(&res.ok(200)["result"]["supportedVersions"]);
    assert_eq!(
        versions,
        ["2025-06-18", "2025-11-25", "2026-07-28"]
            .map(str::to_owned)
            .into_iter()
            .collect()
    );
}

async fn a_tool_call_is_the_rest_operation_with_its_idempotency_and_if_match(s: Server) {
    let args = json!({"email": "idem@example.com", "idempotency_key": "agents-1"});
    let first = call_tool(&s, "svc_create_contact", args.clone()).await;
    assert_eq!(first["isError"], false);
    let contact = first["structuredContent"].clone();
    assert_eq!(
        serde_json::from_str::<Value>(first["content"][0]["text"].as_str().unwrap()).unwrap(),
        contact
    );
    let again = call_tool(&s, "svc_create_contact", args).await;
    assert_eq!(
        again["structuredContent"]["id"], contact["id"],
        "the same key replays the first result"
    );
    // The key is the REST Idempotency-Key: the same request over REST replays it too.
    let rest = s
        .req(Method::POST, "/contacts")
        .header("idempotency-key", "agents-1")
        .json(&json!({"email": "idem@example.com"}))
        .send()
        .await;
    assert_eq!(rest.ok(201)["id"], contact["id"]);
    assert_eq!(rest.header("idempotent-replayed"), Some("true"));

    let id = contact["id"].as_str().unwrap();
    let stale = call_tool(
        &s,
        "svc_update_contact",
        json!({"id": id, "phone": "+1 555 0100", "if_match": 7}),
    )
    .await;
    assert_eq!(stale["isError"], true);
    assert_eq!(stale["structuredContent"]["code"], "version_conflict");
    let fresh = call_tool(
        &s,
        "svc_update_contact",
        json!({"id": id, "phone": "+1 555 0100", "if_match": "\"1\""}),
    )
    .await;
    assert_eq!(fresh["structuredContent"]["version"], 2);
    let rest = s.get(&format!("/contacts/{id}")).await;
    assert_eq!(
        rest.ok(200),
        &fresh["structuredContent"],
        "structuredContent is exactly the REST body"
    );
}

async fn a_tool_call_keeps_the_scopes_of_the_key(s: Server) {
    let unknown = call_tool(&s, "svc_list_contacts", json!({"emial": "x@example.com"})).await;
    assert_eq!(unknown["isError"], true);
    assert_eq!(unknown["structuredContent"]["code"], "unknown_field");
    assert_eq!(
        unknown["structuredContent"]["suggestion"],
        "did you mean `email`?"
    );
    // The live key sees live data only, like REST.
    let created = call_tool(&s, "svc_create_company", json!({"name": "Test Co"})).await;
    let id = created["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let live = mcp(
        &s,
        Some(&s.keys.live),
        "2025-11-25",
        "tools/call",
        json!({"name": "svc_get_company", "arguments": {"id": id}}),
    )
    .await;
    assert_eq!(
        live.ok(200)["result"]["structuredContent"]["code"],
        "not_found"
    );
}

async fn a_tool_filters_contacts_by_custom_field_with_one_object_argument(s: Server) {
    s.post(
        "/fields",
        json!({"object": "contact", "key": "score", "data_type": "number"}),
    )
    .await
    .ok(201);
    let hit = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"score": 5}}),
        )
        .await
        .ok(201)["id"]
        .clone();
    s.post(
        "/contacts",
        json!({"first_name": "Bo", "custom_fields": {"score": 6}}),
    )
    .await
    .ok(201);
    let listed = call_tool(
        &s,
        "svc_list_contacts",
        json!({"custom_fields": {"score": 5.0}}),
    )
    .await;
    let ids: Vec<_> = listed["structuredContent"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].clone())
        .collect();
    assert_eq!(ids, vec![hit]);
    let unknown = call_tool(
        &s,
        "svc_list_contacts",
        json!({"custom_fields": {"scor": 5}}),
    )
    .await;
    assert_eq!(unknown["isError"], true);
    assert_eq!(
        (
            unknown["structuredContent"]["code"].clone(),
            unknown["structuredContent"]["field"].clone()
        ),
        (json!("unknown_field"), json!("custom_fields.scor"))
    );
    let wrong = call_tool(
        &s,
        "svc_list_contacts",
        json!({"custom_fields": {"score": "five"}}),
    )
    .await;
    assert_eq!(wrong["structuredContent"]["code"], "validation_failed");
}

async fn an_unknown_tool_is_a_protocol_error_naming_the_valid_ones(s: Server) {
    let res = mcp(
        &s,
        Some(&s.keys.test),
        "2025-11-25",
        "tools/call",
        json!({"name": "svc_create_contcat", "arguments": {}}),
    )
    .await;
    let error = &res.ok(200)["error"];
    assert_eq!(error["code"], -32602);
    assert_eq!(
        error["data"]["suggestion"],
        "did you mean `svc_create_contact`?"
    );
}

/// Usage and settings are rendered straight to JSON bytes (`Reply::serialized`), which the
/// agent transports parse back: the tool's result and the task's artifact are the REST body.
async fn usage_and_settings_are_the_same_document_on_every_transport(s: Server) {
    let key = Some(s.keys.test.as_str());
    s.patch("/settings", json!({"overage_cap_usd": 12.5}))
        .await
        .ok(200);
    for (tool, path) in [
        ("svc_get_settings", "/settings"),
        ("svc_get_usage", "/usage"),
    ] {
        let rest = s.get(path).await.ok(200).clone();
        assert_eq!(rest["object"], path.trim_start_matches('/'));
        let tool_result = call_tool(&s, tool, json!({})).await;
        assert_eq!(tool_result["isError"], false);
        assert_eq!(tool_result["structuredContent"], rest, "{tool} over MCP");
        let done = a2a(&s, key, "SendMessage", tool_message(tool, json!({}))).await;
        assert_eq!(
            done.ok(200)["result"]["task"]["artifacts"][0]["parts"][0]["data"],
            rest,
            "{tool} over A2A"
        );
    }
    let settings = call_tool(&s, "svc_get_settings", json!({})).await;
    assert_eq!(settings["structuredContent"]["overage_cap_usd"], 12.5);
}

async fn a2a_answers_completed_failed_and_rejected_tasks(s: Server) {
    let key = Some(s.keys.test.as_str());
    let done = a2a(
        &s,
        key,
        "SendMessage",
        tool_message("svc_create_company", json!({"name": "Acme"})),
    )
    .await;
    let task = done.ok(200)["result"]["task"].clone();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let company = task["artifacts"][0]["parts"][0]["data"].clone();
    let rest = s
        .get(&format!("/companies/{}", company["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        rest.ok(200),
        &company,
        "the artifact is exactly the REST body"
    );

    let got = a2a(&s, key, "GetTask", json!({"id": task["id"]})).await;
    assert_eq!(got.ok(200)["result"], task);

    let failed = a2a(
        &s,
        key,
        "SendMessage",
        tool_message(
            "svc_get_company",
            json!({"id": "cmp_00000000000000000000000000"}),
        ),
    )
    .await;
    let failed = &failed.ok(200)["result"]["task"];
    assert_eq!(failed["status"]["state"], "TASK_STATE_FAILED");
    let problem = &failed["status"]["message"]["parts"][1]["data"];
    assert_eq!(
        (problem["code"].as_str(), problem["status"].as_i64()),
        (Some("not_found"), Some(404))
    );

    let rejected = a2a(
        &s,
        key,
        "SendMessage",
        tool_message("svc_no_such_tool", json!({})),
    )
    .await;
    assert_eq!(
        rejected.ok(200)["result"]["task"]["status"]["state"],
        "TASK_STATE_REJECTED"
    );
    let no_call =
        json!({"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"text": "hello"}]}});
    let rejected = a2a(&s, key, "SendMessage", no_call).await;
    assert_eq!(
        rejected.ok(200)["result"]["task"]["status"]["state"],
        "TASK_STATE_REJECTED"
    );

    let malformed = a2a(&s, key, "SendMessage", json!({"message": "hi"})).await;
    assert_eq!(malformed.ok(200)["error"]["code"], -32602);
    let unknown = a2a(&s, key, "DoSomething", json!({})).await;
    assert_eq!(unknown.ok(200)["error"]["code"], -32601);
}

/// A task belongs to the workspace and mode that created it, as every record does, and is read
/// only with a key that may run its operation.
async fn a2a_tasks_are_visible_only_to_their_workspace_and_mode(s: Server) {
    let task = a2a(
        &s,
        Some(&s.keys.test),
        "SendMessage",
        tool_message("svc_list_contacts", json!({})),
    )
    .await;
    let id = task.ok(200)["result"]["task"]["id"].clone();
    let other = support::create_workspace(&s.database_url, &[]);
    for key in [&s.keys.live, &other.test] {
        let res = a2a(&s, Some(key), "GetTask", json!({"id": id})).await;
        assert_eq!(
            res.ok(200)["error"]["code"],
            -32001,
            "another tenant's task is not found"
        );
    }
    // A key of the same workspace and mode that may not list contacts may not read the list
    // through the task either.
    let narrow = s
        .post("/keys", json!({"name": "narrow", "scopes": ["usage:read"]}))
        .await
        .ok(201)["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = a2a(&s, Some(&narrow), "GetTask", json!({"id": id})).await;
    assert_eq!(
        res.ok(200)["error"]["code"],
        -32001,
        "a key without the task's scope does not read it"
    );
    let mine = a2a(&s, Some(&s.keys.test), "GetTask", json!({"id": id})).await;
    assert_eq!(mine.ok(200)["result"]["id"], id);
}

async fn a2a_answers_the_0_3_method_names_in_0_3_shapes(s: Server) {
    let params = json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
        "parts": [{"kind": "data", "data": {"tool": "svc_list_contacts", "arguments": {"limit": 1.0}}}]}});
    let res = a2a(&s, Some(&s.keys.test), "message/send", params).await;
    let task = res.ok(200)["result"].clone();
    assert_eq!(
        (task["kind"].as_str(), task["status"]["state"].as_str()),
        (Some("task"), Some("completed"))
    );
    assert_eq!(task["artifacts"][0]["parts"][0]["kind"], "data");
    assert_eq!(task["artifacts"][0]["parts"][0]["data"]["object"], "list");
    let got = a2a(
        &s,
        Some(&s.keys.test),
        "tasks/get",
        json!({"id": task["id"]}),
    )
    .await;
    assert_eq!(got.ok(200)["result"], task);
}

mod rate_limits {
    use super::*;

    /// Tool calls are rate-limited and counted like REST requests, and their HTTP responses carry the
    /// same `RateLimit-*` headers; a malformed call counts too (decisions §8, §17).
    async fn tool_calls_carry_rate_limit_headers_and_count_like_rest(backend: Backend) {
        let s = support::spawn_with(backend, &["--rate-limit-per-minute", "4"]).await;
        let res = mcp(
            &s,
            Some(&s.keys.test),
            "2025-11-25",
            "tools/call",
            json!({"name": "svc_list_contacts", "arguments": {}}),
        )
        .await;
        assert_eq!(res.header("ratelimit-limit"), Some("4"));
        assert_eq!(res.header("ratelimit-remaining"), Some("3"));
        // A call with a bad argument is still one admitted request.
        let res = mcp(
            &s,
            Some(&s.keys.test),
            "2025-11-25",
            "tools/call",
            json!({"name": "svc_list_contacts", "arguments": {"emial": "x"}}),
        )
        .await;
        assert_eq!(res.ok(200)["result"]["isError"], true);
        assert_eq!(res.header("ratelimit-remaining"), Some("2"));
        let res = a2a(
            &s,
            Some(&s.keys.test),
            "SendMessage",
            tool_message("svc_list_contacts", json!({})),
        )
        .await;
        assert_eq!(res.header("ratelimit-remaining"), Some("1"));
        // Protocol traffic is neither limited nor counted.
        mcp(
            &s,
            Some(&s.keys.test),
            "2025-11-25",
            "tools/list",
            json!({}),
        )
        .await
        .ok(200);
        s.get("/contacts").await.ok(200);
        let refused = mcp(
            &s,
            Some(&s.keys.test),
            "2025-11-25",
            "tools/call",
            json!({"name": "svc_list_contacts", "arguments": {}}),
        )
        .await;
        assert_eq!(
            refused.ok(200)["result"]["structuredContent"]["code"],
            "rate_limited"
        );
        assert_eq!(refused.header("ratelimit-remaining"), Some("0"));
        assert!(refused.header("retry-after").is_some());
    }

    crate::on_both_backends!(tool_calls_carry_rate_limit_headers_and_count_like_rest);
}

/// A tool call whose request repeats a key in one object answers the 400 REST answers for such
/// a body (decisions §22), as a counted call, instead of keeping the last value.
async fn a_tool_call_with_a_repeated_key_is_refused_as_rest_refuses_it(s: Server) {
    let body = r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "svc_create_contact", "arguments": {"email": "a@example.com", "email": "b@example.com"}}}"#;
    let res = s
        .anon(Method::POST, "!/mcp")
        .header("accept", MCP_ACCEPT)
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/call")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .raw(body)
        .send()
        .await;
    let result = res.ok(200)["result"].clone();
    assert_eq!(result["isError"], true, "{result}");
    assert!(res.header("ratelimit-remaining").is_some());
    let problem = &result["structuredContent"];
    assert_eq!(problem["code"], "bad_request");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("appears twice"),
        "{problem}"
    );
    let listed = call_tool(&s, "svc_list_contacts", json!({})).await;
    assert_eq!(listed["structuredContent"]["data"], json!([]));
}

crate::on_both_stores!(
    a_tool_call_with_a_repeated_key_is_refused_as_rest_refuses_it,
    rest_mcp_and_a2a_offer_the_same_operations_with_the_same_inputs,
    agent_endpoints_answer_401_with_a_bearer_challenge_to_a_missing_or_bad_key,
    mcp_negotiates_each_supported_revision,
    a_tool_call_is_the_rest_operation_with_its_idempotency_and_if_match,
    a_tool_call_keeps_the_scopes_of_the_key,
    a_tool_filters_contacts_by_custom_field_with_one_object_argument,
    an_unknown_tool_is_a_protocol_error_naming_the_valid_ones,
    a2a_answers_completed_failed_and_rejected_tasks,
    usage_and_settings_are_the_same_document_on_every_transport,
    a2a_tasks_are_visible_only_to_their_workspace_and_mode,
    a2a_answers_the_0_3_method_names_in_0_3_shapes,
);

/// A deployed server is reached under its public host name, which the MCP endpoint must accept
/// (rmcp accepts only loopback names unless told otherwise); other hosts are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_accepts_the_host_of_the_public_url_and_refuses_others() {
    let database_url = support::fresh_database(Backend::Sqlite).await;
    let keys = support::create_workspace(&database_url, &[]);
    let s = support::start(
        Backend::Sqlite,
        database_url,
        keys,
        &[("CRM_PUBLIC_URL", "https://crm.example.com")],
    );
    let list = |host: &'static str| {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
        s.req(Method::POST, "!/mcp")
            .header("host", host)
            .header("accept", MCP_ACCEPT)
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body)
    };
    assert_eq!(
        list("crm.example.com").send().await.ok(200)["result"]["tools"]
            .as_array()
            .map(Vec::len),
        Some(crm_api::catalog().len())
    );
    assert_eq!(list("evil.example.net").send().await.status, 403);
    let card = s
        .anon(Method::GET, "!/.well-known/agent-card.json")
        .send()
        .await;
    assert_eq!(
        card.ok(200)["supportedInterfaces"][0]["url"],
        "https://crm.example.com/a2a"
    );
}

/// A named optional object reads `anyOf: [<Type>, {"type": "null"}]` in the document (the
/// reference inlined) and `type: ["object", "null"]` in a tool, which inlines it: the second
/// spelling of the first.
fn nullable_object(v: &Value) -> Option<Value> {
    let map = v.as_object()?;
    let [a, b] = map.get("anyOf")?.as_array()?.as_slice() else {
        return None;
    };
    let null = json!({"type": "null"});
    let object = if *a == null {
        b
    } else if *b == null {
        a
    } else {
        return None;
    };
    if object.get("type")? != "object" {
        return None;
    }
    let mut merged = object.as_object()?.clone();
    merged.insert("type".into(), json!(["object", "null"]));
    for (k, v) in map.iter().filter(|(k, _)| k.as_str() != "anyOf") {
        merged.insert(k.clone(), v.clone());
    }
    Some(Value::Object(merged))
}
