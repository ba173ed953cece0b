//! The registry: `POST /fields`, `GET /enums`, `POST /enums`, `POST /types`. Registrations are
//! idempotent and answer 201 with the whole current set and whether anything was `created`.

use std::collections::BTreeMap;

use crm_app::{
    registry::{EnumGroupSet, FieldSet, TypeSet},
    Scope,
};
use crm_domain::{DataType, EnumValue, FieldDef, FieldRegistration, ObjectKind, ObjectType};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};

use super::handler;
use crate::{
    body,
    operation::{Hints, Method, Operation, Output, Reply},
    schema::string_enum,
    Problem,
};

/// Registry creates are idempotent: repeating one changes nothing (decisions §17).
const REGISTER: Hints = Hints {
    read_only: false,
    destructive: false,
    idempotent: true,
    dry_run: true,
};

fn object_names(schema: &mut Schema) {
    string_enum(schema, &ObjectKind::ALL.map(|o| o.as_str()));
}

fn data_type_names(schema: &mut Schema) {
    crate::schema::nullable_string_enum(schema, &DataType::ALL.map(|t| t.as_str()));
}

/// Only the data types that take their values from an enum group take an `enum_group`
/// (`crm_domain::registry::FieldDef::register` refuses it on the others; the default type,
/// `text`, is not one of them).
fn enum_group_only_for_enums(schema: &mut Schema) {
    let enum_types: Vec<&str> = DataType::ALL
        .into_iter()
        .filter(|t| t.uses_enum())
        .map(|t| t.as_str())
        .collect();
    schema.insert(
        "anyOf".into(),
        serde_json::json!([
            {"required": ["data_type"], "properties": {"data_type": {"enum": enum_types}}},
            {"properties": {"enum_group": {"type": "null"}}},
        ]),
    );
    // `unique: true` only with a data type that can be unique (`DataType::can_be_unique`), or
    // none given: the default `text` can, and a key registered before keeps its own type.
    let mut unique_types: Vec<serde_json::Value> = DataType::ALL
        .into_iter()
        .filter(|t| t.can_be_unique())
        .map(|t| t.as_str().into())
        .collect();
    unique_types.push(serde_json::Value::Null);
    // A new key may not be a built-in or reserved name of its object
    // (`ObjectKind::reserved_field_names`): one branch per object.
    let reserved: Vec<serde_json::Value> = ObjectKind::ALL
        .into_iter()
        .map(|object| {
            let names: Vec<&str> = object.reserved_field_names().collect();
            serde_json::json!({"properties": {
                "object": {"const": object.as_str()},
                "key": {"not": {"enum": names}},
            }})
        })
        .collect();
    schema.insert(
        "allOf".into(),
        serde_json::json!([
            {"anyOf": [
                {"properties": {"unique": {"enum": [false, null]}}},
                {"properties": {"data_type": {"enum": unique_types}}},
            ]},
            {"anyOf": reserved},
        ]),
    );
}

/// A custom field to register.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(transform = enum_group_only_for_enums)]
pub struct FieldCreate {
    /// The object whose records carry the field.
    #[schemars(required, transform = object_names)]
    pub object: Option<String>,
    /// 1-64 lowercase letters, digits and underscores, starting with a letter (snake_case). Unique per object.
    #[schemars(required, pattern(crm_domain::registry::KEY_PATTERN))]
    pub key: Option<String>,
    #[schemars(pattern(crm_domain::registry::LABEL_PATTERN))]
    pub label: Option<String>,
    /// Default `text`. What values the field accepts: text (string), number, boolean, date
    /// (YYYY-MM-DD), select (a value of `enum_group`), multiselect (an array of them), currency
    /// (integer minor units), reference (id of an existing record), email, url (http or https).
    #[schemars(transform = data_type_names)]
    pub data_type: Option<String>,
    /// Only for select and multiselect: the enum group of allowed values; default
    /// `<object>.<key>`, created empty if absent (add values with POST /enums).
    #[schemars(pattern(crm_domain::registry::GROUP_PATTERN))]
    pub enum_group: Option<String>,
    /// A record created without a value for it is refused. Default false.
    pub required: Option<bool>,
    /// Text, email, url and number only: values unique per object (409 on a duplicate); upserts
    /// may match on it. Sent for an existing field, makes it unique. Default false.
    pub unique: Option<bool>,
}

