//! `GET /search`: a substring over contacts, companies and deals, one section per object.

use crm_app::{search::Section, Scope};
use schemars::JsonSchema;
use serde::Serialize;

use super::handler;
use crate::{
    bodies::{CompanyBody, ContactBody, DealBody},
    operation::{Hints, Method, Operation, Output, ParamKind, QueryParam, Reply},
    Problem,
};

const QUERY: &[QueryParam] = &[
    QueryParam {
        name: "q",
        // Trimmed, it must not be empty.
        kind: ParamKind::Pattern(crate::schema::NON_BLANK),
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

/// The answer: one section per object the key may read.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "SearchResults")]
struct SearchBody {
    #[schemars(extend("const" = "search"))]
    object: &'static str,
    query: String,
    /// True when any section was cut at `limit`.
    has_more: bool,
    /// Left out when the key may not read contacts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "SectionBody<ContactBody>")]
    contacts: Option<SectionBody<ContactBody>>,
    /// Left out when the key may not read companies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "SectionBody<CompanyBody>")]
    companies: Option<SectionBody<CompanyBody>>,
    /// Left out when the key may not read deals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "SectionBody<DealBody>")]
    deals: Option<SectionBody<DealBody>>,
}

/// The records of one object that matched, newest first.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "{T}SearchSection")]
struct SectionBody<T> {
    data: Vec<T>,
    has_more: bool,
}

fn section<R, T>(s: Option<Section<R>>) -> Option<SectionBody<T>>
where
    T: for<'r> From<&'r R>,
{
    s.map(|s| SectionBody {
        data: s.data.iter().map(T::from).collect(),
        has_more: s.has_more,
    })
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
    let contacts = section::<_, ContactBody>(results.contacts);
    let companies = section::<_, CompanyBody>(results.companies);
    let deals = section::<_, DealBody>(results.deals);
    let body = SearchBody {
        object: "search",
        query: q,
        has_more: [
            contacts.as_ref().map(|s| s.has_more),
            companies.as_ref().map(|s| s.has_more),
            deals.as_ref().map(|s| s.has_more),
        ]
        .contains(&Some(true)),
        contacts,
        companies,
        deals,
    };
    Ok(Reply::serialized(&body))
});

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_search_records",
        method: Method::Get,
        path: "/search",
        summary: "Search contacts, companies and deals",
        description: "Finds contacts, companies and deals whose text contains `q`, one section per object the key may read.",
        scope: Scope::PER_RECORD,
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: QUERY,
        body: None,
        output: Output::of::<SearchBody>(),
        hints: Hints::READ,
        handler: search,
    }]
}
