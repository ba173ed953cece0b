//! Field history (decisions §18, §23, §24): one entry per change of a contact, company or deal,
//! saying who changed it (the actor, copied at write time), through which transport (`channel`),
//! how (`via`) and which writable fields went from what to what.
//!
//! The changes are computed from the record as clients see it (its body), so a history entry
//! names fields as the API does, custom fields as `custom_fields.<key>`.

use serde_json::{Map, Value};

use crate::{ChangeId, ObjectKind, Timestamp};

/// Keys of a record body that no client writes: never listed in `changes`.
const NOT_WRITABLE: &[&str] = &[
    "id",
    "object",
    "created_at",
    "updated_at",
    "version",
    "deleted_at",
    "merged_into",
    // A deal's pipeline id and stage type follow from its pipeline key and stage.
    "pipeline_id",
    "stage_type",
];

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorType {
    ApiKey,
    User,
    Automation,
    System,
}

impl ActorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ActorType::ApiKey => "api_key",
            ActorType::User => "user",
            ActorType::Automation => "automation",
            ActorType::System => "system",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::ApiKey, Self::User, Self::Automation, Self::System]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// The actor of a change as it was when the change was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub kind: ActorType,
    pub id: Option<String>,
    pub name: Option<String>,
}

impl Actor {
    pub fn system() -> Actor {
        Actor {
            kind: ActorType::System,
            id: None,
            name: None,
        }
    }
}

/// The transport a change came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    Rest,
    Mcp,
    A2a,
    Console,
    Cli,
    System,
}

impl Channel {
    pub const ALL: [Channel; 6] = [
        Channel::Rest,
        Channel::Mcp,
        Channel::A2a,
        Channel::Console,
        Channel::Cli,
        Channel::System,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Channel::Rest => "rest",
            Channel::Mcp => "mcp",
            Channel::A2a => "a2a",
            Channel::Console => "console",
            Channel::Cli => "cli",
            Channel::System => "system",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// How a change was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Direct,
    Batch,
    Import,
    Automation,
    Merge,
}

impl Via {
    pub const ALL: [Via; 5] = [
        Via::Direct,
        Via::Batch,
        Via::Import,
        Via::Automation,
        Via::Merge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Batch => "batch",
            Via::Import => "import",
            Via::Automation => "automation",
            Via::Merge => "merge",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeAction {
    Created,
    Updated,
    Deleted,
    Restored,
    Merged,
}

impl ChangeAction {
    pub const ALL: [ChangeAction; 5] = [
        ChangeAction::Created,
        ChangeAction::Updated,
        ChangeAction::Deleted,
        ChangeAction::Restored,
        ChangeAction::Merged,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeAction::Created => "created",
            ChangeAction::Updated => "updated",
            ChangeAction::Deleted => "deleted",
            ChangeAction::Restored => "restored",
            ChangeAction::Merged => "merged",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }
}

/// One field of a change: a built-in name or `custom_fields.<key>`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldChange {
    pub field: String,
    pub from: Value,
    pub to: Value,
}

/// Who, through what and how: what every change a write makes shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Author {
    pub actor: Actor,
    pub channel: Channel,
    pub via: Via,
    pub request_id: Option<String>,
}

impl Author {
    /// A change the service makes on its own (no request, no key).
    pub fn system() -> Author {
        Author {
            actor: Actor::system(),
            channel: Channel::System,
            via: Via::Direct,
            request_id: None,
        }
    }

    /// The same author, making its changes `via`.
    pub fn via(&self, via: Via) -> Author {
        Author {
            via,
            ..self.clone()
        }
    }
}

/// One history entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub id: ChangeId,
    pub object: ObjectKind,
    pub record_id: String,
    pub at: Timestamp,
    pub action: ChangeAction,
    pub author: Author,
    pub changes: Vec<FieldChange>,
    /// A merge's survivor entry: the records merged into it.
    pub merged_ids: Option<Vec<String>>,
    /// The record was erased (decisions §25): every `from` and `to` is null.
    pub erased: bool,
}

/// The writable fields that differ between two bodies of one record (`before` `None`: a create,
/// listing every non-null writable field from null), in the body's order, custom fields one by
/// one as `custom_fields.<key>`.
pub fn field_changes(before: Option<&Value>, after: &Value) -> Vec<FieldChange> {
    let empty = Map::new();
    let before = before.and_then(Value::as_object).unwrap_or(&empty);
    let Some(after) = after.as_object() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, to) in after {
        if NOT_WRITABLE.contains(&key.as_str()) {
            continue;
        }
        let from = before.get(key).unwrap_or(&Value::Null);
        if key == "custom_fields" {
            custom_changes(from, to, &mut out);
        } else if from != to {
            out.push(FieldChange {
                field: key.clone(),
                from: from.clone(),
                to: to.clone(),
            });
        }
    }
    out
}

fn custom_changes(from: &Value, to: &Value, out: &mut Vec<FieldChange>) {
    let empty = Map::new();
    let from = from.as_object().unwrap_or(&empty);
    let to = to.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = to.keys().chain(from.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let old = from.get(key).unwrap_or(&Value::Null);
        let new = to.get(key).unwrap_or(&Value::Null);
        if old != new {
            out.push(FieldChange {
                field: format!("custom_fields.{key}"),
                from: old.clone(),
                to: new.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_create_lists_every_non_null_writable_field_from_null() {
        let after = json!({"id": "con_1", "object": "contact", "first_name": "Ada", "last_name": null,
            "custom_fields": {"tier": "gold"}, "created_at": "x", "updated_at": "x", "version": 1, "deleted_at": null});
        let changes = field_changes(None, &after);
        assert_eq!(
            changes,
            [
                FieldChange {
                    field: "first_name".into(),
                    from: Value::Null,
                    to: json!("Ada")
                },
                FieldChange {
                    field: "custom_fields.tier".into(),
                    from: Value::Null,
                    to: json!("gold")
                },
            ]
        );
    }

    #[test]
    fn an_update_lists_changed_writable_fields_old_to_new() {
        let before = json!({"first_name": "Ada", "email": "a@x.test", "custom_fields": {"a": 1, "b": 2}, "version": 1});
        let after = json!({"first_name": "Grace", "email": "a@x.test", "custom_fields": {"b": 3, "c": true}, "version": 2});
        let fields: Vec<(String, Value, Value)> = field_changes(Some(&before), &after)
            .into_iter()
            .map(|c| (c.field, c.from, c.to))
            .collect();
        assert_eq!(
            fields,
            [
                ("first_name".into(), json!("Ada"), json!("Grace")),
                ("custom_fields.a".into(), json!(1), Value::Null),
                ("custom_fields.b".into(), json!(2), json!(3)),
                ("custom_fields.c".into(), Value::Null, json!(true)),
            ]
        );
    }
}
