//! The registry of a workspace and mode: custom field definitions and enum groups. Records are
//! validated against a snapshot of it, so that what the store holds always matches what was
//! registered: no unregistered key and no value of the wrong type is ever written.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{email::Email, error::ValidationError, suggest, time::Date, JsonMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Contact,
    Company,
    Deal,
    Activity,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 4] = [ObjectKind::Contact, ObjectKind::Company, ObjectKind::Deal, ObjectKind::Activity];

    pub fn as_str(self) -> &'static str {
        match self {
            ObjectKind::Contact => "contact",
            ObjectKind::Company => "company",
            ObjectKind::Deal => "deal",
            ObjectKind::Activity => "activity",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    Text,
    Number,
    Boolean,
    Date,
    Select,
    Multiselect,
    Currency,
    Reference,
    Email,
    Url,
}

impl DataType {
    pub const ALL: [DataType; 10] = [
        DataType::Text,
        DataType::Number,
        DataType::Boolean,
        DataType::Date,
        DataType::Select,
        DataType::Multiselect,
        DataType::Currency,
        DataType::Reference,
        DataType::Email,
        DataType::Url,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DataType::Text => "text",
            DataType::Number => "number",
            DataType::Boolean => "boolean",
            DataType::Date => "date",
            DataType::Select => "select",
            DataType::Multiselect => "multiselect",
            DataType::Currency => "currency",
            DataType::Reference => "reference",
            DataType::Email => "email",
            DataType::Url => "url",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    pub fn uses_enum(self) -> bool {
        matches!(self, DataType::Select | DataType::Multiselect)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDef {
    pub object: ObjectKind,
    pub key: String,
    pub label: Option<String>,
    pub data_type: DataType,
    /// Set for select and multiselect fields (defaulting to `<object>.<key>`), `None` otherwise.
    pub enum_group: Option<String>,
    pub required: bool,
}

impl FieldDef {
    /// Builds a definition from a registration request, filling the default enum group.
    pub fn new(
        object: ObjectKind,
        key: &str,
        label: Option<String>,
        data_type: DataType,
        enum_group: Option<String>,
        required: bool,
    ) -> Result<FieldDef, ValidationError> {
        let key_ok = !key.is_empty()
            && key.len() <= 64
            && key.starts_with(|c: char| c.is_ascii_lowercase())
            && key.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !key_ok {
            return Err(ValidationError::invalid(
                "key",
                "must be 1-64 characters of lowercase letters, digits and underscores, starting with a letter",
            ));
        }
        let enum_group = if data_type.uses_enum() {
            Some(enum_group.unwrap_or_else(|| format!("{}.{}", object.as_str(), key)))
        } else if enum_group.is_some() {
            return Err(ValidationError::invalid("enum_group", "only select and multiselect fields take an enum_group"));
        } else {
            None
        };
        Ok(FieldDef { object, key: key.to_owned(), label, data_type, enum_group, required })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumValue {
    pub value: String,
    pub label: Option<String>,
}

/// A reference to another record found in the input; the caller checks that the record exists
/// (the object is told by the id's prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceCheck {
    pub field: String,
    pub id: String,
}

impl ReferenceCheck {
    pub fn new(field: &str, id: &str) -> ReferenceCheck {
        ReferenceCheck { field: field.to_owned(), id: id.to_owned() }
    }

    /// The kind of record the id names, by its prefix.
    pub fn object(&self) -> Option<ObjectKind> {
        [("con_", ObjectKind::Contact), ("cmp_", ObjectKind::Company), ("deal_", ObjectKind::Deal), ("act_", ObjectKind::Activity)]
            .into_iter()
            .find(|(p, _)| self.id.starts_with(p))
            .map(|(_, o)| o)
    }
}

/// What a record's validation needs to know of the registry: the custom fields of its object and
/// the enum groups (with values) those fields and its built-in enum fields use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    pub fields: Vec<FieldDef>,
    pub enums: BTreeMap<String, Vec<EnumValue>>,
}

/// Prefixes a `reference` custom field accepts.
const REFERENCE_PREFIXES: [&str; 4] = ["con_", "cmp_", "deal_", "act_"];

impl Registry {
    pub fn field(&self, key: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.key == key)
    }

    pub fn enum_values(&self, group: &str) -> &[EnumValue] {
        self.enums.get(group).map(Vec::as_slice).unwrap_or(&[])
    }

    fn valid_options(&self, group: &str) -> Vec<String> {
        self.enum_values(group).iter().map(|v| v.value.clone()).collect()
    }

    /// Checks that `value` is in the enum `group`; `field` names the input field for the error.
    pub fn check_enum(&self, field: &str, group: &str, value: &str) -> Result<(), ValidationError> {
        if self.enum_values(group).iter().any(|v| v.value == value) {
            Ok(())
        } else {
            Err(ValidationError::UnknownValue {
                field: field.to_owned(),
                value: value.to_owned(),
                valid_options: self.valid_options(group),
            })
        }
    }

    fn unknown_key(&self, key: &str) -> ValidationError {
        let keys: Vec<&str> = self.fields.iter().map(|f| f.key.as_str()).collect();
        ValidationError::UnknownField {
            field: format!("custom_fields.{key}"),
            valid_options: keys.iter().map(|k| (*k).to_owned()).collect(),
            suggestion: Some(match suggest::closest(key, keys.iter().copied()) {
                Some(k) => format!("did you mean `{k}`?"),
                None => format!("register it first with POST /fields {{\"key\": \"{key}\"}}"),
            }),
        }
    }

    /// Validates and normalises one custom field value. Returns the value to store.
    pub fn check_value(&self, def: &FieldDef, value: Value, refs: &mut Vec<ReferenceCheck>) -> Result<Value, ValidationError> {
        let field = format!("custom_fields.{}", def.key);
        let wrong = |expected: &str| ValidationError::invalid(field.clone(), format!("expected {expected}"));
        let out = match def.data_type {
            DataType::Text => match value {
                Value::String(_) => value,
                _ => return Err(wrong("a string")),
            },
            DataType::Number => match value {
                Value::Number(_) => value,
                _ => return Err(wrong("a number")),
            },
            DataType::Boolean => match value {
                Value::Bool(_) => value,
                _ => return Err(wrong("true or false")),
            },
            DataType::Date => match value.as_str().and_then(Date::parse) {
                Some(d) => Value::String(d.to_string()),
                None => return Err(wrong("a date (YYYY-MM-DD)")),
            },
            DataType::Currency => match whole_number(&value) {
                Some(n) => Value::from(n),
                None => return Err(wrong("an integer amount in minor units (cents)")),
            },
            DataType::Email => match value.as_str().and_then(Email::parse) {
                Some(e) => Value::String(e.as_str().to_owned()),
                None => return Err(wrong("an e-mail address")),
            },
            DataType::Url => match value.as_str() {
                Some(s) if is_http_url(s) => value,
                _ => return Err(wrong("an http or https URL")),
            },
            DataType::Reference => match value.as_str() {
                Some(s) if REFERENCE_PREFIXES.iter().any(|p| s.starts_with(p)) => {
                    refs.push(ReferenceCheck { field: field.clone(), id: s.to_owned() });
                    value
                }
                Some(s) => return Err(ValidationError::InvalidReference { field, value: s.to_owned() }),
                None => return Err(wrong("the id of a record")),
            },
            DataType::Select => {
                let group = def.enum_group.as_deref().unwrap_or_default();
                match value.as_str() {
                    Some(s) => {
                        self.check_enum(&field, group, s)?;
                        value
                    }
                    None => return Err(wrong("a string from the field's enum group")),
                }
            }
            DataType::Multiselect => {
                let group = def.enum_group.as_deref().unwrap_or_default();
                let Value::Array(items) = &value else {
                    return Err(wrong("an array of strings from the field's enum group"));
                };
                for item in items {
                    let s = item.as_str().ok_or_else(|| wrong("an array of strings from the field's enum group"))?;
                    self.check_enum(&field, group, s)?;
                }
                value
            }
        };
        Ok(out)
    }

    /// Validates the `custom_fields` of a new record: every key registered, every value of its
    /// type, every required field present. Returns the normalised map and the references to check.
    pub fn validate_new(&self, values: JsonMap) -> Result<(JsonMap, Vec<ReferenceCheck>), ValidationError> {
        let mut refs = Vec::new();
        let mut out = JsonMap::new();
        for (key, value) in values {
            let def = self.field(&key).ok_or_else(|| self.unknown_key(&key))?;
            if value.is_null() {
                continue; // null on create means "not set"
            }
            out.insert(key, self.check_value(def, value, &mut refs)?);
        }
        self.check_required(&out)?;
        Ok((out, refs))
    }

    /// Merges a PATCH of `custom_fields` into `current`: keys sent are set, `null` removes a key.
    /// Returns whether anything changed, and the references to check.
    pub fn merge(&self, current: &mut JsonMap, patch: JsonMap) -> Result<(bool, Vec<ReferenceCheck>), ValidationError> {
        let mut refs = Vec::new();
        let mut changed = false;
        for (key, value) in patch {
            let def = self.field(&key).ok_or_else(|| self.unknown_key(&key))?;
            if value.is_null() {
                changed |= current.remove(&key).is_some();
            } else {
                let value = self.check_value(def, value, &mut refs)?;
                if current.get(&key) != Some(&value) {
                    current.insert(key, value);
                    changed = true;
                }
            }
        }
        self.check_required(current)?;
        Ok((changed, refs))
    }

    fn check_required(&self, values: &JsonMap) -> Result<(), ValidationError> {
        match self.fields.iter().find(|f| f.required && !values.contains_key(&f.key)) {
            Some(f) => Err(ValidationError::invalid(format!("custom_fields.{}", f.key), "this custom field is required")),
            None => Ok(()),
        }
    }
}

/// A JSON number with no fractional part, as an integer (`3.0` is 3; decisions §17).
pub fn whole_number(value: &Value) -> Option<i64> {
    let Value::Number(n) = value else { return None };
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    let f = n.as_f64()?;
    (f.fract() == 0.0 && f.abs() < 9.0e15).then_some(f as i64)
}

/// An absolute `http` or `https` URL with a host and no whitespace.
pub fn is_http_url(s: &str) -> bool {
    let rest = s.strip_prefix("https://").or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(rest) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_empty() && !s.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn registry() -> Registry {
        let f = |key: &str, t: DataType, required: bool| FieldDef::new(ObjectKind::Contact, key, None, t, None, required).unwrap();
        let mut r = Registry {
            fields: vec![
                f("nickname", DataType::Text, false),
                f("score", DataType::Number, false),
                f("vip", DataType::Boolean, false),
                f("birthday", DataType::Date, false),
                f("tier", DataType::Select, false),
                f("tags", DataType::Multiselect, false),
                f("ltv", DataType::Currency, false),
                f("referrer", DataType::Reference, false),
                f("alt_email", DataType::Email, false),
                f("site", DataType::Url, false),
            ],
            enums: BTreeMap::new(),
        };
        let values = |vs: &[&str]| vs.iter().map(|v| EnumValue { value: (*v).into(), label: None }).collect();
        r.enums.insert("contact.tier".into(), values(&["gold", "silver"]));
        r.enums.insert("contact.tags".into(), values(&["a", "b"]));
        r
    }

    fn map(v: Value) -> JsonMap {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn select_without_group_uses_object_dot_key() {
        let f = FieldDef::new(ObjectKind::Deal, "tier", None, DataType::Select, None, false).unwrap();
        assert_eq!(f.enum_group.as_deref(), Some("deal.tier"));
        assert!(FieldDef::new(ObjectKind::Deal, "x", None, DataType::Text, Some("g".into()), false).is_err());
        assert!(FieldDef::new(ObjectKind::Deal, "Bad Key", None, DataType::Text, None, false).is_err());
    }

    #[test]
    fn unregistered_key_is_rejected_with_suggestion() {
        let err = registry().validate_new(map(json!({"nicknam": "x"}))).unwrap_err();
        let ValidationError::UnknownField { field, suggestion, valid_options } = err else { panic!() };
        assert_eq!(field, "custom_fields.nicknam");
        assert_eq!(suggestion.as_deref(), Some("did you mean `nickname`?"));
        assert!(valid_options.contains(&"nickname".to_owned()));
    }

    #[test]
    fn select_outside_group_lists_valid_options() {
        let err = registry().validate_new(map(json!({"tier": "bronze"}))).unwrap_err();
        assert_eq!(
            err,
            ValidationError::UnknownValue {
                field: "custom_fields.tier".into(),
                value: "bronze".into(),
                valid_options: vec!["gold".into(), "silver".into()]
            }
        );
        assert!(registry().validate_new(map(json!({"tags": ["a", "zzz"]}))).is_err());
        assert!(registry().validate_new(map(json!({"tags": ["a", "b"]}))).is_ok());
    }

    #[test]
    fn wrong_types_fail() {
        for (k, v) in [
            ("score", json!("12")),
            ("vip", json!("yes")),
            ("birthday", json!("2026-13-01")),
            ("ltv", json!(10.5)),
            ("alt_email", json!("nope")),
            ("site", json!("ftp://x.y")),
            ("nickname", json!(3)),
            ("referrer", json!(5)),
        ] {
            let mut m = JsonMap::new();
            m.insert(k.into(), v.clone());
            assert!(registry().validate_new(m).is_err(), "{k}={v} should fail");
        }
    }

    #[test]
    fn currency_accepts_whole_floats_and_normalises() {
        let (out, _) = registry().validate_new(map(json!({"ltv": 1200.0}))).unwrap();
        assert_eq!(out["ltv"], json!(1200));
    }

    #[test]
    fn references_are_returned_for_checking() {
        let (_, refs) = registry().validate_new(map(json!({"referrer": "con_0000000000000000000000000a"}))).unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].field, "custom_fields.referrer");
    }

    #[test]
    fn merge_sets_and_removes() {
        let r = registry();
        let mut current = map(json!({"nickname": "a", "score": 1}));
        let (changed, _) = r.merge(&mut current, map(json!({"nickname": null, "vip": true}))).unwrap();
        assert!(changed);
        assert_eq!(Value::Object(current.clone()), json!({"score": 1, "vip": true}));
        let (changed, _) = r.merge(&mut current, map(json!({"score": 1}))).unwrap();
        assert!(!changed, "same value is no change");
    }

    #[test]
    fn required_fields_are_enforced_on_create_and_merge() {
        let mut r = registry();
        r.fields.push(FieldDef::new(ObjectKind::Contact, "region", None, DataType::Text, None, true).unwrap());
        let err = r.validate_new(JsonMap::new()).unwrap_err();
        assert_eq!(err, ValidationError::invalid("custom_fields.region", "this custom field is required"));
        let mut current = map(json!({"region": "eu"}));
        assert!(r.merge(&mut current, map(json!({"region": null}))).is_err());
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            "[a-z@.:/0-9-]{0,20}".prop_map(Value::String),
            prop::collection::vec("[a-z]{1,3}".prop_map(Value::String), 0..3).prop_map(Value::Array),
        ]
    }

    proptest! {
        /// No value of the wrong type is ever accepted, and an accepted value is accepted again,
        /// unchanged, when it comes back (as it does from the store).
        #[test]
        fn accepted_values_are_of_the_field_type_and_stable(idx in 0usize..10, value in arb_value()) {
            let r = registry();
            let def = r.fields[idx].clone();
            let mut refs = Vec::new();
            if let Ok(stored) = r.check_value(&def, value, &mut refs) {
                let ok_type = match def.data_type {
                    DataType::Text | DataType::Select | DataType::Email | DataType::Url | DataType::Reference | DataType::Date => stored.is_string(),
                    DataType::Number => stored.is_number(),
                    DataType::Currency => stored.is_i64(),
                    DataType::Boolean => stored.is_boolean(),
                    DataType::Multiselect => stored.is_array(),
                };
                prop_assert!(ok_type);
                let round_trip: Value = serde_json::from_str(&stored.to_string()).unwrap();
                let again = r.check_value(&def, round_trip, &mut refs);
                prop_assert_eq!(again, Ok(stored));
            }
        }
    }
}
