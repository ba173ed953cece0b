//! Response bodies: each resource's answer as a type that is at once what the operation sends and
//! the schema it documents, built from the domain record (`From<&Contact>` and so on). The domain
//! knows records, not wire bodies; this module is where one becomes the other. It also answers
//! crm-app's `RecordViews` port ([`BodyViews`]), so that an event's `data` and a replayed answer
//! are these same bodies.

mod activity;
mod audit;
mod automation;
mod change;
mod company;
mod contact;
mod deal;
mod deleted;
mod dry_run;
mod email;
mod event;
mod export;
mod import;
mod key;
mod list;
mod pipeline;
mod sequence;
mod user;
mod views;
mod webhook;

pub use activity::ActivityBody;
pub use audit::{AuditEntryBody, TargetBody};
pub use automation::{
    ActionBody, ActionOutcomeBody, AutomationBody, AutomationRunBody, ConditionBody,
};
pub use change::{ActorBody, ChangeBody, FieldChangeBody};
pub use company::CompanyBody;
pub use contact::ContactBody;
pub use deal::DealBody;
pub use deleted::DeletedBody;
pub use dry_run::{DryRunBody, DryRunEffectsBody};
pub use email::{ConnectionBody, EmailBody, TemplateBody};
pub use event::EventBody;
pub use export::{ContactExportBody, ExportBody};
pub use import::{ImportBody, ImportErrorBody};
pub use key::{KeyBody, KeyWithSecretBody};
pub use list::ListBody;
pub use pipeline::{PipelineBody, StageBody};
pub use sequence::{
    EnrollmentBody, PreviewBody, ScheduleLineBody, SequenceBody, SourceBody, StepBody, TriggerBody,
    UnenrolledBody,
};
pub use user::{sign_in_url, SignInLinkBody, UserBody, UserWithLinkBody};
pub use views::BodyViews;
pub use webhook::{DeliveryAttemptBody, DeliveryBody, WebhookBody, WebhookWithSecretBody};

use crm_domain::Timestamp;

/// A body of one versioned record: its version is sent as the `ETag`.
pub trait Versioned {
    fn version(&self) -> i64;
}

/// Timestamps go on the wire in RFC 3339, as `Timestamp` displays them.
pub(crate) fn ts(t: Timestamp) -> String {
    t.to_string()
}

pub(crate) fn opt_ts(t: Option<Timestamp>) -> Option<String> {
    t.map(ts)
}

/// Implements [`Versioned`] for bodies with a `version` field.
macro_rules! versioned {
    ($($body:ty),* $(,)?) => {
        $(impl $crate::bodies::Versioned for $body {
            fn version(&self) -> i64 {
                self.version
            }
        })*
    };
}
pub(crate) use versioned;

/// Asserts that `body` serializes to exactly `expected` (the same keys in the same order, the
/// same values), and that its schema describes it.
#[cfg(test)]
pub(crate) fn assert_same_json<B: serde::Serialize + schemars::JsonSchema>(
    body: &B,
    expected: &serde_json::Value,
) {
    assert_eq!(
        serde_json::to_string(body).unwrap(),
        expected.to_string(),
        "the body differs from what the old path gave"
    );
    assert_schema_describes(body);
}

/// Asserts that every key `body` serializes is a property of its schema, and that it has every
/// property the schema requires.
#[cfg(test)]
pub(crate) fn assert_schema_describes<B: serde::Serialize + schemars::JsonSchema>(body: &B) {
    let schema = crate::schema::schema_of::<B>();
    let properties = crate::schema::property_names(&schema);
    let value = serde_json::to_value(body).unwrap();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    for key in &keys {
        assert!(
            properties.contains(key),
            "{key} is not in the schema: {schema:#}"
        );
    }
    for required in schema["required"].as_array().into_iter().flatten() {
        assert!(
            keys.iter().any(|k| *k == required),
            "{required} is required but not sent"
        );
    }
}
