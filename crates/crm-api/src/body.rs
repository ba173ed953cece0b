//! Turning a JSON body into an operation's input type, with the errors of decisions §5: an
//! unknown field is `unknown_field` with the valid names and a suggestion; a wrong type is
//! `validation_failed` naming the field.

use std::{borrow::Cow, sync::OnceLock};

use schemars::JsonSchema;
use serde::{de::DeserializeOwned, Deserializer};
use serde_json::{Map, Value};

use crate::{
    problem::{ErrorCode, Problem},
    schema::field_names,
    strict_json::{self, Facts},
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
pub fn caused_by<E: std::error::Error + 'static>(
    error: &(dyn std::error::Error + 'static),
) -> bool {
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
pub fn unreadable(
    error: &(dyn std::error::Error + 'static),
    over_limit: bool,
    limit: usize,
) -> Problem {
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

/// A request body as its transport carried it. [`parse`] reads it into an operation's input
/// type: REST's bytes straight into the type, with no document built in between.
#[derive(Debug, Clone, PartialEq)]
pub enum JsonBody {
    /// Bytes read from the wire ([`JsonBody::from_bytes`]).
    Checked(CheckedJson),
    /// A document the transport holds already: an agent tool call's arguments, or an alias
    /// route's body with its path and query folded in.
    Value(Value),
}

/// Bytes [`strict_json::check`] accepted, with what it learned of them; made only by
/// [`JsonBody::from_bytes`], so they always parse.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedJson {
    bytes: Vec<u8>,
    facts: Facts,
}

impl CheckedJson {
    fn to_value(&self) -> Value {
        serde_json::from_slice(&self.bytes).expect("bytes strict_json::check accepted")
    }
}

impl JsonBody {
    /// Checks `bytes` as strict JSON (decisions §22); the error is the parser's.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<JsonBody, serde_json::Error> {
        let facts = strict_json::check(&bytes)?;
        Ok(JsonBody::Checked(CheckedJson { bytes, facts }))
    }

    /// Whether the document is an object, as every operation's body must be.
    pub fn is_object(&self) -> bool {
        match self {
            JsonBody::Checked(checked) => checked.facts.object_keys.is_some(),
            JsonBody::Value(value) => value.is_object(),
        }
    }

    /// The document as a value: built from the bytes, for the rare readers that need one (the
    /// `Idempotency-Key` fingerprint, an alias route, a member read twice).
    pub fn to_value(&self) -> Cow<'_, Value> {
        match self {
            JsonBody::Checked(checked) => Cow::Owned(checked.to_value()),
            JsonBody::Value(value) => Cow::Borrowed(value),
        }
    }

    pub fn into_value(self) -> Value {
        match self {
            JsonBody::Value(value) => value,
            JsonBody::Checked(checked) => checked.to_value(),
        }
    }

    /// The member `name` of an object body.
    pub fn get(&self, name: &str) -> Option<Value> {
        match self.to_value() {
            Cow::Borrowed(value) => value.get(name).cloned(),
            Cow::Owned(mut value) => value.as_object_mut()?.remove(name),
        }
    }
}

/// What [`parse`] reads: a request's [`JsonBody`], or a document inside one (a batch item).
pub trait Document {
    fn json(&self) -> Json<'_>;
}

/// A [`Document`] as [`parse`] reads it.
pub enum Json<'a> {
    Checked(&'a CheckedJson),
    Value(&'a Value),
}

impl Document for JsonBody {
    fn json(&self) -> Json<'_> {
        match self {
            JsonBody::Checked(checked) => Json::Checked(checked),
            JsonBody::Value(value) => Json::Value(value),
        }
    }
}

impl Document for Value {
    fn json(&self) -> Json<'_> {
        Json::Value(self)
    }
}

