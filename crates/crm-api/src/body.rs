//! Turning a JSON body into an operation's input type, with the errors of decisions §5: an
//! unknown field is `unknown_field` with the valid names and a suggestion; a wrong type is
//! `validation_failed` naming the field.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    problem::{ErrorCode, Problem},
    schema::field_names,
};

/// A request body that stalled past the transport's body timers (the HTTP edge's, decisions §24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body stalled past the body timeout")
    }
}

impl std::error::Error for BodyTimeout {}

/// Whether `error`, or an error it was caused by, is an `E` (body readers wrap their errors).
pub fn caused_by<E: std::error::Error + 'static>(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<E>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The problem for a body that could not be read whole: it stalled (408), it was over `limit`
/// bytes (`over_limit`: 413), or the client hung up before its end (400, logged at `debug`: the
/// client is gone and will not read it).
pub fn unreadable(error: &(dyn std::error::Error + 'static), over_limit: bool, limit: usize) -> Problem {
    if caused_by::<BodyTimeout>(error) {
        Problem::new(
            ErrorCode::RequestTimeout,
            "the request body stalled; send the request again",
        )
    } else if over_limit {
        Problem::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body exceeds {limit} bytes"),
        )
    } else {
        tracing::debug!(error = %error, "the request body could not be read");
        Problem::bad_request(
            "the request body could not be read: the connection ended before the body did",
        )
    }
}

/// Parses `body` (absent = `{}`) into `T`. `unknown_hint` is suggested when no valid field name
/// is close to an unknown one (e.g. "register it with POST /fields and send it under custom_fields").
pub fn parse<T: DeserializeOwned + JsonSchema + 'static>(
    body: Option<&Value>,
    unknown_hint: Option<&str>,
) -> Result<T, Problem> {
    let mut value = body
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    integral_floats_as_integers(&mut value);
    let Value::Object(map) = &value else {
        return Err(Problem::bad_request(
            "the request body must be a JSON object",
        ));
    };
    if let Some(path) = nul_path(&value, String::new()) {
        return Err(Problem::validation(
            &path,
            format!("{path}: text must not contain the NUL character (U+0000)"),
        ));
    }
    let valid = field_names::<T>();
    if let Some(unknown) = map.keys().find(|k| !valid.contains(k)) {
        let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
        return Err(Problem::unknown_field(unknown, &valid, unknown_hint));
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde's "invalid type: string \"x\", expected i64 at line 1 column 2" → keep the useful part.
        let detail = inner.split(" at line").next().unwrap_or(&inner).to_owned();
        match missing_field(&detail) {
            // The path is the object that lacks the member (`.` for the body itself): name the
            // member, as the other "is required" errors do.
            Some(name) => {
                let field = if path == "." {
                    name.to_owned()
                } else {
                    format!("{path}.{name}")
                };
                Problem::validation(&field, format!("{field} is required"))
            }
            None => Problem::validation(&path, format!("{path}: {detail}")),
        }
    })
}

/// The member named by serde's "missing field `x`".
fn missing_field(detail: &str) -> Option<&str> {
    detail.strip_prefix("missing field `")?.strip_suffix('`')
}

