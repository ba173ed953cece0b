//! Lists of contacts, companies and deals: search, one of the API's filters (custom fields
//! included, from the live schema), paging by cursor, and soft-deleted records on request,
//! which their record pages restore.

use askama::Template;
use axum::response::Response;
use serde_json::{Map, Value};

use crate::{
    chrome::{can_write, Chrome},
    form::Form,
    ops::call,
    pages::{
        fields::{money, value_text, CUSTOM},
        Kind,
    },
    reply::{page, problem_page},
    session::Signed,
    State,
};

/// Records per page.
const PAGE_SIZE: &str = "50";

pub struct Row {
    pub id: String,
    pub name: String,
    pub cells: Vec<String>,
    pub deleted: bool,
}

#[derive(Template)]
#[template(path = "list.html")]
struct ListPage {
    chrome: Chrome,
    path: &'static str,
    title: &'static str,
    object: &'static str,
    columns: &'static [&'static str],
    rows: Vec<Row>,
    q: String,
    filters: Vec<(String, String)>,
    filter: String,
    value: String,
    include_deleted: bool,
    mine: bool,
    next: Option<String>,
    can_create: bool,
}

fn columns(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::Contacts => &["Email", "Phone", "Type"],
        Kind::Companies => &["Domain"],
        Kind::Deals => &["Pipeline", "Stage", "Value"],
    }
}

fn cells(kind: Kind, record: &Value) -> Vec<String> {
    let text = |k: &str| value_text(&record[k]);
    match kind {
        Kind::Contacts => vec![text("email"), text("phone"), text("type")],
        Kind::Companies => vec![text("domain")],
        Kind::Deals => vec![
            text("pipeline"),
            text("stage"),
            money(&record["value_cents"], &record["currency"]),
        ],
    }
}

/// The list's arguments from the page's query: search, the chosen filter, only the records
/// `me` owns (`mine`), deleted records and the cursor.
fn list_args(query: &Form, me: &str) -> Map<String, Value> {
    let mut args = crate::args! {"limit" => PAGE_SIZE};
    if let Some(q) = query.text("q") {
        args.insert("q".into(), q.into());
    }
    if let (Some(filter), Some(value)) = (query.text("filter"), query.text("value")) {
        match filter.strip_prefix(CUSTOM) {
            Some(key) => {
                let mut custom = Map::new();
                custom.insert(key.to_owned(), value.into());
                args.insert("custom_fields".into(), Value::Object(custom));
            }
            None => {
                args.insert(filter.to_owned(), value.into());
            }
        }
    }
    if query.get("mine").is_some() {
        args.insert("owner_id".into(), me.into());
    }
    if query.get("include_deleted").is_some() {
        args.insert("include_deleted".into(), "true".into());
    }
    if let Some(cursor) = query.text("cursor") {
        args.insert("cursor".into(), cursor.into());
    }
    args
}

/// `GET /<kind>`.
pub async fn show(state: &State, signed: &Signed, kind: Kind, query: &Form) -> Response {
    let schema = match call(state, signed, "svc_describe_schema", Map::new()).await {
        Ok(schema) => schema,
        Err(problem) => return problem_page(signed, &problem),
    };
    let me = signed.session.user.id.to_string();
    let list = match call(state, signed, kind.op("list"), list_args(query, &me)).await {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let filters = schema["objects"]
        .as_array()
        .and_then(|all| all.iter().find(|o| o["name"] == kind.object()))
        .and_then(|o| o["list_filters"].as_array())
        .map(|all| {
            all.iter()
                .filter_map(|f| f["name"].as_str())
                .filter(|name| !["q", "include_deleted", "owner_id"].contains(name))
                .map(|name| (name.to_owned(), filter_label(name)))
                .collect()
        })
        .unwrap_or_default();
    let next = list["next_cursor"].as_str().map(|cursor| {
        let mut pairs: Vec<(String, String)> = query
            .0
            .iter()
            .filter(|(k, _)| k != "cursor")
            .cloned()
            .collect();
        pairs.push(("cursor".into(), cursor.to_owned()));
        let encoded: String = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish();
        format!("/{}?{encoded}", kind.path())
    });
    let rows = list["data"]
        .as_array()
        .map(|records| {
            records
                .iter()
                .map(|r| Row {
                    id: value_text(&r["id"]),
                    name: kind.display_name(r),
                    cells: cells(kind, r),
                    deleted: !r["deleted_at"].is_null(),
                })
                .collect()
        })
        .unwrap_or_default();
    let body = ListPage {
        chrome: Chrome::new(signed, kind.path()),
        path: kind.path(),
        title: kind.title(),
        object: kind.object(),
        columns: columns(kind),
        rows,
        q: query.text("q").unwrap_or_default().to_owned(),
        filters,
        filter: query.text("filter").unwrap_or_default().to_owned(),
        value: query.text("value").unwrap_or_default().to_owned(),
        include_deleted: query.get("include_deleted").is_some(),
        mine: query.get("mine").is_some(),
        next,
        can_create: can_write(signed, kind),
    };
    page(200, &body)
}

/// `custom_fields.tier` → `Tier (custom)`; `company_id` → `Company`.
fn filter_label(name: &str) -> String {
    match name.strip_prefix(CUSTOM) {
        Some(key) => format!("{} (custom)", crate::pages::fields::humanize(key)),
        None => crate::pages::fields::humanize(name),
    }
}
