//! The audit entry body (decisions §25).

use crm_domain::audit::AuditEntry;
use schemars::JsonSchema;
use serde::Serialize;

use super::{ts, ActorBody, FieldChangeBody};

/// One change to configuration or access, as `GET /audit` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "AuditEntry")]
pub struct AuditEntryBody {
    /// `audit_entry`.
    pub object: &'static str,
    /// `aud_` prefix.
    pub id: String,
    pub at: String,
    /// Who made the change, as they were then (the CLI: `system` named `operator`).
    pub actor: ActorBody,
    /// The transport: `rest`, `mcp`, `a2a`, `console`, `cli` or `system`.
    pub channel: &'static str,
    pub request_id: Option<String>,
    /// `<object>.<verb>`, e.g. `key.created`, `webhook.updated`, `contact.erased`.
    pub action: String,
    pub target: TargetBody,
    /// The members changed, from and to; secrets as `[redacted]`.
    pub changes: Vec<FieldChangeBody>,
}

/// What an audit entry is about.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct TargetBody {
    pub object: String,
    pub id: String,
}

impl From<&AuditEntry> for AuditEntryBody {
    fn from(e: &AuditEntry) -> Self {
        AuditEntryBody {
            object: "audit_entry",
            id: e.id.as_str().to_owned(),
            at: ts(e.at),
            actor: ActorBody {
                actor_type: e.actor.kind.as_str(),
                id: e.actor.id.clone(),
                name: e.actor.name.clone(),
            },
            channel: e.channel.as_str(),
            request_id: e.request_id.clone(),
            action: e.action.clone(),
            target: TargetBody {
                object: e.target.object.clone(),
                id: e.target.id.clone(),
            },
            changes: e.changes.iter().map(FieldChangeBody::from).collect(),
        }
    }
}
