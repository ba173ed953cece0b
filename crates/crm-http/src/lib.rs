//! The REST transport: an axum router derived from the operation catalog, plus the routes that
//! are not operations (`/healthz`, `/readyz`, `/errors/<code>`, `/v1/openapi.json`).
//!
//! This crate is the only one that knows axum and HTTP framing: headers, status lines, body
//! limits, request ids. It holds no business rule: every operation goes through
//! [`crm_api::Api::call`], exactly as the MCP and A2A transports do.

mod errors_pages;
mod rest;

use std::{sync::Arc, time::Duration};

use axum::{
    http::{HeaderName, Request},
    routing::get,
    Router,
};
use crm_api::Api;
use tower::ServiceBuilder;
use tower_http::{
    request_id::{MakeRequestId, PropagateRequestIdLayer, RequestId, SetRequestIdLayer},
    trace::TraceLayer,
};

pub use rest::MAX_BODY_BYTES;

pub(crate) static REQUEST_ID: HeaderName = HeaderName::from_static("request-id");

#[derive(Clone, Copy)]
struct NewRequestId;

impl MakeRequestId for NewRequestId {
    fn make_request_id<B>(&mut self, _: &Request<B>) -> Option<RequestId> {
        let id = format!("req_{}", uuid::Uuid::now_v7().simple());
        id.parse().ok().map(RequestId::new)
    }
}

/// Requests slower than this are logged at `info` whatever their status.
const SLOW: Duration = Duration::from_secs(1);

/// One line per response: `warn` for a 5xx (its request id is in the span and the problem
/// document), `info` for a slow one, else `debug` (`CRM_LOG=info,crm_http=debug` turns the full
/// access log on). A line per request at `info` cost as much CPU as the rest of a cached request.
fn log_response(res: &axum::response::Response, latency: Duration, _span: &tracing::Span) {
    let status = res.status().as_u16();
    let latency_ms = latency.as_secs_f64() * 1e3;
    if status >= 500 {
        tracing::warn!(status, latency_ms, "response");
    } else if latency >= SLOW {
        tracing::info!(status, latency_ms, "slow response");
    } else {
        tracing::debug!(status, latency_ms, "response");
    }
}

/// The whole HTTP application. `extra` is merged in (the MCP and A2A endpoints).
pub fn router(api: Arc<Api>, extra: Router) -> Router {
    let request_span = |req: &Request<_>| {
        let id = req.headers().get(&REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
        // Method and path only: headers (and so keys) never reach the logs.
        tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path(), op = tracing::field::Empty)
    };
    let routes = rest::routes()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(rest::readyz))
        .route("/errors", get(errors_pages::index))
        .route("/errors/{code}", get(errors_pages::page))
        .fallback(rest::no_route)
        .method_not_allowed_fallback(rest::no_route)
        .with_state(api)
        .merge(extra);
    // Around the whole router once, not with `Router::layer`, which wraps every route in its
    // own copy of the stack: each request then cloned a boxed service per layer.
    let stack = ServiceBuilder::new()
        .layer(SetRequestIdLayer::new(REQUEST_ID.clone(), NewRequestId))
        .layer(PropagateRequestIdLayer::new(REQUEST_ID.clone()))
        .layer(TraceLayer::new_for_http().make_span_with(request_span).on_response(log_response))
        .service(routes);
    Router::new().fallback_service(stack)
}
