//! Settings, users: the people who sign in to the workspace's console, their roles, and the
//! one-time sign-in links that set a password (decisions §21, §24). `users:read` shows the list,
//! `users:write` creates, changes roles, deletes and issues links. A new link is shown once, in
//! the answer to the POST that made it: it is never stored, nor put in an address.

use askama::Template;
use axum::{
    extract::{Path, RawQuery, State as AxumState},
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_api::Problem;
use crm_app::Scope;
use serde_json::Value;

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

const PATH: &str = "/settings/users";
/// Users per page.
const PAGE_SIZE: &str = "100";
/// The roles a user may have, as the API names them.
const ROLES: [&str; 3] = ["admin", "member", "viewer"];

pub struct UserRow {
    pub id: String,
    pub name: String,
    pub email: String,
    pub role: String,
    pub created: String,
    pub last_login: String,
    /// The signed-in user's own row.
    pub you: bool,
}

/// A one-time sign-in link just made: shown on this page only.
pub struct NewLink {
    /// `created` (a new user) or `issued` (a new link of a user).
    pub why: &'static str,
    pub name: String,
    pub email: String,
    pub url: String,
    pub expires: String,
}

/// The create form's values, kept when a create is refused.
#[derive(Default)]
pub struct Sent {
    pub email: String,
    pub name: String,
    pub role: String,
}

#[derive(Template)]
#[template(path = "settings/users.html")]
struct UsersPage {
    chrome: Chrome,
    users: Vec<UserRow>,
    next: Option<String>,
    can_write: bool,
    roles: &'static [&'static str],
    link: Option<NewLink>,
    sent: Sent,
    notice: Option<&'static str>,
    error: Option<String>,
}

/// The routes of the users section.
pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route(PATH, get(show).post(create))
        .route(&format!("{PATH}/{{id}}/role"), post(change_role))
        .route(&format!("{PATH}/{{id}}/delete"), post(delete))
        .route(&format!("{PATH}/{{id}}/sign-in-link"), post(new_link))
}

/// The notices a redirect back to this page may ask for.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "role" => "Role changed. That user's sessions ended: they sign in again with the new role.",
        "deleted" => "User deleted. Their sessions and sign-in links no longer work.",
        _ => return None,
    })
}

fn back(notice: &str) -> Response {
    Redirect::to(&format!("{PATH}?notice={notice}")).into_response()
}

/// A refusal shown on the page: the detail, naming the field.
fn refusal(problem: &Problem) -> String {
    match problem.extra.get("field").and_then(Value::as_str) {
        Some(field) => format!("{} ({field})", problem.detail),
        None => problem.detail.clone(),
    }
}

/// Whether the page shows `problem` in its `.error` (a refusal of what was sent) rather than as
/// an error page.
fn shown_in_page(problem: &Problem) -> bool {
    matches!(problem.status(), 403 | 409 | 422)
}

/// `2025-01-02T03:04:05.678Z` → `2025-01-02 03:04 UTC`; empty stays empty.
pub fn short_time(value: &Value) -> String {
    let text = value_text(value);
    match text.get(..16) {
        Some(minute) if text.len() > 16 => format!("{} UTC", minute.replacen('T', " ", 1)),
        _ => text,
    }
}

/// A user from the API as a row.
fn row(signed: &Signed, user: &Value) -> UserRow {
    let id = value_text(&user["id"]);
    UserRow {
        you: id == signed.session.user.id.as_str(),
        id,
        name: value_text(&user["name"]),
        email: value_text(&user["email"]),
        role: value_text(&user["role"]),
        created: short_time(&user["created_at"]),
        last_login: short_time(&user["last_login_at"]),
    }
}

/// What the page shows besides the list: a link just made, the create form's values, a notice
/// or an error.
pub struct Extras {
    pub link: Option<NewLink>,
    pub sent: Sent,
    pub notice: Option<&'static str>,
    pub error: Option<String>,
}

impl Default for Extras {
    fn default() -> Extras {
        Extras {
            link: None,
            sent: Sent {
                role: "member".into(),
                ..Sent::default()
            },
            notice: None,
            error: None,
        }
    }
}

/// The page with the list as the API has it now; `status` is the answer's.
async fn users_page(
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
    let list = match call(state, signed, "svc_list_users", list_args).await {
        Ok(list) => list,
        Err(problem) => return problem_page(signed, &problem),
    };
    let users = list["data"]
        .as_array()
        .map(|all| all.iter().map(|u| row(signed, u)).collect())
        .unwrap_or_default();
    let next = list["next_cursor"].as_str().map(|c| {
        let query: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("cursor", c)
            .finish();
        format!("{PATH}?{query}")
    });
    let body = UsersPage {
        chrome: Chrome::new(signed, "settings"),
        users,
        next,
        can_write: signed.caller.scopes.allows(Scope::write("users")),
        roles: &ROLES,
        link: extras.link,
        sent: extras.sent,
        notice: extras.notice,
        error: extras.error,
    };
    page(status, &body)
}

