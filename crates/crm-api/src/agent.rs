//! Agent tools (MCP tools and A2A skills): one flat arguments object per call, turned back into
//! the path parameters, query parameters and body of the REST operation, so that a tool call runs
//! exactly what the REST request would (decisions §15). This is the inverse of
//! [`Operation::arguments_schema`]; the transports only frame and unframe it.

use serde_json::{Map, Value};

use crate::{
    body::JsonBody, operation::Input, problem::ErrorCode, Api, Operation, Problem, ReadRequest,
    Request,
};

/// The argument that carries `Idempotency-Key`.
pub const IDEMPOTENCY_KEY: &str = "idempotency_key";
/// The argument that carries `If-Match`.
pub const IF_MATCH: &str = "if_match";

/// A tool call's arguments, split the way the REST transport splits a request.
#[derive(Debug)]
pub struct ToolCall {
    pub input: Input,
    pub idempotency_key: Option<String>,
}

/// Splits `arguments` for `op`: path parameters (required strings), query parameters (sent as
/// the strings a URL would carry), `idempotency_key` and `if_match`, and the rest as the body.
///
/// As on REST, `idempotency_key` and `if_match` are ignored by operations that do not honour
/// them. Arguments an operation without a body does not know are `unknown_field`; for an
/// operation with a body they stay in the body, whose parser names them with its own hints.
pub fn split(op: &Operation, mut arguments: Map<String, Value>) -> Result<ToolCall, Problem> {
    let mut input = Input::default();
    let idempotency_key = match arguments.remove(IDEMPOTENCY_KEY) {
        Some(Value::String(key)) if op.idempotency_key => Some(key),
        Some(Value::Null) | None => None,
        Some(_) if op.idempotency_key => {
            return Err(Problem::validation(
                IDEMPOTENCY_KEY,
                "idempotency_key must be a string",
            ))
        }
        Some(_) => None,
    };
    input.if_match = match arguments.remove(IF_MATCH) {
        Some(Value::String(v)) if op.if_match => Some(v),
        Some(Value::Number(n)) if op.if_match => Some(number_text(&n)),
        Some(Value::Null) | None => None,
        Some(_) if op.if_match => {
            return Err(Problem::validation(
                IF_MATCH,
                "if_match must be a record version such as 3, or \"*\"",
            ))
        }
        Some(_) => None,
    };
    if !op.hints.read_only {
        // Carried as REST carries it, in the query; an operation without a dry run refuses it.
        match arguments.remove(crate::dry_run::DRY_RUN) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => input
                .query
                .push((crate::dry_run::DRY_RUN.to_owned(), b.to_string())),
            Some(_) => {
                return Err(Problem::validation(
                    crate::dry_run::DRY_RUN,
                    "dry_run must be true or false",
                ))
            }
        }
    }
    for name in op.path_params() {
        match arguments.remove(name) {
            Some(Value::String(v)) if !v.is_empty() => {
                input.path.insert(name.to_owned(), v);
            }
            None | Some(Value::Null) => {
                return Err(Problem::validation(name, format!("{name} is required")))
            }
            Some(_) => {
                return Err(Problem::validation(
                    name,
                    format!("{name} must be a non-empty string"),
                ))
            }
        }
    }
    for q in op.query {
        if matches!(q.kind, crate::operation::ParamKind::FieldMap) {
            match arguments.remove(q.name) {
                None | Some(Value::Null) => {}
                Some(Value::Object(filters)) => {
                    for (key, value) in filters {
                        let field = format!("{}.{key}", q.name);
                        let text = scalar_text(value).ok_or_else(|| {
                            Problem::validation(
                                field.as_str(),
                                format!("{field} must be a string, a number or a boolean"),
                            )
                        })?;
                        input.query.push((field, text));
                    }
                }
                Some(_) => {
                    return Err(Problem::validation(
                        q.name,
                        format!("{} must be an object of field keys to values", q.name),
                    ))
                }
            }
            continue;
        }
        let text = match arguments.remove(q.name) {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s,
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => number_text(&n),
            Some(_) => {
                return Err(Problem::validation(
                    q.name,
                    format!("{} must be a string, a number or a boolean", q.name),
                ))
            }
        };
        input.query.push((q.name.to_owned(), text));
    }
    if op.body.is_some() {
        input.body = Some(JsonBody::Value(Value::Object(arguments)));
    } else if let Some(unknown) = arguments.keys().next() {
        return Err(unknown_argument(op, unknown));
    }
    Ok(ToolCall {
        input,
        idempotency_key,
    })
}

