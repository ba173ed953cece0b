//! An import's JSON columns: its columns' targets and its author (the history entries' author,
//! in the shape of a history entry's `actor`, `channel`, `via` and `request_id`).

use crm_domain::{
    history::{Actor, ActorType, Author, Channel, Via},
    import::Target,
    ObjectKind,
};
use serde_json::{json, Value};

/// The `targets` column: the target names, in column order.
pub fn targets_json(targets: &[Target]) -> Value {
    Value::from(targets.iter().map(Target::name).collect::<Vec<_>>())
}

pub fn targets_from_json(object: ObjectKind, v: &Value) -> Option<Vec<Target>> {
    v.as_array()?
        .iter()
        .map(|t| Target::parse(object, t.as_str()?))
        .collect()
}

/// The `author` column.
pub fn author_json(a: &Author) -> Value {
    json!({
        "actor": {"type": a.actor.kind.as_str(), "id": a.actor.id, "name": a.actor.name},
        "channel": a.channel.as_str(),
        "via": a.via.as_str(),
        "request_id": a.request_id,
    })
}

pub fn author_from_json(v: &Value) -> Option<Author> {
    let text = |v: &Value| v.as_str().map(str::to_owned);
    let actor = &v["actor"];
    Some(Author {
        actor: Actor {
            kind: ActorType::parse(actor["type"].as_str()?)?,
            id: text(&actor["id"]),
            name: text(&actor["name"]),
        },
        channel: Channel::parse(v["channel"].as_str()?)?,
        via: Via::parse(v["via"].as_str()?)?,
        request_id: text(&v["request_id"]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_and_author_read_back() {
        let targets = vec![
            Target::Field("email"),
            Target::Custom("score".into()),
            Target::CompanyDomain,
        ];
        let v = targets_json(&targets);
        assert_eq!(targets_from_json(ObjectKind::Contact, &v), Some(targets));
        let mut author = Author::system();
        author.via = Via::Import;
        author.request_id = Some("req_1".into());
        assert_eq!(author_from_json(&author_json(&author)), Some(author));
    }
}
