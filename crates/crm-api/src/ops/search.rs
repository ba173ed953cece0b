//! `GET /search`: a substring over contacts, companies and deals, one section per object.

use crm_app::{search::Section, Scope};
use serde_json::{json, Value};

use super::handler;
use crate::{
    catalog::{Hints, Method, Operation, ParamKind, QueryParam, Reply},
    Problem,
};

const QUERY: &[QueryParam] = &[
    QueryParam {
        name: "q",
        // Trimmed, it must not be empty.
        kind: ParamKind::Pattern("\\S"),
        required: true,
        description: "Case-insensitive substring: contact names, email, phone, LinkedIn URL; company name and domain; deal title.",
    },
    QueryParam {
        name: "limit",
        kind: ParamKind::Integer { min: 1, max: 100 },
        required: false,
        description: "Results per section, 1 to 100 (default 10).",
    },
];

pub const DEFAULT_LIMIT: u32 = 10;

fn section<T>(s: Option<Section<T>>, render: impl Fn(&T) -> Value) -> (Value, bool) {
    match s {
        Some(s) => (
            json!({"data": s.data.iter().map(render).collect::<Vec<_>>(), "has_more": s.has_more}),
            s.has_more,
        ),
        None => (Value::Null, false),
    }
}

handler!(search(api, caller, input) {
    let q = input.query_str("q").map(str::trim).unwrap_or_default().to_owned();
    if q.is_empty() {
        return Err(Problem::validation("q", "q is required"));
    }
    let limit = match input.query_str("limit") {
        None => DEFAULT_LIMIT,
        Some(raw) => match raw.parse::<f64>() {
            Ok(n) if n.fract() == 0.0 && (1.0..=100.0).contains(&n) => n as u32,
            _ => return Err(Problem::validation("limit", "limit must be an integer from 1 to 100")),
        },
    };
    let results = api.app.search(caller, &q, limit).await?;
    let (contacts, c_more) = section(results.contacts, |c| c.snapshot());
    let (companies, co_more) = section(results.companies, |c| c.snapshot());
    let (deals, d_more) = section(results.deals, |d| d.snapshot());
    let mut body = json!({"object": "search", "query": q, "has_more": c_more || co_more || d_more});
    for (name, value) in [("contacts", contacts), ("companies", companies), ("deals", deals)] {
        if !value.is_null() {
            body[name] = value;
        }
    }
    Ok(Reply::new(200, body))
});

fn output_schema() -> Value {
    let section = json!({
        "type": "object",
        "properties": {"data": {"type": "array", "items": {"type": "object"}}, "has_more": {"type": "boolean"}},
        "required": ["data", "has_more"],
    });
    json!({
        "type": "object",
        "properties": {
            "object": {"const": "search"},
            "query": {"type": "string"},
            "contacts": section,
            "companies": section,
            "deals": section,
            "has_more": {"type": "boolean", "description": "True when any section was cut at `limit`."},
        },
        "required": ["object", "query", "has_more"],
    })
}

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_search_records",
        method: Method::Get,
        path: "/search",
        summary: "Search contacts, companies and deals",
        description: "Finds records whose text contains `q` (case-insensitive): contacts by name, email, phone or LinkedIn URL; \
            companies by name or domain; deals by title. Answers one section per object (newest first, at most `limit` each, \
            default 10, max 100) and `has_more` when any section was cut. Each section needs the read scope of its object; \
            sections the key may not read are left out. Errors: validation_failed when `q` is missing or `limit` is out of range.",
        scope: Scope::PER_RECORD,
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: QUERY,
        body: None,
        output: output_schema,
        hints: Hints::READ,
        handler: search,
    }]
}
