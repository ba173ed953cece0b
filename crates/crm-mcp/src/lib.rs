//! The MCP transport: every operation of the catalog as an MCP tool, served over Streamable HTTP
//! at `/mcp` with the official Rust SDK (`rmcp`).
//!
//! The tool list is generated from [`crm_api::catalog`], so an operation added there is a tool
//! at once, under the same name, with the REST operation's arguments as its `inputSchema`. A
//! `tools/call` is split back into path, query and body by [`crm_api::agent`] and run through
//! [`crm_api::Api::call`], exactly as a REST request is: same scopes, limits, usage counting,
//! idempotency and `If-Match`. This crate knows MCP framing and nothing of CRM rules, SQL or the
//! REST transport.
//!
//! The endpoint is stateless (decisions §15): no MCP sessions are kept, every POST stands alone
//! and is answered with a JSON body, so any server process behind a load balancer can answer any
//! request. It negotiates the revisions 2025-06-18 and 2025-11-25 (`initialize`) and 2026-07-28
//! (per-request metadata, `server/discover`).

mod auth;
mod repeated_keys;
mod server;
pub mod tools;

use std::sync::Arc;

use axum::{middleware, Router};
use crm_api::Api;
use rmcp::transport::streamable_http_server::{
    session::never::NeverSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};

pub use server::{CrmMcp, SUPPORTED_PROTOCOL_VERSIONS};

/// Where the endpoint is served.
pub const PATH: &str = "/mcp";

/// Request bodies above this are refused (413), as on REST (decisions §5).
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The `/mcp` route. Every request must carry a valid bearer key: without one it is answered 401
/// with `WWW-Authenticate: Bearer` before any MCP handling.
pub fn router(api: Arc<Api>) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(allowed_hosts(api.public_url()))
        .with_max_request_body_bytes(MAX_BODY_BYTES);
    let server = CrmMcp::new(api.clone());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new()
        .route_service(PATH, service)
        .route_layer(middleware::from_fn_with_state(api, auth::require_key))
}

/// The `Host` headers the endpoint accepts: the host of the public URL (any port, since a proxy
/// may forward from another one) and the loopback names. rmcp accepts only loopback hosts by
/// default, which would refuse every client of a deployed server; DNS rebinding, which that
/// default guards against, cannot reach data here anyway, since every request needs a bearer key.
pub fn allowed_hosts(public_url: &str) -> Vec<String> {
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    if let Some(host) = public_url.parse::<http::Uri>().ok().and_then(|u| {
        u.host()
            .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
    }) {
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowed_hosts_follow_the_public_url() {
        assert!(allowed_hosts("https://crm.example.com").contains(&"crm.example.com".to_owned()));
        assert!(
            allowed_hosts("http://CRM.example.com:8443/").contains(&"crm.example.com".to_owned())
        );
        assert!(allowed_hosts("http://[2001:db8::1]:8080").contains(&"2001:db8::1".to_owned()));
        assert_eq!(allowed_hosts("http://127.0.0.1:8080").len(), 3);
        assert_eq!(allowed_hosts("not a url").len(), 3);
    }
}
