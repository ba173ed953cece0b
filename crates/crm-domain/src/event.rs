//! Events: what a change tells the outside world (webhooks) and the rules (automations,
//! sequences). Written in the same transaction as the change.

use serde_json::{json, Value};

use crate::{ids::EventId, tenant::Mode, time::Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    ContactCreated,
    ContactUpdated,
    DealCreated,
    DealUpdated,
    DealStageChanged,
}

impl EventType {
    pub const ALL: [EventType; 5] = [
        EventType::ContactCreated,
        EventType::ContactUpdated,
        EventType::DealCreated,
        EventType::DealUpdated,
        EventType::DealStageChanged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::ContactCreated => "contact.created",
            EventType::ContactUpdated => "contact.updated",
            EventType::DealCreated => "deal.created",
            EventType::DealUpdated => "deal.updated",
            EventType::DealStageChanged => "deal.stage_changed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The object the event is about.
    pub fn object(self) -> &'static str {
        match self {
            EventType::ContactCreated | EventType::ContactUpdated => "contact",
            _ => "deal",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub id: EventId,
    pub event_type: EventType,
    pub mode: Mode,
    pub created_at: Timestamp,
    /// The record as it stands after the change.
    pub data: Value,
    /// For `*.updated`: the fields the change touched.
    pub changed_fields: Option<Vec<String>>,
    /// For `deal.stage_changed`: the stage the deal left (null when it was just created).
    pub previous_stage: Option<Option<String>>,
}

impl Event {
    /// The event as webhooks and `GET /events` carry it.
    pub fn snapshot(&self) -> Value {
        let mut v = json!({
            "id": self.id.as_str(),
            "type": self.event_type.as_str(),
            "object": self.event_type.object(),
            "created_at": self.created_at.to_string(),
            "mode": self.mode.as_str(),
            "data": self.data,
        });
        if let Some(fields) = &self.changed_fields {
            v["changed_fields"] = json!(fields);
        }
        if let Some(prev) = &self.previous_stage {
            v["previous_stage"] = json!(prev);
        }
        v
    }
}

impl Event {
    /// Reads back an event stored as its snapshot.
    pub fn from_snapshot(v: &Value) -> Option<Event> {
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        Some(Event {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn snapshot_round_trips() {
        let e = Event {
            id: EventId::from_uuid(Uuid::from_u128(3)),
            event_type: EventType::DealStageChanged,
            mode: Mode::Live,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            data: json!({"id": "deal_x"}),
            changed_fields: Some(vec!["stage".into()]),
            previous_stage: Some(None),
        };
        let snap = e.snapshot();
        assert_eq!(snap["object"], "deal");
        assert_eq!(snap["previous_stage"], Value::Null);
        assert_eq!(Event::from_snapshot(&snap), Some(e));
    }
}