/// A value to add to an enum group.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EnumValueCreate {
    /// The group, by convention `<object>.<name>` such as `contact.type`; created if absent.
    #[schemars(required, pattern(crm_domain::registry::GROUP_PATTERN))]
    pub group: Option<String>,
    /// The value records will carry. Trimmed; unique in its group.
    #[schemars(required, pattern(crm_domain::registry::VALUE_PATTERN))]
    pub value: Option<String>,
    #[schemars(pattern(crm_domain::registry::LABEL_PATTERN))]
    pub label: Option<String>,
}

/// A custom object type: a schema grouping only.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TypeCreate {
    /// 1-64 lowercase letters, digits and underscores, starting with a letter.
    #[schemars(required, pattern(crm_domain::registry::KEY_PATTERN))]
    pub key: Option<String>,
    #[schemars(pattern(crm_domain::registry::LABEL_PATTERN))]
    pub label: Option<String>,
}

/// A registered custom field.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Field")]
pub struct FieldOut {
    pub object: &'static str,
    pub key: String,
    pub label: Option<String>,
    pub data_type: &'static str,
    /// Set for select and multiselect fields.
    pub enum_group: Option<String>,
    pub required: bool,
    /// Shown when true: values unique per object, workspace and mode.
    /// (Left out when false, so the schema does not require it.)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unique: bool,
}

impl From<&FieldDef> for FieldOut {
    fn from(f: &FieldDef) -> Self {
        FieldOut {
            object: f.object.as_str(),
            key: f.key.clone(),
            label: f.label.clone(),
            data_type: f.data_type.as_str(),
            enum_group: f.enum_group.clone(),
            required: f.required,
            unique: f.unique,
        }
    }
}

/// Every custom field of one object after a registration.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "FieldSet")]
pub struct FieldSetOut {
    /// The object the fields belong to.
    pub object: &'static str,
    /// False when the key was already registered: nothing changed, and the field kept its definition.
    pub created: bool,
    /// The object's custom fields in registration order.
    pub fields: Vec<FieldOut>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "EnumValue")]
pub struct EnumValueOut {
    pub value: String,
    pub label: Option<String>,
}

impl From<&EnumValue> for EnumValueOut {
    fn from(v: &EnumValue) -> Self {
        EnumValueOut {
            value: v.value.clone(),
            label: v.label.clone(),
        }
    }
}

/// Every enum group with its values (in the order they were added).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "Enums")]
pub struct EnumsOut {
    /// Always `enums`.
    pub object: &'static str,
    pub groups: BTreeMap<String, Vec<EnumValueOut>>,
}

