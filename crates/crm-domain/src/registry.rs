//! The registry of a workspace and mode: custom field definitions and enum groups. Records are
//! validated against a snapshot of it, so that what the store holds always matches what was
//! registered: no unregistered key and no value of the wrong type is ever written.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{email::Email, error::ValidationError, suggest, text, time::Date, JsonMap};

pub use crate::object::{ObjectKind, ACTIVITY_TYPE_GROUP};

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

    /// Parses a requested `data_type`; anything else is `unknown_value` listing the ten.
    pub fn parse_input(field: &str, s: &str) -> Result<Self, ValidationError> {
        Self::parse(s).ok_or_else(|| ValidationError::UnknownValue {
            field: field.to_owned(),
            value: s.to_owned(),
            valid_options: Self::ALL.iter().map(|t| t.as_str().to_owned()).collect(),
        })
    }

    /// Whether fields of this type may be registered `unique`.
    pub fn can_be_unique(self) -> bool {
        matches!(
            self,
            DataType::Text | DataType::Email | DataType::Url | DataType::Number
        )
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
    /// Values are unique per object, workspace and mode (text, email, url and number fields):
    /// a second record with a value is refused, and upserts may match on it (decisions §24).
    pub unique: bool,
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
        check_key("key", key)?;
        if let Some(group) = &enum_group {
            check_group_name("enum_group", group)?;
        }
        let enum_group = if data_type.uses_enum() {
            Some(enum_group.unwrap_or_else(|| format!("{}.{}", object.as_str(), key)))
        } else if enum_group.is_some() {
            return Err(ValidationError::invalid(
                "enum_group",
                "only select and multiselect fields take an enum_group",
            ));
        } else {
            None
        };
        Ok(FieldDef {
            object,
            key: key.to_owned(),
            label,
            data_type,
            enum_group,
            required,
            unique: false,
        })
    }

    /// The rules of `POST /fields`: `object` one of the four, `data_type` one of the ten
    /// (default `text`), the key format, a blank label counting as none, and the default enum
    /// group of select and multiselect fields.
    pub fn register(request: FieldRegistration) -> Result<FieldDef, ValidationError> {
        let object = ObjectKind::parse_input("object", &request.object)?;
        let data_type = match request.data_type.as_deref() {
            Some(t) => DataType::parse_input("data_type", t)?,
            None => DataType::Text,
        };
        let label = clean_label(request.label)?;
        let mut def = FieldDef::new(
            object,
            &request.key,
            label,
            data_type,
            request.enum_group,
            request.required,
        )?;
        check_not_reserved(object, &def.key)?;
        if request.unique && !data_type.can_be_unique() {
            return Err(ValidationError::invalid(
                "unique",
                "only text, email, url and number fields can be unique",
            ));
        }
        def.unique = request.unique;
        Ok(def)
    }
}

/// A new custom field may not shadow a built-in field or a reserved name of its object (see
/// `ObjectKind::reserved_field_names`). Checked on registration only: the rule is for new keys,
/// not for reading definitions back.
fn check_not_reserved(object: ObjectKind, key: &str) -> Result<(), ValidationError> {
    if object.reserved_field_names().any(|name| name == key) {
        return Err(ValidationError::invalid(
            "key",
            format!("`{key}` is a built-in or reserved field name of {}; choose another key for the custom field", object.as_str()),
        ));
    }
    Ok(())
}

/// A `POST /fields` request as the client sent it, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldRegistration {
    pub object: String,
    pub key: String,
    pub label: Option<String>,
    pub data_type: Option<String>,
    pub enum_group: Option<String>,
    pub required: bool,
    /// Values unique per object, workspace and mode.
    pub unique: bool,
}

/// What [`clean_label`] accepts, as a regular expression for JSON Schemas: no control
/// characters, at most [`MAX_LABEL_LEN`] once trimmed.
pub const LABEL_PATTERN: &str = "^\\s*[^\\u0000-\\u001f\\u007f-\\u009f]{0,200}\\s*$";

/// What [`EnumValue::new`] accepts, as a regular expression for JSON Schemas: 1-200 characters
/// once trimmed, no control characters.
pub const VALUE_PATTERN: &str = "^\\s*([^\\s\\u0000-\\u001f\\u007f-\\u009f]|[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]{0,198}[^\\s\\u0000-\\u001f\\u007f-\\u009f])\\s*$";

/// Longest label a field, enum value or object type may carry.
pub const MAX_LABEL_LEN: usize = 200;

/// [`check_key`]'s format as a regular expression, for JSON Schemas.
pub const KEY_PATTERN: &str = "^[a-z][a-z0-9_]{0,63}$";

/// The key format of custom fields and custom object types: 1-64 lowercase letters, digits and
/// underscores, starting with a letter (snake_case, so it reads the same in JSON, in conditions
/// and in merge tags).
pub fn check_key(field: &str, key: &str) -> Result<(), ValidationError> {
    let ok = !key.is_empty()
        && key.len() <= 64
        && key.starts_with(|c: char| c.is_ascii_lowercase())
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ValidationError::invalid(field, "must be 1-64 characters of lowercase letters, digits and underscores, starting with a letter"))
    }
}

