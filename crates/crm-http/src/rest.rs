//! The catalog's operations over REST under `/v1` (routed by [`crate::dispatch`], served here
//! through [`crm_api::Api::call`]), and the routes beside them that are not operations.

use std::{
    cell::RefCell,
    sync::{Arc, OnceLock},
};

use axum::{
    body::Body,
    extract::{Request, State},
    http::{header, request::Parts, HeaderMap, HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Router,
};
use bytes::Bytes;
use crm_api::{
    body::{caused_by, JsonBody},
    catalog::Alias,
    operation::BodyStream,
    Api, Credentials, ErrorCode, FileReply, Input, Operation, Problem, ReadRequest, Reply,
    ReplyBody,
};
use crm_app::imports::MAX_IMPORT_BYTES;
use crm_app::{Channel, Origin, RateStatus};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::{
    route::{PathParams, Target},
    with_request_id, REQUEST_ID,
};

/// Request bodies above this answer 413 `payload_too_large` (decisions §5).
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

const JSON: &str = "application/json";
const PROBLEM_JSON: &str = "application/problem+json";

static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
/// On a stored answer (success or 4xx) replayed for a repeated `Idempotency-Key` (decisions §9).
static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
static UPSERT_OUTCOME: HeaderName = HeaderName::from_static("upsert-outcome");
static DRY_RUN: HeaderName = HeaderName::from_static("dry-run");

pub(crate) fn routes() -> Router<Arc<Api>> {
    Router::new().route("/v1/openapi.json", axum::routing::get(openapi))
}

fn json_response(
    status: u16,
    content_type: &'static str,
    body: &Value,
    rate: Option<&RateStatus>,
) -> Response {
    bytes_response(
        status,
        content_type,
        Body::from(serde_json::to_vec(body).unwrap_or_default()),
        rate,
    )
}

fn bytes_response(
    status: u16,
    content_type: &'static str,
    body: Body,
    rate: Option<&RateStatus>,
) -> Response {
    let mut res = Response::new(body);
    *res.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    *res.headers_mut() = response_headers(content_type, rate);
    res
}

/// Renders a problem; 500s carry the request id (the one being served), which the log shows too.
/// `rate`: the caller's rate-limit status, when the limiter ran.
pub(crate) fn problem_response(
    api: &Api,
    problem: &Problem,
    rate: Option<&RateStatus>,
) -> Response {
    let mut doc = api.problem_json(problem);
    if problem.code == ErrorCode::InternalError {
        doc["request_id"] = Value::from(with_request_id(|id| id.unwrap_or_default().to_owned()));
    }
    let mut res = json_response(problem.status(), PROBLEM_JSON, &doc, rate);
    if problem.code == ErrorCode::Unauthorized {
        res.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    if problem.code == ErrorCode::RequestTimeout {
        // The rest of the stalled body would be read as the next request.
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if problem.code == ErrorCode::ServiceUnavailable {
        res.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(crm_api::problem::UNAVAILABLE_RETRY_AFTER_SECS),
        );
    }
    if problem.is_replayed() {
        res.headers_mut().insert(
            IDEMPOTENT_REPLAYED.clone(),
            HeaderValue::from_static("true"),
        );
    }
    res
}

fn reply_response(reply: Reply, rate: Option<&RateStatus>) -> Response {
    let mut res = match reply.body {
        ReplyBody::Owned(value) => json_response(reply.status, JSON, &value, rate),
        ReplyBody::Static(fixed) => bytes_response(
            reply.status,
            JSON,
            Body::from(Bytes::from_static(&fixed.json)),
            rate,
        ),
        ReplyBody::Serialized(json) => bytes_response(reply.status, JSON, Body::from(json), rate),
        ReplyBody::File(file) => file_response(reply.status, &file, rate),
    };
    if let Some(v) = reply.etag {
        if let Ok(h) = HeaderValue::from_str(&format!("\"{v}\"")) {
            res.headers_mut().insert(header::ETAG, h);
        }
    }
    if let Some(outcome) = reply.upsert_outcome {
        res.headers_mut()
            .insert(UPSERT_OUTCOME.clone(), HeaderValue::from_static(outcome));
    }
    if reply.dry_run {
        res.headers_mut()
            .insert(DRY_RUN.clone(), HeaderValue::from_static("true"));
    }
    if reply.replayed {
        res.headers_mut().insert(
            IDEMPOTENT_REPLAYED.clone(),
            HeaderValue::from_static("true"),
        );
    }
    res
}

/// A file answered as it is read (an export's), with the name to save it under. A piece that
/// fails to read ends the body there: the client sees a cut-off transfer, not a complete file.
fn file_response(status: u16, file: &FileReply, rate: Option<&RateStatus>) -> Response {
    // A reply is sent once, so its pieces are always there to take.
    let body = file
        .take_pieces()
        .map_or_else(Body::empty, Body::from_stream);
    let mut res = bytes_response(status, file.content_type, body, rate);
    let disposition = format!("attachment; filename=\"{}\"", file.filename);
    if let Ok(value) = HeaderValue::from_str(&disposition) {
        res.headers_mut().insert(header::CONTENT_DISPOSITION, value);
    }
    res
}

/// One operation's request, from [`crate::dispatch`]: run through [`Api::call`], answered with
/// the rate-limit headers.
pub(crate) async fn serve(
    api: Arc<Api>,
    target: Target,
    path: PathParams,
    req: Request,
) -> Response {
    let (parts, body) = req.into_parts();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let request = RestRequest {
        alias: target.alias,
        path,
        parts: &parts,
        body,
    };
    let answer = api
        .call(
            target.op,
            Credentials::Authorization(authorization),
            Origin {
                channel: Channel::Rest,
                request_id: with_request_id(|id| id.map(Arc::from)),
            },
            request,
        )
        .await;
    match answer.result {
        Ok(reply) => reply_response(reply, answer.rate.as_ref()),
        Err(problem) => problem_response(&api, &problem, answer.rate.as_ref()),
    }
}

/// A response's headers: `Content-Type`, and when the limiter ran, `RateLimit-Limit`,
/// `RateLimit-Remaining`, `RateLimit-Reset` (plain integers, decisions §17), plus `Retry-After`
/// on a 429 `rate_limited`.
///
/// The four usual headers are a per-thread template, cloned and then filled by position: each
/// `HeaderMap::insert` hashes the name and probes the table, 240 instructions apiece, a tenth
/// of what the stack itself costs on a cached request (callgrind, docs/performance-history.md); the
/// clone copies the map's two small arrays without hashing. The template also holds an empty
/// `Request-Id` for [`crate::RequestContext`] to fill in place: a clone has room for exactly its
/// own entries, and adding one more reallocated them on every response.
fn response_headers(content_type: &'static str, rate: Option<&RateStatus>) -> HeaderMap {
    thread_local! {
        static TEMPLATES: [HeaderMap; 2] = [rate_template(JSON), rate_template(PROBLEM_JSON)];
    }
    let template = match content_type {
        JSON => Some(0),
        PROBLEM_JSON => Some(1),
        _ => None,
    };
    let (Some(rate), Some(template)) = (rate, template) else {
        let mut headers = HeaderMap::with_capacity(5);
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        for (value, name) in rate.into_iter().flat_map(rate_values).zip(&RATE_HEADERS) {
            headers.insert(name.clone(), value);
        }
        return headers;
    };
    let mut headers = TEMPLATES.with(|templates| templates[template].clone());
    let mut values = rate_values(rate);
    // The template's order, checked where it is built: the content type, the three, the id.
    for (slot, value) in headers.values_mut().skip(1).take(3).zip(&mut values) {
        *slot = value;
    }
    if let Some(retry_after) = values.next() {
        headers.insert(RATE_HEADERS[3].clone(), retry_after);
    }
    headers
}

/// The values of `rate`'s headers, in [`RATE_HEADERS`]' order (`crm_api::rate_limit_headers`').
fn rate_values(rate: &RateStatus) -> impl Iterator<Item = HeaderValue> {
    crm_api::rate_limit_headers(rate)
        .zip(&RATE_HEADERS)
        .enumerate()
        .map(|(i, ((name, value), header))| {
            debug_assert_eq!(name, header.as_str());
            if i == 0 {
                limit_value(value)
            } else {
                integer_value(value)
            }
        })
}

/// `content_type` and the three rate-limit headers every admitted answer has, their values to
/// be filled in. Panics if the map would not iterate them in that order (it does: a map without
/// removals keeps its entries in insertion order), so a change there shows in every test.
fn rate_template(content_type: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::with_capacity(6);
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    for name in &RATE_HEADERS[..3] {
        headers.insert(name.clone(), HeaderValue::from_static("0"));
    }
    headers.insert(REQUEST_ID.clone(), HeaderValue::from_static(""));
    let order: Vec<&HeaderName> = headers.keys().collect();
    assert!(
        order[0] == header::CONTENT_TYPE
            && order[1..4] == [&RATE_HEADERS[0], &RATE_HEADERS[1], &RATE_HEADERS[2]]
            && order[4] == REQUEST_ID,
        "header map order changed: {order:?}"
    );
    headers
}

/// The rate-limit header names in `crm_api::rate_limit_headers`' order, parsed once:
/// `HeaderName::from_static` at run time validates its input, three times per request here.
static RATE_HEADERS: [HeaderName; 4] = [
    HeaderName::from_static("ratelimit-limit"),
    HeaderName::from_static("ratelimit-remaining"),
    HeaderName::from_static("ratelimit-reset"),
    header::RETRY_AFTER,
];

/// Integers below this are answered from a text of them all, made once (`RateLimit-Reset` is at
/// most 60; the free and pro plans' `RateLimit-Remaining` at most 1,200): `HeaderValue::from(u64)`
/// allocated twice per header, a fifth of the stack's own cost on a cached request, and a value
/// made once and cloned shares its reference count between the worker threads, whose cores then
/// pass its cache line back and forth on every request (docs/performance-history.md). A value of static
/// text has no count at all.
const SMALL_INTEGERS: u64 = 1_201;

fn integer_value(n: u64) -> HeaderValue {
    /// "012345678910…1200", and where each number ends in it.
    static DIGITS: OnceLock<(String, Vec<u16>)> = OnceLock::new();
    let Some(small) = usize::try_from(n).ok().filter(|_| n < SMALL_INTEGERS) else {
        return HeaderValue::from_bytes(itoa::Buffer::new().format(n).as_bytes()).expect("digits");
    };
    let (text, ends) = DIGITS.get_or_init(|| {
        let mut text = String::new();
        let ends = (0..SMALL_INTEGERS)
            .map(|i| {
                text.push_str(itoa::Buffer::new().format(i));
                u16::try_from(text.len()).expect("a short text")
            })
            .collect();
        (text, ends)
    });
    let start = if small == 0 {
        0
    } else {
        usize::from(ends[small - 1])
    };
    HeaderValue::from_static(&text[start..usize::from(ends[small])])
}

/// `RateLimit-Limit` is the same on nearly every response a thread writes (one plan's limit):
/// the last one is kept per thread, and cloning it only counts a reference.
fn limit_value(n: u64) -> HeaderValue {
    thread_local! {
        static LAST: RefCell<Option<(u64, HeaderValue)>> = const { RefCell::new(None) };
    }
    if n < SMALL_INTEGERS {
        return integer_value(n);
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        match &*last {
            Some((kept, value)) if *kept == n => value.clone(),
            _ => {
                let value = integer_value(n);
                *last = Some((n, value.clone()));
                value
            }
        }
    })
}

/// What [`Api::call`] reads of a request once it is admitted: the path parameters, the query,
/// the body (only for the operations that take one) and the `If-Match` and `Idempotency-Key`
/// headers.
struct RestRequest<'a> {
    alias: Option<&'static Alias>,
    path: PathParams,
    parts: &'a Parts,
    body: Body,
}

