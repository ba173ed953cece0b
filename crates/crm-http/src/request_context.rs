//! What every HTTP request gets before routing: a request id (the caller's `Request-Id`, or a
//! new `req_<uuid v7>`), echoed on the response; the id as this thread's current request id while
//! the request is being polled, so that its handler ([`with_request_id`]) and every log line the
//! request writes see it; and one log line per response.
//!
//! One hand-written service instead of tower-http's `SetRequestId`, `PropagateRequestId` and
//! `Trace` layers plus the outer `Router` they needed: those cost 8,500 of the 26,400 instructions
//! of a `GET /healthz` (callgrind; a bare axum hello-world is 12,200), docs/performance-history.md. The id
//! is not a `tracing` span field either: opening, entering, leaving and closing a span in the log
//! subscriber cost about 2,000 instructions per request, for lines that are rarely written.

use std::{
    cell::{Cell, RefCell},
    convert::Infallible,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use axum::{
    extract::Request,
    http::{HeaderValue, Method, Uri},
    response::Response,
};
use tower::Service;

use crate::REQUEST_ID;

/// Requests slower than this are logged at `info` whatever their status.
const SLOW: Duration = Duration::from_secs(1);

thread_local! {
    /// The id of the request this thread is polling right now.
    static CURRENT: RefCell<Option<HeaderValue>> = const { RefCell::new(None) };
}

/// Calls `f` with the id of the request whose code is running on this thread, if any: what the
/// server's log format adds to each line. Work a request hands to another task or thread (a
/// spawned task, SQLite's connection thread) runs without it.
pub fn with_request_id<R>(f: impl FnOnce(Option<&str>) -> R) -> R {
    CURRENT.with(|current| match current.try_borrow() {
        Ok(id) => f(id.as_ref().and_then(|id| id.to_str().ok())),
        Err(_) => f(None),
    })
}

/// The id of the request being served on this thread, if any.
pub(crate) fn current_request_id() -> Option<HeaderValue> {
    CURRENT.with(|current| current.try_borrow().ok().and_then(|id| id.clone()))
}

/// The request's id made this thread's current one for as long as it lives (one poll).
struct Current<'a> {
    slot: &'a mut Option<HeaderValue>,
    previous: Option<HeaderValue>,
}

impl<'a> Current<'a> {
    fn enter(slot: &'a mut Option<HeaderValue>) -> Current<'a> {
        let previous = CURRENT.with(|current| current.replace(slot.take()));
        Current { slot, previous }
    }
}

impl Drop for Current<'_> {
    // Also on a panic inside the poll: the thread must not keep a finished request's id.
    fn drop(&mut self) {
        *self.slot = CURRENT.with(|current| current.replace(self.previous.take()));
    }
}

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

/// `req_` and a UUID v7 in lower-case hex: unique, and in time order (to the millisecond) in the
/// logs. Its 74 random bits come from a per-thread generator seeded once from the OS, not from
/// `Uuid::now_v7`, which locks a process-wide context and draws from a cryptographic generator
/// (800 instructions of a request's 20,000): an id must be unique, not unguessable.
pub(crate) fn new_request_id() -> HeaderValue {
    thread_local! {
        // Seeded from a v7 UUID's random half (the OS's randomness, once per thread).
        static STATE: Cell<u64> = Cell::new(u64::from_le_bytes(uuid::Uuid::now_v7().as_bytes()[8..].try_into().expect("8 bytes")));
    }
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let (a, b) = STATE.with(|state| (wyrand(state), wyrand(state)));
    let mut random = [0u8; 10];
    random[..8].copy_from_slice(&a.to_le_bytes());
    random[8..].copy_from_slice(&b.to_le_bytes()[..2]);
    let mut buf = [0u8; 36];
    buf[..4].copy_from_slice(b"req_");
    uuid::Builder::from_unix_timestamp_millis(millis, &random)
        .into_uuid()
        .simple()
        .encode_lower(&mut buf[4..]);
    HeaderValue::from_bytes(&buf).expect("ASCII letters, digits and an underscore")
}

/// wyrand: a 64-bit generator that passes BigCrush, one multiply a step.
fn wyrand(state: &Cell<u64>) -> u64 {
    let s = state.get().wrapping_add(0xa076_1d64_78bd_642f);
    state.set(s);
    let t = u128::from(s) * u128::from(s ^ 0xe703_7ed1_a0b4_28db);
    (t >> 64) as u64 ^ t as u64
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

    fn call(&mut self, req: Request) -> Self::Future {
        // Not added to the request's headers: the operations read it as the current id, and only
        // the routes that hand work to other tasks need it there (`Dispatch` adds it for those).
        let id = req
            .headers()
            .get(&REQUEST_ID)
            .cloned()
            .unwrap_or_else(new_request_id);
        // Method and path are on the response's line; headers (and so keys) never reach the logs.
        let route = Route {
            method: req.method().clone(),
            uri: req.uri().clone(),
        };
        let mut id = Some(id);
        let inner = {
            let _current = Current::enter(&mut id);
            self.inner.call(req)
        };
        RequestFuture {
            inner,
            id,
            route,
            start: Instant::now(),
        }
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
        // The request id; `None` only while a poll has lent it to `CURRENT`.
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
        let current = Current::enter(this.id);
        let Ok(mut res) = ready!(this.inner.poll(cx));
        log_response(&res, this.route, this.start.elapsed());
        drop(current);
        if let Some(id) = this.id.take() {
            let headers = res.headers_mut();
            match headers.get_mut(&REQUEST_ID) {
                // The operations' answers carry an empty slot for it (rest.rs): filled in place.
                Some(slot) if slot.is_empty() => *slot = id,
                Some(_) => {}
                None => {
                    headers.insert(REQUEST_ID.clone(), id);
                }
            }
        }
        Poll::Ready(Ok(res))
    }
}

