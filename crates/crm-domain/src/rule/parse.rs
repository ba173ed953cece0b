//! Reading a rule's conditions and actions from a request: each checked against the
//! capability catalog, the registry and the pipelines, with errors that name the offending part.

use super::*;

/// The built-in fields a condition may read on records of `event`'s object.
pub fn builtin_fields(event: EventType) -> &'static [&'static str] {
    if event.object() == "deal" {
        merge::DEAL_FIELDS
    } else {
        merge::CONTACT_FIELDS
    }
}

pub(super) fn unknown_value(field: String, value: &str, options: Vec<String>) -> ValidationError {
    ValidationError::UnknownValue {
        field,
        value: value.to_owned(),
        valid_options: options,
    }
}

pub(super) fn unknown_field(
    field: String,
    name: &str,
    options: Vec<String>,
    hint: &str,
) -> ValidationError {
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

pub(super) fn is_scalar(v: &Value) -> bool {
    !matches!(v, Value::Array(_) | Value::Object(_))
}

pub(super) fn is_ordered(v: &Value) -> bool {
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

pub(super) fn param_str(
    i: usize,
    obj: &JsonMap,
    p: &ActionParam,
) -> Result<Option<String>, ValidationError> {
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

pub(super) fn parse_action(
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
pub(super) fn relabel(e: ValidationError, field: &str) -> ValidationError {
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