/// One enum group after a registration.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "EnumGroup")]
pub struct EnumGroupOut {
    /// Always `enum_group`.
    pub object: &'static str,
    pub group: String,
    /// False when the value was already in the group: nothing changed.
    pub created: bool,
    /// The group's values in the order they were added.
    pub values: Vec<EnumValueOut>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ObjectType")]
pub struct TypeOut {
    pub key: String,
    pub label: Option<String>,
}

impl From<&ObjectType> for TypeOut {
    fn from(t: &ObjectType) -> Self {
        TypeOut {
            key: t.key.clone(),
            label: t.label.clone(),
        }
    }
}

/// Every custom object type after a registration.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(rename = "ObjectTypeSet")]
pub struct TypeSetOut {
    /// Always `types`.
    pub object: &'static str,
    /// False when the key was already registered: nothing changed.
    pub created: bool,
    /// In registration order.
    pub types: Vec<TypeOut>,
}

/// The enum groups as the API shows them (also in `GET /schema`).
pub(crate) fn enum_groups(
    enums: &BTreeMap<String, Vec<EnumValue>>,
) -> BTreeMap<String, Vec<EnumValueOut>> {
    enums
        .iter()
        .map(|(group, values)| {
            (
                group.clone(),
                values.iter().map(EnumValueOut::from).collect(),
            )
        })
        .collect()
}

fn to_json<T: Serialize>(out: &T) -> Result<serde_json::Value, Problem> {
    serde_json::to_value(out).map_err(|e| crm_app::AppError::Internal(e.to_string()).into())
}

/// A body field the schema marks required.
fn required(value: Option<String>, field: &str) -> Result<String, Problem> {
    value.ok_or_else(|| Problem::validation(field, format!("{field} is required")))
}

handler!(create_field(api, caller, input) {
    let f: FieldCreate = body::parse(input.body.as_ref(), None)?;
    let request = FieldRegistration {
        object: required(f.object, "object")?,
        key: required(f.key, "key")?,
        label: f.label,
        data_type: f.data_type,
        enum_group: f.enum_group,
        required: f.required.unwrap_or(false),
        unique: f.unique.unwrap_or(false),
    };
    let FieldSet { object, created, fields } = api.app.create_field(caller, request).await?;
    let out = FieldSetOut { object: object.as_str(), created, fields: fields.iter().map(FieldOut::from).collect() };
    Ok(Reply::new(to_json(&out)?))
});

handler!(list_enums(api, caller, _input) {
    let enums = api.app.list_enums(caller).await?;
    Ok(Reply::new(to_json(&EnumsOut { object: "enums", groups: enum_groups(&enums) })?))
});

handler!(create_enum_value(api, caller, input) {
    let e: EnumValueCreate = body::parse(input.body.as_ref(), None)?;
    let (group, value) = (required(e.group, "group")?, required(e.value, "value")?);
    let EnumGroupSet { group, created, values } = api.app.create_enum_value(caller, &group, &value, e.label).await?;
    let out = EnumGroupOut { object: "enum_group", group, created, values: values.iter().map(EnumValueOut::from).collect() };
    Ok(Reply::new(to_json(&out)?))
});

handler!(create_type(api, caller, input) {
    let t: TypeCreate = body::parse(input.body.as_ref(), None)?;
    let TypeSet { created, types } = api.app.create_object_type(caller, &required(t.key, "key")?, t.label).await?;
    let out = TypeSetOut { object: "types", created, types: types.iter().map(TypeOut::from).collect() };
    Ok(Reply::new(to_json(&out)?))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("registry");
    let write = Scope::write("registry");
    vec![
        Operation {
            name: "svc_create_field",
            method: Method::Post,
            path: "/fields",
            summary: "Register a custom field",
            description: "Registers a custom field key so records can carry it under `custom_fields`. Select fields take values from `enum_group` (add them with svc_create_enum_value). Registering a key again changes nothing but `unique: true`, which makes it unique.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<FieldCreate>()),
            output: Output::of::<FieldSetOut>(),
            hints: REGISTER,
            handler: create_field,
        },
        Operation {
            name: "svc_list_enums",
            method: Method::Get,
            path: "/enums",
            summary: "List enum groups",
            description: "Every enum group with its values: contact and activity `type`, select custom fields.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<EnumsOut>(),
            hints: Hints::READ,
            handler: list_enums,
        },
        Operation {
            name: "svc_create_enum_value",
            method: Method::Post,
            path: "/enums",
            summary: "Add an enum value",
            description: "Adds a value to an enum group (created if absent); adding it again changes nothing.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<EnumValueCreate>()),
            output: Output::of::<EnumGroupOut>(),
            hints: REGISTER,
            handler: create_enum_value,
        },
        Operation {
            name: "svc_create_type",
            method: Method::Post,
            path: "/types",
            summary: "Register a custom object type",
            description: "Registers a custom object type: a schema grouping only, holding no records.",
            scope: write,
            idempotency_key: false,
            if_match: false,
            success_status: 201,
            query: &[],
            body: Some(Output::of::<TypeCreate>()),
            output: Output::of::<TypeSetOut>(),
            hints: REGISTER,
            handler: create_type,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::schema::schema_of;

    #[test]
    fn body_schemas_mark_required_fields_and_list_valid_names() {
        let s = schema_of::<FieldCreate>();
        assert_eq!(s["required"], json!(["object", "key"]));
        assert_eq!(
            s["properties"]["object"]["enum"],
            json!(["contact", "company", "deal", "activity"])
        );
        // The ten data types, and null: the field is optional (default `text`).
        assert_eq!(
            s["properties"]["data_type"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(11)
        );
        assert_eq!(
            schema_of::<EnumValueCreate>()["required"],
            json!(["group", "value"])
        );
        assert_eq!(schema_of::<TypeCreate>()["required"], json!(["key"]));
    }

    #[test]
    fn registry_operations_need_the_registry_scope() {
        for op in operations() {
            assert_eq!(op.scope.resource, "registry", "{}", op.name);
            assert!(
                !op.idempotency_key,
                "{}: registrations are idempotent by themselves",
                op.name
            );
        }
    }
}
