//! The console: pages for people, served by crm-server itself at `/` (decisions §21, §24).
//!
//! One more transport beside REST, MCP and A2A: every page reads and every form writes through
//! [`crm_api::Api::call`] with the signed-in user's [`crm_app::Caller`] and channel `console`, so
//! validation, events, automations, sequences, metering and history behave as they do for a key.
//! It never reads a store. Pages are rendered on the server by askama templates (checked at
//! compile time, escaped by default); a small script of our own adds drag and drop and keyboard
//! shortcuts to forms that work without it.
//!
//! Only these routes read the `crm_session` cookie, and they ignore `Authorization`. Every state
//! change is a POST carrying the session's CSRF token (before sign-in, the pre-session cookie's).

mod assets;
mod chrome;
mod form;
mod ops;
mod pages;
mod reply;
mod session;

use std::sync::Arc;

use axum::{
    routing::{get, post},
    Router,
};
use crm_api::Api;

/// The paths whose handlers need the client's address (sign-in throttling): the server puts it
/// in those requests' extensions as axum's `ConnectInfo`, and in no other request's.
pub const CLIENT_ADDRESS_PATHS: &[&str] = &["/login", "/sign-in/"];

/// What every console handler shares.
pub(crate) struct Console {
    pub api: Arc<Api>,
    /// Cookies are `Secure` when the public URL is https.
    pub secure_cookies: bool,
    /// Addresses of proxies whose `X-Forwarded-For` is believed (`CRM_TRUSTED_PROXIES`).
    pub trusted_proxies: Vec<std::net::IpAddr>,
}

pub(crate) type State = Arc<Console>;

/// The console's routes, to merge beside the API's.
pub fn router(api: Arc<Api>, trusted_proxies: Vec<std::net::IpAddr>) -> Router {
    let secure_cookies = api.public_url().starts_with("https://");
    let state = Arc::new(Console {
        api,
        secure_cookies,
        trusted_proxies,
    });
    let mut router = Router::new()
        .route("/assets/console.css", get(assets::css))
        .route("/assets/console.js", get(assets::js))
        .route("/login", get(pages::login::form).post(pages::login::submit))
        .route("/logout", post(pages::login::sign_out))
        .route(
            "/sign-in/{token}",
            get(pages::login::link_form).post(pages::login::link_submit),
        )
        .route("/mode", post(pages::login::switch_mode))
        .route("/", get(pages::board::show))
        .route("/board/move", post(pages::board::move_deal))
        .route("/search", get(pages::search::show));
    for kind in pages::Kind::ALL {
        router = pages::records::routes(router, kind);
    }
    let router = pages::settings::routes(router);
    // Every console answer carries the security headers, extractors' own refusals included.
    router
        .layer(axum::middleware::map_response(reply::secured))
        .with_state(state)
}