/// Parses `body` (absent = `{}`) into `T`. `unknown_hint` is suggested when no valid field name
/// is close to an unknown one (e.g. "register it with POST /fields and send it under custom_fields").
///
/// In order: the body must be an object (400); no text in it may hold U+0000 (422 naming its
/// path); every member must be a field of `T` (422 `unknown_field`); then `T` is read, its
/// errors naming the field (422). Checked bytes are read straight into `T`, unless a number in
/// them needs reading as an integer first ([`integral_floats_as_integers`]).
pub fn parse<T: DeserializeOwned + JsonSchema + 'static>(
    body: Option<&impl Document>,
    unknown_hint: Option<&str>,
) -> Result<T, Problem> {
    static EMPTY: OnceLock<Value> = OnceLock::new();
    let json = match body {
        Some(body) => body.json(),
        None => Json::Value(EMPTY.get_or_init(|| Value::Object(Map::new()))),
    };
    match json {
        Json::Value(value) => {
            let Value::Object(map) = value else {
                return Err(not_an_object());
            };
            refuse_nul(value)?;
            refuse_unknown::<T>(map.keys(), unknown_hint)?;
            refuse_long::<T>(map)?;
            if has_integral_float(value) {
                let mut value = value.clone();
                integral_floats_as_integers(&mut value);
                deserialize(value)
            } else {
                deserialize(value)
            }
        }
        Json::Checked(checked) => {
            let Some(keys) = &checked.facts.object_keys else {
                return Err(not_an_object());
            };
            if checked.facts.nul {
                refuse_nul(&checked.to_value())?;
            }
            refuse_unknown::<T>(keys.iter(), unknown_hint)?;
            // Building the document only when some string could be over a limit keeps the
            // common body on the fast path.
            if checked.facts.longest_string > crate::schema::text_limits::<T>().shortest {
                if let Value::Object(map) = checked.to_value() {
                    refuse_long::<T>(&map)?;
                }
            }
            if checked.facts.integral_float {
                let mut value = checked.to_value();
                integral_floats_as_integers(&mut value);
                deserialize(value)
            } else {
                deserialize(&mut serde_json::Deserializer::from_slice(&checked.bytes))
            }
        }
    }
}

fn not_an_object() -> Problem {
    Problem::bad_request("the request body must be a JSON object")
}

/// 422 naming the first text of `value` that holds U+0000.
fn refuse_nul(value: &Value) -> Result<(), Problem> {
    match nul_path(value, String::new()) {
        Some(path) => Err(Problem::validation(
            &path,
            format!("{path}: text must not contain the NUL character (U+0000)"),
        )),
        None => Ok(()),
    }
}

/// 422 `validation_failed` for the first member of `map` whose text is longer than its field's
/// `maxLength` in `T`'s schema. The limit is on the text as sent: the domain checks what is
/// left after trimming, which would let white space carry a value past the documented limit.
fn refuse_long<T: JsonSchema + 'static>(map: &Map<String, Value>) -> Result<(), Problem> {
    let limits = crate::schema::text_limits::<T>();
    for (name, max) in limits.fields.iter() {
        if let Some(Value::String(text)) = map.get(name) {
            if text.len() > *max && text.chars().count() > *max {
                return Err(Problem::validation(
                    name,
                    format!("{name}: must be at most {max} characters"),
                ));
            }
        }
    }
    Ok(())
}

/// 422 `unknown_field` for the first of `names` that is no field of `T`.
fn refuse_unknown<'n, T: JsonSchema + 'static>(
    mut names: impl Iterator<Item = &'n String>,
    unknown_hint: Option<&str>,
) -> Result<(), Problem> {
    let valid = field_names::<T>();
    match names.find(|k| !valid.contains(k)) {
        Some(unknown) => {
            let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
            Err(Problem::unknown_field(unknown, &valid, unknown_hint))
        }
        None => Ok(()),
    }
}

