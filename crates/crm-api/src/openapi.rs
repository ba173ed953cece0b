//! The OpenAPI 3.1 document, generated from the catalog.

use serde_json::{json, Map, Value};

use crate::{
    catalog::{catalog, Method},
    ErrorCode, SPEC_VERSION,
};

fn problem_schema() -> Value {
    json!({
        "type": "object",
        "description": "RFC 9457 problem document.",
        "properties": {
            "type": {"type": "string", "format": "uri"},
            "title": {"type": "string"},
            "status": {"type": "integer"},
            "detail": {"type": "string"},
            "code": {"type": "string", "enum": ErrorCode::ALL.iter().map(|c| c.as_str()).collect::<Vec<_>>()},
            "field": {"type": "string"},
            "valid_options": {"type": "array", "items": {"type": "string"}},
            "suggestion": {"type": "string"},
            "existing": {"type": "object"},
        },
        "required": ["type", "title", "status", "detail", "code"],
    })
}

/// The document for a server reachable at `public_url`.
pub fn document(public_url: &str) -> Value {
    let mut paths: Map<String, Value> = Map::new();
    for op in catalog() {
        let mut parameters: Vec<Value> = op
            .path_params()
            .into_iter()
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        for q in op.query {
            let mut param = json!({"name": q.name, "in": "query", "required": q.required, "description": q.description, "schema": q.schema()});
            if q.kind == crate::catalog::ParamKind::FieldMap {
                // `custom_fields[tier]=gold`: the one standard way to describe keyed query parameters.
                param["style"] = json!("deepObject");
                param["explode"] = json!(true);
            }
            parameters.push(param);
        }
        if op.idempotency_key {
            parameters.push(json!({"name": "Idempotency-Key", "in": "header", "required": false, "schema": {"type": "string", "maxLength": 255},
                "description": "Replaying the same key with the same body returns the original result (kept 24 hours)."}));
        }
        if op.if_match {
            parameters.push(json!({"name": "If-Match", "in": "header", "required": false, "schema": {"type": "string"},
                "description": "The version (ETag) you read; 412 version_conflict if the record changed since."}));
        }
        let mut operation = json!({
            "operationId": op.name,
            "summary": op.summary,
            "description": op.description,
            "parameters": parameters,
            "security": [{"bearer": []}],
            "x-scope": op.scope.to_string(),
            "responses": {
                op.success_status.to_string(): {
                    "description": "Success",
                    "content": {"application/json": {"schema": (op.output)()}},
                },
                "default": {
                    "description": "Problem",
                    "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
                },
            },
        });
        if let Some(body) = op.body {
            operation["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": body()}}});
        }
        let method = match op.method {
            Method::Get => "get",
            Method::Post => "post",
            Method::Patch => "patch",
            Method::Delete => "delete",
        };
        let entry = paths.entry(op.path.to_owned()).or_insert_with(|| json!({}));
        entry[method] = operation;
    }
    for alias in crate::catalog::ALIASES {
        let Some(op) = crate::catalog::find(alias.operation) else { continue };
        let method = alias.method.as_str().to_lowercase();
        let params: Vec<Value> = alias
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        let mut operation = json!({
            "operationId": format!("{}__{}", op.name, alias.action),
            "x-alias-of": op.name,
            "summary": format!("{} ({})", op.summary, alias.action),
            "description": format!("The `{}` action of {}, as its own route. {}", alias.action, op.name, op.description),
            "parameters": params,
            "security": [{"bearer": []}],
            "x-scope": op.scope.to_string(),
            "responses": {
                "200": {"description": "Success", "content": {"application/json": {"schema": (op.output)()}}},
                "default": {"description": "Problem", "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}},
            },
        });
        if alias.method == Method::Patch {
            operation["requestBody"] = json!({"required": false, "content": {"application/json": {"schema": op.body.map(|b| b()).unwrap_or(json!({}))}}});
        }
        let entry = paths.entry(alias.path.to_owned()).or_insert_with(|| json!({}));
        entry[method] = operation;
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "crm",
            "version": SPEC_VERSION,
            "description": "API-first CRM: contacts, companies, deals, activities, custom fields, automations, sequences and signed webhooks. Every operation is also an MCP tool at /mcp and an A2A skill at /a2a, under the same name.",
        },
        "servers": [{"url": format!("{}/v1", public_url.trim_end_matches('/'))}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "svc_test_… or svc_live_… API key"}},
            "schemas": {"Problem": problem_schema()},
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_catalog_operation_is_in_the_document() {
        let doc = document("http://localhost:8080");
        assert_eq!(doc["info"]["version"], "0.14.0");
        for op in catalog() {
            let method = op.method.as_str().to_lowercase();
            assert_eq!(doc["paths"][op.path][&method]["operationId"], op.name);
        }
    }
}
