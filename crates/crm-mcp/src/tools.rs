//! The catalog as MCP tools, and an operation's outcome as a tool result.

use std::sync::Arc;

use crm_api::{catalog, Operation};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

/// One tool per catalog operation, in catalog order.
pub fn tools() -> Vec<Tool> {
    catalog().iter().map(tool).collect()
}

/// The tools of `all` (one per catalog operation, in catalog order) a key holding `scopes` may
/// call, of `toolsets` when any are named.
pub fn visible(all: &[Tool], scopes: &crm_app::Scopes, toolsets: &[&str]) -> Vec<Tool> {
    catalog()
        .iter()
        .zip(all)
        .filter(|(op, _)| {
            catalog::allowed(op, scopes)
                && (toolsets.is_empty() || toolsets.contains(&catalog::toolset_of(op)))
        })
        .map(|(_, tool)| tool.clone())
        .collect()
}

/// The toolsets the `toolsets` query parameter of an `/mcp` URL names (none: every tool), or the
/// problem to answer an unknown one with.
pub fn toolsets_of(uri: &http::Uri) -> Result<Vec<&'static str>, crm_api::Problem> {
    let Some(query) = uri.query() else {
        return Ok(Vec::new());
    };
    let params: Vec<(String, String)> = axum::extract::Query::try_from_uri(uri)
        .map(|axum::extract::Query(params)| params)
        .map_err(|_| crm_api::Problem::bad_request(format!("malformed query `{query}`")))?;
    match params.iter().find(|(name, _)| name == "toolsets") {
        Some((_, raw)) => catalog::parse_toolsets(raw),
        None => Ok(Vec::new()),
    }
}

/// The tool of `op`: its name, summary as title, description, the flat arguments schema as
/// `inputSchema`, the REST response body's schema as `outputSchema`, and the hints of
/// decisions §17 as annotations. Nothing a tool does reaches outside this service, so
/// `openWorldHint` is false.
pub fn tool(op: &Operation) -> Tool {
    let mut tool = Tool::new(
        op.name,
        op.description,
        Arc::new(object(op.arguments_schema()).unwrap_or_default()),
    );
    tool.title = Some(op.summary.to_owned());
    tool.output_schema = object_schema(output_schema(op)).map(Arc::new);
    tool.annotations = Some(
        ToolAnnotations::with_title(op.summary)
            .read_only(op.hints.read_only)
            .destructive(op.hints.destructive)
            .idempotent(op.hints.idempotent)
            .open_world(false),
    );
    tool
}

/// The schema of `op`'s result. Where the operation takes `fields`, a record may carry only some
/// of its members, so its schema requires only `id` and `object` (decisions §24), and a projected
/// result still conforms. Where it takes `dry_run`, the dry-run envelope is a branch of `anyOf`.
fn output_schema(op: &Operation) -> Value {
    let mut schema = (op.output)();
    if crm_api::view::is_shaped(op) {
        schema = crm_api::view::shaped_schema(schema);
    }
    if op.generic_dry_run() {
        // `dry_run: true` answers the envelope instead (decisions §24, "MCP tool definitions").
        let envelope = crm_api::operation::Output::of::<crm_api::bodies::DryRunBody>().inline();
        schema = serde_json::json!({"type": "object", "anyOf": [schema, envelope]});
    }
    schema
}

/// What a model is shown of `tools` (decisions §24): the JSON of each tool's name, description
/// and `inputSchema`, in bytes.
pub fn shown_bytes(tools: &[Tool]) -> usize {
    tools
        .iter()
        .map(|t| {
            serde_json::to_vec(&serde_json::json!({
                "name": t.name,
                "description": t.description,
                "inputSchema": t.input_schema,
            }))
            .map_or(0, |json| json.len())
        })
        .sum()
}

