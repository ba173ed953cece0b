//! A rule's `conditions` and `actions` columns, and a run's `actions` column (the outcome of
//! each action). Conditions are also the trigger filters and exit conditions of sequences.

use crm_domain::{
    automation::{ActionType, ConditionOp},
    condition::Condition,
    rule::{Action, ActionOutcome, AutomationDef, EmailAction},
    EventType,
};
use serde_json::{json, Value};

fn condition(c: &Condition) -> Value {
    let mut v = json!({"field": c.field, "op": c.op.as_str()});
    if let Some(value) = &c.value {
        v["value"] = value.clone();
    }
    v
}

/// A list of conditions as a column holds it: `[{field, op, value?}]`.
pub fn conditions_json(conditions: &[Condition]) -> Value {
    Value::Array(conditions.iter().map(condition).collect())
}

pub fn conditions_from_json(v: &Value) -> Option<Vec<Condition>> {
    v.as_array()?
        .iter()
        .map(|c| {
            let op = ConditionOp::parse(c.get("op")?.as_str()?)?;
            Some(Condition::new(
                c.get("field")?.as_str()?,
                op,
                c.get("value").cloned(),
            ))
        })
        .collect()
}

fn action(a: &Action) -> Value {
    let mut v = json!({"type": a.action_type().as_str()});
    match a {
        Action::CreateActivity {
            activity_type,
            body,
        } => {
            v["activity_type"] = json!(activity_type);
            v["body"] = json!(body);
        }
        Action::SetField { field, value } => {
            v["field"] = json!(field);
            v["value"] = value.clone();
        }
        Action::MoveDealStage { stage } => v["stage"] = json!(stage),
        Action::SendEmail(e) => {
            for (k, val) in [
                ("to", &e.to),
                ("subject", &e.subject),
                ("body", &e.body),
                ("text", &e.text),
                ("template_id", &e.template_id),
            ] {
                if let Some(val) = val {
                    v[k] = json!(val);
                }
            }
        }
    }
    v
}

/// A rule's actions as its column holds them: `[{type, ...parameters}]`.
pub fn actions_json(actions: &[Action]) -> Value {
    Value::Array(actions.iter().map(action).collect())
}

fn action_from_json(v: &Value) -> Option<Action> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(match ActionType::parse(v.get("type")?.as_str()?)? {
        ActionType::CreateActivity => Action::CreateActivity {
            activity_type: s("activity_type")?,
            body: s("body")?,
        },
        ActionType::SetField => Action::SetField {
            field: s("field")?,
            value: v.get("value").cloned().unwrap_or(Value::Null),
        },
        ActionType::MoveDealStage => Action::MoveDealStage { stage: s("stage")? },
        ActionType::SendEmail => Action::SendEmail(EmailAction {
            to: s("to"),
            subject: s("subject"),
            body: s("body"),
            text: s("text"),
            template_id: s("template_id"),
        }),
    })
}

/// A rule read back from its columns.
pub fn automation_def(
    name: String,
    trigger_event: &str,
    conditions: &Value,
    actions: &Value,
) -> Option<AutomationDef> {
    Some(AutomationDef {
        name,
        trigger_event: EventType::parse(trigger_event)?,
        conditions: conditions_from_json(conditions)?,
        actions: actions
            .as_array()?
            .iter()
            .map(action_from_json)
            .collect::<Option<Vec<_>>>()?,
    })
}

fn outcome(o: &ActionOutcome) -> Value {
    let kind = o.action_type.as_str();
    match &o.result {
        Ok(result) => {
            json!({"type": kind, "status": "succeeded", "result": result, "error": null})
        }
        Err((code, detail)) => {
            json!({"type": kind, "status": "failed", "result": null, "error": {"code": code, "detail": detail}})
        }
    }
}

/// A run's `actions` column: the outcome of each action, in order.
pub fn outcomes_json(outcomes: &[ActionOutcome]) -> String {
    Value::Array(outcomes.iter().map(outcome).collect()).to_string()
}

fn outcome_from_json(v: &Value) -> Option<ActionOutcome> {
    let action_type = ActionType::parse(v.get("type")?.as_str()?)?;
    let result = match v.get("status")?.as_str()? {
        "succeeded" => Ok(v.get("result").cloned().unwrap_or(Value::Null)),
        _ => {
            let e = v.get("error")?;
            Err((
                e.get("code")?.as_str()?.to_owned(),
                e.get("detail")?.as_str()?.to_owned(),
            ))
        }
    };
    Some(ActionOutcome {
        action_type,
        result,
    })
}

pub fn outcomes_from_json(v: &Value) -> Option<Vec<ActionOutcome>> {
    v.as_array()?.iter().map(outcome_from_json).collect()
}
