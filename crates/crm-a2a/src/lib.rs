//! The A2A transport: every operation of the catalog as a skill of one agent, over A2A's JSON-RPC
//! binding at `/a2a`, with its agent card at `/.well-known/agent-card.json` (decisions §15).
//!
//! A message whose data part is `{"tool": "<skill id>", "arguments": {...}}` runs that operation
//! through [`crm_api::Api::call`] with its arguments ([`crm_api::agent::ToolArguments`]), as an
//! MCP tool call does and as a REST request does with its own input. The answer is a finished task. This crate knows
//! A2A framing (a small hand-written JSON-RPC layer, checked against the official Python SDK) and
//! nothing of CRM rules, SQL or the other transports.

mod card;
pub mod rpc;
mod store;
pub mod task;

use std::sync::Arc;

use axum::{
    body::{Body, Bytes},
    extract::{Request, State},
    http::{header, HeaderValue, StatusCode},
    response::Response,
    routing::{get, post},
    Router,
};
use crm_api::{Api, Problem, RateSlot};

pub use card::{agent_card, BEARER_SCHEME, TOOL_CALL_EXTENSION};
pub use store::TaskStore;

/// The JSON-RPC endpoint.
pub const PATH: &str = "/a2a";
/// Where clients look for the agent card.
pub const CARD_PATH: &str = "/.well-known/agent-card.json";

/// Request bodies above this are refused (413), as on REST (decisions §5).
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What the endpoint holds: the API, the finished tasks, and the card rendered once.
pub struct Agent {
    pub api: Arc<Api>,
    pub tasks: TaskStore,
    card: Bytes,
}

/// The agent card route (no authentication) and the JSON-RPC route (bearer key required).
pub fn router(api: Arc<Api>) -> Router {
    let card = Bytes::from(serde_json::to_vec(&agent_card(api.public_url())).unwrap_or_default());
    let agent = Arc::new(Agent {
        api,
        tasks: TaskStore::new(store::MAX_TASKS, store::MAX_BYTES),
        card,
    });
    Router::new()
        .route(CARD_PATH, get(serve_card))
        .route(PATH, post(serve_rpc))
        .with_state(agent)
}

async fn serve_card(State(agent): State<Arc<Agent>>) -> Response {
    json_response(StatusCode::OK, "application/json", agent.card.clone())
}

/// Authenticates first: a missing or bad key is answered 401 with `WWW-Authenticate: Bearer`
/// (an unreachable database 503 with `Retry-After`) before the body is read, so no task exists
/// for it; a tool call hands the caller on to [`Api::call`]. Then one JSON-RPC request, always answered
/// 200 with a JSON-RPC response.
async fn serve_rpc(State(agent): State<Arc<Agent>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let request_id = parts
        .headers
        .get("request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    // A header that is not text can never be a key; NUL makes it fail as malformed.
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or("\u{0}"));
    let caller = match agent.api.authenticate(authorization).await {
        Ok(caller) => caller,
        Err(problem) => return problem_response(&agent.api, &problem, &request_id),
    };
    let bytes = match axum::body::to_bytes(body, MAX_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let over = crm_api::body::caused_by::<http_body_util::LengthLimitError>(&e);
            let p = crm_api::body::unreadable(&e, over, MAX_BODY_BYTES);
            return problem_response(&agent.api, &p, &request_id);
        }
    };
    let a2a_version = parts
        .headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok());
    let rate = RateSlot::default();
    let answer = rpc::handle(&agent, &caller, a2a_version, &bytes, &request_id, &rate).await;
    let mut res = json_response(
        StatusCode::OK,
        "application/json",
        Bytes::from(serde_json::to_vec(&answer).unwrap_or_default()),
    );
    if let Some(rate) = rate.get() {
        for (name, value) in crm_api::rate_limit_headers(&rate) {
            res.headers_mut().insert(name, HeaderValue::from(value));
        }
    }
    res
}

fn problem_response(api: &Api, problem: &Problem, request_id: &str) -> Response {
    let doc = crm_api::agent::problem_document(api, problem, request_id);
    let status =
        StatusCode::from_u16(problem.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = json_response(
        status,
        "application/problem+json",
        Bytes::from(serde_json::to_vec(&doc).unwrap_or_default()),
    );
    if let Some((name, value)) = crm_api::agent::problem_headers(problem) {
        if let Ok(value) = HeaderValue::from_str(&value) {
            res.headers_mut().insert(name, value);
        }
    }
    res
}

fn json_response(status: StatusCode, content_type: &'static str, body: Bytes) -> Response {
    let mut res = Response::new(Body::from(body));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}
