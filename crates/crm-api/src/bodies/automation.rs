//! Automation bodies: the rule (its conditions and actions) and its runs. The condition and
//! action types are also the schemas of the create and update bodies, which the engine parses.

use crm_domain::{
    automation::{ActionType, ConditionOp, Need, ParamType},
    condition::Condition,
    rule::{Action, ActionOutcome, Automation, AutomationRun},
};
use schemars::JsonSchema;
use serde::{ser::SerializeMap, Serialize, Serializer};
use serde_json::{json, Map, Value};

use super::{ts, versioned};
use crate::schema::string_enum;

fn condition_ops(schema: &mut schemars::Schema) {
    string_enum(schema, &ConditionOp::ALL.map(|o| o.as_str()));
}

fn action_types(schema: &mut schemars::Schema) {
    string_enum(schema, &ActionType::ALL.map(|t| t.as_str()));
}

/// A condition: `{field, op, value?}`.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Condition")]
#[schemars(deny_unknown_fields)] // crm_domain::rule::parse_condition refuses other keys
pub struct ConditionBody {
    /// A built-in field of the triggering record, a custom field key (bare or
    /// `custom_fields.<key>`), or `previous_stage` on `deal.stage_changed`.
    #[schemars(pattern(crate::schema::NON_BLANK))]
    pub field: String,
    /// One of eq, neq, in, nin, exists, empty, contains, gt, lt, gte, lte.
    #[schemars(transform = condition_ops)]
    pub op: String,
    /// Omitted for `exists` and `empty`; an array for `in` and `nin`; a number or date for the
    /// orderings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

impl From<&Condition> for ConditionBody {
    fn from(c: &Condition) -> Self {
        ConditionBody {
            field: c.field.clone(),
            op: c.op.as_str().to_owned(),
            value: c.value.clone(),
        }
    }
}

/// Each action type's own shape, from the domain's parameter table (`ActionType::params`, which
/// the engine checks against): `oneOf` one object per type, holding only `type` and that type's
/// parameters, with the required ones present and not null (the engine reads null as absent),
/// and a parameter required unless another is given as "this one, or all of those".
fn action_shapes(schema: &mut schemars::Schema) {
    let present = |t: ParamType| match t {
        ParamType::String => json!({"type": "string"}),
        ParamType::Any => json!({"not": {"type": "null"}}),
    };
    let shapes: Vec<Value> = ActionType::ALL
        .iter()
        .map(|t| {
            let mut properties = Map::new();
            properties.insert("type".into(), json!({"const": t.as_str()}));
            let mut required = vec![Value::from("type")];
            let mut instead: Vec<(&str, Vec<Value>, Map<String, Value>)> = Vec::new();
            for p in t.params() {
                match p.need {
                    Need::Optional => {
                        properties.insert(p.name.into(), json!(true));
                    }
                    Need::Required => {
                        properties.insert(p.name.into(), present(p.param_type));
                        required.push(p.name.into());
                    }
                    Need::RequiredWithout(other) => {
                        properties.insert(p.name.into(), json!(true));
                        let group = match instead.iter().position(|(o, ..)| *o == other) {
                            Some(i) => &mut instead[i],
                            None => {
                                instead.push((other, Vec::new(), Map::new()));
                                instead.last_mut().expect("just pushed")
                            }
                        };
                        group.1.push(p.name.into());
                        group.2.insert(p.name.into(), present(p.param_type));
                    }
                }
            }
            let mut shape = json!({
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            });
            let all_of: Vec<Value> = instead
                .into_iter()
                .map(|(other, names, props)| {
                    let other_type = t
                        .params()
                        .iter()
                        .find(|p| p.name == other)
                        .map_or(ParamType::Any, |p| p.param_type);
                    json!({"anyOf": [
                        {"required": [other], "properties": {other: present(other_type)}},
                        {"required": names, "properties": props},
                    ]})
                })
                .collect();
            if !all_of.is_empty() {
                shape["allOf"] = all_of.into();
            }
            shape
        })
        .collect();
    schema.insert("oneOf".into(), shapes.into());
}

/// An action: `{type, ...parameters}`; see GET /automations-capabilities for each type's
/// parameters. The schema lists every parameter and, under `oneOf`, which ones each type takes
/// and needs.
#[derive(Debug, Clone, PartialEq, Default, JsonSchema)]
#[schemars(rename = "Action")]
#[schemars(deny_unknown_fields)] // the engine refuses keys that are not the action's parameters
#[schemars(transform = action_shapes)]
pub struct ActionBody {
    /// create_activity, set_field, move_deal_stage or send_email.
    #[serde(rename = "type")]
    #[schemars(transform = action_types)]
    pub action_type: String,
    /// create_activity: a registered `activity.type` value.
    #[schemars(length(max = 1024))]
    pub activity_type: Option<String>,
    /// create_activity: the text; send_email: the HTML body. `{{field}}` placeholders allowed.
    #[schemars(length(max = 100000))]
    pub body: Option<String>,
    /// set_field: a built-in field or a registered custom field key.
    #[schemars(length(max = 1024))]
    pub field: Option<String>,
    /// set_field: the new value (strings may hold placeholders).
    pub value: Option<Value>,
    /// move_deal_stage: a stage key of the deal's pipeline.
    #[schemars(length(max = 1024))]
    pub stage: Option<String>,
    /// send_email: the recipient; default the triggering contact or the deal's primary contact.
    #[schemars(length(max = 1024), pattern(crate::schema::EMAIL_OR_TAG))]
    pub to: Option<String>,
    /// send_email: the subject.
    #[schemars(length(max = 1024))]
    pub subject: Option<String>,
    /// send_email: a plain-text part; derived from `body` when absent.
    #[schemars(length(max = 100000))]
    pub text: Option<String>,
    /// send_email: a `tpl_` template giving subject, body and text instead.
    #[schemars(length(max = 1024))]
    pub template_id: Option<String>,
}

impl From<&Action> for ActionBody {
    fn from(a: &Action) -> Self {
        let mut body = ActionBody {
            action_type: a.action_type().as_str().to_owned(),
            ..Default::default()
        };
        match a {
            Action::CreateActivity {
                activity_type,
                body: text,
            } => {
                body.activity_type = Some(activity_type.clone());
                body.body = Some(text.clone());
            }
            Action::SetField { field, value } => {
                body.field = Some(field.clone());
                body.value = Some(value.clone());
            }
            Action::MoveDealStage { stage } => body.stage = Some(stage.clone()),
            Action::SendEmail(e) => {
                body.to = e.to.clone();
                body.subject = e.subject.clone();
                body.body = e.body.clone();
                body.text = e.text.clone();
                body.template_id = e.template_id.clone();
            }
        }
        body
    }
}

/// `type` first, then the parameters the action has, in the order its type reads them (a
/// `send_email` names its recipient and subject before its body): not the field order.
impl Serialize for ActionBody {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("type", &self.action_type)?;
        let text = |v: &Option<String>| v.as_ref().map(|s| Value::from(s.as_str()));
        let params: [(&str, Option<Value>); 9] = [
            ("activity_type", text(&self.activity_type)),
            ("field", text(&self.field)),
            ("value", self.value.clone()),
            ("stage", text(&self.stage)),
            ("to", text(&self.to)),
            ("subject", text(&self.subject)),
            ("body", text(&self.body)),
            ("text", text(&self.text)),
            ("template_id", text(&self.template_id)),
        ];
        // create_activity reads `activity_type` then `body`; every other type's order is above.
        let order: &[&str] = if self.activity_type.is_some() {
            &["activity_type", "body"]
        } else {
            &[
                "field",
                "value",
                "stage",
                "to",
                "subject",
                "body",
                "text",
                "template_id",
            ]
        };
        for name in order {
            if let Some((_, Some(v))) = params.iter().find(|(n, _)| n == name) {
                map.serialize_entry(name, v)?;
            }
        }
        map.end()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Automation")]
pub struct AutomationBody {
    /// `aut_` prefix.
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub trigger_event: &'static str,
    pub conditions: Vec<ConditionBody>,
    pub actions: Vec<ActionBody>,
    pub enabled: bool,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

versioned!(AutomationBody);

impl From<&Automation> for AutomationBody {
    fn from(a: &Automation) -> Self {
        AutomationBody {
            id: a.id.as_str().to_owned(),
            object: "automation",
            name: a.def.name.clone(),
            trigger_event: a.def.trigger_event.as_str(),
            conditions: a.def.conditions.iter().map(ConditionBody::from).collect(),
            actions: a.def.actions.iter().map(ActionBody::from).collect(),
            enabled: a.enabled,
            created_at: ts(a.created_at),
            updated_at: ts(a.updated_at),
            version: a.version,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "ActionOutcome")]
pub struct ActionOutcomeBody {
    #[serde(rename = "type")]
    pub action_type: &'static str,
    /// `succeeded` or `failed`.
    pub status: &'static str,
    /// What the action made or set, e.g. `{"activity_id": ...}`, `{"email_id": ...}`.
    pub result: Option<Value>,
    /// `{code, detail}` when it failed; `code` is a code of the error table, or `no_recipient`.
    pub error: Option<Value>,
}

impl From<&ActionOutcome> for ActionOutcomeBody {
    fn from(o: &ActionOutcome) -> Self {
        let (status, result, error) = match &o.result {
            Ok(result) => ("succeeded", Some(result.clone()), None),
            Err((code, detail)) => (
                "failed",
                None,
                Some(serde_json::json!({"code": code, "detail": detail})),
            ),
        };
        ActionOutcomeBody {
            action_type: o.action_type.as_str(),
            status,
            result,
            error,
        }
    }
}

/// One evaluation of a rule for one event.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "AutomationRun")]
pub struct AutomationRunBody {
    /// `run_` prefix.
    pub id: String,
    pub object: &'static str,
    pub automation_id: String,
    pub event_id: String,
    pub event_type: &'static str,
    pub record_id: String,
    /// Whether the conditions matched (then the actions ran).
    pub matched: bool,
    pub actions: Vec<ActionOutcomeBody>,
    pub created_at: String,
}

impl From<&AutomationRun> for AutomationRunBody {
    fn from(r: &AutomationRun) -> Self {
        AutomationRunBody {
            id: r.id.as_str().to_owned(),
            object: "automation_run",
            automation_id: r.automation_id.as_str().to_owned(),
            event_id: r.event_id.as_str().to_owned(),
            event_type: r.event_type.as_str(),
            record_id: r.record_id.clone(),
            matched: r.matched,
            actions: r.actions.iter().map(ActionOutcomeBody::from).collect(),
            created_at: ts(r.created_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{
        automation::ConditionOp,
        rule::{AutomationDef, EmailAction},
        AutomationId, AutomationRunId, EventId, EventType, Timestamp,
    };
    use serde_json::{json, Value};

    /// The body an automation had when the domain rendered it (the fixture's rule written out).
    fn old_automation(x: &Automation) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "automation",
            "name": x.def.name,
            "trigger_event": x.def.trigger_event.as_str(),
            "conditions": [
                {"field": "stage", "op": ConditionOp::ALL[0].as_str(), "value": "won"},
                {"field": "tier", "op": ConditionOp::ALL[4].as_str()},
            ],
            "actions": [
                {"type": "create_activity", "activity_type": "note", "body": "b"},
                {"type": "set_field", "field": "tier", "value": null},
                {"type": "move_deal_stage", "stage": "won"},
                {"type": "send_email", "to": "x@example.com", "subject": "s", "body": "b",
                 "template_id": "tpl_x"},
                {"type": "send_email"},
            ],
            "enabled": x.enabled,
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
        })
    }

