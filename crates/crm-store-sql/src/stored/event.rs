//! The outbox event as its `body` column keeps it. The column is also the exact body a webhook
//! delivers, so it has the shape of the API's event body (`GET /events/{id}`); a black-box test
//! compares the two.

use crm_domain::{Event, EventId, EventType, Mode, Timestamp};
use serde_json::{json, Value};

/// The event's `body` column.
pub fn event_json(e: &Event) -> String {
    let mut v = json!({
        "id": e.id.as_str(),
        "type": e.event_type.as_str(),
        "object": e.event_type.object(),
        "created_at": e.created_at.to_string(),
        "mode": e.mode.as_str(),
        "data": e.data,
    });
    if let Some(fields) = &e.changed_fields {
        v["changed_fields"] = json!(fields);
    }
    if let Some(prev) = &e.previous_stage {
        v["previous_stage"] = json!(prev);
    }
    if let Some(ids) = &e.merged_ids {
        v["merged_ids"] = json!(ids);
    }
    v.to_string()
}

/// A `body` column read back.
pub fn event_from_json(v: &Value) -> Option<Event> {
    let s = |k: &str| v.get(k).and_then(Value::as_str);
    Some(Event {
        merged_ids: v.get("merged_ids").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        }),
        id: EventId::from_trusted(s("id")?.to_owned()),
        event_type: EventType::parse(s("type")?)?,
        mode: Mode::parse(s("mode")?)?,
        created_at: Timestamp::parse_rfc3339(s("created_at")?)?,
        data: v.get("data")?.clone(),
        changed_fields: v.get("changed_fields").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        }),
        previous_stage: v
            .get("previous_stage")
            .map(|p| p.as_str().map(String::from)),
    })
}