fn object(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// MCP requires an `outputSchema` to describe an object (`structuredContent` is one); an
/// operation whose body is not an object gets none rather than a schema clients would reject.
fn object_schema(schema: Value) -> Option<JsonObject> {
    object(schema).filter(|s| s.get("type").and_then(Value::as_str) == Some("object"))
}

/// The tool result of an operation's outcome: on success `structuredContent` is exactly the REST
/// response body and the text content the same JSON; on failure `isError` is set and both carry
/// the problem document.
pub fn call_result(outcome: Result<Value, Value>) -> CallToolResult {
    match outcome {
        Ok(body) => CallToolResult::structured(body),
        Err(problem) => {
            let mut result = CallToolResult::error(vec![ContentBlock::text(problem.to_string())]);
            result.structured_content = Some(problem);
            result
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_api::catalog::Hints;
    use serde_json::json;

    #[test]
    fn every_operation_is_a_tool_with_its_arguments_schema() {
        let tools = tools();
        assert_eq!(tools.len(), catalog().len());
        for (tool, op) in tools.iter().zip(catalog()) {
            assert_eq!(tool.name, op.name);
            assert_eq!(tool.description.as_deref(), Some(op.description));
            assert_eq!(
                Value::Object((*tool.input_schema).clone()),
                op.arguments_schema()
            );
        }
    }

    #[test]
    fn every_operation_answers_an_object_so_every_tool_has_an_output_schema() {
        for op in catalog() {
            let tool = tool(op);
            let schema = tool
                .output_schema
                .unwrap_or_else(|| panic!("{} has no object output schema", op.name));
            assert_eq!(Value::Object((*schema).clone()), output_schema(op));
        }
    }

    /// Decisions §24: at most 50,000 bytes for a `*` key once §18-21's operations exist. With
    /// every operation of §18-21 and §25 and §24's owners merged, the catalog measures 49,938
    /// bytes for 109 tools, with bounds, key shapes and closed objects left to the server's
    /// refusals and `owner_id` filters explained once in the instructions (tests/api/reading.rs
    /// holds the 50,000 line over HTTP).
    #[test]
    fn what_a_model_is_shown_fits_the_budget() {
        let all = tools();
        let bytes = shown_bytes(&all);
        let mut by_tool: Vec<(usize, &str)> = all
            .iter()
            .map(|t| (shown_bytes(std::slice::from_ref(t)), t.name.as_ref()))
            .collect();
        by_tool.sort();
        println!(
            "{bytes} bytes for {} tools; largest {:?}",
            all.len(),
            &by_tool[by_tool.len() - 10..]
        );
        assert!(bytes <= 50_000, "{bytes} bytes");
    }

    #[test]
    fn a_projected_record_needs_only_id_and_object() {
        for name in ["svc_get_deal", "svc_list_contacts"] {
            let tool = tool(crm_api::catalog::find(name).unwrap());
            let schema = Value::Object((*tool.output_schema.unwrap()).clone());
            let record = schema.pointer("/properties/data/items").unwrap_or(&schema);
            assert_eq!(
                record["required"],
                serde_json::json!(["id", "object"]),
                "{name}"
            );
        }
        let create = tool(crm_api::catalog::find("svc_create_deal").unwrap());
        let schema = create.output_schema.unwrap();
        assert!(schema["anyOf"][0]["required"].as_array().unwrap().len() > 2);
        assert_eq!(
            schema["anyOf"][1]["required"],
            serde_json::json!(["object", "status", "result", "effects"]),
            "a dry run's envelope is the other branch"
        );
    }

    #[test]
    fn annotations_carry_the_catalog_hints_and_a_closed_world() {
        for op in catalog() {
            let a = tool(op).annotations.unwrap_or_default();
            assert_eq!(
                (
                    a.read_only_hint,
                    a.destructive_hint,
                    a.idempotent_hint,
                    a.open_world_hint
                ),
                (
                    Some(op.hints.read_only),
                    Some(op.hints.destructive),
                    Some(op.hints.idempotent),
                    Some(false)
                ),
                "{}",
                op.name
            );
        }
        let list = tool(crm_api::catalog::find("svc_list_contacts").unwrap())
            .annotations
            .unwrap();
        assert_eq!(list.read_only_hint, Some(Hints::READ.read_only));
        assert_eq!(
            tool(crm_api::catalog::find("svc_delete_contact").unwrap())
                .annotations
                .unwrap()
                .destructive_hint,
            Some(true)
        );
    }

    #[test]
    fn a_result_carries_the_body_as_structured_content_and_as_the_same_json_text() {
        let body = json!({"id": "con_1", "object": "contact", "custom_fields": {"tier": 2}});
        let result = call_result(Ok(body.clone()));
        assert_eq!(result.is_error, Some(false));
        assert_eq!(result.structured_content, Some(body.clone()));
        let text = result.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), body);
    }

    #[test]
    fn a_failure_is_an_error_result_carrying_the_problem_document() {
        let problem = json!({"type": "http://x/errors/not_found", "title": "Not found", "status": 404, "detail": "no contact", "code": "not_found"});
        let result = call_result(Err(problem.clone()));
        assert_eq!(result.is_error, Some(true));
        assert_eq!(result.structured_content, Some(problem.clone()));
        let text = result.content[0]
            .as_text()
            .map(|t| t.text.clone())
            .unwrap_or_default();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), problem);
    }

    #[test]
    fn non_object_schemas_are_not_output_schemas() {
        assert!(object_schema(json!({"type": "array"})).is_none());
        assert!(object_schema(json!({"type": "object", "properties": {}})).is_some());
    }
}
