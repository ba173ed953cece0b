//! Signing in and out: the login form, one-time sign-in links (set a password), sign-out and
//! the mode switch. Before sign-in the forms' CSRF token is a pre-session cookie's value (the
//! double-submit pattern): a page elsewhere can neither read the cookie nor set it.

use askama::Template;
use axum::{
    extract::{FromRequest, Path, Request, State as AxumState},
    http::{header, request::Parts, HeaderMap},
    response::{IntoResponse, Redirect, Response},
};
use crm_api::{ErrorCode, Problem};
use crm_app::sessions::{constant_time_eq, NewSession};
use crm_domain::Mode;

use crate::{
    form::Form,
    reply::{bare_problem_page, page, problem_page},
    session::{
        cleared_session_cookie, client_address, cookie, cookie_name, csrf_refused, session_cookie,
        set_cookie, Posted, PRE_SESSION_COOKIE,
    },
    State,
};

/// A pre-session cookie lives as long as a login form may stay open.
const PRE_SESSION_MAX_AGE_SECS: i64 = 60 * 60;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage<'a> {
    csrf: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "set_password.html")]
struct SetPasswordPage<'a> {
    csrf: &'a str,
    token: &'a str,
    name: &'a str,
    email: &'a str,
    error: Option<&'a str>,
}

/// The pre-session token: the request's cookie, or a new one; set again either way, so that a
/// form shown is good for its whole hour.
fn pre_session(state: &State, headers: &HeaderMap) -> (String, Option<String>) {
    let token = cookie(
        headers,
        cookie_name(PRE_SESSION_COOKIE, state.secure_cookies),
    )
    .filter(|v| v.len() >= 32)
    .map_or_else(crm_app::auth::generate_token, str::to_owned);
    (token.clone(), Some(token))
}

