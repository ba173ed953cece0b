//! The REST transport: the operation catalog's routes (matched here, [`Dispatch`]), and an axum
//! router for the routes that are not operations (`/healthz`, `/readyz`, `/errors/<code>`,
//! `/v1/openapi.json`, and the MCP and A2A endpoints merged in).
//!
//! This crate is the only one that knows axum and HTTP framing: headers, status lines, body
//! limits, request ids. It holds no business rule: every operation goes through
//! [`crm_api::Api::call`], exactly as the MCP and A2A transports do.

mod dispatch;
mod errors_pages;
mod request_context;
mod rest;
mod route;
pub mod server;

use std::sync::Arc;

use axum::{http::HeaderName, routing::get, Router};
use crm_api::Api;

pub use dispatch::{Dispatch, DispatchFuture};
pub use request_context::{with_request_id, RequestContext};
pub use rest::MAX_BODY_BYTES;

pub(crate) static REQUEST_ID: HeaderName = HeaderName::from_static("request-id");

/// The whole HTTP application. `extra` is merged in (the MCP and A2A endpoints).
pub fn router(api: Arc<Api>, extra: Router) -> RequestContext<Dispatch> {
    let rest = rest::routes()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(rest::readyz))
        .route("/errors", get(errors_pages::index))
        .route("/errors/{code}", get(errors_pages::page))
        .fallback(rest::no_route)
        .method_not_allowed_fallback(rest::no_method)
        .with_state(api.clone())
        .merge(extra);
    // Around the whole application once, not with `Router::layer`, which wraps every route in
    // its own copy (each request then cloned a boxed service per layer).
    RequestContext::new(Dispatch::new(api, rest))
}
