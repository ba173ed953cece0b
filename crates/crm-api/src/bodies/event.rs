//! The event payload: what webhooks deliver and `GET /events` lists.

use crm_domain::Event;
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::ts;

/// An event as webhooks and `GET /events` carry it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Event")]
pub struct EventBody {
    /// `evt_` prefix.
    pub id: String,
    /// One of the five event types.
    #[serde(rename = "type")]
    pub event_type: &'static str,
    /// The object the event is about: `contact` or `deal`.
    pub object: &'static str,
    pub created_at: String,
    pub mode: &'static str,
    /// The record after the change.
    pub data: Value,
    /// `*.updated` only: the fields the change touched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_fields: Option<Vec<String>>,
    /// `deal.stage_changed` only: the stage the deal left.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<String>")]
    pub previous_stage: Option<Option<String>>,
    /// A merge survivor's `contact.updated` only: the contacts merged into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_ids: Option<Vec<String>>,
}

impl From<&Event> for EventBody {
    fn from(e: &Event) -> Self {
        EventBody {
            id: e.id.as_str().to_owned(),
            event_type: e.event_type.as_str(),
            object: e.event_type.object(),
            created_at: ts(e.created_at),
            mode: e.mode.as_str(),
            data: e.data.clone(),
            changed_fields: e.changed_fields.clone(),
            previous_stage: e.previous_stage.clone(),
            merged_ids: e.merged_ids.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{EventId, EventType, Mode, Timestamp};
    use serde_json::json;

    #[test]
    fn serializes_as_webhooks_deliver_an_event() {
        let mut e = Event {
            merged_ids: None,
            id: EventId::from_uuid(uuid::Uuid::from_u128(3)),
            event_type: EventType::DealStageChanged,
            mode: Mode::Live,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            data: json!({"id": "deal_x", "custom_fields": {"a": 1}}),
            changed_fields: Some(vec!["stage".into()]),
            previous_stage: Some(None),
        };
        let id = e.id.as_str().to_owned();
        let at = e.created_at.to_string();
        let data = e.data.clone();
        crate::bodies::assert_same_json(
            &EventBody::from(&e),
            &json!({"id": id, "type": "deal.stage_changed", "object": "deal", "created_at": at,
                    "mode": "live", "data": data, "changed_fields": ["stage"],
                    "previous_stage": null}),
        );
        e.previous_stage = Some(Some("new".into()));
        crate::bodies::assert_same_json(
            &EventBody::from(&e),
            &json!({"id": id, "type": "deal.stage_changed", "object": "deal", "created_at": at,
                    "mode": "live", "data": data, "changed_fields": ["stage"],
                    "previous_stage": "new"}),
        );
        (e.event_type, e.changed_fields, e.previous_stage) =
            (EventType::ContactCreated, None, None);
        crate::bodies::assert_same_json(
            &EventBody::from(&e),
            &json!({"id": id, "type": "contact.created", "object": "contact", "created_at": at,
                    "mode": "live", "data": data}),
        );
    }
}
