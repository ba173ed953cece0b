//! The audit log (decisions §25): one entry per change to configuration and access (keys,
//! webhooks, connections, templates, automations, sequences, pipelines and stages, fields, enum
//! values, types, settings, erasures, plan changes), saying who made it (the actor, copied at
//! write time), through which transport, what it changed and from what to what. Secrets never
//! enter an entry: a field that holds one shows [`REDACTED`] on both sides.

use serde_json::{Map, Value};

use crate::{
    history::{Actor, Channel, FieldChange},
    AuditId, Timestamp,
};

/// What an entry shows in place of a secret.
pub const REDACTED: &str = "[redacted]";

/// How long entries are kept (decisions §25).
pub const RETENTION_DAYS: i64 = 400;

/// Milliseconds in a day.
pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Field names whose values are secrets wherever they appear.
const SECRET_FIELDS: &[&str] = &[
    "secret", "api_key", "password", "key_hash", "token", "test_key", "live_key",
];

/// Whether `field` (a top-level member of a configuration object) holds a secret.
pub fn is_secret(field: &str) -> bool {
    SECRET_FIELDS.contains(&field)
}

/// The record the entry is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `key`, `webhook`, `connection`, `template`, `automation`, `sequence`, `pipeline`,
    /// `stage`, `field`, `enum_value`, `type`, `settings`, `workspace`, `contact`, `company`,
    /// `deal`.
    pub object: String,
    pub id: String,
}

/// One audit entry.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: AuditId,
    pub at: Timestamp,
    pub actor: Actor,
    pub channel: Channel,
    pub request_id: Option<String>,
    /// `<object>.<verb>`, e.g. `key.created`, `webhook.updated`, `contact.erased`.
    pub action: String,
    pub target: Target,
    pub changes: Vec<FieldChange>,
}

/// The members of two shapes of one configuration object (`None`: it did not exist before, or
/// does not after) that differ, in `after`'s order then `before`'s, each secret as
/// [`REDACTED`]. A create lists every non-null member from null; a delete every non-null member
/// to null. `id`, `object` and timestamps are not listed.
pub fn changes(before: Option<&Value>, after: Option<&Value>) -> Vec<FieldChange> {
    const SKIP: &[&str] = &["id", "object", "created_at", "updated_at", "version"];
    let empty = Map::new();
    let before = before.and_then(Value::as_object).unwrap_or(&empty);
    let after = after.and_then(Value::as_object).unwrap_or(&empty);
    let mut out = Vec::new();
    let keys = after
        .keys()
        .chain(before.keys().filter(|k| !after.contains_key(*k)));
    for key in keys {
        if SKIP.contains(&key.as_str()) {
            continue;
        }
        let from = before.get(key).unwrap_or(&Value::Null);
        let to = after.get(key).unwrap_or(&Value::Null);
        if from == to {
            continue;
        }
        out.push(FieldChange {
            field: key.clone(),
            from: redact(key, from),
            to: redact(key, to),
        });
    }
    out
}

/// A secret field's value as an entry shows it: [`REDACTED`] unless null.
pub fn redact(field: &str, value: &Value) -> Value {
    if is_secret(field) && !value.is_null() {
        Value::String(REDACTED.to_owned())
    } else {
        value.clone()
    }
}

/// A change of a secret that is never shown: `field` from and to [`REDACTED`].
pub fn secret_changed(field: &str) -> FieldChange {
    FieldChange {
        field: field.to_owned(),
        from: Value::String(REDACTED.to_owned()),
        to: Value::String(REDACTED.to_owned()),
    }
}

/// The oldest moment an entry kept for `days` days may carry at `now`.
pub fn cutoff(now: Timestamp, days: i64) -> Timestamp {
    now.plus_millis(-days * DAY_MS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_create_lists_members_and_redacts_secrets() {
        let after = json!({"id": "wh_1", "object": "webhook", "url": "https://x.test", "secret": "whsec_abc",
            "description": null, "created_at": "t"});
        let c = changes(None, Some(&after));
        assert_eq!(
            c,
            [
                FieldChange {
                    field: "url".into(),
                    from: Value::Null,
                    to: json!("https://x.test")
                },
                FieldChange {
                    field: "secret".into(),
                    from: Value::Null,
                    to: json!(REDACTED)
                },
            ]
        );
    }

    #[test]
    fn an_update_lists_what_differs_and_a_delete_what_was() {
        let before = json!({"name": "a", "api_key": "k1", "enabled": true});
        let after = json!({"name": "b", "api_key": "k2", "enabled": true});
        let c = changes(Some(&before), Some(&after));
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].field, "name");
        assert_eq!(
            (c[1].from.clone(), c[1].to.clone()),
            (json!(REDACTED), json!(REDACTED))
        );
        let gone = changes(Some(&before), None);
        assert_eq!(gone.len(), 3);
        assert!(gone.iter().all(|f| f.to.is_null()));
        assert!(
            !serde_json::to_string(&json!(gone.iter().map(|f| &f.from).collect::<Vec<_>>()))
                .unwrap()
                .contains("k1")
        );
    }

    #[test]
    fn cutoff_counts_whole_days_back() {
        let now = Timestamp::from_millis(1_000 * DAY_MS);
        assert_eq!(cutoff(now, 400).millis(), 600 * DAY_MS);
    }
}
