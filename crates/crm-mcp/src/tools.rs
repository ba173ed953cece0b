//! The catalog as MCP tools, and an operation's outcome as a tool result.

use std::sync::Arc;

use crm_api::{catalog, Operation};
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

/// One tool per catalog operation, in catalog order.
pub fn tools() -> Vec<Tool> {
    catalog().iter().map(tool).collect()
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
    tool.output_schema = object_schema((op.output)()).map(Arc::new);
    tool.annotations = Some(
        ToolAnnotations::with_title(op.summary)
            .read_only(op.hints.read_only)
            .destructive(op.hints.destructive)
            .idempotent(op.hints.idempotent)
            .open_world(false),
    );
    tool
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
            assert_eq!(Value::Object((*schema).clone()), (op.output)());
        }
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
