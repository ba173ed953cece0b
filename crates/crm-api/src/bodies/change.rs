//! The history entry body (decisions §18, §23, §24).

use crm_domain::history::{Change, FieldChange};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::ts;

/// One change of a contact, company or deal, as `GET /{object}/{id}/history` lists it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Change")]
pub struct ChangeBody {
    /// `change`.
    pub object: &'static str,
    /// `chg_` prefix.
    pub id: String,
    /// The record the change is about.
    pub record_id: String,
    pub at: String,
    /// `created`, `updated`, `deleted`, `restored` or `merged`.
    pub action: &'static str,
    pub actor: ActorBody,
    /// The transport: `rest`, `mcp`, `a2a`, `console`, `cli` or `system`.
    pub channel: &'static str,
    /// How: `direct`, `batch`, `import`, `automation` or `merge`.
    pub via: &'static str,
    /// The id of the request that made the change (for an automation, the triggering request's).
    pub request_id: Option<String>,
    /// The writable fields changed, custom fields as `custom_fields.<key>`; a create lists every
    /// non-null one from `null`; a delete or restore none.
    pub changes: Vec<FieldChangeBody>,
    /// A merge's survivor entry: the ids merged into it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged_ids: Option<Vec<String>>,
    /// Present (true) once the record was erased: every `from` and `to` is then null.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub erased: bool,
}

/// Who made a change, as they were at the time.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ActorBody {
    /// `api_key`, `user`, `automation` or `system`.
    #[serde(rename = "type")]
    pub actor_type: &'static str,
    pub id: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FieldChangeBody {
    pub field: String,
    pub from: Value,
    pub to: Value,
}

impl From<&FieldChange> for FieldChangeBody {
    fn from(c: &FieldChange) -> Self {
        FieldChangeBody {
            field: c.field.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
        }
    }
}

impl From<&Change> for ChangeBody {
    fn from(c: &Change) -> Self {
        let a = &c.author;
        ChangeBody {
            object: "change",
            id: c.id.as_str().to_owned(),
            record_id: c.record_id.clone(),
            at: ts(c.at),
            action: c.action.as_str(),
            actor: ActorBody {
                actor_type: a.actor.kind.as_str(),
                id: a.actor.id.clone(),
                name: a.actor.name.clone(),
            },
            channel: a.channel.as_str(),
            via: a.via.as_str(),
            request_id: a.request_id.clone(),
            changes: c.changes.iter().map(FieldChangeBody::from).collect(),
            merged_ids: c.merged_ids.clone(),
            erased: c.erased,
        }
    }
}
