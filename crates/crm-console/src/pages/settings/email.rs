//! Settings: the email connection, the provider this mode's email is sent through
//! (`svc_list_connections`, `svc_create_connection`, `svc_delete_connection`). The page shows
//! the connection that sends (the newest) and any older ones, never a provider key: the API
//! shows only its last four characters, and the form's key is a password input that is never
//! filled back. Saving creates a new connection and then deletes the older ones (connections
//! have no update); Remove deletes one.

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_app::Scope;
use crm_domain::mail::Provider;
use serde_json::Value;

use crate::{
    args,
    chrome::Chrome,
    form::Form,
    ops::call,
    pages::fields::value_text,
    reply::{form_refusal, page, problem_page},
    session::{Posted, Signed},
    State,
};

pub struct Connection {
    pub id: String,
    pub provider: String,
    pub from: String,
    pub base_url: String,
    pub key_last4: String,
    pub created_at: String,
}

impl Connection {
    fn of(c: &Value) -> Connection {
        Connection {
            id: value_text(&c["id"]),
            provider: value_text(&c["provider"]),
            from: value_text(&c["from"]),
            base_url: value_text(&c["base_url"]),
            key_last4: value_text(&c["api_key_last4"]),
            created_at: value_text(&c["created_at"]),
        }
    }
}

#[derive(Template)]
#[template(path = "settings/email.html")]
struct EmailPage {
    chrome: Chrome,
    /// The connection that sends: the newest.
    current: Option<Connection>,
    /// Older connections of this mode, which no longer send.
    older: Vec<Connection>,
    can_write: bool,
    providers: Vec<&'static str>,
    /// What a refused save sent (never its key).
    provider: String,
    from: String,
    base_url: String,
    notice: Option<&'static str>,
    error: Option<String>,
}

pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route("/settings/email", get(show).post(save))
        .route("/settings/email/delete", post(remove))
}

fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "saved" => "Connection saved: this mode's email is sent through it.",
        "replaced" => "Connection replaced: the new one sends, the old one is deleted.",
        "removed" => "Connection removed.",
        _ => return None,
    })
}

fn back(notice: &str) -> Response {
    Redirect::to(&format!("/settings/email?notice={notice}")).into_response()
}

/// This mode's connections, newest first.
async fn connections(state: &State, signed: &Signed) -> Result<Vec<Connection>, Response> {
    let list = call(
        state,
        signed,
        "svc_list_connections",
        args! {"limit" => "100"},
    )
    .await
    .map_err(|problem| problem_page(signed, &problem))?;
    let mut all: Vec<Connection> = list["data"]
        .as_array()
        .map(|all| all.iter().map(Connection::of).collect())
        .unwrap_or_default();
    // Timestamps are RFC 3339 in UTC: their text sorts as their time.
    all.sort_by(|a, b| b.created_at.cmp(&a.created_at));
    Ok(all)
}

/// `GET /settings/email`.
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(query): RawQuery,
) -> Response {
    let query = Form::parse(query.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    render(&state, &signed, notice, &Form::default(), None).await
}

async fn render(
    state: &State,
    signed: &Signed,
    notice: Option<&'static str>,
    sent: &Form,
    error: Option<String>,
) -> Response {
    let mut all = match connections(state, signed).await {
        Ok(all) => all,
        Err(res) => return res,
    };
    let current = (!all.is_empty()).then(|| all.remove(0));
    let body = EmailPage {
        chrome: Chrome::new(signed, "settings"),
        current,
        older: all,
        can_write: signed.caller.scopes.allows(Scope::write("connections")),
        providers: Provider::ALL.iter().map(|p| p.as_str()).collect(),
        provider: sent.text("provider").unwrap_or_default().to_owned(),
        from: sent.text("from").unwrap_or_default().to_owned(),
        base_url: sent.text("base_url").unwrap_or_default().to_owned(),
        notice,
        error: error.clone(),
    };
    page(if error.is_some() { 422 } else { 200 }, &body)
}

/// `POST /settings/email`: a new connection; the older ones are deleted once it exists.
async fn save(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let before = match connections(&state, &signed).await {
        Ok(all) => all,
        Err(res) => return res,
    };
    let mut body = args! {
        "provider" => form.text("provider").unwrap_or_default(),
        "api_key" => form.text("api_key").unwrap_or_default(),
        "from" => form.text("from").unwrap_or_default(),
    };
    if let Some(base_url) = form.text("base_url") {
        body.insert("base_url".into(), base_url.into());
    }
    if let Err(problem) = call(&state, &signed, "svc_create_connection", body).await {
        return match form_refusal(&problem) {
            Some(error) => render(&state, &signed, None, &form, Some(error)).await,
            None => problem_page(&signed, &problem),
        };
    }
    for old in &before {
        let deleted = call(
            &state,
            &signed,
            "svc_delete_connection",
            args! {"id" => old.id.as_str()},
        )
        .await;
        match deleted {
            Ok(_) => {}
            // Already gone (someone removed it meanwhile) is what was wanted.
            Err(problem) if problem.status() == 404 => {}
            Err(problem) => return problem_page(&signed, &problem),
        }
    }
    back(if before.is_empty() {
        "saved"
    } else {
        "replaced"
    })
}

/// `POST /settings/email/delete`: the connection named by `connection`.
async fn remove(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let id = form.text("connection").unwrap_or_default();
    match call(&state, &signed, "svc_delete_connection", args! {"id" => id}).await {
        Ok(_) => back("removed"),
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_connection_shows_no_key() {
        let c = Connection::of(&json!({"id": "conn_1", "provider": "resend",
            "from": "a@example.com", "base_url": null, "api_key_last4": "1234",
            "created_at": "2026-01-01T00:00:00Z"}));
        assert_eq!(
            (c.provider.as_str(), c.key_last4.as_str()),
            ("resend", "1234")
        );
        assert_eq!(c.base_url, "");
    }
}
