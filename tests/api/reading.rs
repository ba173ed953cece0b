//! Reading for agents (decisions §19, §23, §24): paging on every list, `fields=` and `expand=`
//! on gets and lists, and MCP tool lists cut to the key's scopes and the toolsets asked for.

use std::{collections::BTreeSet, time::Duration};

use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::support::{self, Backend, Server};

/// The pro plan: these tests make more requests than the free plan's minute allows.
async fn pro(backend: Backend) -> Server {
    support::spawn_with(backend, &["--plan", "pro"]).await
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("an id").to_owned()
}

fn keys_of(v: &Value) -> Vec<&str> {
    v.as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect()
}

async fn pipelines_page_with_limit_and_cursor(s: Server) {
    for n in 0..59 {
        s.post(
            "/pipelines",
            json!({"key": format!("p{n:02}"), "stages": ["open"]}),
        )
        .await
        .ok(201);
    }
    let mut seen = Vec::new();
    let mut path = "/pipelines?limit=25".to_owned();
    let mut sizes = Vec::new();
    loop {
        let page = s.get(&path).await.ok(200).clone();
        assert_eq!(page["object"], "list");
        let data = page["data"].as_array().unwrap();
        sizes.push(data.len());
        seen.extend(data.iter().map(id));
        if page["has_more"] == false {
            assert_eq!(page["next_cursor"], Value::Null);
            break;
        }
        path = format!(
            "/pipelines?limit=25&cursor={}",
            page["next_cursor"].as_str().unwrap()
        );
    }
    assert_eq!(sizes, [25, 25, 10]);
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 60);
    // The default pipeline is the oldest, so it comes first.
    assert_eq!(
        s.get("/pipelines?limit=1").await.ok(200)["data"][0]["key"],
        "default"
    );
    // A cursor of another list is refused.
    let contacts_cursor = {
        for n in 0..2 {
            s.post("/contacts", json!({"first_name": format!("c{n}")}))
                .await
                .ok(201);
        }
        s.get("/contacts?limit=1").await.ok(200)["next_cursor"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    s.get(&format!("/pipelines?cursor={contacts_cursor}"))
        .await
        .problem(400, "invalid_cursor");
    s.get("/pipelines?limit=101")
        .await
        .problem(422, "validation_failed");
    // An unknown parameter names what the endpoint accepts.
    let unknown = s.get("/pipelines?page=2").await;
    let valid = unknown.problem(400, "bad_request")["valid_options"].clone();
    assert_eq!(valid, json!(["limit", "cursor"]));
}

/// The records the shape tests read: a company, a soft-deleted company, a contact of the first
/// and one without a company, a deal of each company (the second without a contact), and an
/// activity on the first contact and deal.
struct Fixture {
    company: Value,
    deleted_company: Value,
    contact: Value,
    loner: Value,
    deal: Value,
    orphan_deal: Value,
    activity: Value,
}

async fn fixture(s: &Server) -> Fixture {
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    let company = s
        .post("/companies", json!({"name": "Acme", "domain": "acme.test"}))
        .await
        .ok(201)
        .clone();
    let gone = s
        .post("/companies", json!({"name": "Gone"}))
        .await
        .ok(201)
        .clone();
    let contact = s
        .post(
            "/contacts",
            json!({"email": "ada@acme.test", "first_name": "Ada", "company_id": id(&company),
                   "custom_fields": {"tier": "gold"}}),
        )
        .await
        .ok(201)
        .clone();
    let loner = s
        .post("/contacts", json!({"email": "lone@example.com"}))
        .await
        .ok(201)
        .clone();
    let deal = s
        .post(
            "/deals",
            json!({"title": "Big", "company_id": id(&company), "primary_contact_id": id(&contact)}),
        )
        .await
        .ok(201)
        .clone();
    let orphan_deal = s
        .post(
            "/deals",
            json!({"title": "Orphan", "company_id": id(&gone)}),
        )
        .await
        .ok(201)
        .clone();
    s.delete(&format!("/companies/{}", id(&gone))).await.ok(200);
    let deleted_company = s
        .get(&format!("/companies/{}", id(&gone)))
        .await
        .ok(200)
        .clone();
    assert!(deleted_company["deleted_at"].is_string());
    let activity = s
        .post(
            "/activities",
            json!({"type": "note", "body": "hi", "contact_id": id(&contact), "deal_id": id(&deal)}),
        )
        .await
        .ok(201)
        .clone();
    Fixture {
        company,
        deleted_company,
        contact,
        loner,
        deal,
        orphan_deal,
        activity,
    }
}

async fn fields_project_gets_and_lists_of_every_object(s: Server) {
    let f = fixture(&s).await;
    let path = format!("/contacts/{}", id(&f.contact));
    let plain = s.get(&path).await;
    let projected = s
        .get(&format!("{path}?fields=email,custom_fields.tier"))
        .await;
    assert_eq!(
        projected.ok(200).clone(),
        json!({"id": id(&f.contact), "object": "contact", "email": "ada@acme.test",
               "custom_fields": {"tier": "gold"}})
    );
    assert_eq!(projected.header("etag"), plain.header("etag"));
    assert!(projected.header("etag").is_some());
    // Whole custom_fields, and blanks ignored.
    let whole = s
        .get(&format!("{path}?fields=custom_fields,,first_name"))
        .await;
    assert_eq!(
        keys_of(whole.ok(200)),
        ["id", "object", "first_name", "custom_fields"]
    );
    let list = s
        .get("/contacts?fields=email&limit=10")
        .await
        .ok(200)
        .clone();
    for c in list["data"].as_array().unwrap() {
        assert_eq!(keys_of(c), ["id", "object", "email"]);
    }
    assert_eq!(list["data"].as_array().unwrap().len(), 2);
    assert_eq!(list["has_more"], false);
    for (collection, record, field) in [
        ("companies", &f.company, "domain"),
        ("deals", &f.deal, "stage"),
        ("activities", &f.activity, "body"),
    ] {
        let one = s
            .get(&format!("/{collection}/{}?fields={field}", id(record)))
            .await;
        assert_eq!(
            keys_of(one.ok(200)),
            ["id", "object", field],
            "{collection}"
        );
        assert_eq!(one.ok(200)[field], record[field], "{collection}");
        let list = s.get(&format!("/{collection}?fields={field}")).await;
        for r in list.ok(200)["data"].as_array().unwrap() {
            assert_eq!(keys_of(r), ["id", "object", field], "{collection}");
        }
    }
    // Unknown names: 400 naming what may be asked for.
    let bad = s.get(&format!("{path}?fields=emial")).await;
    let p = bad.problem(400, "bad_request");
    assert_eq!(p["field"], "fields");
    assert_eq!(p["suggestion"], "did you mean `email`?");
    let valid = p["valid_options"].as_array().unwrap();
    assert!(valid.contains(&json!("email")) && valid.contains(&json!("custom_fields.tier")));
    let p = s.get("/deals?fields=custom_fields.nope").await;
    assert_eq!(p.problem(400, "bad_request")["field"], "fields");
    let p = s.get("/companies?expand=company").await;
    assert!(p.problem(400, "bad_request")["valid_options"]
        .as_array()
        .unwrap()
        .contains(&json!("fields")));
}

async fn expand_adds_related_records_as_their_gets_answer(s: Server) {
    let f = fixture(&s).await;
    let company = s
        .get(&format!("/companies/{}", id(&f.company)))
        .await
        .ok(200)
        .clone();
    let contact = s
        .get(&format!("/contacts/{}", id(&f.contact)))
        .await
        .ok(200)
        .clone();
    let deal = s
        .get(&format!("/deals/{}", id(&f.deal)))
        .await
        .ok(200)
        .clone();

    // Contacts: company, placed right after company_id; null without one.
    let got = s
        .get(&format!("/contacts/{}?expand=company", id(&f.contact)))
        .await
        .ok(200)
        .clone();
    assert_eq!(got["company"], company);
    let keys = keys_of(&got);
    let at = keys.iter().position(|k| *k == "company_id").unwrap();
    assert_eq!(keys[at + 1], "company");
    let list = s.get("/contacts?expand=company").await.ok(200).clone();
    let by_id: Map<String, Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (id(c), c["company"].clone()))
        .collect();
    assert_eq!(by_id[&id(&f.contact)], company);
    assert_eq!(by_id[&id(&f.loner)], Value::Null);

    // Deals: a soft-deleted company comes as its GET answers, a missing contact as null.
    let list = s
        .get("/deals?expand=company,primary_contact")
        .await
        .ok(200)
        .clone();
    let deals: Map<String, Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (id(d), d.clone()))
        .collect();
    let orphan = &deals[&id(&f.orphan_deal)];
    assert_eq!(orphan["company"], f.deleted_company);
    assert!(orphan["company"]["deleted_at"].is_string());
    assert_eq!(orphan["primary_contact"], Value::Null);
    assert_eq!(deals[&id(&f.deal)]["company"], company);
    assert_eq!(deals[&id(&f.deal)]["primary_contact"], contact);

    // Activities: contact and deal; with fields, only the named members and the relations.
    let got = s
        .get(&format!(
            "/activities/{}?expand=contact,deal&fields=body",
            id(&f.activity)
        ))
        .await
        .ok(200)
        .clone();
    assert_eq!(keys_of(&got), ["id", "object", "contact", "deal", "body"]);
    assert_eq!(got["contact"], contact);
    assert_eq!(got["deal"], deal);
    let list = s
        .get("/activities?expand=deal&fields=deal_id")
        .await
        .ok(200)
        .clone();
    assert_eq!(
        keys_of(&list["data"][0]),
        ["id", "object", "deal_id", "deal"]
    );
    let got = s
        .get(&format!(
            "/deals/{}?fields=title&expand=primary_contact",
            id(&f.deal)
        ))
        .await;
    assert_eq!(got.ok(200)["primary_contact"], contact);
    assert_eq!(got.header("etag"), Some("\"1\""));

    // Unknown relations, and relations the key may not read.
    let bad = s.get("/deals?expand=contact").await;
    let p = bad.problem(400, "bad_request");
    assert_eq!(p["field"], "expand");
    assert_eq!(p["valid_options"], json!(["company", "primary_contact"]));
    let deals_only = s
        .post("/keys", json!({"name": "deals", "scopes": ["deals:read"]}))
        .await
        .ok(201)
        .clone();
    let secret = deals_only["secret"].as_str().unwrap();
    let res = s
        .req(Method::GET, "/deals?expand=company")
        .key(secret)
        .send()
        .await;
    assert!(res.problem(403, "forbidden")["detail"]
        .as_str()
        .unwrap()
        .contains("companies:read"));
    s.req(Method::GET, "/deals?fields=title")
        .key(secret)
        .send()
        .await
        .ok(200);
}

