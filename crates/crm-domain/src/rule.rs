//! Automations: a rule `{name, trigger_event, conditions, actions}` checked against the capability
//! catalog ([`crate::automation`]), the registry and the pipelines when it is created or changed,
//! and the engine that decides, for an event, whether the rule matches and what its actions do
//! (with merge tags filled). The use cases apply the actions; nothing here does I/O.

use serde_json::{json, Value};

use crate::{
    automation::{ActionParam, ActionType, ConditionOp, Need, Operand, ParamType, TRIGGER_EVENTS},
    condition::{all_match, Condition, Subject},
    contact::ContactPatch,
    deal::DealPatch,
    error::ValidationError,
    event::EventType,
    ids::{AutomationId, AutomationRunId, EventId},
    merge::{self, Escape, MergeData},
    patch::Patch,
    registry::{whole_number, Registry, ACTIVITY_TYPE_GROUP},
    suggest,
    time::Timestamp,
    Email, JsonMap,
};

/// Most conditions and actions one rule may carry.
pub const MAX_CONDITIONS: usize = 50;
pub const MAX_ACTIONS: usize = 20;

/// Built-in contact fields `set_field` may write.
pub const CONTACT_SETTABLE: &[&str] = &[
    "first_name",
    "last_name",
    "email",
    "phone",
    "linkedin_url",
    "company_id",
    "type",
];
/// Built-in deal fields `set_field` may write (stages move with `move_deal_stage`).
pub const DEAL_SETTABLE: &[&str] = &[
    "title",
    "primary_contact_id",
    "company_id",
    "value_cents",
    "currency",
    "close_date",
];

/// `send_email`'s parameters as the rule holds them (merge tags not yet filled).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EmailAction {
    pub to: Option<String>,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub text: Option<String>,
    pub template_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    CreateActivity { activity_type: String, body: String },
    SetField { field: String, value: Value },
    MoveDealStage { stage: String },
    SendEmail(EmailAction),
}

impl Action {
    pub fn action_type(&self) -> ActionType {
        match self {
            Action::CreateActivity { .. } => ActionType::CreateActivity,
            Action::SetField { .. } => ActionType::SetField,
            Action::MoveDealStage { .. } => ActionType::MoveDealStage,
            Action::SendEmail(_) => ActionType::SendEmail,
        }
    }

    /// The wire form `{type, ...parameters}`.
    pub fn snapshot(&self) -> Value {
        let mut v = json!({"type": self.action_type().as_str()});
        match self {
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
}

/// A rule's definition, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct AutomationDef {
    pub name: String,
    pub trigger_event: EventType,
    pub conditions: Vec<Condition>,
    pub actions: Vec<Action>,
}

/// A rule as a client sent it, before validation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AutomationDraft {
    pub name: Option<String>,
    pub trigger_event: Option<String>,
    pub conditions: Option<Value>,
    pub actions: Option<Value>,
}

/// What a rule is checked against: the registry of contacts and of deals (each holding every
/// enum group), and the stage keys of every pipeline.
#[derive(Debug, Clone, Copy)]
pub struct RuleContext<'a> {
    pub contact_registry: &'a Registry,
    pub deal_registry: &'a Registry,
    pub stage_keys: &'a [String],
}

impl RuleContext<'_> {
    fn registry(&self, event: EventType) -> &Registry {
        if event.object() == "deal" {
            self.deal_registry
        } else {
            self.contact_registry
        }
    }
}

/// The built-in fields a condition may read on records of `event`'s object.
pub fn builtin_fields(event: EventType) -> &'static [&'static str] {
    if event.object() == "deal" {
        merge::DEAL_FIELDS
    } else {
        merge::CONTACT_FIELDS
    }
}

fn unknown_value(field: String, value: &str, options: Vec<String>) -> ValidationError {
    ValidationError::UnknownValue {
        field,
        value: value.to_owned(),
        valid_options: options,
    }
}

fn unknown_field(field: String, name: &str, options: Vec<String>, hint: &str) -> ValidationError {
    let suggestion = match suggest::closest(name, options.iter().map(String::as_str)) {
        Some(s) => format!("did you mean `{s}`?"),
        None => hint.to_owned(),
    };
    ValidationError::UnknownField {
        field,
        valid_options: options,
        suggestion: Some(suggestion),
    }
}

fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

fn is_ordered(v: &Value) -> bool {
    match v {
        Value::Number(_) => true,
        Value::String(s) => {
            Timestamp::parse_rfc3339(s).is_some() || crate::time::Date::parse(s).is_some()
        }
        _ => false,
    }
}

