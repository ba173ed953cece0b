//! The OpenAPI 3.1 document, generated from the catalog.

use std::collections::BTreeSet;

use schemars::{generate::SchemaSettings, SchemaGenerator};
use serde_json::{json, Map, Value};

use crate::{
    catalog::{catalog, Alias, Method, ParamKind, QueryParam},
    operation::Output,
    ErrorCode, Operation, SPEC_VERSION,
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

/// The response headers the REST transport sends, described once under `components.headers`.
/// Only `Request-Id` is on every answer; the rate-limit headers are missing on a 401 (the limiter
/// has not run), `Retry-After` on a 429 other than `rate_limited`.
fn headers() -> Value {
    let integer = |description: &str| json!({"description": description, "schema": {"type": "integer", "minimum": 0}});
    json!({
        "Request-Id": {"description": "This request's id (`req_…`, or the caller's own `Request-Id`); 500 problems carry it as `request_id`.",
            "required": true, "schema": {"type": "string"}},
        "RateLimit-Limit": integer("Requests per minute this workspace and mode may make."),
        "RateLimit-Remaining": integer("Requests left in the current budget."),
        "RateLimit-Reset": integer("Seconds until the budget is whole again."),
        "Retry-After": integer("Seconds to wait before retrying (429 rate_limited)."),
        "ETag": {"description": "The record's version, quoted (`\"3\"`); send it back as If-Match.", "schema": {"type": "string"}},
        "Idempotent-Replayed": {"description": "`true` on a stored answer replayed for a repeated Idempotency-Key.", "schema": {"type": "string", "enum": ["true"]}},
        "WWW-Authenticate": {"description": "The bearer challenge.", "required": true, "schema": {"type": "string", "const": "Bearer"}},
    })
}

/// `{name: {"$ref": …}}` for each of `names` (of [`headers`]).
fn header_refs(names: &[&str]) -> Value {
    names
        .iter()
        .map(|name| {
            (
                (*name).to_owned(),
                json!({"$ref": format!("#/components/headers/{name}")}),
            )
        })
        .collect::<Map<_, _>>()
        .into()
}

const RATE: [&str; 3] = ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"];

/// The generator of the document's body schemas: a body type is described once, under
/// `components.schemas` by its name, and referred to from each operation that answers with it.
fn schema_generator() -> SchemaGenerator {
    SchemaSettings::draft2020_12()
        .with(|s| {
            s.definitions_path = "/components/schemas".into();
            s.meta_schema = None;
        })
        .into_generator()
}

/// The responses of `op`, or of an alias of it answering `success`: each success status with
/// the output schema, 401 and 429 (the two every operation may answer with headers of their
/// own), and every other problem as `default`.
fn responses(
    op: &Operation,
    success: &[u16],
    generator: &mut SchemaGenerator,
    shaped: &mut Map<String, Value>,
) -> Value {
    let mut output = op.output.in_generator(generator);
    if crate::view::is_shaped(op) {
        output = shaped_output(op, &output, shaped);
    }
    let mut ok = vec!["Request-Id"];
    ok.extend(RATE);
    // A single record (it has a version) is answered with its version as ETag.
    if op.output.inline().pointer("/properties/version").is_some() {
        ok.push("ETag");
    }
    let mut problem = vec!["Request-Id"];
    problem.extend(RATE);
    if op.idempotency_key {
        ok.push("Idempotent-Replayed");
        problem.push("Idempotent-Replayed");
    }
    let problem_content =
        json!({"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}});
    let mut responses = Map::new();
    for status in success {
        responses.insert(
            status.to_string(),
            json!({"description": "Success", "headers": header_refs(&ok), "content": {"application/json": {"schema": output.clone()}}}),
        );
    }
    responses.insert(
        "401".into(),
        json!({"description": "Missing, malformed, unknown, expired or revoked key", "headers": header_refs(&["Request-Id", "WWW-Authenticate"]), "content": problem_content}),
    );
    let mut limited = vec!["Request-Id", "Retry-After"];
    limited.extend(RATE);
    responses.insert(
        "429".into(),
        json!({"description": "Rate limit, quota or spend cap reached", "headers": header_refs(&limited), "content": problem_content}),
    );
    responses.insert("default".into(), json!({"description": "Problem", "headers": header_refs(&problem), "content": problem_content}));
    responses.into()
}

/// The success schema of a read `fields=` may shape: `<Body>Shaped` under `components.schemas`,
/// the body with its records requiring only `id` and `object` (a list's items too).
fn shaped_output(op: &Operation, named: &Value, shaped: &mut Map<String, Value>) -> Value {
    let Some(base) = named
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
    else {
        return crate::view::shaped_schema(op.output.inline());
    };
    let name = format!("{base}Shaped");
    let mut schema = crate::view::shaped_schema(op.output.inline());
    // A list's records are `<Item>Shaped` of their own, so a generated client has one class.
    if let (Some(item), Some(items)) = (
        base.strip_suffix("List"),
        schema.pointer_mut("/properties/data/items"),
    ) {
        let item_name = format!("{item}Shaped");
        let record = std::mem::replace(
            items,
            json!({"$ref": format!("#/components/schemas/{item_name}")}),
        );
        shaped.entry(item_name).or_insert(record);
    }
    shaped.entry(name.clone()).or_insert(schema);
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// The request body of an operation, stated as the parser reads it: an absent body is `{}`, so
/// the body is required only when some field is; an unknown top-level field is 422
/// `unknown_field` (`crate::body::parse`), so the object is closed unless the type says
/// otherwise. A body type is referred to by name and its definition closed once the document
/// is built (the names are collected in `closed`); a schema written by hand stays inline.
fn request_body(
    body: &Output,
    generator: &mut SchemaGenerator,
    closed: &mut BTreeSet<String>,
) -> Value {
    let mut schema = body.in_generator(generator);
    match component_name(&schema) {
        Some(name) => {
            closed.insert(name.to_owned());
        }
        None => close(&mut schema),
    }
    inline_request_body(body.inline(), schema)
}

/// `{"required": …, "content": …}` for `schema`, whose inline form is `inline`: required when a
/// member is, or when the body must have some member (`minProperties`, the settings' PATCH),
/// since an absent body is read as `{}`.
fn inline_request_body(inline: Value, schema: Value) -> Value {
    let required = inline
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| !r.is_empty())
        || inline.get("minProperties").and_then(Value::as_u64) > Some(0);
    json!({"required": required, "content": {"application/json": {"schema": schema}}})
}

/// The name under `components.schemas` that `schema` refers to, if it is a `$ref` there.
fn component_name(schema: &Value) -> Option<&str> {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
}

/// Closes an object schema to members it does not list, unless it says otherwise.
fn close(schema: &mut Value) {
    if let Value::Object(map) = schema {
        map.entry("additionalProperties")
            .or_insert(Value::Bool(false));
    }
}

/// The body of `alias`: the operation's body cut down to the fields the route takes.
fn alias_body(op: &Operation, alias: &Alias) -> Value {
    let full = op.body.map(|b| b.inline()).unwrap_or_default();
    let properties: Map<String, Value> = full
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter(|(name, _)| alias.fields.contains(&name.as_str()))
        .map(|(name, schema)| (name.clone(), schema.clone()))
        .collect();
    json!({"type": "object", "properties": properties})
}

fn query_parameter(q: &QueryParam) -> Value {
    if let ParamKind::Json(schema) = q.kind {
        // A JSON document in the parameter: its schema, not a string's.
        return json!({"name": q.name, "in": "query", "required": q.required, "description": q.description,
            "content": {"application/json": {"schema": schema()}}});
    }
    let mut param = json!({"name": q.name, "in": "query", "required": q.required, "description": q.description, "schema": q.schema()});
    if matches!(q.kind, ParamKind::FieldMap) {
        // `custom_fields[tier]=gold`: the one standard way to describe keyed query parameters.
        param["style"] = json!("deepObject");
        param["explode"] = json!(true);
    }
    param
}

/// A dry run's 200 (decisions §18): the envelope, beside the operation's own 200 where it has
/// one.
fn dry_run_response(operation: &mut Value, generator: &mut SchemaGenerator) {
    let envelope = generator
        .subschema_for::<crate::bodies::DryRunBody>()
        .to_value();
    let responses = &mut operation["responses"];
    match responses.get_mut("200") {
        Some(ok) => {
            let schema = &mut ok["content"]["application/json"]["schema"];
            *schema = json!({"anyOf": [schema.take(), envelope]});
        }
        None => {
            let ok = json!({"description": "The dry run's answer (`dry_run=true`)",
                "headers": header_refs(&["Request-Id"]),
                "content": {"application/json": {"schema": envelope}}});
            // After the operation's own successes, before the problems.
            let mut ordered = Map::new();
            if let Value::Object(listed) = responses.take() {
                for (status, response) in listed {
                    if !status.starts_with('2') && !ordered.contains_key("200") {
                        ordered.insert("200".into(), ok.clone());
                    }
                    ordered.insert(status, response);
                }
            }
            *responses = Value::Object(ordered);
        }
    }
}

/// The document for a server reachable at `public_url`.
pub fn document(public_url: &str) -> Value {
    let mut generator = schema_generator();
    let mut shaped = Map::new();
    let mut closed = BTreeSet::new();
    let mut paths: Map<String, Value> = Map::new();
    for op in catalog() {
        let mut parameters: Vec<Value> = op
            .path_params()
            .into_iter()
            .map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        parameters.extend(op.query.iter().map(query_parameter));
        if op.idempotency_key {
            parameters.push(json!({"name": "Idempotency-Key", "in": "header", "required": false, "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                "description": "Replaying the same key with the same body returns the original result (kept 24 hours)."}));
        }
        if op.if_match {
            parameters.push(json!({"name": "If-Match", "in": "header", "required": false, "schema": {"type": "string", "pattern": crate::ops::IF_MATCH_PATTERN},
                "description": "The version (ETag) you read; 412 version_conflict if the record changed since."}));
        }
        if op.generic_dry_run() {
            parameters.push(json!({"name": crate::dry_run::DRY_RUN, "in": "query", "required": false, "schema": {"type": "boolean"},
                "description": "Run the write in full, roll it back, and answer 200 with the result it would give and its effects (header Dry-Run: true)."}));
        }
        let mut operation = json!({
            "operationId": op.name,
            "summary": op.summary,
            "description": op.description,
            "parameters": parameters,
            "security": [{"bearer": []}],
            "x-scope": op.scope.to_string(),
            "responses": responses(op, &[&[op.success_status], op.also_success()].concat(), &mut generator, &mut shaped),
        });
        if op.streams_body() {
            // REST sends the file itself (agents send it as the `csv` argument).
            operation["requestBody"] = json!({"required": true, "content": {"text/csv": {"schema": {
                "type": "string",
                "description": "UTF-8 CSV, header row first: built-in field names, `custom_fields.<key>`, `company.domain` (contacts, deals), `primary_contact.email` (deals). Up to 256 MiB."
            }}}});
        } else if let Some(body) = &op.body {
            operation["requestBody"] = request_body(body, &mut generator, &mut closed);
        }
        if op.answers_file() {
            // REST sends the file itself; the JSON notice is what MCP and A2A answer instead.
            let file = json!({"schema": {"type": "string"}});
            operation["responses"]["200"]["content"] =
                json!({"text/csv": file.clone(), "application/x-ndjson": file});
        }
        if !op.hints.read_only {
            operation["x-dry-run"] = Value::Bool(op.hints.dry_run);
        }
        if op.generic_dry_run() {
            dry_run_response(&mut operation, &mut generator);
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
        let Some(op) = crate::catalog::find(alias.operation) else {
            continue;
        };
        let method = alias.method.as_str().to_lowercase();
        let mut params: Vec<Value> =
            alias.path_params().into_iter().map(|p| json!({"name": p, "in": "path", "required": true, "schema": {"type": "string"}})).collect();
        params.extend(alias.query.iter().map(query_parameter));
        let mut operation = json!({
            "operationId": format!("{}__{}", op.name, alias.action),
            "x-alias-of": op.name,
            "summary": format!("{} ({})", op.summary, alias.action),
            "description": format!("The `{}` action of {}, as its own route. {}", alias.action, op.name, op.description),
            "parameters": params,
            "security": [{"bearer": []}],
            "x-scope": op.scope.to_string(),
            // The aliases change or remove: 200, never the 201 of an add.
            "responses": responses(op, &[200], &mut generator, &mut shaped),
        });
        if !alias.fields.is_empty() {
            // The operation's body cut to the route's fields: a schema of its own, inline.
            let mut body = alias_body(op, alias);
            close(&mut body);
            operation["requestBody"] = inline_request_body(body.clone(), body);
        }
        let entry = paths
            .entry(alias.path.to_owned())
            .or_insert_with(|| json!({}));
        entry[method] = operation;
    }
    let mut schemas = Map::new();
    schemas.insert("Problem".into(), problem_schema());
    schemas.extend(generator.take_definitions(true));
    schemas.extend(shaped);
    for name in &closed {
        if let Some(schema) = schemas.get_mut(name) {
            close(schema);
        }
    }
    let mut document = json!({
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
            "schemas": schemas,
            "headers": headers(),
        },
    });
    spell_boolean_schemas_as_objects(&mut document);
    document
}

/// JSON Schema lets `true` stand for "any value" (schemars writes it for a `serde_json::Value`
/// member or a parameter an action may take), and OpenAPI 3.1 inherits that; but client
/// generators read schemas as objects, so the document writes `{}` (and `{"not": {}}` for
/// `false`). `additionalProperties` keeps its boolean, which every reader takes.
fn spell_boolean_schemas_as_objects(v: &mut Value) {
    fn as_object(schema: &mut Value) {
        if let Value::Bool(any) = *schema {
            *schema = if any { json!({}) } else { json!({"not": {}}) };
        }
    }
    match v {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match (key.as_str(), &mut *value) {
                    ("properties" | "patternProperties" | "$defs", Value::Object(members)) => {
                        members.values_mut().for_each(as_object);
                    }
                    ("items" | "not" | "propertyNames", _) => as_object(value),
                    ("oneOf" | "anyOf" | "allOf" | "prefixItems", Value::Array(branches)) => {
                        branches.iter_mut().for_each(as_object);
                    }
                    _ => {}
                }
                spell_boolean_schemas_as_objects(value);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(spell_boolean_schemas_as_objects),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
