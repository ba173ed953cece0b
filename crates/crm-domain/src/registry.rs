//! The registry of a workspace and mode: custom field definitions and enum groups. Records are
//! validated against a snapshot of it, so that what the store holds always matches what was
//! registered: no unregistered key and no value of the wrong type is ever written.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{
    activity, company,
    contact::{self, CONTACT_TYPE_GROUP},
    deal,
    email::Email,
    error::ValidationError,
    ids::{ActivityId, CompanyId, ContactId, DealId},
    merge, suggest, text,
    time::Date,
    JsonMap,
};

/// The enum group an activity's `type` must belong to (seeded with note, call, email, task).
pub const ACTIVITY_TYPE_GROUP: &str = "activity.type";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectKind {
    Contact,
    Company,
    Deal,
    Activity,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 4] = [
        ObjectKind::Contact,
        ObjectKind::Company,
        ObjectKind::Deal,
        ObjectKind::Activity,
    ];

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

    /// Parses an `object` named in a request; anything else is `unknown_value` listing the four.
    pub fn parse_input(field: &str, s: &str) -> Result<Self, ValidationError> {
        Self::parse(s).ok_or_else(|| ValidationError::UnknownValue {
            field: field.to_owned(),
            value: s.to_owned(),
            valid_options: Self::ALL.iter().map(|o| o.as_str().to_owned()).collect(),
        })
    }

    /// The prefix of this object's ids, from its typed id.
    pub fn id_prefix(self) -> &'static str {
        match self {
            ObjectKind::Contact => ContactId::PREFIX,
            ObjectKind::Company => CompanyId::PREFIX,
            ObjectKind::Deal => DealId::PREFIX,
            ObjectKind::Activity => ActivityId::PREFIX,
        }
    }

    /// Built-in fields a create must carry. A wire schema may show them as optional, so that a
    /// missing one is refused with `validation_failed` naming it rather than a parse error.
    pub fn required_on_create(self) -> &'static [&'static str] {
        match self {
            ObjectKind::Company => &["name"],
            ObjectKind::Deal => &["title"],
            ObjectKind::Contact | ObjectKind::Activity => &[],
        }
    }

    /// The names a custom field of this object may not take: the object's built-in fields (those a
    /// client writes, from the record, and those its snapshot adds, from the merge-tag lists), the
    /// fields every record carries, and the names conditions and merge tags give a meaning of their
    /// own on this object (`previous_stage` on `deal.stage_changed`, `company` for
    /// `{{company.<field>}}`). A bare name in a condition, a tag or a `set_field` means the
    /// built-in first, so a custom field by the same name could never be read that way, and
    /// `GET /schema` would list the name twice.
    pub fn reserved_field_names(self) -> impl Iterator<Item = &'static str> {
        let (writable, snapshot, special): (&[&str], &[&str], &[&str]) = match self {
            ObjectKind::Contact => (
                &contact::WRITABLE_FIELDS,
                merge::CONTACT_FIELDS,
                &["company"],
            ),
            ObjectKind::Company => (&company::WRITABLE_FIELDS, merge::COMPANY_FIELDS, &[]),
            ObjectKind::Deal => (
                &deal::WRITABLE_FIELDS,
                merge::DEAL_FIELDS,
                &["company", "previous_stage"],
            ),
            ObjectKind::Activity => (&activity::WRITABLE_FIELDS, &[], &[]),
        };
        RECORD_FIELDS
            .iter()
            .chain(writable)
            .chain(snapshot)
            .chain(special)
            .copied()
    }

    /// Built-in fields whose value must be in an enum group: (field, group).
    pub fn enum_fields(self) -> &'static [(&'static str, &'static str)] {
        match self {
            ObjectKind::Contact => &[("type", CONTACT_TYPE_GROUP)],
            ObjectKind::Activity => &[("type", ACTIVITY_TYPE_GROUP)],
            ObjectKind::Company | ObjectKind::Deal => &[],
        }
    }
}

