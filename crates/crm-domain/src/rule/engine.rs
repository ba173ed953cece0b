//! The engine: given an event and a rule that matched, what its actions do (with merge tags
//! filled), and the record of a run.

use super::*;

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

pub(super) fn string_patch(field: &str, value: Value) -> Result<Patch<String>, ValidationError> {
    match value {
        Value::Null => Ok(Patch::Null),
        Value::String(s) => Ok(Patch::Value(s)),
        _ => Err(ValidationError::invalid(field, "expected a string or null")),
    }
}

pub(super) fn custom(key: &str, value: Value) -> Option<JsonMap> {
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
                "owner_id" => p.owner_id = v,
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
                "owner_id" => p.owner_id = v,
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
