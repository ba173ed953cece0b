//! The bearer key of every `/mcp` request, checked before rmcp sees the request.

use std::sync::Arc;

use axum::{
    body::Body,
    extract::{Request, State},
    http::{header, HeaderValue, StatusCode},
    middleware::Next,
    response::Response,
};
use crm_api::{Api, Problem, RateSlot};

use crate::repeated_keys;

/// Authenticates the key and hands the [`crm_app::Caller`] (and a [`RateSlot`]) on in the request's extensions, where
/// rmcp passes them to the tool handler (inside the request's `http::request::Parts`). A missing
/// or bad key is answered 401 with `WWW-Authenticate: Bearer` and a problem document, as REST
/// answers it (and an unreachable database 503 with `Retry-After`). A tool call hands the caller
/// to [`Api::call`], which does not look the key up again.
pub(crate) async fn require_key(State(api): State<Arc<Api>>, req: Request, next: Next) -> Response {
    // A header that is not text can never be a key; NUL makes it fail as malformed.
    let authorization = req
        .headers()
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}").to_owned());
    let request_id = req
        .headers()
        .get("request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    match api.authenticate(authorization.as_deref()).await {
        Ok(caller) => {
            if let Err(problem) = crate::tools::toolsets_of(req.uri()) {
                return refusal(&api, &problem, &request_id);
            }
            let mut req = match repeated_keys::mark(req).await {
                Ok(req) => req,
                Err(problem) => return refusal(&api, &problem, &request_id),
            };
            // The tool handler records the call's rate budget here (rmcp hands it a clone of the
            // request's extensions, so the Arc is shared), and the response carries it.
            let rate = Arc::new(RateSlot::default());
            req.extensions_mut().insert(caller);
            req.extensions_mut().insert(rate.clone());
            let mut res = next.run(req).await;
            if let Some(rate) = rate.get() {
                for (name, value) in crm_api::rate_limit_headers(&rate) {
                    res.headers_mut().insert(name, HeaderValue::from(value));
                }
            }
            res
        }
        Err(e) => refusal(&api, &e, &request_id),
    }
}

fn refusal(api: &Api, problem: &Problem, request_id: &str) -> Response {
    let body = serde_json::to_vec(&crm_api::agent::problem_document(api, problem, request_id))
        .unwrap_or_default();
    let mut res = Response::new(Body::from(body));
    *res.status_mut() =
        StatusCode::from_u16(problem.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if let Some((name, value)) = crm_api::agent::problem_headers(problem) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            res.headers_mut().insert(name, value);
        }
    }
    res
}
