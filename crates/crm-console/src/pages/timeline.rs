//! A record's timeline: its activities (notes, calls, tasks, ...) and its field changes from
//! history, newest first, each with who made it (a person or an agent's key) and through what.

use serde_json::Value;

use crate::pages::fields::value_text;

pub struct Entry {
    /// RFC 3339, for ordering and the `<time>` element.
    pub at: String,
    /// `note`, `call`, `task`, ... for activities; `change` for history.
    pub kind: String,
    pub title: String,
    pub body: String,
    /// Who: `Kate (user)`, `import bot (api_key)`.
    pub who: String,
    /// Through what: `console`, `rest`, `mcp`, ... and how (`merge`, `automation`).
    pub channel: String,
    pub changes: Vec<(String, String, String)>,
}

/// An activity as a timeline entry.
pub fn activity(a: &Value) -> Entry {
    let kind = value_text(&a["type"]);
    Entry {
        at: value_text(&a["occurred_at"]),
        title: crate::pages::fields::humanize(&kind),
        kind,
        body: value_text(&a["body"]),
        who: String::new(),
        channel: String::new(),
        changes: Vec::new(),
    }
}

/// A history entry as a timeline entry.
pub fn change(c: &Value) -> Entry {
    let actor = &c["actor"];
    let who = match (actor["name"].as_str(), actor["type"].as_str()) {
        (Some(name), Some(kind)) if !name.is_empty() => {
            format!("{name} ({})", kind.replace('_', " "))
        }
        (_, Some(kind)) => kind.replace('_', " "),
        _ => String::new(),
    };
    let via = value_text(&c["via"]);
    let channel = match via.as_str() {
        "" | "direct" => value_text(&c["channel"]),
        _ => format!("{} · {via}", value_text(&c["channel"])),
    };
    let changes = c["changes"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|f| {
                    (
                        value_text(&f["field"]),
                        value_text(&f["from"]),
                        value_text(&f["to"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Entry {
        at: value_text(&c["at"]),
        kind: "change".into(),
        title: crate::pages::fields::humanize(&value_text(&c["action"])),
        body: String::new(),
        who,
        channel,
        changes,
    }
}

/// Both lists as one, newest first.
pub fn merge(activities: &Value, history: &Value) -> Vec<Entry> {
    let items = |v: &Value| v["data"].as_array().cloned().unwrap_or_default();
    let mut entries: Vec<Entry> = items(activities)
        .iter()
        .map(activity)
        .chain(items(history).iter().map(change))
        .collect();
    // RFC 3339 in UTC with a fixed width sorts as text.
    entries.sort_by(|a, b| b.at.cmp(&a.at));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn activities_and_changes_interleave_newest_first() {
        let activities = json!({"data": [{"type": "note", "body": "Called back", "occurred_at": "2026-11-02T10:00:00.000Z"}]});
        let history = json!({"data": [
            {"action": "updated", "at": "2026-11-03T10:00:00.000Z", "channel": "console", "via": "direct",
             "actor": {"type": "user", "id": "usr_1", "name": "Kate"},
             "changes": [{"field": "stage", "from": "new", "to": "won"}]},
            {"action": "created", "at": "2026-11-01T10:00:00.000Z", "channel": "rest", "via": "automation",
             "actor": {"type": "api_key", "id": "key_1", "name": null}, "changes": []}
        ]});
        let t = merge(&activities, &history);
        let kinds: Vec<&str> = t.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, ["change", "note", "change"]);
        assert_eq!(t[0].who, "Kate (user)");
        assert_eq!(t[0].changes, [("stage".into(), "new".into(), "won".into())]);
        assert_eq!(t[2].who, "api key");
        assert_eq!(t[2].channel, "rest · automation");
    }
}
