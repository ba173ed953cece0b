//! Events: `GET /events`, the outbox as a pollable list.

use crm_app::Scope;
use crm_domain::EventType;

use super::{filter_value, handler};
use crate::{
    bodies::{EventBody, ListBody},
    operation::{Hints, Method, Operation, Output, QueryParam, Reply, CURSOR, LIMIT},
    Problem,
};

const LIST_QUERY: &[QueryParam] = &[
    QueryParam::string("type", "Only events of this type."),
    LIMIT,
    CURSOR,
];

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
    Ok(Reply::serialized(&ListBody::<EventBody>::of(page)))
});

pub fn operations() -> Vec<Operation> {
    vec![Operation {
        name: "svc_list_events",
        method: Method::Get,
        path: "/events",
        summary: "List events",
        description: "Events newest first, as webhooks receive them. Company changes, batch writes and automation actions emit none.",
        scope: Scope::read("events"),
        idempotency_key: false,
        if_match: false,
        success_status: 200,
        query: LIST_QUERY,
        body: None,
        output: Output::of::<ListBody<EventBody>>(),
        hints: Hints::READ,
        handler: list,
    }]
}
