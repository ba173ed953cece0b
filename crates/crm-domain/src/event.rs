//! Events: what a change tells the outside world (webhooks) and the rules (automations,
//! sequences). Written in the same transaction as the change.

use serde_json::Value;

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
    /// For the survivor's `contact.updated` of a merge: the contacts merged into it.
    pub merged_ids: Option<Vec<String>>,
}