/// Parses one condition `{field, op, value?}` on the records of `event`'s object (field names
/// in errors are `conditions[i].*`). Also used by sequences for trigger filters and exit conditions.
pub fn parse_condition(
    i: usize,
    raw: &Value,
    event: EventType,
    ctx: &RuleContext<'_>,
) -> Result<Condition, ValidationError> {
    let at = |k: &str| format!("conditions[{i}].{k}");
    let Value::Object(obj) = raw else {
        return Err(ValidationError::invalid(
            format!("conditions[{i}]"),
            "must be an object {field, op, value?}",
        ));
    };
    if let Some(extra) = obj
        .keys()
        .find(|k| !["field", "op", "value"].contains(&k.as_str()))
    {
        return Err(unknown_field(
            at(extra),
            extra,
            vec!["field".into(), "op".into(), "value".into()],
            "a condition is {field, op, value?}",
        ));
    }
    let field = obj
        .get("field")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let field =
        field.ok_or_else(|| ValidationError::invalid(at("field"), "is required (a string)"))?;
    let op_raw = obj
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| ValidationError::invalid(at("op"), "is required (a string)"))?;
    let op = ConditionOp::parse(op_raw).ok_or_else(|| {
        unknown_value(
            at("op"),
            op_raw,
            ConditionOp::ALL
                .iter()
                .map(|o| o.as_str().to_owned())
                .collect(),
        )
    })?;
    // Which fields the trigger's records have.
    let registry = ctx.registry(event);
    let builtin = builtin_fields(event);
    let known = match field.strip_prefix("custom_fields.") {
        Some(key) => registry.field(key).is_some(),
        None => {
            builtin.contains(&field)
                || registry.field(field).is_some()
                || (field == "previous_stage" && event == EventType::DealStageChanged)
        }
    };
    if !known {
        let mut options: Vec<String> = builtin.iter().map(|f| (*f).to_owned()).collect();
        options.extend(registry.fields.iter().map(|f| f.key.clone()));
        if event == EventType::DealStageChanged {
            options.push("previous_stage".into());
        }
        return Err(unknown_field(
            at("field"),
            field,
            options,
            "register custom fields first with POST /fields",
        ));
    }
    let value = obj.get("value").cloned();
    let value = match op.operand() {
        Operand::None => {
            if value.as_ref().is_some_and(|v| !v.is_null()) {
                return Err(ValidationError::invalid(
                    at("value"),
                    format!("`{}` takes no value", op.as_str()),
                ));
            }
            None
        }
        Operand::Scalar => match value {
            Some(v) if is_scalar(&v) => Some(v),
            _ => {
                return Err(ValidationError::invalid(
                    at("value"),
                    format!(
                        "`{}` needs a string, number, boolean or null value",
                        op.as_str()
                    ),
                ))
            }
        },
        Operand::List => match value {
            Some(Value::Array(items)) if items.iter().all(is_scalar) => Some(Value::Array(items)),
            _ => {
                return Err(ValidationError::invalid(
                    at("value"),
                    format!(
                        "`{}` needs an array of strings, numbers or booleans",
                        op.as_str()
                    ),
                ))
            }
        },
        Operand::Ordered => match value {
            Some(v) if is_ordered(&v) => Some(v),
            _ => {
                return Err(ValidationError::invalid(
                    at("value"),
                    format!(
                        "`{}` needs a number, a date (YYYY-MM-DD) or a timestamp",
                        op.as_str()
                    ),
                ))
            }
        },
    };
    Ok(Condition {
        field: field.to_owned(),
        op,
        value,
    })
}

/// Which field a `set_field` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetTarget {
    Builtin(&'static str),
    Custom(String),
}

/// Resolves a `set_field` field on records of `event`'s object.
pub fn set_target(event: EventType, field: &str, registry: &Registry) -> Option<SetTarget> {
    let builtin = if event.object() == "deal" {
        DEAL_SETTABLE
    } else {
        CONTACT_SETTABLE
    };
    if let Some(key) = field.strip_prefix("custom_fields.") {
        return registry
            .field(key)
            .map(|f| SetTarget::Custom(f.key.clone()));
    }
    if let Some(b) = builtin.iter().find(|b| **b == field) {
        return Some(SetTarget::Builtin(b));
    }
    registry
        .field(field)
        .map(|f| SetTarget::Custom(f.key.clone()))
}

fn param_str(i: usize, obj: &JsonMap, p: &ActionParam) -> Result<Option<String>, ValidationError> {
    match obj.get(p.name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            // Bodies are free text; every other string parameter is a single line (decisions §22).
            let max = match p.name {
                "body" | "text" => crate::text::MAX_BODY,
                _ => crate::text::MAX_LINE,
            };
            crate::text::check_len(&format!("actions[{i}].{}", p.name), s, max)?;
            Ok(Some(s.clone()))
        }
        Some(_) => Err(ValidationError::invalid(
            format!("actions[{i}].{}", p.name),
            "must be a string",
        )),
    }
}

