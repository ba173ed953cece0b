//! JSON Schemas of the operations' inputs and outputs, generated from the DTO types so that the
//! OpenAPI document, MCP `inputSchema`s and A2A skills describe exactly what the parser accepts.

use std::{
    any::TypeId,
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, OnceLock, RwLock},
};

use crm_domain::Patch;

use schemars::{generate::SchemaSettings, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A self-contained schema (subschemas inlined, no `$schema`), ready to embed anywhere.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = generator
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
    }
    schema
}

/// Narrows a string field's schema to the names `values` (an optional field may still be left
/// out: that is the object's `required` list, not this schema).
pub(crate) fn string_enum<S: AsRef<str>>(schema: &mut Schema, values: &[S]) {
    schema.insert("type".into(), "string".into());
    schema.insert("enum".into(), enum_of(values));
}

/// [`string_enum`] for the items of an array field.
pub(crate) fn items_enum<S: AsRef<str>>(schema: &mut Schema, values: &[S]) {
    if let Some(items) = schema.get_mut("items").and_then(Value::as_object_mut) {
        items.insert("enum".into(), enum_of(values));
    }
}

fn enum_of<S: AsRef<str>>(values: &[S]) -> Value {
    values.iter().map(|v| Value::from(v.as_ref())).collect()
}

/// The fields a body of type `T` may carry, generated from its schema once per process: generating
/// a schema costs far more than answering a create does.
pub fn field_names<T: JsonSchema + 'static>() -> Arc<[String]> {
    static NAMES: OnceLock<RwLock<HashMap<TypeId, Arc<[String]>>>> = OnceLock::new();
    let names = NAMES.get_or_init(RwLock::default);
    let read = names
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&TypeId::of::<T>())
        .cloned();
    read.unwrap_or_else(|| {
        let fields: Arc<[String]> = property_names(&schema_of::<T>()).into();
        names
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(TypeId::of::<T>(), fields.clone());
        fields
    })
}

/// The `maxLength` of each text field of a body of type `T`, and the shortest of them
/// (`usize::MAX` when none has one), generated once per process like [`field_names`].
#[derive(Debug)]
pub struct TextLimits {
    pub fields: Vec<(String, usize)>,
    pub shortest: usize,
}

pub fn text_limits<T: JsonSchema + 'static>() -> Arc<TextLimits> {
    static LIMITS: OnceLock<RwLock<HashMap<TypeId, Arc<TextLimits>>>> = OnceLock::new();
    let limits = LIMITS.get_or_init(RwLock::default);
    let read = limits
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(&TypeId::of::<T>())
        .cloned();
    read.unwrap_or_else(|| {
        let schema = schema_of::<T>();
        let fields: Vec<(String, usize)> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .filter_map(|(name, s)| {
                        let max = s.get("maxLength")?.as_u64()?;
                        Some((name.clone(), usize::try_from(max).ok()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let shortest = fields.iter().map(|(_, m)| *m).min().unwrap_or(usize::MAX);
        let found = Arc::new(TextLimits { fields, shortest });
        limits
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(TypeId::of::<T>(), found.clone());
        found
    })
}

/// The property names of an object schema: the fields a body may carry.
pub fn property_names(schema: &Value) -> Vec<String> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// A field of a PATCH body: absent leaves it, `null` clears it, a value sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct PatchField<T>(pub Patch<T>);

impl<T> Default for PatchField<T> {
    fn default() -> Self {
        PatchField(Patch::Absent)
    }
}

impl<T> PatchField<T> {
    pub fn into_patch(self) -> Patch<T> {
        self.0
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for PatchField<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Only called when the key is present (with #[serde(default)]); absent stays Absent.
        Ok(PatchField(match Option::<T>::deserialize(d)? {
            Some(v) => Patch::Value(v),
            None => Patch::Null,
        }))
    }
}

impl<T: JsonSchema> JsonSchema for PatchField<T> {
    fn schema_name() -> Cow<'static, str> {
        <Option<T>>::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        <Option<T>>::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

/// An integer field that accepts any JSON number without a fractional part up to 2^63-1 in
/// magnitude, in any spelling (`3.0` is 3, `1e18` is 10^18; decisions §17, §22: A2A clients send
/// numbers as doubles); `3.5` and 2^63 are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WholeNumber(pub i64);

impl<'de> Deserialize<'de> for WholeNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Number::deserialize(d)?;
        crm_domain::registry::whole_number(&serde_json::Value::Number(v))
            .map(WholeNumber)
            .ok_or_else(|| serde::de::Error::custom(crm_domain::registry::WHOLE_NUMBER_RULE))
    }
}

impl JsonSchema for WholeNumber {
    fn schema_name() -> Cow<'static, str> {
        "integer".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX})
    }

    fn inline_schema() -> bool {
        true
    }
}

