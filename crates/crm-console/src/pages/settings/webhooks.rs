//! Settings: webhooks. The list with a form to register one (its URL, the event types it
//! receives, a description); its signing secret is shown once, on the page that answers the
//! create, and again only when rolled. Each webhook's page shows its deliveries (the attempts of
//! `svc_list_webhook_deliveries` grouped by delivery, newest first) with a Retry button on a
//! dead-lettered one, enables or disables it, rolls its secret and deletes it.

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_api::{ErrorCode, Problem};
use crm_app::Scope;
use crm_domain::EventType;
use serde_json::Value;

use crate::{
    args,
    chrome::Chrome,
    form::{encode, Form},
    ops::call,
    pages::fields::value_text,
    reply::{form_refusal, page, problem_page},
    session::{Posted, Signed},
    State,
};

/// Delivery attempts read for a webhook's page (grouped into deliveries).
const ATTEMPTS_LIMIT: &str = "100";

/// A webhook as its rows and page show it.
pub struct Hook {
    pub id: String,
    pub url: String,
    pub events: String,
    pub description: String,
    pub enabled: bool,
    pub mode: String,
    pub created_at: String,
    pub version: i64,
}

impl Hook {
    fn of(w: &Value) -> Hook {
        Hook {
            id: value_text(&w["id"]),
            url: value_text(&w["url"]),
            events: value_text(&w["events"]),
            description: value_text(&w["description"]),
            enabled: w["enabled"] == true,
            mode: value_text(&w["mode"]),
            created_at: value_text(&w["created_at"]),
            version: w["version"].as_i64().unwrap_or(0),
        }
    }
}

/// One delivery: its newest attempt, and how many were made.
pub struct Delivery {
    pub id: String,
    pub event_type: String,
    pub event_id: String,
    pub status: String,
    pub attempts: u64,
    pub last_response: String,
    pub at: String,
    pub next_attempt_at: String,
}

impl Delivery {
    /// Only a dead-lettered delivery may be retried by hand (409 otherwise).
    pub fn retryable(&self) -> bool {
        self.status == "dead_lettered"
    }
}

/// An event type the create form offers: value, label, checked.
pub struct EventChoice {
    pub value: &'static str,
    pub label: &'static str,
    pub checked: bool,
}

#[derive(Template)]
#[template(path = "settings/webhooks.html")]
struct ListPage {
    chrome: Chrome,
    hooks: Vec<Hook>,
    can_write: bool,
    choices: Vec<EventChoice>,
    url: String,
    description: String,
    notice: Option<&'static str>,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "settings/webhooks_one.html")]
struct OnePage {
    chrome: Chrome,
    hook: Hook,
    deliveries: Vec<Delivery>,
    can_write: bool,
    /// The signing secret, on the page that answers a create or a roll only.
    secret: Option<String>,
    notice: Option<&'static str>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/webhooks", get(list).post(create))
        .route("/settings/webhooks/{id}", get(show))
        .route("/settings/webhooks/{id}/enabled", post(set_enabled))
        .route("/settings/webhooks/{id}/delete", post(delete))
        .route("/settings/webhooks/{id}/roll-secret", post(roll_secret))
        .route(
            "/settings/webhooks/{id}/deliveries/{dlv_id}/retry",
            post(retry),
        )
}

/// The notices a redirect back to these pages may ask for.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "enabled" => "Enabled: new events are delivered again, and waiting deliveries resume.",
        "disabled" => "Disabled: events that arrive meanwhile are not delivered to it.",
        "deleted" => "Webhook deleted, with its deliveries.",
        "retried" => "Queued for one more attempt now.",
        "conflict" => "Someone else changed this webhook meanwhile: this is its newer state.",
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
    signed.caller.scopes.allows(Scope::write("webhooks"))
}

/// `*` and every event type, with those `sent` checked.
fn choices(sent: &[String]) -> Vec<EventChoice> {
    let mut all = vec![EventChoice {
        value: "*",
        label: "Every event (*)",
        checked: sent.iter().any(|s| s == "*"),
    }];
    all.extend(EventType::ALL.iter().map(|t| EventChoice {
        value: t.as_str(),
        label: t.as_str(),
        checked: sent.iter().any(|s| s == t.as_str()),
    }));
    all
}

