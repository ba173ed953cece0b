//! Settings: automations. The list (name, trigger, enabled) with a form for the common rule:
//! a trigger event, at most one condition and one `create_activity` action (the API takes the
//! full definition). Each rule's page shows its definition readably and its runs
//! (`svc_list_automation_runs`: when, the record, each action's outcome), enables or disables it
//! and deletes it.

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_app::Scope;
use crm_domain::{automation::ConditionOp, EventType};
use serde_json::{Map, Number, Value};

use crate::{
    args,
    chrome::Chrome,
    form::{encode, Form},
    ops::call,
    pages::fields::{value_text, CUSTOM},
    reply::{form_refusal, page, problem_page},
    session::{Posted, Signed},
    State,
};

/// Runs shown on a rule's page, newest first.
const RUNS_LIMIT: &str = "50";
/// Activity types offered when the schema names none.
const DEFAULT_ACTIVITY_TYPES: [&str; 4] = ["note", "call", "email", "task"];

pub struct Rule {
    pub id: String,
    pub name: String,
    pub trigger: String,
    pub enabled: bool,
    /// `field op value` of each condition.
    pub conditions: Vec<String>,
    /// Each action: its type and its parameters as `(name, value)`.
    pub actions: Vec<(String, Vec<(String, String)>)>,
    pub created_at: String,
}