/// `GET /settings/users`.
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
    users_page(&state, &signed, 200, query.text("cursor"), extras).await
}

/// The link of a user the API answered with (`UserWithSignInLink`).
fn new_link_of(answer: &Value, why: &'static str) -> NewLink {
    NewLink {
        why,
        name: value_text(&answer["name"]),
        email: value_text(&answer["email"]),
        url: value_text(&answer["sign_in_link"]["url"]),
        expires: short_time(&answer["sign_in_link"]["expires_at"]),
    }
}

/// `POST /settings/users`: creates the user and shows its sign-in link, once.
async fn create(AxumState(state): AxumState<State>, Posted { signed, form }: Posted) -> Response {
    let text = |name: &str| form.text(name).unwrap_or_default().to_owned();
    let sent = Sent {
        email: text("email"),
        name: text("name"),
        role: text("role"),
    };
    let mut body = args! {};
    for (name, value) in [
        ("email", &sent.email),
        ("name", &sent.name),
        ("role", &sent.role),
    ] {
        if !value.is_empty() {
            body.insert(name.into(), value.as_str().into());
        }
    }
    match call(&state, &signed, "svc_create_user", body).await {
        Ok(created) => {
            let extras = Extras {
                link: Some(new_link_of(&created, "created")),
                ..Extras::default()
            };
            users_page(&state, &signed, 201, None, extras).await
        }
        Err(problem) if shown_in_page(&problem) => {
            let extras = Extras {
                sent,
                error: Some(refusal(&problem)),
                ..Extras::default()
            };
            users_page(&state, &signed, problem.status(), None, extras).await
        }
        Err(problem) => problem_page(&signed, &problem),
    }
}

/// A write of one user refused: the page again, saying why.
async fn refused(state: &State, signed: &Signed, problem: &Problem) -> Response {
    if !shown_in_page(problem) {
        return problem_page(signed, problem);
    }
    let extras = Extras {
        error: Some(refusal(problem)),
        ..Extras::default()
    };
    users_page(state, signed, problem.status(), None, extras).await
}

/// `POST /settings/users/{id}/role`.
async fn change_role(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form }: Posted,
) -> Response {
    let role = form.text("role").unwrap_or_default();
    match call(
        &state,
        &signed,
        "svc_update_user",
        args! {"id" => id, "role" => role},
    )
    .await
    {
        Ok(_) => back("role"),
        Err(problem) => refused(&state, &signed, &problem).await,
    }
}

/// `POST /settings/users/{id}/delete`.
async fn delete(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(&state, &signed, "svc_delete_user", args! {"id" => id}).await {
        Ok(_) => back("deleted"),
        Err(problem) => refused(&state, &signed, &problem).await,
    }
}

/// `POST /settings/users/{id}/sign-in-link`: a new link (older ones stop working), shown once.
async fn new_link(
    AxumState(state): AxumState<State>,
    Path(id): Path<String>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    match call(
        &state,
        &signed,
        "svc_create_sign_in_link",
        args! {"id" => id},
    )
    .await
    {
        Ok(answer) => {
            let extras = Extras {
                link: Some(new_link_of(&answer, "issued")),
                ..Extras::default()
            };
            users_page(&state, &signed, 201, None, extras).await
        }
        Err(problem) => refused(&state, &signed, &problem).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_api::ErrorCode;
    use serde_json::json;

    #[test]
    fn times_are_shown_to_the_minute() {
        assert_eq!(
            short_time(&json!("2025-01-02T03:04:05.678Z")),
            "2025-01-02 03:04 UTC"
        );
        assert_eq!(short_time(&Value::Null), "");
        assert_eq!(short_time(&json!("soon")), "soon");
    }

    #[test]
    fn a_link_is_read_from_the_answer() {
        let answer = json!({"id": "usr_1", "name": "Ann", "email": "a@x.test",
            "sign_in_link": {"url": "http://h/sign-in/t", "expires_at": "2025-01-02T03:04:05.678Z"}});
        let link = new_link_of(&answer, "created");
        assert_eq!(link.url, "http://h/sign-in/t");
        assert_eq!(
            (link.name.as_str(), link.email.as_str()),
            ("Ann", "a@x.test")
        );
        assert_eq!(new_link_of(&json!({}), "issued").url, "");
    }

    #[test]
    fn refusals_of_what_was_sent_stay_on_the_page() {
        let last_admin = Problem::new(ErrorCode::Conflict, "this is the workspace's last admin");
        assert!(shown_in_page(&last_admin));
        assert!(shown_in_page(&Problem::new(
            ErrorCode::Forbidden,
            "needs users:write"
        )));
        let invalid = Problem::validation("email", "email is not an email address");
        assert!(shown_in_page(&invalid));
        assert_eq!(refusal(&invalid), "email is not an email address (email)");
        assert!(!shown_in_page(&Problem::new(
            ErrorCode::NotFound,
            "no user"
        )));
        assert!(notice_text("role").is_some() && notice_text("x").is_none());
    }
}