    /// The body a run had when the domain rendered it (the fixture's outcomes written out).
    fn old_run(x: &AutomationRun) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "automation_run",
            "automation_id": x.automation_id.as_str(),
            "event_id": x.event_id.as_str(),
            "event_type": x.event_type.as_str(),
            "record_id": x.record_id,
            "matched": x.matched,
            "actions": [
                {"type": "create_activity", "status": "succeeded",
                 "result": {"activity_id": "act_x"}, "error": null},
                {"type": "send_email", "status": "failed", "result": null,
                 "error": {"code": "no_recipient", "detail": "none"}},
            ],
            "created_at": x.created_at.to_string(),
        })
    }

    #[test]
    fn serializes_as_the_automation_snapshots_did() {
        let a = Automation {
            id: AutomationId::from_uuid(uuid::Uuid::from_u128(1)),
            def: AutomationDef {
                name: "r".into(),
                trigger_event: EventType::DealUpdated,
                conditions: vec![
                    Condition::new("stage", ConditionOp::ALL[0], Some(json!("won"))),
                    Condition::new("tier", ConditionOp::ALL[4], None),
                ],
                actions: vec![
                    Action::CreateActivity {
                        activity_type: "note".into(),
                        body: "b".into(),
                    },
                    Action::SetField {
                        field: "tier".into(),
                        value: Value::Null,
                    },
                    Action::MoveDealStage {
                        stage: "won".into(),
                    },
                    Action::SendEmail(EmailAction {
                        to: Some("x@example.com".into()),
                        subject: Some("s".into()),
                        body: Some("b".into()),
                        text: None,
                        template_id: Some("tpl_x".into()),
                    }),
                    Action::SendEmail(EmailAction::default()),
                ],
            },
            enabled: true,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            updated_at: Timestamp::from_millis(1_700_000_000_000),
            version: 1,
        };
        crate::bodies::assert_same_json(&AutomationBody::from(&a), &old_automation(&a));
        let run = AutomationRun {
            id: AutomationRunId::from_uuid(uuid::Uuid::from_u128(2)),
            automation_id: a.id.clone(),
            event_id: EventId::from_uuid(uuid::Uuid::from_u128(3)),
            event_type: EventType::DealUpdated,
            record_id: "deal_x".into(),
            matched: true,
            actions: vec![
                ActionOutcome {
                    action_type: ActionType::CreateActivity,
                    result: Ok(json!({"activity_id": "act_x"})),
                },
                ActionOutcome {
                    action_type: ActionType::SendEmail,
                    result: Err(("no_recipient".into(), "none".into())),
                },
            ],
            created_at: Timestamp::from_millis(1_700_000_000_000),
        };
        crate::bodies::assert_same_json(&AutomationRunBody::from(&run), &old_run(&run));
    }
}