/// A tool call's arguments, as an agent transport hands them to [`Api::call`], which splits
/// them ([`split`]) once the call is admitted: as on REST, a malformed call counts too
/// (decisions §17: each `tools/call` and `SendMessage` is one request).
#[derive(Debug)]
pub struct ToolArguments(pub Map<String, Value>);

impl ReadRequest for ToolArguments {
    async fn read(self, op: &'static Operation) -> Result<Request, Problem> {
        let ToolCall {
            input,
            idempotency_key,
        } = split(op, self.0)?;
        Ok(Request {
            input,
            idempotency_key,
            alias: None,
        })
    }
}

/// The tool named `name`, or the problem to answer a call of an unknown one: `bad_request` naming
/// every tool under `valid_options`, with the closest as a suggestion.
pub fn find_tool(name: &str) -> Result<&'static Operation, Problem> {
    crate::catalog::find(name).ok_or_else(|| {
        let names: Vec<&str> = crate::catalog().iter().map(|op| op.name).collect();
        let mut p = Problem::bad_request(format!("unknown tool `{name}`"))
            .with("field", "tool")
            .with("valid_options", names.clone());
        if let Some(s) = crm_domain::suggest::closest(name, names) {
            p = p.with("suggestion", format!("did you mean `{s}`?"));
        }
        p
    })
}

/// The problem document an agent transport hands back; a 500's carries the request id, which the
/// log shows too, as REST's does.
pub fn problem_document(api: &Api, problem: &Problem, request_id: &str) -> Value {
    let mut doc = api.problem_json(problem);
    if problem.code == ErrorCode::InternalError {
        doc["request_id"] = Value::from(request_id);
    }
    doc
}

/// The HTTP headers an agent transport's problem response carries besides its content type, as
/// REST's do: `WWW-Authenticate` on a 401, `Retry-After` on a 503, `Connection: close` on a 408.
pub fn problem_headers(problem: &Problem) -> Option<(&'static str, String)> {
    match problem.code {
        ErrorCode::Unauthorized => Some(("www-authenticate", "Bearer".to_owned())),
        ErrorCode::ServiceUnavailable => Some((
            "retry-after",
            crate::problem::UNAVAILABLE_RETRY_AFTER_SECS.to_string(),
        )),
        // The rest of the stalled body would be read as the next request (as on REST).
        ErrorCode::RequestTimeout => Some(("connection", "close".to_owned())),
        _ => None,
    }
}

/// A filter value as a URL would carry it; `None` for arrays, objects and null.
fn scalar_text(value: Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(number_text(&n)),
        _ => None,
    }
}

/// A number as a URL would carry it: an integral value without a fraction (A2A clients send every
/// number as a double, so `25.0` must read as `25`, decisions §17).
fn number_text(n: &serde_json::Number) -> String {
    match n.as_f64().and_then(crm_domain::registry::integral_f64) {
        Some(i) if n.is_f64() => i.to_string(),
        _ => n.to_string(),
    }
}

