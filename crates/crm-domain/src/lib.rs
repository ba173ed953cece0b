//! The rules of the CRM: typed ids, records and their validation, custom fields checked against a
//! registry snapshot, and the events a change produces.
//!
//! This crate must not know about HTTP, SQL, JSON wire DTOs, the network or any async runtime.
//! Everything here is synchronous and deterministic: time and randomness come in as arguments
//! (a [`Timestamp`], a [`uuid::Uuid`]), so every rule can be unit-tested without a database.
//! Other Rust services may depend on this crate alone.

pub mod activity;
pub mod audit;
pub mod automation;
pub mod billing;
pub mod company;
pub mod condition;
pub mod contact;
pub mod deal;
pub mod email;
pub mod error;
pub mod event;
pub mod export;
pub mod history;
pub mod ids;
pub mod import;
pub mod mail;
pub mod merge;
pub mod object;
pub mod owner;
pub mod patch;
pub mod pipeline;
pub mod plan;
pub mod record_merge;
pub mod registry;
pub mod rule;
pub mod sequence;
pub mod ssrf;
pub mod suggest;
pub mod tenant;
pub mod text;
pub mod time;
pub mod user;
pub mod webhook;

pub use activity::{Activity, ActivityDraft, ActivityPatch};
pub use billing::Period;
pub use company::{Company, CompanyDraft, CompanyPatch};
pub use contact::{Contact, ContactDraft, ContactPatch};
pub use deal::{Deal, DealChange, DealDraft, DealPatch};
pub use email::Email;
pub use error::ValidationError;
pub use event::{Event, EventType};
pub use ids::*;
pub use patch::Patch;
pub use pipeline::{Pipeline, PipelineDraft, Stage, StageDraft, StageType};
pub use plan::{Allowance, Plan, PlanCap, PlanLimits, Refusal};
pub use registry::{
    DataType, EnumValue, FieldDef, FieldRegistration, ObjectKind, ObjectType, Registry,
};
pub use tenant::{Mode, Tenant};
pub use time::{Date, Timestamp};
pub use user::{Role, User};
pub use webhook::{Backoff, DeliveryStatus, Subscription, Webhook};

/// A JSON object, the shape of `custom_fields` and of record snapshots.
pub type JsonMap = serde_json::Map<String, serde_json::Value>;
