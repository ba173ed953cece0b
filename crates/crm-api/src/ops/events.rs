//! Events: `GET /events`, the outbox as a pollable list.

use crm_app::Scope;
use crm_domain::{Event, EventType};
use schemars::JsonSchema;

use super::{filter_value, handler, list_body, list_schema};
use crate::{
    catalog::{Hints, Method, Operation, QueryParam, Reply, CURSOR, LIMIT},
    Problem,
};

/// An event as webhooks and `GET /events` carry it.
#[derive(Debug, JsonSchema)]
#[allow(dead_code)] // describes the snapshot; never constructed
pub struct EventOut {
    /// `evt_` prefix.
    id: String,
    /// One of the five event types.
    #[schemars(rename = "type")]
    event_type: String,
    /// The object the event is about: `contact` or `deal`.
    object: String,
    created_at: String,
    mode: String,
    /// The record after the change.
    data: serde_json::Value,
    /// `*.updated` only: the fields the change touched.
    changed_fields: Option<Vec<String>>,
    /// `deal.stage_changed` only: the stage the deal left.
    previous_stage: Option<String>,
}

const LIST_QUERY: &[QueryParam] = &[
    QueryParam::string("type", "Only events of this type."),
    LIMIT,
    CURSOR,
];

fn render(e: &Event) -> serde_json::Value {
    e.snapshot()
}

handler!(list(api, caller, input) {
    let event_type = filter_value(&input, "type");
    if let Some(t) = &event_type {
        if EventType::parse(t).is_none() {
            let valid: Vec<&str> = EventType::ALL.iter().map(|t| t.as_str()).collect();
            return Err(Problem::new(crate::ErrorCode::UnknownValue, format!("`{t}` is not an event type"))
                .with("field", "type")
                .with("valid_options", valid));
        }
    }
    let page = api.app.list_events(caller, event_type.as_deref(), input.page()?).await?;
    Ok(Reply::new(200, list_body(page, render)))
});

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_list_events",
        method: Method::Get,
        path: "/events",
        summary: "List events",
        description: "Lists the events of this mode newest first (the same objects webhooks receive), optionally of one `type` \
            (contact.created, contact.updated, deal.created, deal.updated, deal.stage_changed). Company changes, batch writes \
            and automation actions emit none. Errors: unknown_value for an unknown type, invalid_cursor.",
        scope: Scope::read("events"),
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: LIST_QUERY,
        body: None,
        output: list_schema::<EventOut>,
        hints: Hints::READ,
        handler: list,
    }]
}