/// `custom_fields` of a body: keys in the registry's key format (which keys are registered is
/// live state, answered with `unknown_field`).
pub(crate) fn custom_field_keys(schema: &mut Schema) {
    schema.insert(
        "propertyNames".into(),
        serde_json::json!({"pattern": crm_domain::registry::KEY_PATTERN}),
    );
}

/// An e-mail address as `crm_domain::Email::parse` takes it, in its ASCII spelling (which is what
/// it stores): a local part of the characters it allows, without leading, trailing or doubled
/// dots, and a domain of at least two labels of letters, digits and inner hyphens, ending in
/// one that starts with a letter. Case is free (addresses are lower-cased). It is narrower than
/// the parser in two ways a client never meets: lengths (at most 64 characters before the `@`,
/// five labels after it) and non-ASCII spellings (which the parser folds to this one). White
/// space around a value is written `[ \t\r\n]`, not `\s`, which also takes control characters
/// that the parser does not trim. No anchors: the patterns below place it.
macro_rules! email_core {
    () => {
        "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,32}(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]{1,15}){0,2}@([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.){1,4}[A-Za-z][A-Za-z0-9-]{0,61}[A-Za-z0-9]"
    };
}

/// An e-mail address, or white space only, which the contact fields read as no address.
pub(crate) const EMAIL_OR_BLANK: &str =
    concat!("^[ \\t\\r\\n]*(", email_core!(), ")?[ \\t\\r\\n]*$");

/// An e-mail address, required: white space only is refused (the key an upsert matches on).
pub(crate) const EMAIL: &str = concat!("^[ \\t\\r\\n]*(", email_core!(), ")[ \\t\\r\\n]*$");

/// A sender: an address, or a display name and the address in angle brackets, on one line
/// (`crm_domain::mail::Sender::parse`).
pub(crate) const SENDER: &str = concat!(
    "^[ \\t\\r\\n]*([^\\r\\n]*<[ \\t]*",
    email_core!(),
    "[ \\t]*>|",
    email_core!(),
    ")[ \\t\\r\\n]*$"
);

/// A send_email action's `to`: an address, or text holding a `{{tag}}` filled in when it runs.
pub(crate) const EMAIL_OR_TAG: &str = concat!(
    "^([ \\t\\r\\n]*",
    email_core!(),
    "[ \\t\\r\\n]*|[\\s\\S]*\\{\\{[\\s\\S]*\\}\\}[\\s\\S]*)$"
);

/// The characters Rust's `char::is_whitespace` takes (Unicode White_Space), as a class body:
/// `\s` differs between regex dialects (ECMA's leaves out U+0085, Python's adds U+001C-U+001F).
macro_rules! ws {
    () => {
        "\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
    };
}

/// A string that is not empty once trimmed: the parser trims names, titles and subjects and
/// refuses what is left empty. One character outside [`ws`], not `\\S` (see there).
pub(crate) const NON_BLANK: &str = concat!("[^", ws!(), "]");

/// The control characters (`char::is_control`: Unicode's `Cc`), as a character class's ranges.
macro_rules! cc {
    () => {
        "\\u0000-\\u001f\\u007f-\\u009f"
    };
}

/// One line that is not blank once trimmed and holds no control character between the blanks
/// trimmed off its ends (a user's name: `crm_domain::user::check_name`).
pub(crate) const ONE_LINE: &str = concat!(
    "^[",
    ws!(),
    "]*[^",
    ws!(),
    cc!(),
    "]([^",
    cc!(),
    "]*[^",
    ws!(),
    cc!(),
    "])?[",
    ws!(),
    "]*$"
);

/// White space only (or nothing), which the record fields read as no value; beside a `format`
/// (`close_date`) as `anyOf: [{format}, {pattern: BLANK}]`.
pub(crate) const BLANK: &str = concat!("^[", ws!(), "]*$");

