//! The answer of a dry run (decisions §18, §24): what the real call would have answered, and
//! every effect its write would have had, each section the key may not read as its count only.

use crm_app::{dry_run::DryRunEffects, Caller, Scope};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// A dry run's answer: the write ran in full and was rolled back.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "DryRun")]
pub struct DryRunBody {
    /// `dry_run`.
    pub object: &'static str,
    /// The status the real call would answer.
    pub status: u16,
    /// The body the real call would answer; its ids are never used.
    pub result: Value,
    pub effects: DryRunEffectsBody,
}

/// A section of the effects: listed, or only counted when the key may not read it.
/// Named after its items (`AutomationEffectSection`), so that each section is a component of its own.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "{T}Section")]
pub enum Section<T> {
    Listed(Vec<T>),
    Counted { count: usize },
}

impl<T> Section<T> {
    fn of(items: Vec<T>, visible: bool) -> Section<T> {
        if visible {
            Section::Listed(items)
        } else {
            Section::Counted { count: items.len() }
        }
    }
}

/// What the write would have done besides its result.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "DryRunEffects")]
pub struct DryRunEffectsBody {
    pub events: Vec<EventEffect>,
    /// Every enabled automation the events trigger (`automations:read`).
    pub automations: Section<AutomationEffect>,
    /// Enrollments it would start (`sequences:read`).
    pub enrollments: Section<EnrollmentEffect>,
    /// Enrollments it would end (`sequences:read`).
    pub exits: Section<ExitEffect>,
    /// Deliveries its events would queue (`webhooks:read`).
    pub webhooks: Section<WebhookEffect>,
    /// Emails it would send at once (`emails:read`).
    pub emails: Section<EmailEffect>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EventEffect {
    #[serde(rename = "type")]
    pub event_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed_fields: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct AutomationEffect {
    pub id: String,
    pub name: String,
    pub matched: bool,
    pub actions: Vec<ActionEffect>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ActionEffect {
    #[serde(rename = "type")]
    pub action_type: &'static str,
    /// `succeeded` or `failed`.
    pub outcome: &'static str,
    /// `{code, detail}` when it would fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EnrollmentEffect {
    pub sequence_id: String,
    pub contact_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ExitEffect {
    pub sequence_id: String,
    pub contact_id: String,
    pub reason: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WebhookEffect {
    pub id: String,
    pub event_type: &'static str,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EmailEffect {
    pub to: String,
    pub subject: String,
}

impl DryRunBody {
    /// The envelope of a dry run that would answer `status` with `result`, its effects shown as
    /// `caller` may read them.
    pub fn new(status: u16, result: Value, fx: DryRunEffects, caller: &Caller) -> DryRunBody {
        let may = |resource: &'static str| caller.require(Scope::read(resource)).is_ok();
        let sequences = may("sequences");
        let events = fx
            .events
            .into_iter()
            .map(|e| EventEffect {
                event_type: e.event_type.as_str(),
                changed_fields: e.changed_fields,
            })
            .collect();
        let automations = fx
            .automations
            .into_iter()
            .map(|a| AutomationEffect {
                id: a.id.as_str().to_owned(),
                name: a.name,
                matched: a.matched,
                actions: a
                    .actions
                    .iter()
                    .map(|o| match &o.result {
                        Ok(_) => ActionEffect {
                            action_type: o.action_type.as_str(),
                            outcome: "succeeded",
                            error: None,
                        },
                        Err((code, detail)) => ActionEffect {
                            action_type: o.action_type.as_str(),
                            outcome: "failed",
                            error: Some(serde_json::json!({"code": code, "detail": detail})),
                        },
                    })
                    .collect(),
            })
            .collect();
        let enrollments = fx
            .enrollments
            .into_iter()
            .map(|(s, c)| EnrollmentEffect {
                sequence_id: s.as_str().to_owned(),
                contact_id: c.as_str().to_owned(),
            })
            .collect();
        let exits = fx
            .exits
            .into_iter()
            .map(|(s, c, r)| ExitEffect {
                sequence_id: s.as_str().to_owned(),
                contact_id: c.as_str().to_owned(),
                reason: r.as_str(),
            })
            .collect();
        let webhooks = fx
            .webhooks
            .into_iter()
            .map(|(id, t)| WebhookEffect {
                id: id.as_str().to_owned(),
                event_type: t.as_str(),
            })
            .collect();
        let emails = fx
            .emails
            .into_iter()
            .map(|(to, subject)| EmailEffect { to, subject })
            .collect();
        DryRunBody {
            object: "dry_run",
            status,
            result,
            effects: DryRunEffectsBody {
                events,
                automations: Section::of(automations, may("automations")),
                enrollments: Section::of(enrollments, sequences),
                exits: Section::of(exits, sequences),
                webhooks: Section::of(webhooks, may("webhooks")),
                emails: Section::of(emails, may("emails")),
            },
        }
    }
}
