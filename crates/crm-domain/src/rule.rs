//! Automations: a rule `{name, trigger_event, conditions, actions}` checked against the capability
//! catalog ([`crate::automation`]), the registry and the pipelines when it is created or changed,
//! and the engine that decides, for an event, whether the rule matches and what its actions do
//! (with merge tags filled). The use cases apply the actions; nothing here does I/O.

use serde_json::Value;

use crate::{
    automation::{ActionParam, ActionType, ConditionOp, Need, Operand, ParamType, TRIGGER_EVENTS},
    condition::{all_match, Condition, Subject},
    contact::ContactPatch,
    deal::DealPatch,
    error::ValidationError,
    event::EventType,
    ids::{AutomationId, AutomationRunId, EventId},
    merge::{self, Escape, MergeData},
    patch::Patch,
    registry::{whole_number, Registry, ACTIVITY_TYPE_GROUP},
    suggest,
    time::Timestamp,
    Email, JsonMap,
};

/// Most conditions and actions one rule may carry.
pub const MAX_CONDITIONS: usize = 50;
pub const MAX_ACTIONS: usize = 20;

/// Built-in contact fields `set_field` may write.
pub const CONTACT_SETTABLE: &[&str] = &[
    "first_name",
    "last_name",
    "email",
    "phone",
    "linkedin_url",
    "company_id",
    "type",
    "owner_id",
];
/// Built-in deal fields `set_field` may write (stages move with `move_deal_stage`).
pub const DEAL_SETTABLE: &[&str] = &[
    "title",
    "primary_contact_id",
    "company_id",
    "value_cents",
    "currency",
    "close_date",
    "owner_id",
];

/// `send_email`'s parameters as the rule holds them (merge tags not yet filled).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EmailAction {
    pub to: Option<String>,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub text: Option<String>,
    pub template_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CreateActivity { activity_type: String, body: String },
    SetField { field: String, value: Value },
    MoveDealStage { stage: String },
    SendEmail(EmailAction),
}

impl Action {
    pub fn action_type(&self) -> ActionType {
        match self {
            Action::CreateActivity { .. } => ActionType::CreateActivity,
            Action::SetField { .. } => ActionType::SetField,
            Action::MoveDealStage { .. } => ActionType::MoveDealStage,
            Action::SendEmail(_) => ActionType::SendEmail,
        }
    }
}

/// A rule's definition, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AutomationDef {
    pub name: String,
    pub trigger_event: EventType,
    pub conditions: Vec<Condition>,
    pub actions: Vec<Action>,
}

/// A rule as a client sent it, before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AutomationDraft {
    pub name: Option<String>,
    pub trigger_event: Option<String>,
    pub conditions: Option<Value>,
    pub actions: Option<Value>,
}

/// What a rule is checked against: the registry of contacts and of deals (each holding every
/// enum group), and the stage keys of every pipeline.
#[derive(Debug, Clone, Copy)]
pub struct RuleContext<'a> {
    pub contact_registry: &'a Registry,
    pub deal_registry: &'a Registry,
    pub stage_keys: &'a [String],
}

impl RuleContext<'_> {
    fn registry(&self, event: EventType) -> &Registry {
        if event.object() == "deal" {
            self.deal_registry
        } else {
            self.contact_registry
        }
    }
}

mod engine;
mod parse;

pub use engine::*;
pub use parse::*;

impl AutomationDef {
    /// Validates a draft: a name, one of the five trigger events, conditions on fields the
    /// trigger's records have, and actions of the catalog with their parameters (a deal-only
    /// action on a contact trigger, a `set_field` on an unregistered field, a `move_deal_stage` to
    /// a stage no pipeline has: refused with the valid options).
    pub fn parse(
        draft: AutomationDraft,
        ctx: &RuleContext<'_>,
    ) -> Result<AutomationDef, ValidationError> {
        let name = draft
            .name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| ValidationError::invalid("name", "is required"))?;
        if name.chars().count() > 200 {
            return Err(ValidationError::invalid(
                "name",
                "must be at most 200 characters",
            ));
        }
        let raw_event = draft
            .trigger_event
            .ok_or_else(|| ValidationError::invalid("trigger_event", "is required"))?;
        let trigger_event = EventType::parse(&raw_event).ok_or_else(|| {
            unknown_value(
                "trigger_event".into(),
                &raw_event,
                TRIGGER_EVENTS
                    .iter()
                    .map(|e| e.as_str().to_owned())
                    .collect(),
            )
        })?;
        let conditions = match draft.conditions {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.len() <= MAX_CONDITIONS => items
                .iter()
                .enumerate()
                .map(|(i, c)| parse_condition(i, c, trigger_event, ctx))
                .collect::<Result<_, _>>()?,
            Some(Value::Array(_)) => {
                return Err(ValidationError::invalid(
                    "conditions",
                    format!("at most {MAX_CONDITIONS} conditions"),
                ))
            }
            Some(_) => {
                return Err(ValidationError::invalid(
                    "conditions",
                    "must be an array of {field, op, value?}",
                ))
            }
        };
        let actions = match draft.actions {
            Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_ACTIONS => items
                .iter()
                .enumerate()
                .map(|(i, a)| parse_action(i, a, trigger_event, ctx))
                .collect::<Result<_, _>>()?,
            Some(Value::Array(items)) if !items.is_empty() => {
                return Err(ValidationError::invalid(
                    "actions",
                    format!("at most {MAX_ACTIONS} actions"),
                ))
            }
            _ => {
                return Err(ValidationError::invalid(
                    "actions",
                    "is required: an array of one or more {type, ...parameters}",
                ))
            }
        };
        Ok(AutomationDef {
            name,
            trigger_event,
            conditions,
            actions,
        })
    }

    /// Whether the rule sends email (a live-mode rule then needs an email connection).
    pub fn sends_email(&self) -> bool {
        self.actions
            .iter()
            .any(|a| matches!(a, Action::SendEmail(_)))
    }

    /// The templates the rule's `send_email` actions name.
    pub fn template_ids(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::SendEmail(e) => e.template_id.as_deref(),
                _ => None,
            })
            .collect()
    }
}

/// A stored rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Automation {
    pub id: AutomationId,
    pub def: AutomationDef,
    pub enabled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

impl Automation {
    /// Whether this rule fires for an event of `event_type` about `subject` (the record as the
    /// client's write left it).
    pub fn matches(&self, event_type: EventType, subject: &Subject<'_>) -> bool {
        self.enabled
            && self.def.trigger_event == event_type
            && all_match(&self.def.conditions, subject)
    }
}

#[cfg(test)]
mod tests;
