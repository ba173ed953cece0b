//! A sequence's `trigger`, `exit_when` and `steps` columns.

use crm_domain::{
    sequence::{SequenceDef, Step, Trigger, WaitUnit},
    EventType,
};
use serde_json::{json, Value};

use super::rule::{conditions_from_json, conditions_json};

/// `{event, filter}`, or null for a sequence enrolled only directly.
pub fn trigger_json(trigger: Option<&Trigger>) -> String {
    match trigger {
        None => Value::Null,
        Some(t) => json!({"event": t.event.as_str(), "filter": conditions_json(&t.filter)}),
    }
    .to_string()
}

pub fn exit_when_json(def: &SequenceDef) -> String {
    conditions_json(&def.exit_when).to_string()
}

fn step(s: &Step) -> Value {
    let mut v = json!({ s.wait_unit.key(): s.wait });
    for (k, val) in [
        ("subject", &s.subject),
        ("body", &s.body),
        ("text", &s.text),
        ("template_id", &s.template_id),
    ] {
        if let Some(val) = val {
            v[k] = json!(val);
        }
    }
    v
}

/// The steps, each `{wait_<unit>: n, subject?, body?, text?, template_id?}` (the wait keeps the
/// unit it was given in).
pub fn steps_json(def: &SequenceDef) -> String {
    Value::Array(def.steps.iter().map(step).collect()).to_string()
}

fn step_from_json(v: &Value) -> Option<Step> {
    let obj = v.as_object()?;
    let mut waits = WaitUnit::ALL
        .into_iter()
        .filter_map(|u| Some((u, obj.get(u.key())?.as_i64()?)));
    let (wait_unit, wait) = waits.next()?;
    let s = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(Step {
        wait_unit,
        wait,
        subject: s("subject"),
        body: s("body"),
        text: s("text"),
        template_id: s("template_id"),
    })
}

/// A definition read back from its columns.
pub fn sequence_def(
    name: String,
    trigger: &Value,
    exit_when: &Value,
    steps: &Value,
) -> Option<SequenceDef> {
    let trigger = match trigger {
        Value::Null => None,
        t => Some(Trigger {
            event: EventType::parse(t.get("event")?.as_str()?)?,
            filter: conditions_from_json(t.get("filter")?)?,
        }),
    };
    Some(SequenceDef {
        name,
        trigger,
        exit_when: conditions_from_json(exit_when)?,
        steps: steps
            .as_array()?
            .iter()
            .map(step_from_json)
            .collect::<Option<Vec<_>>>()?,
    })
}
