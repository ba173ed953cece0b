//! The agent card (`/.well-known/agent-card.json`), generated from the catalog: one skill per
//! operation, `id` = the tool name.
//!
//! A2A 1.0's `AgentSkill` has no field for an input schema, so the arguments schema of every
//! skill travels in the card's one extension, [`TOOL_CALL_EXTENSION`], under
//! `params.inputSchemas.<skill id>`: a standard place clients that do not know the extension
//! ignore, rather than a member the specification does not have.

use crm_api::{catalog, Operation, SPEC_VERSION};
use serde_json::{json, Map, Value};

/// Identifies this agent's calling convention: a message data part `{"tool", "arguments"}`.
pub const TOOL_CALL_EXTENSION: &str = "urn:crm:a2a:tool-call:v1";

/// The name of the bearer scheme in `securitySchemes`.
pub const BEARER_SCHEME: &str = "bearer";

const DESCRIPTION: &str = "API-first CRM: contacts, companies, deals in pipelines, activities, custom fields, \
automations, sequences, webhooks, search and usage. Each skill is one operation of the REST API (the skill id \
is its OpenAPI operationId and its MCP tool name). Call one with a message holding a data part \
{\"tool\": \"<skill id>\", \"arguments\": {...}}; the arguments are the operation's path parameters, query \
parameters and body fields in one object (schemas in the tool-call extension), plus idempotency_key and \
if_match where a skill takes them, and dry_run (true: the write runs, is rolled back, and answers its \
would-be result and effects). Lists take limit and cursor (the previous page's next_cursor) and \
include_deleted; gets and lists of contacts, companies, deals and activities take fields (comma-separated members; \
id and object always come) and expand (related records added whole, e.g. a deal's company,primary_contact). Contacts, companies and deals have an \
owner_id, a user's usr_ id, which their lists filter on. The answer is a finished task: TASK_STATE_COMPLETED with the REST \
response body as an artifact data part, TASK_STATE_FAILED with an RFC 9457 problem document as a data part \
of status.message, or TASK_STATE_REJECTED for an unknown tool or a message that is no tool call. Send the \
API key as a bearer token.";

/// The card of a server reachable at `public_url`.
pub fn agent_card(public_url: &str) -> Value {
    let base = public_url.trim_end_matches('/');
    let rpc_url = format!("{base}{}", crate::PATH);
    let input_schemas: Map<String, Value> = catalog()
        .iter()
        .map(|op| (op.name.to_owned(), op.arguments_schema()))
        .collect();
    json!({
        "name": "crm",
        "description": DESCRIPTION,
        "supportedInterfaces": [
            {"url": rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ],
        "provider": {"organization": "crm", "url": base},
        "version": SPEC_VERSION,
        "documentationUrl": format!("{base}/v1/openapi.json"),
        "capabilities": {
            "streaming": false,
            "pushNotifications": false,
            "extendedAgentCard": false,
            "extensions": [{
                "uri": TOOL_CALL_EXTENSION,
                "description": "Skills are called with a message data part {\"tool\": \"<skill id>\", \"arguments\": {...}}. \
                    params.inputSchemas maps each skill id to the JSON Schema of its arguments.",
                "required": false,
                "params": {"inputSchemas": input_schemas},
            }],
        },
        "securitySchemes": {
            BEARER_SCHEME: {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "bearerFormat": "API key (svc_test_… or svc_live_…)",
                "description": "The workspace API key; its prefix selects test or live mode and its scopes what it may do.",
            }},
        },
        "securityRequirements": [{"schemes": {BEARER_SCHEME: {"list": []}}}],
        "defaultInputModes": ["application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": catalog().iter().map(skill).collect::<Vec<_>>(),
    })
}

fn skill(op: &Operation) -> Value {
    let verb = op.name.split('_').nth(1).unwrap_or_default();
    let mut tags = vec![op.scope.resource.to_owned(), verb.to_owned()];
    if op.hints.read_only {
        tags.push("read-only".into());
    }
    if op.hints.destructive {
        tags.push("destructive".into());
    }
    json!({
        "id": op.name,
        "name": op.summary,
        "description": op.description,
        "tags": tags,
        "examples": [example(op)],
        "inputModes": ["application/json"],
        "outputModes": ["application/json"],
    })
}

/// A data part calling `op` with its required arguments as placeholders.
fn example(op: &Operation) -> String {
    let schema = op.arguments_schema();
    let mut arguments = Map::new();
    for name in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        arguments.insert(name.to_owned(), Value::from(format!("<{name}>")));
    }
    json!({"tool": op.name, "arguments": arguments}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_skill_per_operation_with_its_input_schema() {
        let card = agent_card("https://crm.example.com/");
        let skills = card["skills"].as_array().unwrap();
        assert_eq!(skills.len(), catalog().len());
        let schemas = &card["capabilities"]["extensions"][0]["params"]["inputSchemas"];
        for (skill, op) in skills.iter().zip(catalog()) {
            assert_eq!(skill["id"], op.name);
            assert_eq!(skill["description"], op.description);
            assert_eq!(schemas[op.name], op.arguments_schema());
        }
    }

    #[test]
    fn the_card_points_at_the_json_rpc_endpoint_and_declares_bearer_auth() {
        let card = agent_card("https://crm.example.com/");
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            "https://crm.example.com/a2a"
        );
        assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
        assert_eq!(card["supportedInterfaces"][0]["protocolVersion"], "1.0");
        assert_eq!(
            card["securitySchemes"][BEARER_SCHEME]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
        assert!(card["securityRequirements"][0]["schemes"]
            .get(BEARER_SCHEME)
            .is_some());
    }

    #[test]
    fn examples_name_the_required_arguments() {
        let op = crm_api::catalog::find("svc_get_contact").unwrap();
        assert_eq!(
            example(op),
            r#"{"tool":"svc_get_contact","arguments":{"id":"<id>"}}"#
        );
    }
}