/// [`check_group_name`]'s format as a regular expression, for JSON Schemas.
pub const GROUP_PATTERN: &str = "^[a-z][a-z0-9_.-]{0,99}$";

/// The name format of enum groups: 1-100 lowercase letters, digits, `_`, `.` and `-`, starting
/// with a letter, so both `contact.type` and bare names such as `industry` fit, with one spelling
/// per group.
pub fn check_group_name(field: &str, group: &str) -> Result<(), ValidationError> {
    let ok = !group.is_empty()
        && group.len() <= 100
        && group.starts_with(|c: char| c.is_ascii_lowercase())
        && group
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(ValidationError::invalid(
            field,
            "must be 1-100 characters of lowercase letters, digits, `_`, `.` and `-`, starting with a letter (e.g. `contact.type`)",
        ))
    }
}

/// Trims a label; a blank one is none.
pub fn clean_label(label: Option<String>) -> Result<Option<String>, ValidationError> {
    let label = label.map(|l| l.trim().to_owned()).filter(|l| !l.is_empty());
    match &label {
        Some(l) if l.chars().count() > MAX_LABEL_LEN => Err(ValidationError::invalid(
            "label",
            format!("must be at most {MAX_LABEL_LEN} characters"),
        )),
        Some(l) if l.chars().any(char::is_control) => Err(ValidationError::invalid(
            "label",
            "must not contain control characters",
        )),
        _ => Ok(label),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumValue {
    pub value: String,
    pub label: Option<String>,
}

impl EnumValue {
    /// A value to add to a group: trimmed (records' enum fields are trimmed before they are
    /// checked, so a value with outer spaces could never match), 1-200 characters, no control
    /// characters.
    pub fn new(value: &str, label: Option<String>) -> Result<EnumValue, ValidationError> {
        let value = value.trim();
        if value.is_empty() || value.chars().count() > 200 || value.chars().any(char::is_control) {
            return Err(ValidationError::invalid(
                "value",
                "must be 1-200 characters with no control characters",
            ));
        }
        Ok(EnumValue {
            value: value.to_owned(),
            label: clean_label(label)?,
        })
    }
}

/// A custom object type: a schema grouping only (spec, "Custom object type").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectType {
    pub key: String,
    pub label: Option<String>,
}

impl ObjectType {
    /// The rules of `POST /types`: the key format of custom fields, a trimmed label.
    pub fn new(key: &str, label: Option<String>) -> Result<ObjectType, ValidationError> {
        check_key("key", key)?;
        Ok(ObjectType {
            key: key.to_owned(),
            label: clean_label(label)?,
        })
    }
}

/// A reference to another record found in the input, or to the user who owns the record; the
/// caller checks that it exists (what it names is told by the id's prefix).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReferenceCheck {
    pub field: String,
    pub id: String,
}

impl ReferenceCheck {
    pub fn new(field: &str, id: &str) -> ReferenceCheck {
        ReferenceCheck {
            field: field.to_owned(),
            id: id.to_owned(),
        }
    }

    /// Whether the id names a user of the workspace (an owner, [`crate::owner`]) rather than a
    /// record of the tenant.
    pub fn names_user(&self) -> bool {
        self.id.starts_with(crate::ids::UserId::PREFIX)
    }

