//! A record's fields as form inputs, from the live schema (`svc_describe_schema`): built-in
//! fields and registered custom fields, each with the input its type needs (a select from its
//! enum group, a date picker, a number, a checkbox); and a submitted form turned back into the
//! JSON a create or update takes.

use serde_json::{Map, Number, Value};

use crate::form::Form;

/// The prefix of custom fields' input names, as the API's filters and imports name them.
pub const CUSTOM: &str = "custom_fields.";

/// How a field is entered.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Text,
    Email,
    Url,
    Integer,
    Number,
    Date,
    Checkbox,
    Select(Vec<(String, String)>),
    Multiselect(Vec<(String, String)>),
}

/// One field of a record's form.
#[derive(Debug, Clone)]
pub struct Field {
    /// The form name: the key, or `custom_fields.<key>`.
    pub name: String,
    pub label: String,
    pub input: Input,
    pub required: bool,
    /// The current value as the input shows it.
    pub value: String,
    /// The current values of a multiselect.
    pub values: Vec<String>,
}

impl Field {
    pub fn id(&self) -> String {
        format!("f-{}", self.name.replace('.', "-"))
    }

    pub fn kind(&self) -> &'static str {
        match self.input {
            Input::Text => "text",
            Input::Email => "email",
            Input::Url => "url",
            Input::Integer | Input::Number => "number",
            Input::Date => "date",
            Input::Checkbox => "checkbox",
            Input::Select(_) => "select",
            Input::Multiselect(_) => "multiselect",
        }
    }

    pub fn step(&self) -> &'static str {
        if self.input == Input::Integer {
            "1"
        } else {
            "any"
        }
    }

    pub fn options(&self) -> &[(String, String)] {
        match &self.input {
            Input::Select(o) | Input::Multiselect(o) => o,
            _ => &[],
        }
    }

    pub fn is_selected(&self, option: &str) -> bool {
        self.value == option || self.values.iter().any(|v| v == option)
    }

    pub fn checked(&self) -> bool {
        self.value == "true"
    }
}

/// Built-in fields the console does not offer as inputs: set by the service or shown another
/// way (a deal's pipeline by its id, the stage on the board and in its own select).
const NOT_INPUTS: &[&str] = &["pipeline", "custom_fields"];

/// The schema's document of `object` (`contact`, ...).
fn object_doc<'s>(schema: &'s Value, object: &str) -> Option<&'s Value> {
    schema["objects"]
        .as_array()?
        .iter()
        .find(|o| o["name"] == object)
}

/// The inputs of `object`'s writable fields, filled from `record` (`Null` for a new one).
pub fn fields(schema: &Value, object: &str, record: &Value) -> Vec<Field> {
    let Some(doc) = object_doc(schema, object) else {
        return Vec::new();
    };
    doc["fields"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|f| f["read_only"] != true)
                .filter(|f| !NOT_INPUTS.contains(&f["key"].as_str().unwrap_or_default()))
                .map(|f| field(schema, f, record))
                .collect()
        })
        .unwrap_or_default()
}

fn field(schema: &Value, doc: &Value, record: &Value) -> Field {
    let key = doc["key"].as_str().unwrap_or_default();
    let custom = doc["custom"] == true;
    let current = if custom {
        &record["custom_fields"][key]
    } else {
        &record[key]
    };
    let options = || enum_options(schema, doc["enum_group"].as_str());
    let input = match (doc["type"].as_str().unwrap_or("string"), custom) {
        (_, false) if doc["enum_group"].is_string() => Input::Select(options()),
        ("select", true) => Input::Select(options()),
        ("multiselect", true) => Input::Multiselect(options()),
        ("number", _) => Input::Number,
        // Currency fields hold integer minor units.
        ("currency", true) | ("integer", false) => Input::Integer,
        ("boolean", _) => Input::Checkbox,
        ("date", true) => Input::Date,
        ("email", true) => Input::Email,
        ("url", true) => Input::Url,
        _ if key == "email" => Input::Email,
        _ if key.ends_with("_url") => Input::Url,
        _ if key.ends_with("_date") => Input::Date,
        _ => Input::Text,
    };
    let label = doc["label"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| humanize(key));
    Field {
        name: if custom {
            format!("{CUSTOM}{key}")
        } else {
            key.to_owned()
        },
        label,
        input,
        required: doc["required"] == true,
        value: value_text(current),
        values: current
            .as_array()
            .map(|a| a.iter().map(value_text).collect())
            .unwrap_or_default(),
    }
}