/// A reference to a record by its id (`crm_domain::CompanyId::PATTERN`,
/// `crm_domain::ContactId::PATTERN`), or white space only, which the record fields read as no
/// reference (they trim what Rust's `str::trim` trims, [`ws`]).
pub(crate) const COMPANY_ID_OR_BLANK: &str = concat!(
    "^[",
    ws!(),
    "]*(cmp_[0-7][0-9a-hjkmnp-tv-z]{25})?[",
    ws!(),
    "]*$"
);
/// An owner: a user's id (`crm_domain::UserId::PATTERN`), or white space only (no owner).
pub(crate) const USER_ID_OR_BLANK: &str = concat!(
    "^[",
    ws!(),
    "]*(usr_[0-7][0-9a-hjkmnp-tv-z]{25})?[",
    ws!(),
    "]*$"
);
pub(crate) const CONTACT_ID_OR_BLANK: &str = concat!(
    "^[",
    ws!(),
    "]*(con_[0-7][0-9a-hjkmnp-tv-z]{25})?[",
    ws!(),
    "]*$"
);

/// A company domain as `crm_domain::company::normalise_domain` needs it at least: one run of
/// characters with no white space or control character inside (a scheme, port and path are
/// dropped), blanks around it. Whether a name is valid IDNA (UTS #46) is more than a regular
/// expression can state; the refusal names `domain`.
pub(crate) const DOMAIN: &str = concat!(
    "^[ \\t\\r\\n]*[^",
    ws!(),
    "\\u0000-\\u001f\\u007f-\\u009f]+[ \\t\\r\\n]*$"
);

/// A domain, or white space only, which a company reads as no domain.
pub(crate) const DOMAIN_OR_BLANK: &str = concat!(
    "^[ \\t\\r\\n]*([^",
    ws!(),
    "\\u0000-\\u001f\\u007f-\\u009f]+)?[ \\t\\r\\n]*$"
);

/// An http or https URL (`crm_domain::registry::is_http_url`): a host, no white space inside;
/// white space only is no URL.
pub(crate) const HTTP_URL_OR_BLANK: &str = concat!(
    "^[ \\t\\r\\n]*(https?://[^",
    ws!(),
    "/?#]+[^",
    ws!(),
    "]*)?[ \\t\\r\\n]*$"
);

/// An SMTP server (`crm_domain::mail`'s `is_smtp_url`): `smtp://` or `smtps://`, an optional
/// user, a host, no white space; the trailing slashes it drops.
pub(crate) const SMTP_URL: &str = concat!(
    "^[ \\t\\r\\n]*smtps?://([^",
    ws!(),
    "@]*@)?[^",
    ws!(),
    "@/?]+([/?][^",
    ws!(),
    "]*)?[ \\t\\r\\n]*$"
);

/// A webhook URL: http or https, a host name of two or more labels (each starting with a
/// letter; a single label is a local name), an optional port and
/// path, as the WHATWG URL parser takes it. Narrower than the server, which also takes address
/// literals (loopback ones, in test mode); whether http and which hosts are allowed depends on
/// the key's mode (live: https and public hosts only), which the description says.
pub(crate) const WEBHOOK_URL: &str = "^[ \\t\\r\\n]*https?://[A-Za-z][A-Za-z0-9-]{0,62}(\\.[A-Za-z][A-Za-z0-9-]{0,62}){1,4}(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*)?[ \\t\\r\\n]*$";

/// Narrows a string field to `values`, null allowed (an optional field left to its default).
pub(crate) fn nullable_string_enum<S: AsRef<str>>(schema: &mut Schema, values: &[S]) {
    let mut all: Vec<Value> = values.iter().map(|v| Value::from(v.as_ref())).collect();
    all.push(Value::Null);
    schema.insert("type".into(), serde_json::json!(["string", "null"]));
    schema.insert("enum".into(), all.into());
}

/// A three-letter currency code in any case (it is upper-cased); white space only is none.
pub(crate) const CURRENCY_OR_BLANK: &str = "^[ \\t\\r\\n]*([A-Za-z]{3})?[ \\t\\r\\n]*$";

/// The longest e-mail address (RFC 5321's path limit less the brackets).
pub(crate) const EMAIL_MAX: u32 = 254;

#[cfg(test)]
mod tests {
    use super::*;

    /// The written-out reference patterns hold the id types' own shapes.
    #[test]
    fn reference_patterns_hold_the_id_shapes() {
        let core = |pattern: &'static str| pattern.trim_start_matches('^').trim_end_matches('$');
        assert!(
            COMPANY_ID_OR_BLANK.contains(&format!("({})?", core(crm_domain::CompanyId::PATTERN)))
        );
        assert!(
            CONTACT_ID_OR_BLANK.contains(&format!("({})?", core(crm_domain::ContactId::PATTERN)))
        );
        assert!(USER_ID_OR_BLANK.contains(&format!("({})?", core(crm_domain::UserId::PATTERN))));
    }
}