    /// The kind of record the id names, by its prefix.
    pub fn object(&self) -> Option<ObjectKind> {
        [
            ("con_", ObjectKind::Contact),
            ("cmp_", ObjectKind::Company),
            ("deal_", ObjectKind::Deal),
            ("act_", ObjectKind::Activity),
        ]
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

/// Prefixes a `reference` custom field accepts (checked against `ObjectKind::id_prefix` in tests).
const REFERENCE_PREFIXES: [&str; 4] = ["con_", "cmp_", "deal_", "act_"];

impl Registry {
    pub fn field(&self, key: &str) -> Option<&FieldDef> {
        self.fields.iter().find(|f| f.key == key)
    }

    pub fn enum_values(&self, group: &str) -> &[EnumValue] {
        self.enums.get(group).map(Vec::as_slice).unwrap_or(&[])
    }

    fn valid_options(&self, group: &str) -> Vec<String> {
        self.enum_values(group)
            .iter()
            .map(|v| v.value.clone())
            .collect()
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
    pub fn check_value(
        &self,
        def: &FieldDef,
        value: Value,
        refs: &mut Vec<ReferenceCheck>,
    ) -> Result<Value, ValidationError> {
        let field = format!("custom_fields.{}", def.key);
        let wrong = |expected: &str| {
            ValidationError::invalid(field.clone(), format!("expected {expected}"))
        };
        let out = match def.data_type {
            DataType::Text => match value {
                Value::String(ref s) => {
                    text::check_len(&field, s, text::MAX_CUSTOM_TEXT)?;
                    value
                }
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
                Some(s) if is_http_url(s) => {
                    text::check_len(&field, s, text::MAX_LINE)?;
                    value
                }
                _ => return Err(wrong("an http or https URL")),
            },
            DataType::Reference => match value.as_str() {
                Some(s) if REFERENCE_PREFIXES.iter().any(|p| s.starts_with(p)) => {
                    refs.push(ReferenceCheck {
                        field: field.clone(),
                        id: s.to_owned(),
                    });
                    value
                }
                Some(s) => {
                    return Err(ValidationError::InvalidReference {
                        field,
                        value: s.to_owned(),
                    })
                }
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
                if items.len() > text::MAX_MULTISELECT {
                    return Err(ValidationError::invalid(
                        field.clone(),
                        format!("must hold at most {} values", text::MAX_MULTISELECT),
                    ));
                }
                for item in items {
                    let s = item
                        .as_str()
                        .ok_or_else(|| wrong("an array of strings from the field's enum group"))?;
                    self.check_enum(&field, group, s)?;
                }
                value
            }
        };
        Ok(out)
    }

    /// Validates the `custom_fields` of a new record: every key registered, every value of its
    /// type, every required field present. Returns the normalised map and the references to check.
    pub fn validate_new(
        &self,
        values: JsonMap,
    ) -> Result<(JsonMap, Vec<ReferenceCheck>), ValidationError> {
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
        text::check_custom_fields_size(&out)?;
        Ok((out, refs))
    }

    /// Merges a PATCH of `custom_fields` into `current`: keys sent are set, `null` removes a key.
    /// Returns whether anything changed, and the references to check.
    pub fn merge(
        &self,
        current: &mut JsonMap,
        patch: JsonMap,
    ) -> Result<(bool, Vec<ReferenceCheck>), ValidationError> {
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
        if changed {
            text::check_custom_fields_size(current)?;
        }
        Ok((changed, refs))
    }

    /// Reads a list filter on the custom field `key` (`custom_fields.<key>=<raw>` in a query
    /// string) as the JSON value a stored record would hold, normalised as writes are (dates,
    /// emails), so that equality with stored values is exact. A multiselect filter names one value
    /// of the group, matching records whose array holds it. The errors are the write path's:
    /// `unknown_field` for an unregistered key, `unknown_value` outside the enum group,
    /// `validation_failed` for a value the field's type cannot hold.
    pub fn filter_value(&self, key: &str, raw: &str) -> Result<Value, ValidationError> {
        let def = self.field(key).ok_or_else(|| self.unknown_key(key))?;
        let field = format!("custom_fields.{key}");
        let value = match def.data_type {
            DataType::Number | DataType::Currency => match raw.parse::<serde_json::Number>() {
                Ok(n) => Value::Number(n),
                Err(_) => {
                    return Err(ValidationError::invalid(
                        field,
                        format!("expected a number, got `{raw}`"),
                    ))
                }
            },
            DataType::Boolean => match raw {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                _ => return Err(ValidationError::invalid(field, "expected true or false")),
            },
            DataType::Multiselect => {
                self.check_enum(&field, def.enum_group.as_deref().unwrap_or_default(), raw)?;
                return Ok(Value::String(raw.to_owned()));
            }
            _ => Value::String(raw.to_owned()),
        };
        // Existence of a referenced record is not checked: a filter on a missing one matches nothing.
        self.check_value(def, value, &mut Vec::new())
            .map_err(|e| match e {
                ValidationError::InvalidReference { field, value } => {
                    ValidationError::invalid(field, format!("`{value}` is not the id of a record"))
                }
                other => other,
            })
    }

    fn check_required(&self, values: &JsonMap) -> Result<(), ValidationError> {
        match self
            .fields
            .iter()
            .find(|f| f.required && !values.contains_key(&f.key))
        {
            Some(f) => Err(ValidationError::invalid(
                format!("custom_fields.{}", f.key),
                "this custom field is required",
            )),
            None => Ok(()),
        }
    }
}

/// A JSON number with no fractional part that fits in an `i64`, as one, whatever its spelling:
/// `3.0` is 3 (A2A clients send every number as a double) and `1e18` is 10^18 (decisions §17, §22).
pub fn whole_number(value: &Value) -> Option<i64> {
    let Value::Number(n) = value else { return None };
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    integral_f64(n.as_f64()?)
}

/// What a client is told when a value is not a [`whole_number`].
pub const WHOLE_NUMBER_RULE: &str =
    "must be a whole number from -9223372036854775808 to 9223372036854775807";

/// `f` as an `i64` when it is integral and in range. Every integral double below 2^63 in
/// magnitude is exactly an `i64`; 2^63 itself (what `9223372036854775807.0` rounds to) is not.
pub fn integral_f64(f: f64) -> Option<i64> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    (f.fract() == 0.0 && (-TWO_POW_63..TWO_POW_63).contains(&f)).then_some(f as i64)
}

/// An absolute `http` or `https` URL with a host and no whitespace.
pub fn is_http_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"));
    match rest {
        Some(rest) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_empty() && !s.chars().any(char::is_whitespace)
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;