impl Rule {
    fn of(a: &Value) -> Rule {
        let conditions = a["conditions"]
            .as_array()
            .map(|all| all.iter().map(condition_text).collect())
            .unwrap_or_default();
        let actions = a["actions"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|action| {
                        let params = action
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .filter(|(k, _)| *k != "type")
                                    .map(|(k, v)| (k.clone(), shown(v)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        (value_text(&action["type"]), params)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Rule {
            id: value_text(&a["id"]),
            name: value_text(&a["name"]),
            trigger: value_text(&a["trigger_event"]),
            enabled: a["enabled"] == true,
            conditions,
            actions,
            created_at: value_text(&a["created_at"]),
        }
    }
}

/// A value as the definition shows it: text as it is, anything else as JSON.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".to_owned(),
        other => other.to_string(),
    }
}

/// `stage eq "won"`, `email exists`.
fn condition_text(c: &Value) -> String {
    let head = format!("{} {}", value_text(&c["field"]), value_text(&c["op"]));
    match c.get("value") {
        None | Some(Value::Null) => head,
        Some(v) => format!("{head} {v}"),
    }
}

/// One action's outcome in a run.
pub struct Outcome {
    pub action: String,
    pub status: String,
    pub detail: String,
}

pub struct Run {
    pub at: String,
    pub event_type: String,
    pub record_id: String,
    /// The record's console page, for a contact or a deal.
    pub record_href: Option<String>,
    pub matched: bool,
    pub outcomes: Vec<Outcome>,
}

fn run_of(r: &Value) -> Run {
    let record_id = value_text(&r["record_id"]);
    let record_href = if record_id.starts_with("con_") {
        Some(format!("/contacts/{record_id}"))
    } else if record_id.starts_with("deal_") {
        Some(format!("/deals/{record_id}"))
    } else {
        None
    };
    let outcomes = r["actions"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|o| {
                    let detail = if o["error"].is_object() {
                        format!(
                            "{}: {}",
                            value_text(&o["error"]["code"]),
                            value_text(&o["error"]["detail"])
                        )
                    } else {
                        o["result"]
                            .as_object()
                            .map(|m| {
                                m.iter()
                                    .map(|(k, v)| format!("{k} {}", shown(v)))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            })
                            .unwrap_or_default()
                    };
                    Outcome {
                        action: value_text(&o["type"]),
                        status: value_text(&o["status"]),
                        detail,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Run {
        at: value_text(&r["created_at"]),
        event_type: value_text(&r["event_type"]),
        record_id,
        record_href,
        matched: r["matched"] == true,
        outcomes,
    }
}

#[derive(Template)]
#[template(path = "settings/automations.html")]
struct ListPage {
    chrome: Chrome,
    rules: Vec<Rule>,
    can_write: bool,
    triggers: Vec<&'static str>,
    ops: Vec<&'static str>,
    activity_types: Vec<(String, String)>,
    /// What a refused create sent, to fill the form again.
    sent: Form,
    notice: Option<&'static str>,
    error: Option<String>,
}

impl ListPage {
    /// What the refused create sent as `name`.
    fn sent_value(&self, name: &str) -> &str {
        self.sent.get(name).unwrap_or_default()
    }

    /// A new rule is enabled unless a refused create asked otherwise.
    fn enabled_checked(&self) -> bool {
        self.sent.0.is_empty() || self.sent.get("enabled").is_some()
    }
}

#[derive(Template)]
#[template(path = "settings/automations_one.html")]
struct OnePage {
    chrome: Chrome,
    rule: Rule,
    runs: Vec<Run>,
    can_write: bool,
    notice: Option<&'static str>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/automations", get(list).post(create))
        .route("/settings/automations/{id}", get(show))
        .route("/settings/automations/{id}/enabled", post(set_enabled))
        .route("/settings/automations/{id}/delete", post(delete))
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "created" => "Automation created: it runs on its trigger's events from now on.",
        "enabled" => "Enabled.",
        "disabled" => "Disabled: it does not run until enabled again.",
        "deleted" => "Automation deleted, with its runs.",
        _ => return None,
    })
}

fn notice_of(query: Option<String>) -> Option<&'static str> {
    Form::parse(query.unwrap_or_default().as_bytes())
        .text("notice")
        .and_then(notice_text)
}

fn to(path: &str) -> Response {
    Redirect::to(path).into_response()
}

fn can_write(signed: &Signed) -> bool {
    signed.caller.scopes.allows(Scope::write("automations"))
}

/// `GET /settings/automations`.
async fn list(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    render_list(&state, &signed, notice_of(query), Form::default(), None).await
}

async fn render_list(
    state: &State,
    signed: &Signed,
    notice: Option<&'static str>,
    sent: Form,
    error: Option<String>,
) -> Response {
    let list = match call(
        state,
        signed,
        "svc_list_automations",
        args! {"limit" => "100"},
    )
    .await
    {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let rules = list["data"]
        .as_array()
        .map(|all| all.iter().map(Rule::of).collect())
        .unwrap_or_default();
    let can_write = can_write(signed);
    let activity_types = if can_write {
        match call(state, signed, "svc_describe_schema", Map::new()).await {
            Ok(schema) => activity_types(&schema),
            Err(problem) => return problem_page(signed, &problem),
        }
    } else {
        Vec::new()
    };
    let body = ListPage {
        chrome: Chrome::new(signed, "settings"),
        rules,
        can_write,
        triggers: EventType::ALL.iter().map(|t| t.as_str()).collect(),
        ops: ConditionOp::ALL.iter().map(|o| o.as_str()).collect(),
        activity_types,
        sent,
        notice,
        error: error.clone(),
    };
    page(if error.is_some() { 422 } else { 200 }, &body)
}

/// The `activity.type` values the schema registers, as (value, label).
fn activity_types(schema: &Value) -> Vec<(String, String)> {
    let listed: Vec<(String, String)> = schema["enums"][crm_domain::object::ACTIVITY_TYPE_GROUP]
        .as_array()
        .map(|all| {
            all.iter()
                .filter_map(|v| {
                    let value = v["value"].as_str()?.to_owned();
                    let label = v["label"].as_str().unwrap_or(&value).to_owned();
                    Some((value, label))
                })
                .collect()
        })
        .unwrap_or_default();
    if listed.is_empty() {
        DEFAULT_ACTIVITY_TYPES
            .iter()
            .map(|t| ((*t).to_owned(), (*t).to_owned()))
            .collect()
    } else {
        listed
    }
}

/// The JSON a condition's typed text stands for: numbers for number fields, booleans for
/// boolean ones, text otherwise (the API names a value of the wrong shape).
fn typed(schema: &Value, object: &str, field: &str, text: &str) -> Value {
    let (key, custom) = match field.strip_prefix(CUSTOM) {
        Some(key) => (key, Some(true)),
        None => (field, None),
    };
    let kind = schema["objects"]
        .as_array()
        .and_then(|all| all.iter().find(|o| o["name"] == object))
        .and_then(|o| o["fields"].as_array())
        .and_then(|fields| {
            let matching = |f: &&Value| f["key"] == key;
            match custom {
                Some(_) => fields.iter().filter(matching).find(|f| f["custom"] == true),
                // A bare key names a built-in field first, then a custom one.
                None => fields
                    .iter()
                    .filter(matching)
                    .find(|f| f["custom"] != true)
                    .or_else(|| fields.iter().find(matching)),
            }
        })
        .and_then(|f| f["type"].as_str())
        .unwrap_or("string");
    match kind {
        "integer" | "currency" => text
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or_else(|_| text.into()),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or_else(|| text.into(), Value::Number),
        "boolean" => match text.to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" => Value::Bool(true),
            "false" | "no" | "0" => Value::Bool(false),
            _ => text.into(),
        },
        _ => text.into(),
    }
}

/// The one condition of the form, when a field and an operator are given.
fn condition(schema: &Value, trigger: &str, form: &Form) -> Option<Value> {
    let field = form.text("condition_field")?;
    let op = form.text("condition_op")?;
    let object = EventType::parse(trigger).map_or("contact", EventType::object);
    let mut c = Map::new();
    c.insert("field".into(), field.into());
    c.insert("op".into(), op.into());
    let text = form.text("condition_value").unwrap_or_default();
    match op {
        "exists" | "empty" => {}
        "in" | "nin" => {
            let items = text
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| typed(schema, object, field, s))
                .collect();
            c.insert("value".into(), Value::Array(items));
        }
        _ => {
            c.insert("value".into(), typed(schema, object, field, text));
        }
    }
    Some(Value::Object(c))
}

/// `POST /settings/automations`: the rule of the form, then its page.
async fn create(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let schema = match call(&state, &signed, "svc_describe_schema", Map::new()).await {
        Ok(schema) => schema,
        Err(problem) => return problem_page(&signed, &problem),
    };
    let trigger = form.text("trigger_event").unwrap_or_default();
    let mut action = Map::new();
    action.insert("type".into(), "create_activity".into());
    action.insert(
        "activity_type".into(),
        form.text("activity_type").unwrap_or("note").into(),
    );
    action.insert("body".into(), form.text("body").unwrap_or_default().into());
    let mut body = args! {
        "name" => form.text("name").unwrap_or_default(),
        "trigger_event" => trigger,
        "enabled" => form.get("enabled").is_some(),
    };
    body.insert("actions".into(), Value::Array(vec![Value::Object(action)]));
    if let Some(c) = condition(&schema, trigger, &form) {
        body.insert("conditions".into(), Value::Array(vec![c]));
    }
    match call(&state, &signed, "svc_create_automation", body).await {
        Ok(created) => to(&format!(
            "/settings/automations/{}?notice=created",
            encode(&value_text(&created["id"]))
        )),
        Err(problem) => match form_refusal(&problem) {
            Some(error) => render_list(&state, &signed, None, form, Some(error)).await,
            None => problem_page(&signed, &problem),
        },
    }
}

/// `GET /settings/automations/{id}`.
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let rule = match call(
        &state,
        &signed,
        "svc_get_automation",
        args! {"id" => id.as_str()},
    )
    .await
    {
        Ok(rule) => rule,
        Err(problem) => return problem_page(&signed, &problem),
    };
    let runs = match call(
        &state,
        &signed,
        "svc_list_automation_runs",
        args! {"id" => id.as_str(), "limit" => RUNS_LIMIT},
    )
    .await
    {
        Ok(runs) => runs,
        Err(problem) => return problem_page(&signed, &problem),
    };
    let body = OnePage {
        chrome: Chrome::new(&signed, "settings"),
        rule: Rule::of(&rule),
        runs: runs["data"]
            .as_array()
            .map(|all| all.iter().map(run_of).collect())
            .unwrap_or_default(),
        can_write: can_write(&signed),
        notice: notice_of(query),
    };
    page(200, &body)
}

