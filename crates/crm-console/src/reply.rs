//! What a console response carries: HTML with the console's security headers, and a problem
//! from an operation rendered as an error page.

use askama::Template;
use axum::{
    http::{header, HeaderName, HeaderValue, StatusCode},
    response::{Html, IntoResponse, Response},
};
use crm_api::Problem;

use crate::{chrome::Chrome, pages::error_page, session::Signed};

/// Scripts and styles only from this server, no inline script, no framing (decisions §24).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
    base-uri 'none'; frame-ancestors 'none'";

/// The headers every console response carries.
fn secure(mut res: Response) -> Response {
    let headers = res.headers_mut();
    let set = |headers: &mut axum::http::HeaderMap, name: HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        header::CONTENT_SECURITY_POLICY,
        CONTENT_SECURITY_POLICY,
    );
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    // Sign-in links carry their token in the path: never send a page's address elsewhere.
    set(headers, header::REFERRER_POLICY, "no-referrer");
    if !headers.contains_key(header::CACHE_CONTROL) {
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    res
}

/// [`secure`] as the console router's layer.
pub async fn secured(res: Response) -> Response {
    secure(res)
}

/// A rendered template as a page with `status`.
pub fn page(status: u16, template: &impl Template) -> Response {
    match template.render() {
        Ok(html) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
            Html(html),
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "rendering a console page failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "rendering this page failed",
            )
                .into_response()
        }
    }
}

/// The error page of an operation's problem for a signed-in user: its status, title and detail
/// inside the console's header, which marks test mode, as on every other page.
pub fn problem_page(signed: &Signed, problem: &Problem) -> Response {
    page(
        problem.status(),
        &ProblemPage {
            chrome: Chrome::new(signed, ""),
            status: problem.status(),
            title: problem.code.title(),
            detail: detail(problem),
        },
    )
}

/// [`problem_page`] where no one is signed in (sign-in, a sign-in link): no header.
pub fn bare_problem_page(problem: &Problem) -> Response {
    error_page(problem.status(), problem.code.title(), &detail(problem))
}

/// The problem's detail, naming its field when it has one.
fn detail(problem: &Problem) -> String {
    match problem.extra.get("field").and_then(|f| f.as_str()) {
        Some(field) => format!("{} ({field})", problem.detail),
        None => problem.detail.clone(),
    }
}

#[derive(Template)]
#[template(path = "problem.html")]
struct ProblemPage<'a> {
    chrome: Chrome,
    status: u16,
    title: &'a str,
    detail: String,
}

/// What a form shows when an operation refuses what it sent (409, 422): the detail, naming the
/// field. `None` for any other problem, which gets its own page.
pub fn form_refusal(problem: &Problem) -> Option<String> {
    if !matches!(problem.status(), 409 | 422) {
        return None;
    }
    Some(detail(problem))
}