/// MCP and A2A take `fields` and `expand` as REST does.
async fn agents_take_fields_and_expand(s: Server) {
    let f = fixture(&s).await;
    let rest = s
        .get(&format!(
            "/deals/{}?fields=title&expand=company",
            id(&f.deal)
        ))
        .await
        .ok(200)
        .clone();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "svc_get_deal", "arguments": {"id": id(&f.deal), "fields": "title", "expand": "company"}}});
    let res = mcp(&s, &s.keys.test, "", body).await;
    assert_eq!(res.ok(200)["result"]["structuredContent"], rest);
    let message = json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"data": {
        "tool": "svc_list_deals", "arguments": {"fields": "title", "expand": "company", "limit": 1}}}]}});
    let task = s
        .anon(Method::POST, "!/a2a")
        .header("a2a-version", "1.0")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .json(&json!({"jsonrpc": "2.0", "id": "r1", "method": "SendMessage", "params": message}))
        .send()
        .await;
    let result = task.ok(200)["result"]["task"]["artifacts"][0]["parts"][0]["data"].clone();
    assert_eq!(result["data"][0]["title"], "Orphan");
    assert_eq!(
        keys_of(&result["data"][0]),
        ["id", "object", "title", "company"]
    );
}

/// One MCP request with `key`; `query` is appended to `/mcp`.
async fn mcp(s: &Server, key: &str, query: &str, body: Value) -> support::Res {
    s.anon(Method::POST, &format!("!/mcp{query}"))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("authorization", &format!("Bearer {key}"))
        .json(&body)
        .send()
        .await
}