fn enum_options(schema: &Value, group: Option<&str>) -> Vec<(String, String)> {
    let Some(group) = group else {
        return Vec::new();
    };
    schema["enums"][group]
        .as_array()
        .map(|values| {
            values
                .iter()
                .map(|v| {
                    let value = v["value"].as_str().unwrap_or_default().to_owned();
                    let label = v["label"].as_str().unwrap_or(&value).to_owned();
                    (value, label)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `first_name` → `First name`.
pub fn humanize(key: &str) -> String {
    let spaced = key.trim_end_matches("_id").replace('_', " ");
    let mut chars = spaced.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A value as text: strings as they are, numbers and booleans as JSON writes them, null empty,
/// lists joined by commas.
pub fn value_text(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(value_text).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// An amount in cents as `1,234.50 USD`; empty when there is none.
pub fn money(cents: &Value, currency: &Value) -> String {
    let Some(cents) = cents.as_i64() else {
        return String::new();
    };
    let sign = if cents < 0 { "-" } else { "" };
    let whole = (cents / 100).unsigned_abs().to_string();
    let mut grouped = String::new();
    for (i, digit) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let currency = currency.as_str().unwrap_or_default();
    format!(
        "{sign}{grouped}.{:02} {currency}",
        (cents % 100).unsigned_abs()
    )
    .trim_end()
    .to_owned()
}

/// The JSON of one submitted field, by its input: blank is null.
fn submitted(field: &Field, form: &Form) -> Value {
    if field.input == Input::Checkbox {
        return Value::Bool(form.get(&field.name).is_some());
    }
    if let Input::Multiselect(_) = field.input {
        let chosen: Vec<Value> = form
            .0
            .iter()
            .filter(|(k, v)| *k == field.name && !v.trim().is_empty())
            .map(|(_, v)| Value::String(v.trim().to_owned()))
            .collect();
        return if chosen.is_empty() {
            Value::Null
        } else {
            Value::Array(chosen)
        };
    }
    let Some(text) = form.text(&field.name) else {
        return Value::Null;
    };
    let number = match field.input {
        Input::Integer => text.parse::<i64>().ok().map(Number::from),
        Input::Number => text.parse::<f64>().ok().and_then(Number::from_f64),
        _ => None,
    };
    // A number that does not parse goes as text: the API's validation names the field.
    number.map_or_else(|| Value::String(text.to_owned()), Value::Number)
}

/// The body of a create (`before` is `None`: every filled field) or an update (only the fields
/// whose submitted value differs from `before`'s; null clears one).
pub fn body(fields: &[Field], form: &Form, before: Option<&[Field]>) -> Map<String, Value> {
    let mut body = Map::new();
    let mut custom = Map::new();
    for field in fields {
        let value = submitted(field, form);
        let changed = match before.and_then(|b| b.iter().find(|f| f.name == field.name)) {
            Some(old) if old.input == Input::Checkbox => value != Value::Bool(old.checked()),
            Some(old) => value_text(&value) != old.value,
            None => !value.is_null() && value != Value::Bool(false),
        };
        if !changed {
            continue;
        }
        match field.name.strip_prefix(CUSTOM) {
            Some(key) => custom.insert(key.to_owned(), value),
            None => body.insert(field.name.clone(), value),
        };
    }
    if !custom.is_empty() {
        body.insert("custom_fields".into(), Value::Object(custom));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "objects": [{"name": "contact", "fields": [
                {"key": "id", "type": "string", "read_only": true, "custom": false, "required": false},
                {"key": "first_name", "type": "string", "read_only": false, "custom": false, "required": false},
                {"key": "email", "type": "string", "read_only": false, "custom": false, "required": false},
                {"key": "tier", "type": "select", "read_only": false, "custom": true, "required": false, "enum_group": "contact.tier"},
                {"key": "seats", "type": "number", "read_only": false, "custom": true, "required": false},
                {"key": "vip", "type": "boolean", "read_only": false, "custom": true, "required": false}
            ]}],
            "enums": {"contact.tier": [{"value": "gold", "label": "Gold"}, {"value": "silver", "label": null}]}
        })
    }

    #[test]
    fn inputs_follow_the_schema_and_the_record() {
        let record = json!({"first_name": "Kate", "custom_fields": {"tier": "gold", "seats": 3}});
        let f = fields(&schema(), "contact", &record);
        let names: Vec<&str> = f.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "first_name",
                "email",
                "custom_fields.tier",
                "custom_fields.seats",
                "custom_fields.vip"
            ]
        );
        assert_eq!(f[1].input, Input::Email);
        assert_eq!(
            f[2].input,
            Input::Select(vec![
                ("gold".into(), "Gold".into()),
                ("silver".into(), "silver".into())
            ])
        );
        assert!(f[2].is_selected("gold"));
        assert_eq!(f[3].value, "3");
        assert_eq!(f[4].input, Input::Checkbox);
    }

    #[test]
    fn an_update_sends_only_what_changed() {
        let record = json!({"first_name": "Kate", "email": "k@example.com", "custom_fields": {"tier": "gold"}});
        let before = fields(&schema(), "contact", &record);
        let form = Form::parse(
            b"first_name=Kate&email=&custom_fields.tier=silver&custom_fields.seats=4.5",
        );
        let patch = body(&before, &form, Some(&before));
        assert_eq!(
            Value::Object(patch),
            json!({"email": null, "custom_fields": {"tier": "silver", "seats": 4.5}})
        );
        let create = body(&before, &form, None);
        assert_eq!(
            Value::Object(create),
            json!({"first_name": "Kate", "custom_fields": {"tier": "silver", "seats": 4.5}})
        );
    }

    #[test]
    fn money_is_grouped_with_its_currency() {
        assert_eq!(money(&json!(123456789), &json!("USD")), "1,234,567.89 USD");
        assert_eq!(money(&json!(-5), &json!(null)), "-0.05");
        assert_eq!(money(&json!(null), &json!("USD")), "");
    }
}