fn unknown_argument(op: &Operation, unknown: &str) -> Problem {
    let schema = op.arguments_schema();
    let valid: Vec<&str> = schema["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut p = Problem::new(
        ErrorCode::UnknownField,
        format!("unknown argument `{unknown}` for {}", op.name),
    )
    .with("field", unknown)
    .with("valid_options", valid.clone());
    if let Some(s) = crm_domain::suggest::closest(unknown, valid) {
        p = p.with("suggestion", format!("did you mean `{s}`?"));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{catalog, find};
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!("test arguments are objects"),
        }
    }

    fn op(name: &str) -> &'static Operation {
        find(name).unwrap_or_else(|| panic!("{name} is in the catalog"))
    }

    #[test]
    fn path_query_and_body_arguments_go_where_rest_carries_them() {
        let call = split(
            op("svc_update_contact"),
            args(json!({"id": "con_1", "first_name": "Ada", "if_match": 3})),
        )
        .unwrap();
        assert_eq!(call.input.path.get("id").map(String::as_str), Some("con_1"));
        assert_eq!(
            call.input.body,
            Some(JsonBody::Value(json!({"first_name": "Ada"})))
        );
        assert_eq!(call.input.if_match.as_deref(), Some("3"));
        assert!(call.input.query.is_empty());

        let call = split(
            op("svc_list_contacts"),
            args(json!({"q": "ada", "limit": 10.0, "include_deleted": true, "cursor": null})),
        )
        .unwrap();
        assert_eq!(
            call.input.query,
            vec![
                ("q".to_owned(), "ada".to_owned()),
                ("limit".to_owned(), "10".to_owned()),
                ("include_deleted".to_owned(), "true".to_owned())
            ]
        );
        assert_eq!(call.input.body, None);
    }

    #[test]
    fn custom_field_filters_are_one_object_argument() {
        let call = split(
            op("svc_list_contacts"),
            args(json!({"custom_fields": {"tier": "gold", "score": 5.0, "vip": true}, "limit": 2})),
        )
        .unwrap();
        assert_eq!(
            call.input.query,
            vec![
                ("custom_fields.tier".to_owned(), "gold".to_owned()),
                ("custom_fields.score".to_owned(), "5".to_owned()),
                ("custom_fields.vip".to_owned(), "true".to_owned()),
                ("limit".to_owned(), "2".to_owned()),
            ]
        );
        let err = split(
            op("svc_list_contacts"),
            args(json!({"custom_fields": "gold"})),
        )
        .unwrap_err();
        assert_eq!(
            (err.code, err.extra["field"].clone()),
            (ErrorCode::ValidationFailed, json!("custom_fields"))
        );
        let err = split(
            op("svc_list_contacts"),
            args(json!({"custom_fields": {"tags": ["x"]}})),
        )
        .unwrap_err();
        assert_eq!(err.extra["field"], "custom_fields.tags");
        let schema = op("svc_list_contacts").arguments_schema();
        assert_eq!(schema["properties"]["custom_fields"]["type"], "object");
    }

    #[test]
    fn idempotency_key_is_taken_out_of_the_body_where_honoured() {
        let call = split(
            op("svc_create_contact"),
            args(json!({"email": "a@example.com", "idempotency_key": "k1"})),
        )
        .unwrap();
        assert_eq!(call.idempotency_key.as_deref(), Some("k1"));
        assert_eq!(
            call.input.body,
            Some(JsonBody::Value(json!({"email": "a@example.com"})))
        );
        // Ignored where the operation does not honour it, as the REST header is.
        let call = split(
            op("svc_get_contact"),
            args(json!({"id": "con_1", "idempotency_key": "k1", "if_match": "\"2\""})),
        )
        .unwrap();
        assert_eq!(call.idempotency_key, None);
        assert_eq!(call.input.if_match, None);
    }

    #[test]
    fn a_create_without_arguments_still_has_a_body() {
        let call = split(op("svc_create_contact"), Map::new()).unwrap();
        assert_eq!(call.input.body, Some(JsonBody::Value(json!({}))));
    }

    #[test]
    fn missing_or_malformed_path_parameters_name_the_argument() {
        let err = split(op("svc_get_contact"), Map::new()).unwrap_err();
        assert_eq!(
            (err.code, err.extra["field"].clone()),
            (ErrorCode::ValidationFailed, json!("id"))
        );
        let err = split(op("svc_get_contact"), args(json!({"id": 5}))).unwrap_err();
        assert_eq!(err.extra["field"], "id");
        let err = split(op("svc_list_contacts"), args(json!({"q": ["a"]}))).unwrap_err();
        assert_eq!(err.extra["field"], "q");
        let err = split(
            op("svc_update_contact"),
            args(json!({"id": "con_1", "if_match": true})),
        )
        .unwrap_err();
        assert_eq!(err.extra["field"], "if_match");
    }

    #[test]
    fn unknown_arguments_of_an_operation_without_body_get_valid_options_and_a_suggestion() {
        let err = split(
            op("svc_list_contacts"),
            args(json!({"emial": "a@example.com"})),
        )
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::UnknownField);
        assert_eq!(err.extra["field"], "emial");
        assert_eq!(err.extra["suggestion"], "did you mean `email`?");
        assert!(err.extra["valid_options"]
            .as_array()
            .unwrap()
            .contains(&json!("cursor")));
    }

    #[test]
    fn an_unknown_tool_names_the_valid_ones_and_the_closest() {
        let Err(err) = find_tool("svc_create_contcat") else {
            panic!("an unknown tool is refused")
        };
        assert_eq!(err.code, ErrorCode::BadRequest);
        assert_eq!(
            err.extra["suggestion"],
            "did you mean `svc_create_contact`?"
        );
        assert_eq!(
            err.extra["valid_options"].as_array().map(Vec::len),
            Some(catalog().len())
        );
        assert_eq!(
            find_tool("svc_create_contact").ok().map(|op| op.name),
            Some("svc_create_contact")
        );
    }

    #[test]
    fn agent_problem_responses_carry_the_headers_rest_sends() {
        assert_eq!(
            problem_headers(&Problem::new(ErrorCode::Unauthorized, "no key")),
            Some(("www-authenticate", "Bearer".to_owned()))
        );
        assert_eq!(
            problem_headers(&Problem::new(ErrorCode::ServiceUnavailable, "down")),
            Some((
                "retry-after",
                crate::problem::UNAVAILABLE_RETRY_AFTER_SECS.to_string()
            ))
        );
        assert_eq!(
            problem_headers(&Problem::new(ErrorCode::RequestTimeout, "stalled")),
            Some(("connection", "close".to_owned()))
        );
        assert_eq!(problem_headers(&Problem::bad_request("x")), None);
    }

    #[test]
    fn integral_doubles_read_as_integers() {
        assert_eq!(
            number_text(&serde_json::Number::from_f64(25.0).unwrap()),
            "25"
        );
        assert_eq!(
            number_text(&serde_json::Number::from_f64(2.5).unwrap()),
            "2.5"
        );
        assert_eq!(number_text(&serde_json::Number::from(7)), "7");
    }

    /// Every argument name must land in exactly one place, or a call would be ambiguous.
    #[test]
    fn argument_names_do_not_collide_in_any_operation() {
        for op in catalog() {
            let mut names: Vec<String> = op.path_params().into_iter().map(str::to_owned).collect();
            names.extend(op.query.iter().map(|q| q.name.to_owned()));
            if let Some(body) = op.body {
                names.extend(crate::schema::property_names(&body()));
            }
            if op.idempotency_key {
                names.push(IDEMPOTENCY_KEY.to_owned());
            }
            if op.if_match {
                names.push(IF_MATCH.to_owned());
            }
            if op.generic_dry_run() {
                names.push(crate::dry_run::DRY_RUN.to_owned());
            }
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), names.len(), "{}: {names:?}", op.name);
        }
    }
}