/// A page, with the pre-session cookie set when it is new.
fn with_pre_session(state: &State, res: Response, new_token: Option<String>) -> Response {
    let mut res = res;
    if let Some(token) = new_token {
        let value = set_cookie(
            PRE_SESSION_COOKIE,
            &token,
            PRE_SESSION_MAX_AGE_SECS,
            state.secure_cookies,
        );
        if let Ok(v) = value.parse() {
            res.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    res
}

/// Whether the form carries the pre-session cookie's token.
fn pre_session_matches(state: &State, headers: &HeaderMap, form: &Form) -> bool {
    let name = cookie_name(PRE_SESSION_COOKIE, state.secure_cookies);
    match (cookie(headers, name), form.get("csrf")) {
        (Some(c), Some(f)) => c.len() >= 32 && constant_time_eq(c.as_bytes(), f.as_bytes()),
        _ => false,
    }
}

/// `GET /login`.
pub async fn form(AxumState(state): AxumState<State>, headers: HeaderMap) -> Response {
    let (csrf, new) = pre_session(&state, &headers);
    let body = page(
        200,
        &LoginPage {
            csrf: &csrf,
            email: "",
            error: None,
        },
    );
    with_pre_session(&state, body, new)
}

/// Splits a request into its head (cookies, the client's address) and its form.
async fn head_and_form(req: Request) -> Result<(Parts, Form), Response> {
    let (parts, body) = req.into_parts();
    let form = Form::from_request(Request::from_parts(parts.clone(), body), &()).await?;
    Ok((parts, form))
}

/// `POST /login`: a session cookie and the board, or the form again saying why not.
pub async fn submit(AxumState(state): AxumState<State>, req: Request) -> Response {
    let (parts, form) = match head_and_form(req).await {
        Ok(split) => split,
        Err(res) => return res,
    };
    if !pre_session_matches(&state, &parts.headers, &form) {
        return csrf_refused();
    }
    let email = form.get("email").unwrap_or_default();
    let password = form.get("password").unwrap_or_default();
    let address = client_address(&parts, &state.trusted_proxies);
    match state.api.sign_in(email, password, &address).await {
        Ok(session) => signed_in(&state, &session),
        Err(problem) => {
            let (csrf, new) = pre_session(&state, &parts.headers);
            let message = refusal_message(&problem);
            let body = page(
                problem.status(),
                &LoginPage {
                    csrf: &csrf,
                    email,
                    error: Some(&message),
                },
            );
            with_pre_session(&state, body, new)
        }
    }
}

fn refusal_message(problem: &Problem) -> String {
    match problem.code {
        ErrorCode::Unauthorized => "Wrong email or password.".to_owned(),
        ErrorCode::RateLimited => {
            "Too many failed sign-ins. Wait a minute, then try again.".to_owned()
        }
        _ => problem.detail.clone(),
    }
}

/// The board, with the new session's cookie (a new id at every sign-in: a session id an
/// attacker planted before it is worth nothing after).
fn signed_in(state: &State, session: &NewSession) -> Response {
    let mut res = Redirect::to("/").into_response();
    if let Ok(v) = session_cookie(&session.id, state.secure_cookies).parse() {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res
}

/// `POST /logout`: the session ends on the server, and its cookie is cleared.
pub async fn sign_out(
    AxumState(state): AxumState<State>,
    Posted { signed, form: _ }: Posted,
) -> Response {
    if let Err(problem) = state.api.sign_out(&signed.session).await {
        return problem_page(&signed, &problem);
    }
    let mut res = Redirect::to("/login").into_response();
    if let Ok(v) = cleared_session_cookie(state.secure_cookies).parse() {
        res.headers_mut().append(header::SET_COOKIE, v);
    }
    res
}

/// `POST /mode`: the session switches between test and live.
pub async fn switch_mode(
    AxumState(state): AxumState<State>,
    Posted { signed, form }: Posted,
) -> Response {
    let Some(mode) = form.get("mode").and_then(Mode::parse) else {
        return crate::pages::error_page(422, "Unknown mode", "The mode is test or live.");
    };
    if let Err(problem) = state.api.switch_mode(&signed.session, mode).await {
        return problem_page(&signed, &problem);
    }
    Redirect::to("/").into_response()
}

/// `GET /sign-in/{token}`: the set-password form of a working link. Showing it uses nothing up.
pub async fn link_form(
    AxumState(state): AxumState<State>,
    Path(token): Path<String>,
    headers: HeaderMap,
) -> Response {
    let user = match state.api.sign_in_link_user(&token).await {
        Ok(user) => user,
        Err(problem) => return bare_problem_page(&problem),
    };
    let (csrf, new) = pre_session(&state, &headers);
    let body = page(
        200,
        &SetPasswordPage {
            csrf: &csrf,
            token: &token,
            name: &user.name,
            email: user.email.as_str(),
            error: None,
        },
    );
    with_pre_session(&state, body, new)
}

/// `POST /sign-in/{token}`: uses the link once, sets the password and signs in.
pub async fn link_submit(
    AxumState(state): AxumState<State>,
    Path(token): Path<String>,
    req: Request,
) -> Response {
    let (parts, form) = match head_and_form(req).await {
        Ok(split) => split,
        Err(res) => return res,
    };
    if !pre_session_matches(&state, &parts.headers, &form) {
        return csrf_refused();
    }
    let password = form.get("password").unwrap_or_default();
    if form.get("confirm") != Some(password) {
        return link_form_again(&state, &parts, &token, "The two passwords differ.").await;
    }
    match state.api.set_password_with_link(&token, password).await {
        Ok(session) => signed_in(&state, &session),
        Err(problem) if problem.code == ErrorCode::ValidationFailed => {
            link_form_again(&state, &parts, &token, &problem.detail).await
        }
        Err(problem) => bare_problem_page(&problem),
    }
}

async fn link_form_again(state: &State, parts: &Parts, token: &str, error: &str) -> Response {
    let user = match state.api.sign_in_link_user(token).await {
        Ok(user) => user,
        Err(problem) => return bare_problem_page(&problem),
    };
    let (csrf, new) = pre_session(state, &parts.headers);
    let body = page(
        422,
        &SetPasswordPage {
            csrf: &csrf,
            token,
            name: &user.name,
            email: user.email.as_str(),
            error: Some(error),
        },
    );
    with_pre_session(state, body, new)
}