impl ReadRequest for RestRequest<'_> {
    async fn read(self, op: &'static Operation) -> Result<crm_api::Request, Problem> {
        let RestRequest {
            alias,
            path,
            parts,
            body,
        } = self;
        let path = path.map_err(|()| Problem::bad_request("malformed path parameter"))?;
        let query = form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes())
            .into_owned()
            .collect();
        let (body, stream) = if op.streams_body() {
            (None, Some(csv_stream(&parts.headers, body)?))
        } else if op.body.is_some() || alias.is_some() {
            let json =
                read_json(&parts.headers, body, || alias.is_none() && needs_body(op)).await?;
            (json, None)
        } else {
            (None, None)
        };
        // Read only for the operations that take them (the others ignore them): each lookup of a
        // header hashes its name.
        let header = |takes: bool, name: &HeaderName| {
            if takes {
                parts
                    .headers
                    .get(name)
                    .map(|v| v.to_str().map(str::to_owned))
            } else {
                None
            }
        };
        let if_match = header(op.if_match, &header::IF_MATCH)
            .transpose()
            .map_err(|_| Problem::bad_request("If-Match is not valid text"))?;
        let idempotency_key = header(op.idempotency_key, &IDEMPOTENCY_KEY)
            .transpose()
            .map_err(|_| Problem::bad_request("Idempotency-Key is not valid text"))?;
        Ok(crm_api::Request {
            input: Input {
                path,
                query,
                body,
                stream,
                if_match,
                idem: None,
                idempotency_key: None,
            },
            idempotency_key,
            alias,
        })
    }
}

