//! Settings, your account: the signed-in user's name, email and role, and the form that changes
//! their own password given the current one. A new password ends every session of the user
//! (this browser's too): the answer carries the cookie of the new session it opens, which goes on
//! in the mode the old one was in.

use askama::Template;
use axum::{
    extract::{RawQuery, State as AxumState},
    http::header,
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use crm_api::{ErrorCode, Problem};
use crm_domain::Mode;

use crate::{
    chrome::Chrome,
    form::Form,
    reply::{page, problem_page},
    session::{session_cookie, Posted, Signed},
    State,
};

const PATH: &str = "/settings/account";

#[derive(Template)]
#[template(path = "settings/account.html")]
struct AccountPage {
    chrome: Chrome,
    name: String,
    email: String,
    role: &'static str,
    notice: Option<&'static str>,
    error: Option<String>,
}

/// The routes of the account section.
pub fn routes(router: Router<State>) -> Router<State> {
    router
        .route(PATH, get(show))
        .route(&format!("{PATH}/password"), post(change_password))
}

/// The notices a redirect back to this page may ask for.
fn notice_text(code: &str) -> Option<&'static str> {
    Some(match code {
        "password" => "Your password is changed. Your other sessions are signed out.",
        _ => return None,
    })
}

fn account_page(
    signed: &Signed,
    notice: Option<&'static str>,
    error: Option<String>,
) -> AccountPage {
    let user = &signed.session.user;
    AccountPage {
        chrome: Chrome::new(signed, "settings"),
        name: user.name.clone(),
        email: user.email.as_str().to_owned(),
        role: user.role.as_str(),
        notice,
        error,
    }
}

/// `GET /settings/account`.
async fn show(
    AxumState(_state): AxumState<State>,
    signed: Signed,
    RawQuery(q): RawQuery,
) -> Response {
    let query = Form::parse(q.unwrap_or_default().as_bytes());
    let notice = query.text("notice").and_then(notice_text);
    page(200, &account_page(&signed, notice, None))
}

/// A new session opens in live mode: the one that replaces a test-mode session goes on in test
/// mode. Failing that, it stays live (which the page's header shows).
async fn keep_mode(state: &State, signed: &Signed, new_id: &str) {
    if signed.session.mode == Mode::Live {
        return;
    }
    let switched = match state.api.console_session(new_id).await {
        Ok(Some(new)) => state.api.switch_mode(&new, signed.session.mode).await,
        Ok(None) => return,
        Err(problem) => Err(problem),
    };
    if let Err(problem) = switched {
        tracing::warn!(detail = %problem.detail, "the new session stays in live mode");
    }
}

/// What to say when the new password is refused.
fn refusal(problem: &Problem) -> Option<String> {
    match problem.code {
        ErrorCode::Unauthorized => Some("The current password is wrong.".to_owned()),
        ErrorCode::ValidationFailed => Some(format!("New password: {}", problem.detail)),
        _ => None,
    }
}

/// `POST /settings/account/password`: the new password, the new session's cookie, and this page
/// again saying so.
async fn change_password(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let current = form.get("current_password").unwrap_or_default();
    let new = form.get("new_password").unwrap_or_default();
    if form.get("confirm_password").unwrap_or_default() != new {
        let error = "The two new passwords differ.".to_owned();
        return page(422, &account_page(&signed, None, Some(error)));
    }
    match state
        .api
        .change_password(&signed.session, current, new)
        .await
    {
        Ok(session) => {
            keep_mode(&state, &signed, &session.id).await;
            let mut res = Redirect::to(&format!("{PATH}?notice=password")).into_response();
            if let Ok(v) = session_cookie(&session.id, state.secure_cookies).parse() {
                res.headers_mut().append(header::SET_COOKIE, v);
            }
            res
        }
        Err(problem) => match refusal(&problem) {
            Some(error) => page(problem.status(), &account_page(&signed, None, Some(error))),
            None => problem_page(&signed, &problem),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_which_password_is_wrong() {
        let wrong = Problem::new(ErrorCode::Unauthorized, "the current password is wrong");
        assert_eq!(
            refusal(&wrong).as_deref(),
            Some("The current password is wrong.")
        );
        let short = Problem::validation("password", "password must be at least 8 characters");
        assert_eq!(
            refusal(&short).as_deref(),
            Some("New password: password must be at least 8 characters")
        );
        assert!(refusal(&Problem::bad_request("x")).is_none());
        assert!(notice_text("password").is_some() && notice_text("other").is_none());
    }
}
