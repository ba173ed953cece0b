//! A history entry's `body` column.

use crm_domain::{
    history::{Actor, ActorType, Author, Change, ChangeAction, Channel, FieldChange, Via},
    ChangeId, ObjectKind, Timestamp,
};
use serde_json::{json, Value};

/// The entry as its `body` column keeps it: everything but its keys (tenant, object, record,
/// id).
pub fn change_json(change: &Change) -> Value {
    let a = &change.author;
    let mut body = json!({
        "at": change.at.millis(),
        "action": change.action.as_str(),
        "actor": {"type": a.actor.kind.as_str(), "id": a.actor.id, "name": a.actor.name},
        "channel": a.channel.as_str(),
        "via": a.via.as_str(),
        "request_id": a.request_id,
        "changes": change.changes.iter().map(|c| json!({"field": c.field, "from": c.from, "to": c.to})).collect::<Vec<_>>(),
    });
    if let Some(ids) = &change.merged_ids {
        body["merged_ids"] = json!(ids);
    }
    if change.erased {
        body["erased"] = json!(true);
    }
    body
}

/// An entry's `body` column once its record was erased: every `from` and `to` null, and
/// `erased: true`; the rest (who, when, which fields) kept.
pub fn erased_body(mut body: Value) -> Value {
    if let Some(changes) = body["changes"].as_array_mut() {
        for c in changes {
            c["from"] = Value::Null;
            c["to"] = Value::Null;
        }
    }
    body["erased"] = json!(true);
    body
}

/// An entry from its keys and its `body` column; `None` when the body is not one.
pub fn change_from_json(
    id: ChangeId,
    object: ObjectKind,
    record_id: String,
    body: &Value,
) -> Option<Change> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let actor = &body["actor"];
    Some(Change {
        id,
        object,
        record_id,
        at: Timestamp::from_millis(body["at"].as_i64()?),
        action: ChangeAction::parse(body["action"].as_str()?)?,
        author: Author {
            actor: Actor {
                kind: ActorType::parse(actor["type"].as_str()?)?,
                id: text(&actor["id"]),
                name: text(&actor["name"]),
            },
            channel: Channel::parse(body["channel"].as_str()?)?,
            via: Via::parse(body["via"].as_str()?)?,
            request_id: text(&body["request_id"]),
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
        merged_ids: body["merged_ids"].as_array().map(|ids| {
            ids.iter()
                .filter_map(|i| i.as_str().map(str::to_owned))
                .collect()
        }),
        erased: body["erased"].as_bool().unwrap_or(false),
    })
}