/// Integer fields accept any JSON number without a fractional part up to 2^63-1 in magnitude,
/// whatever its spelling (decisions §17, §22): A2A clients carry every number as a double, so
/// `3.0` must read as `3`, and `1e18` as 10^18. A float field reads `3` as `3.0` anyway, and an
/// integral double in that range is exactly an `i64`, so turning such doubles into integers
/// everywhere loses nothing.
fn integral_floats_as_integers(value: &mut Value) {
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(i) = n.as_f64().and_then(crm_domain::registry::integral_f64) {
                *n = serde_json::Number::from(i);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(map) => map.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

/// The path of the first string (or key) holding U+0000, which no store can keep as text.
fn nul_path(value: &Value, path: String) -> Option<String> {
    let join = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    match value {
        Value::String(s) if s.contains('\0') => Some(path),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(join(k))
            } else {
                nul_path(v, join(k))
            }
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_path(v, format!("{path}[{i}]"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::ErrorCode;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Debug, Deserialize, JsonSchema, PartialEq)]
    struct In {
        first_name: Option<String>,
        count: Option<i64>,
    }

    #[test]
    fn unknown_fields_get_valid_options_and_a_suggestion() {
        let err = parse::<In>(Some(&json!({"frist_name": "x"})), None).unwrap_err();
        assert_eq!(err.code, ErrorCode::UnknownField);
        assert_eq!(err.extra["suggestion"], "did you mean `first_name`?");
        assert_eq!(err.extra["valid_options"], json!(["first_name", "count"]));
        let err = parse::<In>(Some(&json!({"zzz": 1})), Some("register it")).unwrap_err();
        assert_eq!(err.extra["suggestion"], "register it");
    }

    #[test]
    fn wrong_types_name_the_field() {
        let err = parse::<In>(Some(&json!({"count": "three"})), None).unwrap_err();
        assert_eq!(err.code, ErrorCode::ValidationFailed);
        assert_eq!(err.extra["field"], "count");
    }

    #[test]
    fn nul_characters_are_refused_with_their_path() {
        let err = parse::<serde_json::Map<String, Value>>(
            Some(&json!({"a": {"b": ["x", "y\u{0}"]}})),
            None,
        )
        .unwrap_err();
        assert_eq!(err.extra["field"], "a.b[1]");
    }

    #[test]
    fn integer_fields_accept_integral_doubles_only() {
        let parsed = parse::<In>(Some(&json!({"count": 3.0})), None).unwrap();
        assert_eq!(parsed.count, Some(3));
        let err = parse::<In>(Some(&json!({"count": 3.5})), None).unwrap_err();
        assert_eq!(
            (err.code, err.extra["field"].clone()),
            (ErrorCode::ValidationFailed, json!("count"))
        );
        #[derive(Debug, Deserialize, JsonSchema)]
        struct Nested {
            a: Value,
        }
        let nested =
            parse::<Nested>(Some(&json!({"a": [1.0, {"b": 2.0, "c": 2.5}]})), None).unwrap();
        assert_eq!(nested.a, json!([1, {"b": 2, "c": 2.5}]));
    }

    #[test]
    fn integer_fields_take_any_spelling_up_to_two_to_the_63() {
        #[derive(Debug, Deserialize, JsonSchema)]
        struct Cents {
            value_cents: Option<crate::schema::WholeNumber>,
        }
        let read = |body: &str| {
            let v: Value = serde_json::from_str(body).unwrap();
            parse::<Cents>(Some(&v), None).map(|c| c.value_cents.unwrap().0)
        };
        for (body, want) in [
            (r#"{"value_cents": 1e18}"#, 1_000_000_000_000_000_000),
            (
                r#"{"value_cents": 1000000000000000000}"#,
                1_000_000_000_000_000_000,
            ),
            (r#"{"value_cents": 1.0E3}"#, 1000),
            (r#"{"value_cents": 3.0}"#, 3),
            (r#"{"value_cents": 9223372036854775807}"#, i64::MAX),
            (r#"{"value_cents": 9.2e18}"#, 9_200_000_000_000_000_000),
        ] {
            assert_eq!(read(body).unwrap(), want, "{body}");
        }
        for body in [
            r#"{"value_cents": 3.5}"#,
            r#"{"value_cents": 9223372036854775808}"#,
            r#"{"value_cents": 9.3e18}"#,
            r#"{"value_cents": 1e19}"#,
            r#"{"value_cents": 100000000000000000000000}"#,
        ] {
            let err = read(body).unwrap_err();
            assert_eq!(
                (err.code, err.extra["field"].clone()),
                (ErrorCode::ValidationFailed, json!("value_cents")),
                "{body}"
            );
        }
        // Plain integer fields read the same spellings.
        let parsed = parse::<In>(Some(&json!({"count": 1e18})), None).unwrap();
        assert_eq!(parsed.count, Some(1_000_000_000_000_000_000));
    }

    #[test]
    fn a_missing_required_member_is_named_as_the_field() {
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Inner {
            key: String,
        }
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Required {
            operations: Vec<Value>,
            inner: Option<Inner>,
        }
        let err = parse::<Required>(Some(&json!({})), None).unwrap_err();
        assert_eq!(
            (err.code, err.extra["field"].clone(), err.detail.as_str()),
            (
                ErrorCode::ValidationFailed,
                json!("operations"),
                "operations is required"
            )
        );
        let err =
            parse::<Required>(Some(&json!({"operations": [], "inner": {}})), None).unwrap_err();
        assert_eq!(
            (err.extra["field"].clone(), err.detail.as_str()),
            (json!("inner.key"), "inner.key is required")
        );
    }

    #[test]
    fn absent_body_is_empty() {
        assert_eq!(
            parse::<In>(None, None).unwrap(),
            In {
                first_name: None,
                count: None
            }
        );
    }
}