fn parse_action(
    i: usize,
    raw: &Value,
    event: EventType,
    ctx: &RuleContext<'_>,
) -> Result<Action, ValidationError> {
    let at = |k: &str| format!("actions[{i}].{k}");
    let Value::Object(obj) = raw else {
        return Err(ValidationError::invalid(
            format!("actions[{i}]"),
            "must be an object {type, ...parameters}",
        ));
    };
    let type_raw = obj
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| ValidationError::invalid(at("type"), "is required (a string)"))?;
    let all_types = || {
        ActionType::ALL
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect::<Vec<_>>()
    };
    let action_type = ActionType::parse(type_raw)
        .ok_or_else(|| unknown_value(at("type"), type_raw, all_types()))?;
    if !action_type.trigger_events().contains(&event) {
        let allowed = ActionType::ALL
            .iter()
            .filter(|a| a.trigger_events().contains(&event))
            .map(|a| a.as_str().to_owned())
            .collect();
        return Err(ValidationError::UnknownValue {
            field: at("type"),
            value: format!(
                "{type_raw} (on a {} trigger; it acts on deals only)",
                event.as_str()
            ),
            valid_options: allowed,
        });
    }
    let params = action_type.params();
    if let Some(extra) = obj
        .keys()
        .find(|k| k.as_str() != "type" && !params.iter().any(|p| p.name == k.as_str()))
    {
        let options = params.iter().map(|p| p.name.to_owned()).collect();
        return Err(unknown_field(
            at(extra),
            extra,
            options,
            "see GET /automations-capabilities for each action's parameters",
        ));
    }
    for p in params {
        let missing = matches!(obj.get(p.name), None | Some(Value::Null));
        let required = match p.need {
            Need::Required => true,
            Need::Optional => false,
            Need::RequiredWithout(other) => matches!(obj.get(other), None | Some(Value::Null)),
        };
        if missing && required {
            let detail = match p.need {
                Need::RequiredWithout(other) => format!("is required unless `{other}` is given"),
                _ => "is required".to_owned(),
            };
            return Err(ValidationError::invalid(at(p.name), detail));
        }
        if p.param_type == ParamType::String {
            param_str(i, obj, p)?;
        }
    }
    let s = |name: &str| obj.get(name).and_then(Value::as_str).map(str::to_owned);
    Ok(match action_type {
        ActionType::CreateActivity => {
            let activity_type = s("activity_type").unwrap_or_default();
            ctx.contact_registry.check_enum(
                &at("activity_type"),
                ACTIVITY_TYPE_GROUP,
                &activity_type,
            )?;
            Action::CreateActivity {
                activity_type,
                body: s("body").unwrap_or_default(),
            }
        }
        ActionType::SetField => {
            let field = s("field").unwrap_or_default();
            let registry = ctx.registry(event);
            let target = set_target(event, &field, registry).ok_or_else(|| {
                let builtin = if event.object() == "deal" {
                    DEAL_SETTABLE
                } else {
                    CONTACT_SETTABLE
                };
                let mut options: Vec<String> = builtin.iter().map(|f| (*f).to_owned()).collect();
                options.extend(registry.fields.iter().map(|f| f.key.clone()));
                unknown_field(
                    at("field"),
                    &field,
                    options,
                    "register the field first with POST /fields",
                )
            })?;
            let value = obj.get("value").cloned().unwrap_or(Value::Null);
            let templated = value.as_str().is_some_and(merge::has_tags);
            if let (SetTarget::Custom(key), false, false) = (&target, templated, value.is_null()) {
                if let Some(def) = registry.field(key) {
                    registry
                        .check_value(def, value.clone(), &mut Vec::new())
                        .map_err(|e| relabel(e, &at("value")))?;
                }
            }
            Action::SetField { field, value }
        }
        ActionType::MoveDealStage => {
            let stage = s("stage").unwrap_or_default();
            if !ctx.stage_keys.contains(&stage) {
                return Err(unknown_value(at("stage"), &stage, ctx.stage_keys.to_vec()));
            }
            Action::MoveDealStage { stage }
        }
        ActionType::SendEmail => {
            let to = s("to");
            if let Some(t) = &to {
                if !merge::has_tags(t) && Email::parse(t).is_none() {
                    return Err(ValidationError::invalid(
                        at("to"),
                        "must be an e-mail address or a merge tag such as {{email}}",
                    ));
                }
            }
            Action::SendEmail(EmailAction {
                to,
                subject: s("subject"),
                body: s("body"),
                text: s("text"),
                template_id: s("template_id"),
            })
        }
    })
}