/// Reads `T` from `de`, naming the field of the first error.
fn deserialize<'de, T: DeserializeOwned, D: Deserializer<'de>>(de: D) -> Result<T, Problem> {
    serde_path_to_error::deserialize::<_, T>(de).map_err(|e| {
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

/// Whether `value` holds a number [`integral_floats_as_integers`] would change.
fn has_integral_float(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_f64()
                && n.as_f64()
                    .and_then(crm_domain::registry::integral_f64)
                    .is_some()
        }
        Value::Array(items) => items.iter().any(has_integral_float),
        Value::Object(map) => map.values().any(has_integral_float),
        _ => false,
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

    /// Bytes read straight into the type answer what their document read into it answers.
    #[test]
    fn checked_bytes_read_as_their_document_does() {
        fn same<T: DeserializeOwned + JsonSchema + std::fmt::Debug + 'static>(text: &str) {
            let value: Value = serde_json::from_str(text).unwrap();
            let from_value = parse::<T>(Some(&value), Some("register it"));
            let body = JsonBody::from_bytes(text.as_bytes().to_vec()).unwrap();
            let from_bytes = parse::<T>(Some(&body), Some("register it"));
            assert_eq!(
                format!("{from_bytes:?}"),
                format!("{from_value:?}"),
                "{text}"
            );
        }
        #[derive(Debug, Deserialize, JsonSchema)]
        #[allow(dead_code)]
        struct Nested {
            count: i64,
            inner: Option<In>,
            tags: Option<Vec<String>>,
            cents: Option<crate::schema::WholeNumber>,
            any: Option<Value>,
        }
        for text in [
            r#"{"first_name": "Ada", "count": 3}"#,
            r#"{"first_name": "Ada", "count": 3.0}"#,
            r#"{"count": 3.5}"#,
            r#"{"count": "three", "first_name": 1}"#,
            r#"{"frist_name": "x"}"#,
            r#"{"zzz": 1}"#,
            r#"{"first_name": "a\u0000b"}"#,
            r#"{"frist_name": "x", "first_name": "a\u0000"}"#,
            r#"{"first_name": null, "count": null}"#,
            r#"{"count": 9223372036854775808}"#,
            r#"[1, 2]"#,
            r#""text""#,
            r#"{}"#,
        ] {
            same::<In>(text);
        }
        for text in [
            r#"{}"#,
            r#"{"count": 1, "inner": {"count": "x"}}"#,
            r#"{"count": 1, "inner": {"count": 2.0}, "any": [1.0, {"b": 2.5}]}"#,
            r#"{"count": 1, "inner": {"frist": 1}}"#,
            r#"{"count": 1, "tags": ["a", 2]}"#,
            r#"{"count": 1, "tags": "a"}"#,
            r#"{"count": 1, "cents": 1e18}"#,
            r#"{"count": 1, "cents": 1e19}"#,
            r#"{"count": 1, "cents": "5"}"#,
            r#"{"count": 1, "any": {"k": ["\u0000"]}}"#,
            r#"{"inner": {}}"#,
        ] {
            same::<Nested>(text);
        }
    }

    #[test]
    fn a_body_member_reads_from_bytes_as_from_its_document() {
        let text = r#"{"trigger": null, "name": "x"}"#;
        let body = JsonBody::from_bytes(text.as_bytes().to_vec()).unwrap();
        assert_eq!(body.get("trigger"), Some(Value::Null));
        assert_eq!(body.get("name"), Some(json!("x")));
        assert_eq!(body.get("other"), None);
        assert!(body.is_object());
        assert_eq!(
            body.to_value().into_owned(),
            json!({"trigger": null, "name": "x"})
        );
        let value = JsonBody::Value(json!({"trigger": null}));
        assert_eq!(value.get("trigger"), Some(Value::Null));
        assert!(!JsonBody::from_bytes(b"[]".to_vec()).unwrap().is_object());
    }

    #[test]
    fn absent_body_is_empty() {
        assert_eq!(
            parse::<In>(None::<&Value>, None).unwrap(),
            In {
                first_name: None,
                count: None
            }
        );
    }
}