/// Whether `op` must be sent a body: when its body has a required member, as its OpenAPI
/// `requestBody.required` says (the others, such as a restore or an update, read none as `{}`).
fn needs_body(op: &Operation) -> bool {
    op.body.is_some_and(|schema| {
        schema()
            .get("required")
            .and_then(Value::as_array)
            .is_some_and(|required| !required.is_empty())
    })
}

/// Reads at most [`MAX_BODY_BYTES`] and checks them as strict JSON (decisions §22, §24): a body
/// of another media type answers 415, one that stalls 408, one that is too large 413, one with
/// duplicate keys 400. An empty body is `None`, unless `required`: then 400. The bytes are kept:
/// the operation reads them straight into its input type ([`crm_api::body::parse`]).
async fn read_json(
    headers: &HeaderMap,
    body: Body,
    required: impl FnOnce() -> bool,
) -> Result<Option<JsonBody>, Problem> {
    let too_large = || {
        Problem::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body exceeds {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(too_large());
    }
    let bytes: Bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            let over = caused_by::<http_body_util::LengthLimitError>(&e);
            crm_api::body::unreadable(&e, over, MAX_BODY_BYTES)
        })?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        if required() {
            return Err(Problem::bad_request(
                "this operation needs a JSON object as its body",
            ));
        }
        return Ok(None);
    }
    if let Some(content_type) = headers.get(header::CONTENT_TYPE) {
        if !is_json(content_type) {
            return Err(Problem::new(
                ErrorCode::UnsupportedMediaType,
                format!(
                    "the body's Content-Type is {}; send application/json",
                    String::from_utf8_lossy(content_type.as_bytes())
                ),
            ));
        }
    }
    JsonBody::from_bytes(bytes.into())
        .map(Some)
        .map_err(|e| Problem::bad_request(format!("malformed JSON: {e}")))
}

