//! Settings, API keys: the keys of the session's mode (test or live, as a key sees those of its
//! own), creating one with a name and scopes, and revoking one (decisions §7). A new key's secret
//! is shown once, in the answer to the POST that made it; no page shows it again. A key is
//! given only scopes the user holds, so only those are offered.

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_api::Problem;
use crm_app::{auth::SCOPE_RESOURCES, Scope};
use serde_json::Value;

use super::users::short_time;
use crate::{
    args,
    chrome::Chrome,
    form::Form,
    ops::call,
    pages::fields::value_text,
    reply::{page, problem_page},
    session::{Posted, Signed},
    State,
};

const PATH: &str = "/settings/keys";
/// Keys per page.
const PAGE_SIZE: &str = "100";
/// The scope that allows everything.
const ALL: &str = "*";

pub struct KeyRow {
    pub id: String,
    pub name: String,
    pub scopes: String,
    pub mode: String,
    pub created: String,
    pub last_used: String,
    pub revoked: String,
    /// A rolled key's end.
    pub expires: String,
}

/// A key just created, with its secret: shown on this page only.
pub struct NewKey {
    pub name: String,
    pub mode: String,
    pub scopes: String,
    pub secret: String,
}

/// One resource's two scopes in the create form: offered when the user holds them.
pub struct ScopeChoice {
    pub resource: &'static str,
    pub read: bool,
    pub write: bool,
    pub read_checked: bool,
    pub write_checked: bool,
}

#[derive(Template)]
#[template(path = "settings/keys.html")]
struct KeysPage {
    chrome: Chrome,
    mode: &'static str,
    keys: Vec<KeyRow>,
    next: Option<String>,
    can_write: bool,
    /// Whether `*` is offered (the user holds it), and chosen.
    offer_all: bool,
    all_checked: bool,
    choices: Vec<ScopeChoice>,
    name: String,
    new_key: Option<NewKey>,
    notice: Option<&'static str>,
    error: Option<String>,
}

/// What the page shows besides the list.
#[derive(Default)]
struct Extras {
    /// The create form's name and scopes, kept when a create is refused.
    name: String,
    scopes: Vec<String>,
    new_key: Option<NewKey>,
    notice: Option<&'static str>,
    error: Option<String>,
}

/// The routes of the keys section.
pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route(PATH, get(show).post(create))
        .route(&format!("{PATH}/{{id}}/revoke"), post(revoke))
}

/// The notices a redirect back to this page may ask for.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "revoked" => "Key revoked: from now on it is refused.",
        _ => return None,
    })
}

fn refusal(problem: &Problem) -> String {
    match problem.extra.get("field").and_then(Value::as_str) {
        Some(field) => format!("{} ({field})", problem.detail),
        None => problem.detail.clone(),
    }
}

fn shown_in_page(problem: &Problem) -> bool {
    matches!(problem.status(), 403 | 409 | 422)
}

/// The scopes the user may give a key, `chosen` ticked.
fn choices(signed: &Signed, chosen: &[String]) -> Vec<ScopeChoice> {
    let scopes = &signed.caller.scopes;
    let ticked = |s: String| chosen.contains(&s);
    SCOPE_RESOURCES
        .iter()
        .map(|r| ScopeChoice {
            resource: r,
            read: scopes.allows(Scope::read(r)),
            write: scopes.allows(Scope::write(r)),
            read_checked: ticked(format!("{r}:read")),
            write_checked: ticked(format!("{r}:write")),
        })
        .filter(|c| c.read || c.write)
        .collect()
}

fn key_row(key: &Value) -> KeyRow {
    KeyRow {
        id: value_text(&key["id"]),
        name: value_text(&key["name"]),
        scopes: value_text(&key["scopes"]),
        mode: value_text(&key["mode"]),
        created: short_time(&key["created_at"]),
        last_used: short_time(&key["last_used_at"]),
        revoked: short_time(&key["revoked_at"]),
        expires: short_time(&key["expires_at"]),
    }
}

