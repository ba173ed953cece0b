//! An audit entry's `body` column.

use crm_domain::{
    audit::{AuditEntry, Target},
    history::{Actor, ActorType, Channel, FieldChange},
    AuditId, Timestamp,
};
use serde_json::{json, Value};

/// The entry as its `body` column keeps it: everything but its keys (tenant, id).
pub fn entry_json(e: &AuditEntry) -> Value {
    json!({
        "at": e.at.millis(),
        "actor": {"type": e.actor.kind.as_str(), "id": e.actor.id, "name": e.actor.name},
        "channel": e.channel.as_str(),
        "request_id": e.request_id,
        "action": e.action,
        "target": {"object": e.target.object, "id": e.target.id},
        "changes": e.changes.iter().map(|c| json!({"field": c.field, "from": c.from, "to": c.to})).collect::<Vec<_>>(),
    })
}

/// An entry from its id and its `body` column; `None` when the body is not one.
pub fn entry_from_json(id: AuditId, body: &Value) -> Option<AuditEntry> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let actor = &body["actor"];
    Some(AuditEntry {
        id,
        at: Timestamp::from_millis(body["at"].as_i64()?),
        actor: Actor {
            kind: ActorType::parse(actor["type"].as_str()?)?,
            id: text(&actor["id"]),
            name: text(&actor["name"]),
        },
        channel: Channel::parse(body["channel"].as_str()?)?,
        request_id: text(&body["request_id"]),
        action: body["action"].as_str()?.to_owned(),
        target: Target {
            object: body["target"]["object"].as_str()?.to_owned(),
            id: body["target"]["id"].as_str()?.to_owned(),
        },
        changes: body["changes"]
            .as_array()?
            .iter()
            .map(|c| {
                Some(FieldChange {
                    field: c["field"].as_str()?.to_owned(),
                    from: c["from"].clone(),
                    to: c["to"].clone(),
                })
            })
            .collect::<Option<_>>()?,
    })
}
