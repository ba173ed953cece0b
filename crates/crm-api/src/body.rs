//! Turning a JSON body into an operation's input type, with the errors of decisions §5: an
//! unknown field is `unknown_field` with the valid names and a suggestion; a wrong type is
//! `validation_failed` naming the field.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{
    problem::{ErrorCode, Problem},
    schema::{property_names, schema_of},
};

/// Parses `body` (absent = `{}`) into `T`. `unknown_hint` is suggested when no valid field name
/// is close to an unknown one (e.g. "register it with POST /fields and send it under custom_fields").
pub fn parse<T: DeserializeOwned + JsonSchema>(body: Option<&Value>, unknown_hint: Option<&str>) -> Result<T, Problem> {
    let value = body.cloned().unwrap_or_else(|| Value::Object(Default::default()));
    let Value::Object(map) = &value else {
        return Err(Problem::bad_request("the request body must be a JSON object"));
    };
    let valid = property_names(&schema_of::<T>());
    if let Some(unknown) = map.keys().find(|k| !valid.contains(k)) {
        let suggestion = match crm_domain::suggest::closest(unknown, valid.iter().map(String::as_str)) {
            Some(s) => Some(format!("did you mean `{s}`?")),
            None => unknown_hint.map(str::to_owned),
        };
        let mut p = Problem::new(ErrorCode::UnknownField, format!("unknown field `{unknown}`"))
            .with("field", unknown.as_str())
            .with("valid_options", valid.clone());
        if let Some(s) = suggestion {
            p = p.with("suggestion", s);
        }
        return Err(p);
    }
    serde_path_to_error::deserialize::<_, T>(value).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner().to_string();
        // serde's "invalid type: string \"x\", expected i64 at line 1 column 2" → keep the useful part.
        let detail = inner.split(" at line").next().unwrap_or(&inner).to_owned();
        Problem::validation(&field, format!("{field}: {detail}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn absent_body_is_empty() {
        assert_eq!(parse::<In>(None, None).unwrap(), In { first_name: None, count: None });
    }
}
