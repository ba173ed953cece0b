//! The hand-written rmcp `ServerHandler`: the tool list comes from the catalog at start, not from
//! rmcp's `#[tool]` macros, which need one Rust function per tool.

use std::{borrow::Cow, sync::Arc};

use crm_api::{agent, Api, Credentials, RateSlot};
use crm_app::{Caller, Channel, Origin};
use rmcp::{
    model::{
        CallToolRequestParams, CallToolResponse, ErrorData, Implementation, ListToolsResult,
        PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
    RoleServer, ServerHandler,
};

use crate::{
    repeated_keys::{Arguments, RepeatedKey},
    tools,
};

/// The revisions this endpoint negotiates (decisions §15).
pub static SUPPORTED_PROTOCOL_VERSIONS: [ProtocolVersion; 3] = [
    ProtocolVersion::V_2025_06_18,
    ProtocolVersion::V_2025_11_25,
    ProtocolVersion::V_2026_07_28,
];

const INSTRUCTIONS: &str = "Each tool runs one operation of this CRM's REST API (the tool name is the operation's \
OpenAPI operationId) with the API key of this connection, so its scopes, plan limits and usage apply. A tool's \
arguments are one flat object: the path parameters (`id`), the query parameters and the body fields of the \
operation, plus `idempotency_key` on creates (a retry with the same key and arguments returns the first result) \
and `if_match` on updates (the `version` you read; the update fails with version_conflict if it changed). \
Writes take `dry_run: true`: the whole write runs and is rolled back, and the result is {object: \"dry_run\", status, result, effects} (events, automations, enrollments, exits, webhooks, emails). \
Lists take `limit` (1 to 100, default 25) and `cursor` (the `next_cursor` of the previous page, while `has_more`; \
it works only with the filters it came from); `include_deleted: true` lists soft-deleted records too. Gets and lists \
of contacts, companies, deals and activities take `fields` (comma-separated members to return; `id` and `object` \
always come; `custom_fields.<key>` picks one custom field) and `expand` (related records to add whole beside their \
`_id`, e.g. a deal's `company,primary_contact`). Contacts, companies and deals have an `owner_id`, a user's \
`usr_` id (svc_list_users), which their lists filter on. \
Successful results carry the REST response body as structuredContent. A failed call returns isError with an \
RFC 9457 problem document as structuredContent: read its `code`, `detail`, `field`, `valid_options` and \
`suggestion` to fix the call. Custom fields must be registered (svc_create_field) before they are written.";

/// The MCP server: the API plus the tools generated from the catalog. Cheap to clone, as rmcp
/// asks for one per request.
#[derive(Clone)]
pub struct CrmMcp {
    api: Arc<Api>,
    tools: Arc<[Tool]>,
}

impl CrmMcp {
    pub fn new(api: Arc<Api>) -> CrmMcp {
        CrmMcp {
            api,
            tools: tools::tools().into(),
        }
    }
}

impl ServerHandler for CrmMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("crm", env!("CARGO_PKG_VERSION")).with_title("crm"),
            )
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(&SUPPORTED_PROTOCOL_VERSIONS)
    }

    /// The tools the connection's key may call (decisions §19), of the toolsets its URL names
    /// (`/mcp?toolsets=records,pipelines`; checked before rmcp reads the request).
    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        let Some(caller) = parts.and_then(|p| p.extensions.get::<Caller>()) else {
            tracing::error!("MCP tool list without an authenticated caller");
            return Err(ErrorData::internal_error(
                "the request was not authenticated",
                None,
            ));
        };
        let toolsets = parts
            .and_then(|p| tools::toolsets_of(&p.uri).ok())
            .unwrap_or_default();
        Ok(ListToolsResult::with_all_items(tools::visible(
            &self.tools,
            &caller.scopes,
            &toolsets,
        )))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let op = match agent::find_tool(&request.name) {
            Ok(op) => op,
            // MCP answers an unknown tool with a protocol error (-32602), not a tool result; its
            // data is the problem document, naming the valid tools.
            Err(problem) => {
                return Err(ErrorData::invalid_params(
                    problem.detail.clone(),
                    Some(self.api.problem_json(&problem)),
                ))
            }
        };
        let parts = context.extensions.get::<http::request::Parts>();
        // The /mcp route authenticates every request before rmcp reads it, so a caller is
        // always there; its absence would mean the route was mounted without that layer.
        let Some(caller) = parts.and_then(|p| p.extensions.get::<Caller>()).cloned() else {
            tracing::error!("MCP tool call without an authenticated caller");
            return Err(ErrorData::internal_error(
                "the request was not authenticated",
                None,
            ));
        };
        let request_id = parts
            .and_then(|p| p.headers.get("request-id"))
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let rate = parts
            .and_then(|p| p.extensions.get::<Arc<RateSlot>>())
            .cloned()
            .unwrap_or_default();
        let arguments = match parts.and_then(|p| p.extensions.get::<RepeatedKey>()) {
            Some(RepeatedKey(problem)) => Arguments::Refused(problem.clone()),
            None => Arguments::Read(agent::ToolArguments(request.arguments.unwrap_or_default())),
        };
        let answer = self
            .api
            .call(
                op,
                Credentials::Caller(&caller),
                Origin {
                    channel: Channel::Mcp,
                    request_id: (!request_id.is_empty()).then(|| Arc::from(request_id)),
                },
                arguments,
            )
            .await;
        rate.set(answer.rate);
        let outcome = answer
            .result
            .map(|reply| reply.body.into_value())
            .map_err(|p| agent::problem_document(&self.api, &p, request_id));
        Ok(tools::call_result(outcome).into())
    }
}