/// The body of an operation that streams it (an import's CSV, decisions §20, §24): `text/csv`
/// (else 415), at most [`MAX_IMPORT_BYTES`] (else 413, at once when `Content-Length` says so,
/// else as soon as the bytes pass it), handed on piece by piece as it arrives.
fn csv_stream(headers: &HeaderMap, body: Body) -> Result<BodyStream, Problem> {
    csv_stream_within(headers, body, MAX_IMPORT_BYTES)
}

/// [`csv_stream`] with the limit `max` (the unit tests use a small one).
fn csv_stream_within(headers: &HeaderMap, body: Body, max: u64) -> Result<BodyStream, Problem> {
    let is_csv = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("text/csv"));
    if !is_csv {
        return Err(Problem::new(
            ErrorCode::UnsupportedMediaType,
            "send the file as text/csv",
        ));
    }
    let too_large = move || {
        Problem::new(
            ErrorCode::PayloadTooLarge,
            format!("the file exceeds {max} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max) {
        return Err(too_large());
    }
    Ok(BodyStream::unfold(
        (Some(body), 0u64),
        move |(body, read)| async move {
            let mut body = body?;
            loop {
                return match body.frame().await {
                    None => None,
                    Some(Err(e)) => Some((
                        Err(crm_api::body::unreadable(&e, false, max as usize)),
                        (None, read),
                    )),
                    Some(Ok(frame)) => {
                        let Ok(data) = frame.into_data() else {
                            continue; // trailers
                        };
                        let read = read + data.len() as u64;
                        if read > max {
                            Some((Err(too_large()), (None, read)))
                        } else {
                            Some((Ok(data.to_vec()), (Some(body), read)))
                        }
                    }
                };
            }
        },
    ))
}

/// `application/json` or any `<type>/<subtype>+json`, with any parameters (decisions §24).
fn is_json(content_type: &HeaderValue) -> bool {
    let Ok(text) = content_type.to_str() else {
        return false;
    };
    let essence = text.split(';').next().unwrap_or_default().trim();
    let Some((kind, subtype)) = essence.split_once('/') else {
        return false;
    };
    !kind.is_empty()
        && (subtype.eq_ignore_ascii_case("json") && kind.eq_ignore_ascii_case("application")
            || subtype.len() > 5 && subtype[subtype.len() - 5..].eq_ignore_ascii_case("+json"))
}

pub(crate) async fn openapi(State(api): State<Arc<Api>>) -> Response {
    let public_url = api.errors_base_url.trim_end_matches("/errors");
    json_response(200, JSON, &crm_api::openapi::document(public_url), None)
}

pub(crate) async fn readyz(State(api): State<Arc<Api>>) -> Response {
    match api.ready().await {
        Ok(()) => "ready".into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            (StatusCode::SERVICE_UNAVAILABLE, "database unreachable").into_response()
        }
    }
}