/// Puts a value error under the action's `value` parameter.
fn relabel(e: ValidationError, field: &str) -> ValidationError {
    match e {
        ValidationError::Invalid { detail, .. } => ValidationError::Invalid {
            field: field.to_owned(),
            detail,
        },
        ValidationError::UnknownValue {
            value,
            valid_options,
            ..
        } => ValidationError::UnknownValue {
            field: field.to_owned(),
            value,
            valid_options,
        },
        ValidationError::InvalidReference { value, .. } => ValidationError::InvalidReference {
            field: field.to_owned(),
            value,
        },
        other => other,
    }
}

impl AutomationDef {
    /// Validates a draft: a name, one of the five trigger events, conditions on fields the
    /// trigger's records have, and actions of the catalog with their parameters (a deal-only
    /// action on a contact trigger, a `set_field` on an unregistered field, a `move_deal_stage` to
    /// a stage no pipeline has: refused with the valid options).
    pub fn parse(
        draft: AutomationDraft,
        ctx: &RuleContext<'_>,
    ) -> Result<AutomationDef, ValidationError> {
        let name = draft
            .name
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty());
        let name = name.ok_or_else(|| ValidationError::invalid("name", "is required"))?;
        if name.chars().count() > 200 {
            return Err(ValidationError::invalid(
                "name",
                "must be at most 200 characters",
            ));
        }
        let raw_event = draft
            .trigger_event
            .ok_or_else(|| ValidationError::invalid("trigger_event", "is required"))?;
        let trigger_event = EventType::parse(&raw_event).ok_or_else(|| {
            unknown_value(
                "trigger_event".into(),
                &raw_event,
                TRIGGER_EVENTS
                    .iter()
                    .map(|e| e.as_str().to_owned())
                    .collect(),
            )
        })?;
        let conditions = match draft.conditions {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) if items.len() <= MAX_CONDITIONS => items
                .iter()
                .enumerate()
                .map(|(i, c)| parse_condition(i, c, trigger_event, ctx))
                .collect::<Result<_, _>>()?,
            Some(Value::Array(_)) => {
                return Err(ValidationError::invalid(
                    "conditions",
                    format!("at most {MAX_CONDITIONS} conditions"),
                ))
            }
            Some(_) => {
                return Err(ValidationError::invalid(
                    "conditions",
                    "must be an array of {field, op, value?}",
                ))
            }
        };
        let actions = match draft.actions {
            Some(Value::Array(items)) if !items.is_empty() && items.len() <= MAX_ACTIONS => items
                .iter()
                .enumerate()
                .map(|(i, a)| parse_action(i, a, trigger_event, ctx))
                .collect::<Result<_, _>>()?,
            Some(Value::Array(items)) if !items.is_empty() => {
                return Err(ValidationError::invalid(
                    "actions",
                    format!("at most {MAX_ACTIONS} actions"),
                ))
            }
            _ => {
                return Err(ValidationError::invalid(
                    "actions",
                    "is required: an array of one or more {type, ...parameters}",
                ))
            }
        };
        Ok(AutomationDef {
            name,
            trigger_event,
            conditions,
            actions,
        })
    }

    /// Whether the rule sends email (a live-mode rule then needs an email connection).
    pub fn sends_email(&self) -> bool {
        self.actions
            .iter()
            .any(|a| matches!(a, Action::SendEmail(_)))
    }

    /// The templates the rule's `send_email` actions name.
    pub fn template_ids(&self) -> Vec<&str> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::SendEmail(e) => e.template_id.as_deref(),
                _ => None,
            })
            .collect()
    }
}

/// A stored rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Automation {
    pub id: AutomationId,
    pub def: AutomationDef,
    pub enabled: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

impl Automation {
    /// The draft this rule was made from, for a PATCH to overlay.
    pub fn draft(&self) -> AutomationDraft {
        AutomationDraft {
            name: Some(self.def.name.clone()),
            trigger_event: Some(self.def.trigger_event.as_str().to_owned()),
            conditions: Some(Value::Array(
                self.def
                    .conditions
                    .iter()
                    .map(Condition::snapshot)
                    .collect(),
            )),
            actions: Some(Value::Array(
                self.def.actions.iter().map(Action::snapshot).collect(),
            )),
        }
    }

    /// Whether this rule fires for an event of `event_type` about `subject` (the record as the
    /// client's write left it).
    pub fn matches(&self, event_type: EventType, subject: &Subject<'_>) -> bool {
        self.enabled
            && self.def.trigger_event == event_type
            && all_match(&self.def.conditions, subject)
    }
}