/// `GET /settings/webhooks`.
async fn list(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    render_list(&state, &signed, notice_of(query), &Form::default(), None).await
}

async fn render_list(
    state: &State,
    signed: &Signed,
    notice: Option<&'static str>,
    sent: &Form,
    error: Option<String>,
) -> Response {
    let list = match call(state, signed, "svc_list_webhooks", args! {"limit" => "100"}).await {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let hooks = list["data"]
        .as_array()
        .map(|all| all.iter().map(Hook::of).collect())
        .unwrap_or_default();
    let events: Vec<String> = sent
        .0
        .iter()
        .filter(|(k, _)| k == "events")
        .map(|(_, v)| v.clone())
        .collect();
    let body = ListPage {
        chrome: Chrome::new(signed, "settings"),
        hooks,
        can_write: can_write(signed),
        choices: choices(&events),
        url: sent.text("url").unwrap_or_default().to_owned(),
        description: sent.text("description").unwrap_or_default().to_owned(),
        notice,
        error: error.clone(),
    };
    page(if error.is_some() { 422 } else { 200 }, &body)
}

/// `POST /settings/webhooks`: registers the webhook and answers its page with the secret.
async fn create(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let events: Vec<Value> = form
        .0
        .iter()
        .filter(|(k, v)| k == "events" && !v.trim().is_empty())
        .map(|(_, v)| Value::from(v.trim()))
        .collect();
    let mut body = args! {"url" => form.text("url").unwrap_or_default()};
    body.insert("events".into(), Value::Array(events));
    if let Some(description) = form.text("description") {
        body.insert("description".into(), description.into());
    }
    match call(&state, &signed, "svc_create_webhook", body).await {
        Ok(created) => {
            let secret = created["secret"].as_str().unwrap_or_default().to_owned();
            render_one(&state, &signed, &created, Some(secret), None, 201).await
        }
        Err(problem) => match form_refusal(&problem) {
            Some(error) => render_list(&state, &signed, None, &form, Some(error)).await,
            None => problem_page(&signed, &problem),
        },
    }
}

/// `GET /settings/webhooks/{id}`.
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Response {
    let hook = match call(
        &state,
        &signed,
        "svc_get_webhook",
        args! {"id" => id.as_str()},
    )
    .await
    {
        Ok(hook) => hook,
        Err(problem) => return problem_page(&signed, &problem),
    };
    render_one(&state, &signed, &hook, None, notice_of(query), 200).await
}

async fn render_one(
    state: &State,
    signed: &Signed,
    hook: &Value,
    secret: Option<String>,
    notice: Option<&'static str>,
    status: u16,
) -> Response {
    let hook = Hook::of(hook);
    let attempts = match call(
        state,
        signed,
        "svc_list_webhook_deliveries",
        args! {"id" => hook.id.as_str(), "limit" => ATTEMPTS_LIMIT},
    )
    .await
    {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let body = OnePage {
        chrome: Chrome::new(signed, "settings"),
        deliveries: deliveries(&attempts),
        hook,
        can_write: can_write(signed),
        secret,
        notice,
    };
    page(status, &body)
}

/// Attempts (newest first) grouped by delivery: each delivery's newest attempt gives its status
/// and last response, its highest attempt number how many were made.
fn deliveries(attempts: &Value) -> Vec<Delivery> {
    let mut out: Vec<Delivery> = Vec::new();
    for a in attempts["data"].as_array().into_iter().flatten() {
        let id = value_text(&a["delivery_id"]);
        let number = a["attempt"].as_u64().unwrap_or(0);
        if let Some(seen) = out.iter_mut().find(|d| d.id == id) {
            seen.attempts = seen.attempts.max(number);
            continue;
        }
        let error = value_text(&a["error"]);
        let last_response = match a["response_status"].as_u64() {
            Some(code) if error.is_empty() => format!("HTTP {code}"),
            Some(code) => format!("HTTP {code}: {error}"),
            None if error.is_empty() => "—".to_owned(),
            None => error,
        };
        out.push(Delivery {
            id,
            event_type: value_text(&a["event_type"]),
            event_id: value_text(&a["event_id"]),
            status: value_text(&a["status"]),
            attempts: number,
            last_response,
            at: value_text(&a["created_at"]),
            next_attempt_at: value_text(&a["next_attempt_at"]),
        });
    }
    out
}

/// `POST /settings/webhooks/{id}/enabled`: `enabled=true|false`, with the version shown.
async fn set_enabled(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form }: Posted,
) -> Response {
    let enabled = form.text("enabled") == Some("true");
    let mut body = args! {"id" => id.as_str(), "enabled" => enabled};
    if let Some(version) = form.text("version") {
        body.insert("if_match".into(), version.into());
    }
    let back = |notice: &str| {
        if form.text("from") == Some("list") {
            to(&format!("/settings/webhooks?notice={notice}"))
        } else {
            to(&format!(
                "/settings/webhooks/{}?notice={notice}",
                encode(&id)
            ))
        }
    };
    match call(&state, &signed, "svc_update_webhook", body).await {
        Ok(_) => back(if enabled { "enabled" } else { "disabled" }),
        Err(problem) if problem.code == ErrorCode::VersionConflict => back("conflict"),
        Err(problem) => problem_page(&signed, &problem),
    }
}

/// `POST /settings/webhooks/{id}/delete`.
async fn delete(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(&state, &signed, "svc_delete_webhook", args! {"id" => id}).await {
        Ok(_) => to("/settings/webhooks?notice=deleted"),
        Err(problem) => problem_page(&signed, &problem),
    }
}

/// `POST /settings/webhooks/{id}/roll-secret`: answers the webhook's page with the new secret.
async fn roll_secret(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(
        &state,
        &signed,
        "svc_roll_webhook_secret",
        args! {"id" => id},
    )
    .await
    {
        Ok(hook) => {
            let secret = hook["secret"].as_str().unwrap_or_default().to_owned();
            render_one(&state, &signed, &hook, Some(secret), None, 200).await
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}

/// `POST /settings/webhooks/{id}/deliveries/{dlv_id}/retry`.
async fn retry(
    AxumState(state): AxumState<State>,
    Path((id, dlv_id)): Path<(String, String)>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    let result: Result<Value, Problem> = call(
        &state,
        &signed,
        "svc_retry_webhook_delivery",
        args! {"id" => id.as_str(), "dlv_id" => dlv_id},
    )
    .await;
    match result {
        Ok(_) => to(&format!(
            "/settings/webhooks/{}?notice=retried",
            encode(&id)
        )),
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn attempts_are_grouped_into_deliveries() {
        let attempts = json!({"data": [
            {"delivery_id": "dlv_2", "event_type": "contact.created", "event_id": "evt_2",
             "attempt": 1, "status": "retrying", "response_status": 500, "error": null,
             "created_at": "t3", "next_attempt_at": "t9"},
            {"delivery_id": "dlv_1", "event_type": "deal.created", "event_id": "evt_1",
             "attempt": 6, "status": "dead_lettered", "response_status": null,
             "error": "connection refused", "created_at": "t2"},
            {"delivery_id": "dlv_1", "event_type": "deal.created", "event_id": "evt_1",
             "attempt": 5, "status": "retrying", "response_status": null,
             "error": "connection refused", "created_at": "t1"},
        ]});
        let d = deliveries(&attempts);
        assert_eq!(d.len(), 2);
        assert_eq!(
            (d[0].id.as_str(), d[0].attempts, d[0].last_response.as_str()),
            ("dlv_2", 1, "HTTP 500")
        );
        assert!(!d[0].retryable());
        assert_eq!(
            (
                d[1].status.as_str(),
                d[1].attempts,
                d[1].last_response.as_str()
            ),
            ("dead_lettered", 6, "connection refused")
        );
        assert!(d[1].retryable());
        assert!(deliveries(&Value::Null).is_empty());
    }

    #[test]
    fn every_event_type_is_offered_with_the_sent_ones_checked() {
        let c = choices(&["contact.created".to_owned()]);
        assert_eq!(c.len(), EventType::ALL.len() + 1);
        assert_eq!(c[0].value, "*");
        assert!(c
            .iter()
            .all(|e| e.checked == (e.value == "contact.created")));
    }
}
