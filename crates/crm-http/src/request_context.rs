//! What every HTTP request gets before routing: a request id (the caller's `Request-Id`, or a
//! new `req_<uuid v7>`), set on the request for the handlers and echoed on the response; a
//! `request` span that every log line of the request carries; and one log line per response.
//!
//! One hand-written service instead of tower-http's `SetRequestId`, `PropagateRequestId` and
//! `Trace` layers plus the outer `Router` they needed: those cost 8,500 of the 26,400 instructions
//! of a `GET /healthz` (callgrind; a bare axum hello-world is 12,200), docs/performance.md.

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
    time::{Duration, Instant},
};

use axum::{
    extract::Request,
    http::{HeaderValue, Method, Uri},
    response::Response,
};
use tower::Service;
use tracing::Span;

use crate::REQUEST_ID;

/// Requests slower than this are logged at `info` whatever their status.
const SLOW: Duration = Duration::from_secs(1);

/// Wraps the whole application (the router with every route).
#[derive(Clone)]
pub struct RequestContext<S> {
    inner: S,
}

impl<S> RequestContext<S> {
    pub fn new(inner: S) -> RequestContext<S> {
        RequestContext { inner }
    }
}

/// `req_` and a UUID v7 in lower-case hex: unique, and in time order in the logs.
fn new_request_id() -> HeaderValue {
    let mut buf = [0u8; 36];
    buf[..4].copy_from_slice(b"req_");
    uuid::Uuid::now_v7().simple().encode_lower(&mut buf[4..]);
    HeaderValue::from_bytes(&buf).expect("ASCII letters, digits and an underscore")
}

impl<S> Service<Request> for RequestContext<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = RequestFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        let id = match req.headers().get(&REQUEST_ID) {
            Some(id) => id.clone(),
            None => {
                let id = new_request_id();
                req.headers_mut().insert(REQUEST_ID.clone(), id.clone());
                id
            }
        };
        // One field: each costs a formatting pass per request in the log subscriber. Method and
        // path are on the response's line; headers (and so keys) never reach the logs. A `&str`,
        // not `%`: the server's text log copies a `&str` request id into the line as it is.
        let span = tracing::info_span!("request", request_id = id.to_str().unwrap_or_default());
        let route = Route { method: req.method().clone(), uri: req.uri().clone() };
        let inner = span.in_scope(|| self.inner.call(req));
        RequestFuture { inner, span, id: Some(id), route, start: Instant::now() }
    }
}

/// What the response's log line says the request was.
struct Route {
    method: Method,
    uri: Uri,
}

pin_project_lite::pin_project! {
    pub struct RequestFuture<F> {
        #[pin]
        inner: F,
        span: Span,
        id: Option<HeaderValue>,
        route: Route,
        start: Instant,
    }
}

impl<F> Future for RequestFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let _entered = this.span.enter();
        let Ok(mut res) = ready!(this.inner.poll(cx));
        log_response(&res, this.route, this.start.elapsed());
        if let Some(id) = this.id.take() {
            res.headers_mut().entry(&REQUEST_ID).or_insert(id);
        }
        Poll::Ready(Ok(res))
    }
}

/// One line per response, inside the request span (so with its request id): `warn` for a 5xx
/// (the problem document has the request id too), `info` for a slow one, else `debug`
/// (`CRM_LOG=info,crm_http=debug` turns the full access log on). A line per request at `info`
/// cost as much CPU as the rest of a cached request.
fn log_response(res: &Response, route: &Route, latency: Duration) {
    let status = res.status().as_u16();
    let latency_ms = latency.as_secs_f64() * 1e3;
    let (method, path) = (route.method.as_str(), route.uri.path());
    if status >= 500 {
        tracing::warn!(method, path, status, latency_ms, "response");
    } else if latency >= SLOW {
        tracing::info!(method, path, status, latency_ms, "slow response");
    } else {
        tracing::debug!(method, path, status, latency_ms, "response");
    }
}

#[cfg(test)]
mod tests {
    use axum::{body::Body, http::HeaderMap, routing::get, Router};
    use tower::ServiceExt;

    use super::*;

    /// A route that answers with the request id its handler saw.
    fn app() -> RequestContext<Router> {
        let seen = |headers: HeaderMap| async move { headers.get(&REQUEST_ID).map(|v| v.to_str().unwrap_or_default().to_owned()).unwrap_or_default() };
        RequestContext::new(Router::new().route("/", get(seen)))
    }

    async fn send(req: Request) -> (Option<String>, String) {
        let res = app().oneshot(req).await.unwrap();
        let header = res.headers().get(&REQUEST_ID).map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
        (header, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_new_id_reaches_the_handler_and_the_response() {
        let (header, seen) = send(Request::new(Body::empty())).await;
        let id = header.unwrap();
        assert!(id.starts_with("req_") && id.len() == 36 && id[4..].bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(seen, id);
        let (other, _) = send(Request::new(Body::empty())).await;
        assert_ne!(other.unwrap(), id);
    }

    #[tokio::test]
    async fn a_callers_id_is_kept() {
        let req = Request::builder().header("request-id", "upstream-7").body(Body::empty()).unwrap();
        let (header, seen) = send(req).await;
        assert_eq!(header.as_deref(), Some("upstream-7"));
        assert_eq!(seen, "upstream-7");
    }
}