/// Fields of every record's snapshot that the service sets (`deleted_at` on the objects that are
/// soft-deleted).
const RECORD_FIELDS: [&str; 6] = [
    "id",
    "object",
    "created_at",
    "updated_at",
    "version",
    "deleted_at",
];

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
        let def = FieldDef::new(
            object,
            &request.key,
            label,
            data_type,
            request.enum_group,
            request.required,
        )?;
        check_not_reserved(object, &def.key)?;
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

/// A reference to another record found in the input; the caller checks that the record exists
/// (the object is told by the id's prefix).
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
mod tests {
    use super::*;

    #[test]
    fn whole_numbers_take_any_spelling_within_i64() {
        let n = |text: &str| whole_number(&serde_json::from_str(text).unwrap());
        assert_eq!(n("1e18"), Some(1_000_000_000_000_000_000));
        assert_eq!(n("3.0"), Some(3));
        assert_eq!(n("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(n("-9.223372036854775808e18"), Some(i64::MIN));
        assert_eq!(n("9223372036854775807"), Some(i64::MAX));
        assert_eq!(n("3.5"), None);
        assert_eq!(n("9223372036854775808"), None);
        assert_eq!(n("9.223372036854775807e18"), None, "rounds to 2^63");
        assert_eq!(n("1e300"), None);
        assert_eq!(n("\"3\""), None);
    }
    use proptest::prelude::*;
    use serde_json::json;

    fn registry() -> Registry {
        let f = |key: &str, t: DataType, required: bool| {
            FieldDef::new(ObjectKind::Contact, key, None, t, None, required).unwrap()
        };
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
        let values = |vs: &[&str]| {
            vs.iter()
                .map(|v| EnumValue {
                    value: (*v).into(),
                    label: None,
                })
                .collect()
        };
        r.enums
            .insert("contact.tier".into(), values(&["gold", "silver"]));
        r.enums.insert("contact.tags".into(), values(&["a", "b"]));
        r
    }

    fn map(v: Value) -> JsonMap {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn custom_values_and_records_have_sizes() {
        let r = registry();
        let field_of = |v: Value| match r.validate_new(map(v)).unwrap_err() {
            ValidationError::Invalid { field, .. } => field,
            other => panic!("{other:?}"),
        };
        let ok = "é".repeat(text::MAX_CUSTOM_TEXT);
        assert!(r.validate_new(map(json!({"nickname": ok}))).is_ok());
        let long = "x".repeat(text::MAX_CUSTOM_TEXT + 1);
        assert_eq!(
            field_of(json!({"nickname": long})),
            "custom_fields.nickname"
        );
        let url = format!("https://example.com/{}", "x".repeat(text::MAX_LINE));
        assert_eq!(field_of(json!({"site": url})), "custom_fields.site");
        let many: Vec<&str> = vec!["a"; text::MAX_MULTISELECT + 1];
        assert_eq!(field_of(json!({"tags": many})), "custom_fields.tags");

        // 30 text fields of 10,000 characters: each allowed, together over 256 KiB.
        let mut big = r.clone();
        let mut values = JsonMap::new();
        for i in 0..30 {
            let key = format!("t{i}");
            big.fields.push(
                FieldDef::new(ObjectKind::Contact, &key, None, DataType::Text, None, false)
                    .unwrap(),
            );
            values.insert(key, Value::from("y".repeat(text::MAX_CUSTOM_TEXT)));
        }
        match big.validate_new(values.clone()).unwrap_err() {
            ValidationError::Invalid { field, .. } => assert_eq!(field, "custom_fields"),
            other => panic!("{other:?}"),
        }
        let mut current = JsonMap::new();
        assert!(big.merge(&mut current, values).is_err());
    }

    #[test]
    fn filter_values_read_as_the_stored_value_of_their_type() {
        let r = registry();
        let ok = |k: &str, raw: &str| r.filter_value(k, raw).unwrap();
        assert_eq!(ok("nickname", "Ada"), json!("Ada"));
        assert_eq!(ok("score", "5"), json!(5));
        assert_eq!(ok("score", "2.5"), json!(2.5));
        assert_eq!(ok("vip", "true"), json!(true));
        assert_eq!(ok("birthday", "1990-01-02"), json!("1990-01-02"));
        assert_eq!(ok("tier", "gold"), json!("gold"));
        assert_eq!(
            ok("tags", "b"),
            json!("b"),
            "a multiselect filter names one value"
        );
        assert_eq!(ok("ltv", "100"), json!(100));
        assert_eq!(ok("alt_email", "Ada@Example.COM"), json!("ada@example.com"));
        assert_eq!(ok("referrer", "con_x"), json!("con_x"));

        let field_of = |k: &str, raw: &str| match r.filter_value(k, raw).unwrap_err() {
            ValidationError::Invalid { field, .. } => field,
            other => panic!("{k}={raw}: {other:?}"),
        };
        for (k, raw) in [
            ("score", "five"),
            ("score", "NaN"),
            ("vip", "yes"),
            ("birthday", "02.01.1990"),
            ("ltv", "1.5"),
            ("referrer", "x"),
            ("alt_email", "nope"),
            ("site", "ftp://x"),
        ] {
            assert_eq!(field_of(k, raw), format!("custom_fields.{k}"));
        }
        match r.filter_value("tier", "platinum").unwrap_err() {
            ValidationError::UnknownValue {
                field,
                valid_options,
                ..
            } => assert_eq!(
                (field.as_str(), valid_options),
                (
                    "custom_fields.tier",
                    vec!["gold".to_owned(), "silver".to_owned()]
                )
            ),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            r.filter_value("tags", "c").unwrap_err(),
            ValidationError::UnknownValue { .. }
        ));
        match r.filter_value("nicknam", "x").unwrap_err() {
            ValidationError::UnknownField {
                field, suggestion, ..
            } => {
                assert_eq!(field, "custom_fields.nicknam");
                assert_eq!(suggestion.as_deref(), Some("did you mean `nickname`?"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn select_without_group_uses_object_dot_key() {
        let f = FieldDef::new(
            ObjectKind::Deal,
            "tier",
            None,
            DataType::Select,
            None,
            false,
        )
        .unwrap();
        assert_eq!(f.enum_group.as_deref(), Some("deal.tier"));
        assert!(FieldDef::new(
            ObjectKind::Deal,
            "x",
            None,
            DataType::Text,
            Some("g".into()),
            false
        )
        .is_err());
        assert!(FieldDef::new(
            ObjectKind::Deal,
            "Bad Key",
            None,
            DataType::Text,
            None,
            false
        )
        .is_err());
    }

    fn registration(object: &str, key: &str, data_type: Option<&str>) -> FieldRegistration {
        FieldRegistration {
            object: object.into(),
            key: key.into(),
            data_type: data_type.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn registration_defaults_to_text_and_parses_the_ten_types() {
        let f = FieldDef::register(registration("company", "industry", None)).unwrap();
        assert_eq!(
            (f.object, f.data_type, f.enum_group, f.required),
            (ObjectKind::Company, DataType::Text, None, false)
        );
        for t in DataType::ALL {
            let f = FieldDef::register(registration("deal", "x", Some(t.as_str()))).unwrap();
            assert_eq!(f.data_type, t);
        }
    }

    #[test]
    fn registration_refuses_unknown_objects_and_types_listing_the_valid_ones() {
        let err = FieldDef::register(registration("lead", "x", None)).unwrap_err();
        assert_eq!(
            err,
            ValidationError::UnknownValue {
                field: "object".into(),
                value: "lead".into(),
                valid_options: vec![
                    "contact".into(),
                    "company".into(),
                    "deal".into(),
                    "activity".into()
                ],
            }
        );
        let err = FieldDef::register(registration("contact", "x", Some("string"))).unwrap_err();
        let ValidationError::UnknownValue {
            field,
            valid_options,
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(field, "data_type");
        assert_eq!(valid_options.len(), 10);
        assert!(valid_options.contains(&"multiselect".to_owned()));
    }

    #[test]
    fn registration_checks_key_group_and_label() {
        for bad in ["", "Tier", "1st", "has space", "dash-ed", &"k".repeat(65)] {
            let err = FieldDef::register(registration("contact", bad, None)).unwrap_err();
            assert!(
                matches!(err, ValidationError::Invalid { ref field, .. } if field == "key"),
                "{bad:?}"
            );
        }
        assert!(FieldDef::register(registration("contact", &"k".repeat(64), None)).is_ok());
        let mut r = registration("contact", "tier", Some("select"));
        r.enum_group = Some("Bad Group".into());
        assert!(
            matches!(FieldDef::register(r.clone()), Err(ValidationError::Invalid { field, .. }) if field == "enum_group")
        );
        r.enum_group = Some("tiers".into());
        assert_eq!(
            FieldDef::register(r.clone()).unwrap().enum_group.as_deref(),
            Some("tiers"),
            "bare group names are allowed"
        );
        r.label = Some("   ".into());
        assert_eq!(
            FieldDef::register(r.clone()).unwrap().label,
            None,
            "a blank label is none"
        );
        r.label = Some(" Tier ".into());
        assert_eq!(
            FieldDef::register(r.clone()).unwrap().label.as_deref(),
            Some("Tier")
        );
        r.label = Some("x".repeat(MAX_LABEL_LEN + 1));
        assert!(
            matches!(FieldDef::register(r), Err(ValidationError::Invalid { field, .. }) if field == "label")
        );
    }

    #[test]
    fn registration_refuses_keys_that_shadow_built_in_or_reserved_names() {
        let refused =
            |object: &str, key: &str| match FieldDef::register(registration(object, key, None)) {
                Err(ValidationError::Invalid { field, detail }) => {
                    field == "key" && detail.contains(&format!("`{key}`"))
                }
                _ => false,
            };
        for key in [
            "stage",
            "pipeline",
            "pipeline_id",
            "stage_type",
            "title",
            "primary_contact_id",
            "previous_stage",
            "company",
        ] {
            assert!(refused("deal", key), "deal {key}");
        }
        for key in ["first_name", "email", "type", "company_id", "company"] {
            assert!(refused("contact", key), "contact {key}");
        }
        for key in ["name", "domain"] {
            assert!(refused("company", key), "company {key}");
        }
        for key in ["body", "occurred_at", "deal_id"] {
            assert!(refused("activity", key), "activity {key}");
        }
        for object in ["contact", "company", "deal", "activity"] {
            for key in [
                "id",
                "object",
                "created_at",
                "updated_at",
                "version",
                "deleted_at",
                "custom_fields",
            ] {
                assert!(refused(object, key), "{object} {key}");
            }
        }
        // A name is reserved only where it means something.
        assert!(FieldDef::register(registration("deal", "first_name", None)).is_ok());
        assert!(FieldDef::register(registration("company", "stage", None)).is_ok());
        assert!(FieldDef::register(registration("contact", "previous_stage", None)).is_ok());
        assert!(FieldDef::register(registration("company", "company", None)).is_ok());
        // Definitions read back are not re-checked.
        assert!(
            FieldDef::new(ObjectKind::Deal, "stage", None, DataType::Text, None, false).is_ok()
        );
    }

    #[test]
    fn multiselect_without_group_uses_object_dot_key_too() {
        let f =
            FieldDef::register(registration("activity", "channels", Some("multiselect"))).unwrap();
        assert_eq!(f.enum_group.as_deref(), Some("activity.channels"));
    }

    #[test]
    fn enum_values_are_trimmed_and_group_names_checked() {
        assert_eq!(
            EnumValue::new("  vip ", Some("".into())).unwrap(),
            EnumValue {
                value: "vip".into(),
                label: None
            }
        );
        assert!(EnumValue::new("   ", None).is_err());
        assert!(EnumValue::new("a\u{7}b", None).is_err());
        assert!(check_group_name("group", "contact.type").is_ok());
        assert!(check_group_name("group", "deal-source_2").is_ok());
        for bad in ["", "Contact.type", ".type", "a b", &"g".repeat(101)] {
            assert!(check_group_name("group", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn object_types_use_the_key_format() {
        assert_eq!(
            ObjectType::new("partner", Some(" Partner ".into()))
                .unwrap()
                .label
                .as_deref(),
            Some("Partner")
        );
        assert!(ObjectType::new("Partner", None).is_err());
    }

    #[test]
    fn objects_know_their_id_prefix_and_rule_fields() {
        let prefixes: Vec<_> = ObjectKind::ALL.iter().map(|o| o.id_prefix()).collect();
        assert_eq!(prefixes, ["con_", "cmp_", "deal_", "act_"]);
        assert_eq!(
            prefixes, REFERENCE_PREFIXES,
            "a reference may name a record of any object"
        );
        assert_eq!(ObjectKind::Company.required_on_create(), ["name"]);
        assert_eq!(ObjectKind::Deal.required_on_create(), ["title"]);
        assert_eq!(
            ObjectKind::Contact.enum_fields(),
            [("type", "contact.type")]
        );
        assert_eq!(
            ObjectKind::Activity.enum_fields(),
            [("type", "activity.type")]
        );
    }

    #[test]
    fn unregistered_key_is_rejected_with_suggestion() {
        let err = registry()
            .validate_new(map(json!({"nicknam": "x"})))
            .unwrap_err();
        let ValidationError::UnknownField {
            field,
            suggestion,
            valid_options,
        } = err
        else {
            panic!()
        };
        assert_eq!(field, "custom_fields.nicknam");
        assert_eq!(suggestion.as_deref(), Some("did you mean `nickname`?"));
        assert!(valid_options.contains(&"nickname".to_owned()));
    }

    #[test]
    fn select_outside_group_lists_valid_options() {
        let err = registry()
            .validate_new(map(json!({"tier": "bronze"})))
            .unwrap_err();
        assert_eq!(
            err,
            ValidationError::UnknownValue {
                field: "custom_fields.tier".into(),
                value: "bronze".into(),
                valid_options: vec!["gold".into(), "silver".into()]
            }
        );
        assert!(registry()
            .validate_new(map(json!({"tags": ["a", "zzz"]})))
            .is_err());
        assert!(registry()
            .validate_new(map(json!({"tags": ["a", "b"]})))
            .is_ok());
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
        let (out, _) = registry()
            .validate_new(map(json!({"ltv": 1200.0})))
            .unwrap();
        assert_eq!(out["ltv"], json!(1200));
    }

    #[test]
    fn references_are_returned_for_checking() {
        let (_, refs) = registry()
            .validate_new(map(json!({"referrer": "con_0000000000000000000000000a"})))
            .unwrap();
        assert_eq!(refs.len(), 1);
        assert_eq!(refs[0].field, "custom_fields.referrer");
    }

    #[test]
    fn merge_sets_and_removes() {
        let r = registry();
        let mut current = map(json!({"nickname": "a", "score": 1}));
        let (changed, _) = r
            .merge(&mut current, map(json!({"nickname": null, "vip": true})))
            .unwrap();
        assert!(changed);
        assert_eq!(
            Value::Object(current.clone()),
            json!({"score": 1, "vip": true})
        );
        let (changed, _) = r.merge(&mut current, map(json!({"score": 1}))).unwrap();
        assert!(!changed, "same value is no change");
    }

    #[test]
    fn required_fields_are_enforced_on_create_and_merge() {
        let mut r = registry();
        r.fields.push(
            FieldDef::new(
                ObjectKind::Contact,
                "region",
                None,
                DataType::Text,
                None,
                true,
            )
            .unwrap(),
        );
        let err = r.validate_new(JsonMap::new()).unwrap_err();
        assert_eq!(
            err,
            ValidationError::invalid("custom_fields.region", "this custom field is required")
        );
        let mut current = map(json!({"region": "eu"}));
        assert!(r.merge(&mut current, map(json!({"region": null}))).is_err());
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "[a-z@.:/0-9-]{0,20}".prop_map(Value::String),
            prop::collection::vec("[a-z]{1,3}".prop_map(Value::String), 0..3)
                .prop_map(Value::Array),
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