/// `POST /settings/automations/{id}/enabled`: `enabled=true|false`.
async fn set_enabled(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form }: Posted,
) -> Response {
    let enabled = form.text("enabled") == Some("true");
    let body = args! {"id" => id.as_str(), "enabled" => enabled};
    match call(&state, &signed, "svc_update_automation", body).await {
        Ok(_) => to(&format!(
            "/settings/automations/{}?notice={}",
            encode(&id),
            if enabled { "enabled" } else { "disabled" }
        )),
        Err(problem) => problem_page(&signed, &problem),
    }
}

/// `POST /settings/automations/{id}/delete`.
async fn delete(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(&state, &signed, "svc_delete_automation", args! {"id" => id}).await {
        Ok(_) => to("/settings/automations?notice=deleted"),
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"objects": [{"name": "deal", "fields": [
            {"key": "value_cents", "type": "integer", "custom": false},
            {"key": "title", "type": "string", "custom": false},
            {"key": "vip", "type": "boolean", "custom": true},
            {"key": "score", "type": "number", "custom": true}
        ]}]})
    }

    #[test]
    fn a_condition_takes_the_type_of_its_field() {
        let s = schema();
        assert_eq!(typed(&s, "deal", "value_cents", "500"), json!(500));
        assert_eq!(typed(&s, "deal", "title", "500"), json!("500"));
        assert_eq!(typed(&s, "deal", "custom_fields.vip", "yes"), json!(true));
        assert_eq!(typed(&s, "deal", "score", "2.5"), json!(2.5));
        assert_eq!(typed(&s, "deal", "unknown", "x"), json!("x"));
        let form = Form::parse(b"condition_field=value_cents&condition_op=in&condition_value=1,+2");
        assert_eq!(
            condition(&s, "deal.created", &form),
            Some(json!({"field": "value_cents", "op": "in", "value": [1, 2]}))
        );
        let form = Form::parse(b"condition_field=title&condition_op=exists&condition_value=x");
        assert_eq!(
            condition(&s, "deal.created", &form),
            Some(json!({"field": "title", "op": "exists"}))
        );
        assert_eq!(condition(&s, "deal.created", &Form::default()), None);
    }

    #[test]
    fn a_rule_and_its_runs_read_plainly() {
        let rule = Rule::of(&json!({
            "id": "aut_1", "name": "Welcome", "trigger_event": "contact.created",
            "conditions": [{"field": "type", "op": "eq", "value": "lead"}, {"field": "email", "op": "exists"}],
            "actions": [{"type": "create_activity", "activity_type": "note", "body": "Hi"}],
            "enabled": true
        }));
        assert_eq!(rule.conditions, ["type eq \"lead\"", "email exists"]);
        assert_eq!(rule.actions[0].0, "create_activity");
        assert_eq!(
            rule.actions[0].1,
            [
                ("activity_type".into(), "note".into()),
                ("body".into(), "Hi".into())
            ]
        );
        let run = run_of(&json!({
            "record_id": "con_1", "matched": true, "created_at": "t",
            "actions": [
                {"type": "create_activity", "status": "succeeded", "result": {"activity_id": "act_1"}, "error": null},
                {"type": "send_email", "status": "failed", "result": null, "error": {"code": "no_recipient", "detail": "none"}}
            ]
        }));
        assert_eq!(run.record_href.as_deref(), Some("/contacts/con_1"));
        assert_eq!(run.outcomes[0].detail, "activity_id act_1");
        assert_eq!(run.outcomes[1].detail, "no_recipient: none");
    }
}