impl AutomationDef {
    /// Reads back a rule the store holds (it was validated when written; anything unreadable is
    /// `None`, a corrupt row).
    pub fn from_stored(
        name: String,
        trigger_event: &str,
        conditions: &Value,
        actions: &Value,
    ) -> Option<AutomationDef> {
        let trigger_event = EventType::parse(trigger_event)?;
        let conditions = conditions
            .as_array()?
            .iter()
            .map(|c| {
                let op = ConditionOp::parse(c.get("op")?.as_str()?)?;
                Some(Condition {
                    field: c.get("field")?.as_str()?.to_owned(),
                    op,
                    value: c.get("value").cloned(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        let actions = actions
            .as_array()?
            .iter()
            .map(action_from_stored)
            .collect::<Option<Vec<_>>>()?;
        Some(AutomationDef {
            name,
            trigger_event,
            conditions,
            actions,
        })
    }
}

fn action_from_stored(v: &Value) -> Option<Action> {
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

/// One evaluation of a rule for one event (`GET /automations/{id}/runs`).
#[derive(Debug, Clone, PartialEq)]
pub struct AutomationRun {
    pub id: AutomationRunId,
    pub automation_id: AutomationId,
    pub event_id: EventId,
    pub event_type: EventType,
    pub record_id: String,
    /// Whether the conditions matched (the actions ran).
    pub matched: bool,
    /// One [`ActionOutcome`] per action, in order, when matched.
    pub actions: Vec<ActionOutcome>,
    pub created_at: Timestamp,
}

/// What one action of a run did.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionOutcome {
    pub action_type: ActionType,
    /// `Ok(result)`: `succeeded`, with what it made (`{"activity_id"}`, `{"email_id"}`, ...);
    /// `Err((code, detail))`: `failed`, with the error code of the spec's table or
    /// `no_recipient`.
    pub result: Result<Value, (String, String)>,
}

impl ActionOutcome {
    pub fn snapshot(&self) -> Value {
        match &self.result {
            Ok(result) => {
                json!({"type": self.action_type.as_str(), "status": "succeeded", "result": result, "error": null})
            }
            Err((code, detail)) => {
                json!({"type": self.action_type.as_str(), "status": "failed", "result": null, "error": {"code": code, "detail": detail}})
            }
        }
    }

    pub fn from_snapshot(v: &Value) -> Option<ActionOutcome> {
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
}

impl AutomationRun {
    pub fn actions_json(&self) -> Value {
        Value::Array(self.actions.iter().map(ActionOutcome::snapshot).collect())
    }
}

/// An action with its merge tags filled from the triggering record, ready to apply.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    CreateActivity {
        activity_type: String,
        body: String,
    },
    SetField {
        target: SetTarget,
        value: Value,
    },
    MoveDealStage {
        stage: String,
    },
    /// Subject, body and text still hold their tags: a template may supply them, and the body is
    /// rendered with HTML escaping ([`render_email`]).
    SendEmail {
        to: Option<String>,
        email: EmailAction,
    },
}

/// Fills an action's merge tags. `None` when a `set_field` names a field that is no longer
/// registered (the rule was valid when made).
pub fn plan(
    action: &Action,
    event: EventType,
    registry: &Registry,
    data: &MergeData<'_>,
) -> Result<Planned, ValidationError> {
    Ok(match action {
        Action::CreateActivity {
            activity_type,
            body,
        } => Planned::CreateActivity {
            activity_type: activity_type.clone(),
            body: merge::render(body, data, Escape::None),
        },
        Action::SetField { field, value } => {
            let target = set_target(event, field, registry).ok_or_else(|| {
                ValidationError::UnknownField {
                    field: field.clone(),
                    valid_options: Vec::new(),
                    suggestion: None,
                }
            })?;
            let value = match value {
                Value::String(s) => Value::String(merge::render(s, data, Escape::None)),
                other => other.clone(),
            };
            Planned::SetField { target, value }
        }
        Action::MoveDealStage { stage } => Planned::MoveDealStage {
            stage: stage.clone(),
        },
        Action::SendEmail(e) => {
            let to =
                e.to.as_ref()
                    .map(|t| merge::render(t, data, Escape::None).trim().to_owned())
                    .filter(|t| !t.is_empty());
            Planned::SendEmail {
                to,
                email: e.clone(),
            }
        }
    })
}

/// A rendered email: the subject and text part plain, the HTML part with values escaped, the
/// text part derived from the HTML when none is given.
pub fn render_email(
    subject: &str,
    body: &str,
    text: Option<&str>,
    data: &MergeData<'_>,
) -> (String, String, String) {
    let subject = merge::render(subject, data, Escape::None).replace(['\r', '\n'], " ");
    let html = merge::render(body, data, Escape::Html);
    let text = match text {
        Some(t) => merge::render(t, data, Escape::None),
        None => merge::html_to_text(&html),
    };
    (subject, html, text)
}

fn string_patch(field: &str, value: Value) -> Result<Patch<String>, ValidationError> {
    match value {
        Value::Null => Ok(Patch::Null),
        Value::String(s) => Ok(Patch::Value(s)),
        _ => Err(ValidationError::invalid(field, "expected a string or null")),
    }
}

fn custom(key: &str, value: Value) -> Option<JsonMap> {
    let mut m = JsonMap::new();
    m.insert(key.to_owned(), value);
    Some(m)
}

/// A contact update that sets one field, as `set_field` does.
pub fn contact_patch(target: &SetTarget, value: Value) -> Result<ContactPatch, ValidationError> {
    let mut p = ContactPatch::default();
    match target {
        SetTarget::Custom(key) => p.custom_fields = custom(key, value),
        SetTarget::Builtin(f) => {
            let v = string_patch(f, value)?;
            match *f {
                "first_name" => p.first_name = v,
                "last_name" => p.last_name = v,
                "email" => p.email = v,
                "phone" => p.phone = v,
                "linkedin_url" => p.linkedin_url = v,
                "company_id" => p.company_id = v,
                "type" => p.contact_type = v,
                other => {
                    return Err(ValidationError::invalid(
                        other,
                        "cannot be set by an automation",
                    ))
                }
            }
        }
    }
    Ok(p)
}

/// A deal update that sets one field, as `set_field` does.
pub fn deal_patch(target: &SetTarget, value: Value) -> Result<DealPatch, ValidationError> {
    let mut p = DealPatch::default();
    match target {
        SetTarget::Custom(key) => p.custom_fields = custom(key, value),
        SetTarget::Builtin("value_cents") => {
            p.value_cents = match &value {
                Value::Null => Patch::Null,
                v => Patch::Value(whole_number(v).ok_or_else(|| {
                    ValidationError::invalid("value_cents", "expected an integer")
                })?),
            }
        }
        SetTarget::Builtin(f) => {
            let v = string_patch(f, value)?;
            match *f {
                "title" => p.title = v,
                "primary_contact_id" => p.primary_contact_id = v,
                "company_id" => p.company_id = v,
                "currency" => p.currency = v,
                "close_date" => p.close_date = v,
                other => {
                    return Err(ValidationError::invalid(
                        other,
                        "cannot be set by an automation",
                    ))
                }
            }
        }
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{DataType, EnumValue, FieldDef, ObjectKind};

    fn registries() -> (Registry, Registry) {
        let mut contact = Registry::default();
        contact.fields.push(
            FieldDef::new(
                ObjectKind::Contact,
                "score",
                None,
                DataType::Number,
                None,
                false,
            )
            .unwrap(),
        );
        contact.enums.insert(
            ACTIVITY_TYPE_GROUP.into(),
            ["note", "call", "email", "task"]
                .iter()
                .map(|v| EnumValue {
                    value: (*v).into(),
                    label: None,
                })
                .collect(),
        );
        let mut deal = contact.clone();
        deal.fields = vec![FieldDef::new(
            ObjectKind::Deal,
            "source",
            None,
            DataType::Text,
            None,
            false,
        )
        .unwrap()];
        (contact, deal)
    }

    fn parse(v: Value) -> Result<AutomationDef, ValidationError> {
        let (c, d) = registries();
        let stages = vec!["lead".to_owned(), "won".to_owned()];
        let ctx = RuleContext {
            contact_registry: &c,
            deal_registry: &d,
            stage_keys: &stages,
        };
        let draft = AutomationDraft {
            name: v.get("name").and_then(Value::as_str).map(String::from),
            trigger_event: v
                .get("trigger_event")
                .and_then(Value::as_str)
                .map(String::from),
            conditions: v.get("conditions").cloned(),
            actions: v.get("actions").cloned(),
        };
        AutomationDef::parse(draft, &ctx)
    }

    fn rule(
        trigger: &str,
        conditions: Value,
        actions: Value,
    ) -> Result<AutomationDef, ValidationError> {
        parse(
            json!({"name": "r", "trigger_event": trigger, "conditions": conditions, "actions": actions}),
        )
    }

    #[test]
    fn a_valid_rule_round_trips_through_its_snapshot() {
        let def = rule(
            "deal.stage_changed",
            json!([{"field": "stage", "op": "eq", "value": "won"}, {"field": "previous_stage", "op": "exists"}, {"field": "custom_fields.source", "op": "in", "value": ["web"]}]),
            json!([{"type": "move_deal_stage", "stage": "lead"}, {"type": "set_field", "field": "source", "value": "{{title}}"},
                   {"type": "create_activity", "activity_type": "note", "body": "won {{title}}"},
                   {"type": "send_email", "template_id": "tpl_x"}]),
        )
        .unwrap();
        assert_eq!(def.conditions.len(), 3);
        assert!(def.sends_email());
        assert_eq!(def.template_ids(), ["tpl_x"]);
        let a = Automation {
            id: AutomationId::from_uuid(uuid::Uuid::nil()),
            def: def.clone(),
            enabled: true,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            version: 1,
        };
        let d = a.draft();
        let again = parse(json!({"name": d.name, "trigger_event": d.trigger_event, "conditions": d.conditions, "actions": d.actions})).unwrap();
        assert_eq!(again, def);
        let stored = AutomationDef::from_stored(
            d.name.unwrap(),
            "deal.stage_changed",
            &d.conditions.unwrap(),
            &d.actions.unwrap(),
        )
        .unwrap();
        assert_eq!(stored, def);
        let failed = ActionOutcome {
            action_type: ActionType::SendEmail,
            result: Err(("no_recipient".into(), "x".into())),
        };
        assert_eq!(
            ActionOutcome::from_snapshot(&failed.snapshot()),
            Some(failed)
        );
    }

    #[test]
    fn unknown_trigger_and_action_types_list_the_valid_ones() {
        let err = rule(
            "company.created",
            json!([]),
            json!([{"type": "set_field", "field": "title", "value": "x"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownValue { ref field, ref valid_options, .. } if field == "trigger_event" && valid_options.len() == 5)
        );
        let err = rule("contact.created", json!([]), json!([{"type": "webhook"}])).unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownValue { ref field, ref valid_options, .. } if field == "actions[0].type" && valid_options.len() == 4)
        );
        let err = rule(
            "contact.created",
            json!([{"field": "email", "op": "like", "value": "x"}]),
            json!([{"type": "set_field", "field": "phone", "value": "1"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownValue { ref field, ref valid_options, .. } if field == "conditions[0].op" && valid_options.len() == 11)
        );
    }

    #[test]
    fn deal_only_actions_are_refused_on_contact_triggers() {
        let err = rule(
            "contact.updated",
            json!([]),
            json!([{"type": "move_deal_stage", "stage": "won"}]),
        )
        .unwrap_err();
        let ValidationError::UnknownValue {
            field,
            valid_options,
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(field, "actions[0].type");
        assert!(!valid_options.contains(&"move_deal_stage".to_owned()));
    }

    #[test]
    fn stages_and_fields_must_exist() {
        let err = rule(
            "deal.created",
            json!([]),
            json!([{"type": "move_deal_stage", "stage": "closed"}]),
        )
        .unwrap_err();
        assert_eq!(
            err,
            ValidationError::UnknownValue {
                field: "actions[0].stage".into(),
                value: "closed".into(),
                valid_options: vec!["lead".into(), "won".into()]
            }
        );
        let err = rule(
            "contact.created",
            json!([]),
            json!([{"type": "set_field", "field": "scor", "value": 1}]),
        )
        .unwrap_err();
        let ValidationError::UnknownField {
            field,
            suggestion,
            valid_options,
        } = err
        else {
            panic!()
        };
        assert_eq!(
            (field.as_str(), suggestion.as_deref()),
            ("actions[0].field", Some("did you mean `score`?"))
        );
        assert!(valid_options.contains(&"score".into()));
        let err = rule(
            "contact.created",
            json!([]),
            json!([{"type": "set_field", "field": "score", "value": "high"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::Invalid { ref field, .. } if field == "actions[0].value"),
            "{err:?}"
        );
        assert!(rule(
            "contact.created",
            json!([]),
            json!([{"type": "set_field", "field": "custom_fields.score", "value": 3}])
        )
        .is_ok());
        let err = rule(
            "contact.created",
            json!([{"field": "nope", "op": "exists"}]),
            json!([{"type": "set_field", "field": "phone", "value": "1"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownField { ref field, .. } if field == "conditions[0].field")
        );
        let err = rule(
            "deal.updated",
            json!([{"field": "previous_stage", "op": "exists"}]),
            json!([{"type": "set_field", "field": "title", "value": "1"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownField { .. }),
            "previous_stage only on deal.stage_changed"
        );
        let err = rule(
            "contact.created",
            json!([]),
            json!([{"type": "create_activity", "activity_type": "meeting", "body": "x"}]),
        )
        .unwrap_err();
        assert!(
            matches!(err, ValidationError::UnknownValue { ref field, .. } if field == "actions[0].activity_type")
        );
    }

    #[test]
    fn parameters_are_checked() {
        let ok = |a: Value| rule("contact.created", json!([]), json!([a]));
        assert!(
            ok(json!({"type": "send_email", "subject": "s"})).is_err(),
            "body or template_id"
        );
        assert!(ok(
            json!({"type": "send_email", "subject": "s", "body": "b", "to": "not-an-email"})
        )
        .is_err());
        assert!(ok(json!({"type": "send_email", "subject": "s", "body": "b", "to": "{{custom_fields.alt}}"})).is_ok());
        assert!(matches!(
            ok(json!({"type": "set_field", "field": "phone", "value": "1", "colour": 1})),
            Err(ValidationError::UnknownField { .. })
        ));
        assert!(ok(json!({"type": "create_activity", "activity_type": "note"})).is_err());
        assert!(
            rule("contact.created", json!([]), json!([])).is_err(),
            "one action at least"
        );
        assert!(parse(json!({"trigger_event": "contact.created", "actions": [{"type": "set_field", "field": "phone", "value": "1"}]})).is_err(), "a name");
        let cond = |c: Value| {
            rule(
                "contact.created",
                json!([c]),
                json!([{"type": "set_field", "field": "phone", "value": "1"}]),
            )
        };
        assert!(cond(json!({"field": "email", "op": "exists", "value": "x"})).is_err());
        assert!(cond(json!({"field": "email", "op": "in", "value": "x"})).is_err());
        assert!(cond(json!({"field": "score", "op": "gt", "value": "high"})).is_err());
        assert!(cond(json!({"field": "created_at", "op": "gt", "value": "2026-01-01"})).is_ok());
        assert!(cond(json!({"field": "email", "op": "eq"})).is_err());
    }

    #[test]
    fn a_rule_matches_its_event_and_conditions() {
        let def = rule(
            "contact.updated",
            json!([{"field": "score", "op": "gte", "value": 10}]),
            json!([{"type": "set_field", "field": "phone", "value": "1"}]),
        )
        .unwrap();
        let mut a = Automation {
            id: AutomationId::from_uuid(uuid::Uuid::nil()),
            def,
            enabled: true,
            created_at: Timestamp::from_millis(0),
            updated_at: Timestamp::from_millis(0),
            version: 1,
        };
        let record = json!({"custom_fields": {"score": 12}});
        assert!(a.matches(EventType::ContactUpdated, &Subject::record(&record)));
        assert!(!a.matches(EventType::ContactCreated, &Subject::record(&record)));
        assert!(!a.matches(
            EventType::ContactUpdated,
            &Subject::record(&json!({"custom_fields": {"score": 9}}))
        ));
        a.enabled = false;
        assert!(!a.matches(EventType::ContactUpdated, &Subject::record(&record)));
    }

    #[test]
    fn planning_fills_tags_and_builds_patches() {
        let (c, _) = registries();
        let record =
            json!({"first_name": "Ada", "email": "ada@x.co", "custom_fields": {"score": 3}});
        let data = MergeData {
            record: Some(&record),
            company: None,
            previous_stage: None,
        };
        let set = Action::SetField {
            field: "phone".into(),
            value: json!("+{{score}}"),
        };
        let planned = plan(&set, EventType::ContactCreated, &c, &data).unwrap();
        let Planned::SetField { target, value } = planned else {
            panic!()
        };
        let p = contact_patch(&target, value).unwrap();
        assert_eq!(p.phone, Patch::Value("+3".into()));
        let email = Action::SendEmail(EmailAction {
            to: Some("{{email}}".into()),
            ..Default::default()
        });
        assert!(
            matches!(plan(&email, EventType::ContactCreated, &c, &data).unwrap(), Planned::SendEmail { to: Some(t), .. } if t == "ada@x.co")
        );
        let p = deal_patch(&SetTarget::Builtin("value_cents"), json!(12.0)).unwrap();
        assert_eq!(p.value_cents, Patch::Value(12));
        assert!(deal_patch(&SetTarget::Builtin("title"), json!(5)).is_err());
        let (subject, html, text) = render_email(
            "Hi {{first_name}}\n",
            "<p>{{first_name}} &lt;3</p>",
            None,
            &data,
        );
        assert_eq!(
            (subject.as_str(), html.as_str(), text.as_str()),
            ("Hi Ada ", "<p>Ada &lt;3</p>", "Ada <3")
        );
    }
}