async fn list_tools(s: &Server, key: &str, query: &str) -> Vec<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    mcp(s, key, query, body).await.ok(200)["result"]["tools"]
        .as_array()
        .unwrap()
        .clone()
}

/// What a model is shown of the tools (decisions §24): name, description and inputSchema.
fn shown_bytes(tools: &[Value]) -> usize {
    tools
        .iter()
        .map(|t| {
            serde_json::to_vec(&json!({"name": t["name"], "description": t["description"],
                "inputSchema": t["inputSchema"]}))
            .unwrap()
            .len()
        })
        .sum()
}

async fn mcp_tool_lists_follow_scopes_and_toolsets(s: Server) {
    let all = list_tools(&s, &s.keys.test, "").await;
    assert_eq!(all.len(), crm_api::catalog().len());
    let bytes = shown_bytes(&all);
    assert!(
        bytes <= 50_000,
        "a model is shown {bytes} bytes of {} tools",
        all.len()
    );

    let read_only = s
        .post(
            "/keys",
            json!({"name": "ro", "scopes": ["contacts:read", "deals:read", "pipelines:read"]}),
        )
        .await
        .ok(201)
        .clone();
    let ro = read_only["secret"].as_str().unwrap();
    let tools = list_tools(&s, ro, "").await;
    let names: BTreeSet<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for t in &tools {
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{}", t["name"]);
    }
    for name in [
        "svc_list_contacts",
        "svc_get_deal",
        "svc_search_records",
        "svc_list_pipelines",
    ] {
        assert!(names.contains(name), "{name}");
    }
    for name in [
        "svc_create_contact",
        "svc_write_batch",
        "svc_list_companies",
    ] {
        assert!(!names.contains(name), "{name}");
    }

    let schema = s.get("/schema").await.ok(200).clone();
    let pipeline_tools: BTreeSet<&str> = schema["toolsets"]["pipelines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(pipeline_tools.contains("svc_manage_stage"));
    let only = list_tools(&s, &s.keys.test, "?toolsets=pipelines").await;
    let only: BTreeSet<&str> = only.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(only, pipeline_tools);
    let ro_pipelines = list_tools(&s, ro, "?toolsets=pipelines").await;
    assert_eq!(
        ro_pipelines
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        [
            "svc_list_pipelines",
            "svc_get_pipeline",
            "svc_get_pipeline_totals"
        ]
    );
    let two = list_tools(&s, &s.keys.test, "?toolsets=pipelines,registry").await;
    assert!(two.len() > only.len());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let res = mcp(&s, &s.keys.test, "?toolsets=pipeline", body).await;
    let p = res.problem(400, "bad_request");
    assert_eq!(p["suggestion"], "did you mean `pipelines`?");
    assert_eq!(
        p["valid_options"],
        json!([
            "records",
            "pipelines",
            "registry",
            "automations",
            "sequences",
            "webhooks",
            "admin"
        ])
    );

    // The agent card stays complete, with the same descriptions.
    let card = s
        .anon(Method::GET, "!/.well-known/agent-card.json")
        .send()
        .await
        .ok(200)
        .clone();
    let skills = card["skills"].as_array().unwrap();
    assert_eq!(skills.len(), all.len());
    for (skill, tool) in skills.iter().zip(&all) {
        assert_eq!(skill["description"], tool["description"]);
    }
}

crate::on_both_stores!(
    served_by super::pro;
    pipelines_page_with_limit_and_cursor,
    fields_project_gets_and_lists_of_every_object,
    expand_adds_related_records_as_their_gets_answer,
    agents_take_fields_and_expand,
    mcp_tool_lists_follow_scopes_and_toolsets,
);

/// The statement count of `expand` (its own servers, logging every statement).
mod statement_log {
    use super::*;

    /// How many statements in the server's log read `table`. sqlx logs each statement it runs on one
    /// line, its text laid out over several (escaped) lines, so whitespace is folded first.
    fn statements_reading(log: &str, table: &str) -> usize {
        let from = format!("FROM {table} ");
        log.lines()
            .filter(|l| l.contains("sqlx::query"))
            .map(|l| {
                let text = l.replace("\\n", " ").replace('"', " ");
                text.split_whitespace().collect::<Vec<_>>().join(" ") + " "
            })
            .filter(|l| l.contains(&from))
            .count()
    }

    /// A page of deals with both relations expanded reads each relation once, whatever the page
    /// holds: counted in the server's own statement log (sqlx logs every statement it runs).
    async fn a_page_reads_each_relation_once(backend: Backend) {
        let database_url = support::fresh_database(backend).await;
        let keys = support::create_workspace(&database_url, &["--plan", "pro"]);
        let log_path =
            std::env::temp_dir().join(format!("crm-expand-{}.log", uuid::Uuid::now_v7().simple()));
        let log = std::fs::File::create(&log_path).unwrap();
        let s = support::start_logging_to(
            backend,
            database_url,
            keys,
            &[("CRM_LOG", "warn,sqlx::query=debug")],
            log,
        );
        for n in 0..6 {
            let company = s
                .post("/companies", json!({"name": format!("co{n}")}))
                .await
                .ok(201)
                .clone();
            let contact = s
                .post(
                    "/contacts",
                    json!({"first_name": format!("c{n}"), "company_id": id(&company)}),
                )
                .await
                .ok(201)
                .clone();
            let mut deal = json!({"title": format!("d{n}"), "company_id": id(&company)});
            if n % 2 == 0 {
                deal["primary_contact_id"] = Value::from(id(&contact));
            }
            s.post("/deals", deal).await.ok(201);
        }
        let count =
            |table: &str| statements_reading(&std::fs::read_to_string(&log_path).unwrap(), table);
        // The log is written as statements run, on the server's own threads: let it catch up.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (companies, contacts) = (count("companies"), count("contacts"));
        let page = s
            .get("/deals?expand=company,primary_contact&limit=6")
            .await
            .ok(200)
            .clone();
        let data = page["data"].as_array().unwrap();
        assert_eq!(data.len(), 6);
        assert!(data.iter().all(|d| d["company"]["object"] == "company"));
        assert_eq!(
            data.iter()
                .filter(|d| d["primary_contact"].is_null())
                .count(),
            3
        );
        // The log is written as the statements run; give the writer a moment.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            count("companies") - companies,
            1,
            "one statement for the page's companies"
        );
        assert_eq!(
            count("contacts") - contacts,
            1,
            "one statement for the page's contacts"
        );
        // Without expand, neither is read.
        let (companies, contacts) = (count("companies"), count("contacts"));
        s.get("/deals?limit=6").await.ok(200);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            (count("companies") - companies, count("contacts") - contacts),
            (0, 0)
        );
        let _ = std::fs::remove_file(&log_path);
    }

    crate::on_both_backends!(a_page_reads_each_relation_once);
}