/// One line per response (with its request id, as every line of the request): `warn` for a 5xx
/// (the problem document has the request id too), `info` for a slow one, else `debug`
/// (`CRM_LOG=info,crm_http=debug` turns the full access log on). A line per request at `info`
/// cost as much CPU as the rest of a cached request.
fn log_response(res: &Response, route: &Route, latency: Duration) {
    let status = res.status().as_u16();
    let latency_ms = latency.as_secs_f64() * 1e3;
    let (method, path) = (route.method.as_str(), loggable(route.uri.path()));
    if status >= 500 {
        tracing::warn!(method, path, status, latency_ms, "response");
    } else if latency >= SLOW {
        tracing::info!(method, path, status, latency_ms, "slow response");
    } else {
        tracing::debug!(method, path, status, latency_ms, "response");
    }
}

/// A path as the log may show it: a console sign-in link's token is a credential.
fn loggable(path: &str) -> &str {
    if path.starts_with(SIGN_IN_LINKS) {
        "/sign-in/[redacted]"
    } else {
        path
    }
}

/// The console's one-time sign-in links, whose last segment is the token.
const SIGN_IN_LINKS: &str = "/sign-in/";

#[cfg(test)]
mod tests {
    use axum::{body::Body, routing::get, Router};
    use tower::ServiceExt;

    use super::*;

    /// A route that answers with the request id its handler saw, and one with the id its code
    /// runs under (what log lines carry), read after an await.
    fn app() -> RequestContext<Router> {
        let seen = || async { with_request_id(|id| id.unwrap_or("none").to_owned()) };
        let current = || async {
            tokio::task::yield_now().await;
            with_request_id(|id| id.unwrap_or("none").to_owned())
        };
        RequestContext::new(
            Router::new()
                .route("/", get(seen))
                .route("/current", get(current)),
        )
    }

    async fn send(req: Request) -> (Option<String>, String) {
        let res = app().oneshot(req).await.unwrap();
        let header = res
            .headers()
            .get(&REQUEST_ID)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
        (header, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_new_id_reaches_the_handler_and_the_response() {
        let (header, seen) = send(Request::new(Body::empty())).await;
        let id = header.unwrap();
        assert!(
            id.starts_with("req_")
                && id.len() == 36
                && id[4..].bytes().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
        assert_eq!(seen, id);
        let (other, _) = send(Request::new(Body::empty())).await;
        assert_ne!(other.unwrap(), id);
    }

    #[tokio::test]
    async fn the_request_id_is_current_while_its_code_runs_and_only_then() {
        let req = Request::builder()
            .uri("/current")
            .header("request-id", "upstream-8")
            .body(Body::empty())
            .unwrap();
        let (header, current) = send(req).await;
        assert_eq!(header.as_deref(), Some("upstream-8"));
        assert_eq!(current, "upstream-8");
        assert_eq!(
            with_request_id(|id| id.map(str::to_owned)),
            None,
            "nothing is current once the response is out"
        );
        let (header, current) = send(
            Request::builder()
                .uri("/current")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
        assert_eq!(current, header.unwrap());
    }

    #[tokio::test]
    async fn a_callers_id_is_kept() {
        let req = Request::builder()
            .header("request-id", "upstream-7")
            .body(Body::empty())
            .unwrap();
        let (header, seen) = send(req).await;
        assert_eq!(header.as_deref(), Some("upstream-7"));
        assert_eq!(seen, "upstream-7");
    }

    #[test]
    fn new_ids_are_uuid_v7_in_time_order_and_distinct() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let ids: Vec<String> = (0..10_000)
            .map(|_| new_request_id().to_str().unwrap().to_owned())
            .collect();
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let mut seen = std::collections::HashSet::new();
        let mut last_millis = 0;
        for id in &ids {
            let uuid = uuid::Uuid::parse_str(&id[4..]).unwrap();
            assert_eq!(uuid.get_version_num(), 7, "{id}");
            assert_eq!(uuid.get_variant(), uuid::Variant::RFC4122, "{id}");
            let (secs, nanos) = uuid.get_timestamp().unwrap().to_unix();
            let millis = secs * 1000 + u64::from(nanos) / 1_000_000;
            assert!(
                (before..=after).contains(&millis) && millis >= last_millis,
                "{id}"
            );
            last_millis = millis;
            assert!(seen.insert(id.clone()), "{id} twice");
        }
        // Another thread draws from its own generator.
        let other = std::thread::spawn(|| new_request_id().to_str().unwrap().to_owned())
            .join()
            .unwrap();
        assert!(!seen.contains(&other));
    }

    #[test]
    fn sign_in_tokens_never_reach_the_log() {
        assert_eq!(super::loggable("/sign-in/abcDEF123"), "/sign-in/[redacted]");
        assert_eq!(super::loggable("/v1/contacts"), "/v1/contacts");
    }
}