/// 405 `method_not_allowed` for a method an operation path does not serve, with its `Allow`.
pub(crate) fn method_not_allowed(api: &Api, req: &Request, allow: &str) -> Response {
    let mut res = problem_response(api, &not_allowed_problem(req), None);
    if let Ok(allow) = HeaderValue::from_str(allow) {
        res.headers_mut().insert(header::ALLOW, allow);
    }
    res
}

fn not_allowed_problem(req: &Request) -> Problem {
    Problem::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "{} {} is not served; the Allow header lists the methods that are",
            req.method(),
            req.uri().path()
        ),
    )
}

/// The routes beside the operations (health, errors, the OpenAPI document, MCP, A2A) for a
/// method they do not serve: axum adds their `Allow`.
pub(crate) async fn no_method(State(api): State<Arc<Api>>, req: Request) -> Response {
    problem_response(&api, &not_allowed_problem(&req), None)
}

/// Unknown paths answer a problem document too.
pub(crate) async fn no_route(State(api): State<Arc<Api>>, req: Request) -> Response {
    let detail = format!(
        "no operation {} {}; see /v1/openapi.json",
        req.method(),
        req.uri().path()
    );
    problem_response(&api, &Problem::new(ErrorCode::NotFound, detail), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(headers: &HeaderMap) -> Vec<(String, String)> {
        headers
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn integer_values_read_as_their_number() {
        for n in (0..SMALL_INTEGERS + 100).chain([u64::from(u32::MAX), u64::MAX]) {
            assert_eq!(integer_value(n).to_str().unwrap(), n.to_string());
            assert_eq!(limit_value(n).to_str().unwrap(), n.to_string());
        }
    }

    #[test]
    fn response_headers_carry_the_content_type_and_the_rate() {
        let allowed = RateStatus {
            allowed: true,
            limit: 1_000_000,
            remaining: 999_998,
            reset_secs: 7,
            retry_after_secs: 0,
        };
        let refused = RateStatus {
            allowed: false,
            limit: 120,
            remaining: 0,
            reset_secs: 31,
            retry_after_secs: 2,
        };
        // Twice each: the second answer on a thread comes from its template and cached values.
        for _ in 0..2 {
            assert_eq!(
                listed(&response_headers(JSON, Some(&allowed))),
                pairs(&[
                    ("content-type", JSON),
                    ("ratelimit-limit", "1000000"),
                    ("ratelimit-remaining", "999998"),
                    ("ratelimit-reset", "7"),
                    ("request-id", "")
                ])
            );
            assert_eq!(
                listed(&response_headers(PROBLEM_JSON, Some(&refused))),
                pairs(&[
                    ("content-type", PROBLEM_JSON),
                    ("ratelimit-limit", "120"),
                    ("ratelimit-remaining", "0"),
                    ("ratelimit-reset", "31"),
                    ("request-id", ""),
                    ("retry-after", "2")
                ])
            );
            assert_eq!(
                listed(&response_headers(PROBLEM_JSON, None)),
                pairs(&[("content-type", PROBLEM_JSON)])
            );
            assert_eq!(
                listed(&response_headers("text/plain", Some(&allowed))),
                pairs(&[
                    ("content-type", "text/plain"),
                    ("ratelimit-limit", "1000000"),
                    ("ratelimit-remaining", "999998"),
                    ("ratelimit-reset", "7")
                ])
            );
        }
    }

    fn csv_headers(length: Option<u64>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/csv"));
        if let Some(n) = length {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
        }
        headers
    }

    fn body_of(pieces: &'static [&'static str]) -> Body {
        Body::from_stream(futures::stream::iter(pieces.iter().map(|p| {
            Ok::<_, std::io::Error>(axum::body::Bytes::from_static(p.as_bytes()))
        })))
    }

    #[test]
    fn a_file_declared_over_the_limit_is_refused_from_its_head() {
        let refused = csv_stream_within(&csv_headers(Some(14)), body_of(&[]), 13).expect_err("413");
        assert_eq!(refused.code, ErrorCode::PayloadTooLarge);
        assert!(csv_stream_within(&csv_headers(Some(13)), body_of(&[]), 13).is_ok());
    }

    #[tokio::test]
    async fn a_file_without_a_length_is_refused_as_its_bytes_pass_the_limit() {
        use futures::StreamExt;
        let pieces = body_of(&["email\n", "a@b.io\n", "c@d.io\n"]);
        let mut stream = csv_stream_within(&csv_headers(None), pieces, 13)
            .unwrap()
            .into_stream();
        assert_eq!(stream.next().await.unwrap().unwrap(), b"email\n");
        assert_eq!(stream.next().await.unwrap().unwrap(), b"a@b.io\n");
        let refused = stream.next().await.unwrap().expect_err("413");
        assert_eq!(refused.code, ErrorCode::PayloadTooLarge);
        assert!(stream.next().await.is_none(), "nothing after the refusal");
    }
}