/// The page with the keys as the API has them now; `status` is the answer's.
async fn keys_page(
    state: &State,
    signed: &Signed,
    status: u16,
    cursor: Option<&str>,
    extras: Extras,
) -> Response {
    let mut list_args = args! {"limit" => PAGE_SIZE};
    if let Some(cursor) = cursor {
        list_args.insert("cursor".into(), cursor.into());
    }
    let list = match call(state, signed, "svc_list_keys", list_args).await {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let keys = list["data"]
        .as_array()
        .map(|all| all.iter().map(key_row).collect())
        .unwrap_or_default();
    let next = list["next_cursor"].as_str().map(|c| {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("cursor", c)
            .finish();
        format!("{PATH}?{query}")
    });
    let body = KeysPage {
        chrome: Chrome::new(signed, "settings"),
        mode: signed.session.mode.as_str(),
        keys,
        next,
        can_write: signed.caller.scopes.allows(Scope::write("keys")),
        offer_all: signed.caller.scopes.0.iter().any(|s| s == ALL),
        all_checked: extras.scopes.iter().any(|s| s == ALL),
        choices: choices(signed, &extras.scopes),
        name: extras.name,
        new_key: extras.new_key,
        notice: extras.notice,
        error: extras.error,
    };
    page(status, &body)
}

/// `GET /settings/keys`.
async fn show(
    AxumState(state): AxumState<State>,
    signed: Signed,
    RawQuery(q): RawQuery,
) -> Response {
    let query = Form::parse(q.unwrap_or_default().as_bytes());
    let extras = Extras {
        notice: query.text("notice").and_then(notice_text),
        ..Extras::default()
    };
    keys_page(&state, &signed, 200, query.text("cursor"), extras).await
}

/// The scopes ticked in a submitted form, each once, in the order sent.
fn sent_scopes(form: &Form) -> Vec<String> {
    let mut scopes: Vec<String> = Vec::new();
    for (name, value) in &form.0 {
        let value = value.trim();
        if name == "scopes" && !value.is_empty() && !scopes.iter().any(|s| s == value) {
            scopes.push(value.to_owned());
        }
    }
    scopes
}

/// `POST /settings/keys`: creates the key and shows its secret, once.
async fn create(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let name = form.text("name").unwrap_or_default().to_owned();
    let scopes = sent_scopes(&form);
    let mut body = args! {"scopes" => scopes.clone()};
    if !name.is_empty() {
        body.insert("name".into(), name.as_str().into());
    }
    match call(&state, &signed, "svc_create_key", body).await {
        Ok(created) => {
            let new_key = NewKey {
                name: value_text(&created["name"]),
                mode: value_text(&created["mode"]),
                scopes: value_text(&created["scopes"]),
                secret: value_text(&created["secret"]),
            };
            let extras = Extras {
                new_key: Some(new_key),
                ..Extras::default()
            };
            keys_page(&state, &signed, 201, None, extras).await
        }
        Err(problem) if shown_in_page(&problem) => {
            let extras = Extras {
                name,
                scopes,
                error: Some(refusal(&problem)),
                ..Extras::default()
            };
            keys_page(&state, &signed, problem.status(), None, extras).await
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}

/// `POST /settings/keys/{id}/revoke`.
async fn revoke(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(&state, &signed, "svc_revoke_key", args! {"id" => id}).await {
        Ok(_) => Redirect::to(&format!("{PATH}?notice=revoked")).into_response(),
        Err(problem) if shown_in_page(&problem) => {
            let extras = Extras {
                error: Some(refusal(&problem)),
                ..Extras::default()
            };
            keys_page(&state, &signed, problem.status(), None, extras).await
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ticked_scopes_are_read_once_each() {
        let form = Form::parse(
            b"csrf=x&name=ci&scopes=contacts%3Aread&scopes=*&scopes=contacts%3Aread&scopes=+",
        );
        assert_eq!(sent_scopes(&form), ["contacts:read", "*"]);
        assert!(sent_scopes(&Form::parse(b"name=ci")).is_empty());
    }

    #[test]
    fn a_key_row_shows_what_the_api_answers() {
        let key = json!({"id": "key_1", "name": "ci", "mode": "live",
            "scopes": ["contacts:read", "deals:write"], "created_at": "2025-01-02T03:04:05.678Z",
            "last_used_at": null, "revoked_at": null, "expires_at": null});
        let row = key_row(&key);
        assert_eq!(row.scopes, "contacts:read, deals:write");
        assert_eq!(row.created, "2025-01-02 03:04 UTC");
        assert!(row.revoked.is_empty() && row.last_used.is_empty());
        assert!(key_row(&json!({})).id.is_empty());
        assert!(notice_text("revoked").is_some() && notice_text("x").is_none());
    }
}
