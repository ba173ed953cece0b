//! Discovery: `GET /schema` and `GET /automations-capabilities`.
//!
//! The schema document is derived, at request time, from the operation catalog and the live
//! registry, never written by hand: an object's built-in writable fields are the body properties
//! of its `svc_create_<object>` operation, its read-only fields what that operation's output adds,
//! its filters the query parameters of `svc_list_<objects>`, and its custom fields what is
//! registered. So the document cannot disagree with what the server accepts, and an object
//! appears as soon as its operations are in the catalog.

use std::collections::BTreeMap;

use crm_app::{registry::RegistryView, Scope};
use crm_domain::{
    automation::{ActionType, ConditionOp, Need, CONDITION_FIELDS, PLACEHOLDERS, TRIGGER_EVENTS},
    DataType, ObjectKind,
};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::{
    handler,
    registry::{enum_groups, EnumValueOut, TypeOut},
};
use crate::{
    catalog,
    operation::{
        Hints, Method, Operation, Output, ParamKind, Reply, CURSOR, INCLUDE_DELETED, LIMIT,
    },
    Problem, SPEC_VERSION,
};

/// The schema document of decisions §14.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SchemaDoc {
    /// The version of the interface description.
    pub version: &'static str,
    pub objects: Vec<ObjectDoc>,
    /// Every enum group with its values.
    pub enums: BTreeMap<String, Vec<EnumValueOut>>,
    /// Custom object types (schema groupings only).
    pub types: Vec<TypeOut>,
    pub list_controls: ListControls,
    pub automation_capabilities: Capabilities,
    /// The MCP toolsets (`/mcp?toolsets=a,b`) with the tools of each.
    pub toolsets: BTreeMap<&'static str, Vec<&'static str>>,
    /// Which writes take `dry_run=true` and which refuse it (decisions §18, §24).
    pub dry_run: DryRunDoc,
    /// How to use the API well.
    pub notes: Vec<&'static str>,
}

/// The writes by whether they take `dry_run=true`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct DryRunDoc {
    /// Operations that run in full, roll back and answer the `dry_run` envelope.
    pub offered: Vec<&'static str>,
    /// Writes whose effect is a secret or a send: 400 `bad_request` to `dry_run`.
    pub refused: Vec<&'static str>,
}

impl DryRunDoc {
    fn of_catalog() -> DryRunDoc {
        let writes = || catalog::catalog().iter().filter(|op| !op.hints.read_only);
        DryRunDoc {
            offered: writes()
                .filter(|op| op.hints.dry_run)
                .map(|op| op.name)
                .collect(),
            refused: writes()
                .filter(|op| !op.hints.dry_run)
                .map(|op| op.name)
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ObjectDoc {
    /// `contact`, `company`, `deal` or `activity`.
    pub name: &'static str,
    pub id_prefix: &'static str,
    /// The collection path under /v1, e.g. `/contacts`.
    pub path: &'static str,
    /// Built-in fields (custom: false) then the registered custom fields (custom: true), which
    /// go under `custom_fields` in request bodies.
    pub fields: Vec<FieldDoc>,
    /// Query parameters the list operation filters by (besides the list controls).
    pub list_filters: Vec<FilterDoc>,
    /// The relations `expand=` adds to its get and list (decisions §19).
    pub expand: Vec<&'static str>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FieldDoc {
    pub key: String,
    /// For built-in fields the JSON type (string, integer, number, boolean, object, array); for
    /// custom fields the registered data type (text, number, select, ...).
    #[serde(rename = "type")]
    #[schemars(rename = "type")]
    pub field_type: String,
    /// Must be given on create.
    pub required: bool,
    /// Set by the service; never sent by clients.
    pub read_only: bool,
    /// A registered custom field, sent under `custom_fields`.
    pub custom: bool,
    /// The enum group the value must belong to (see `enums`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enum_group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FilterDoc {
    /// The query parameter, e.g. `type` or `custom_fields.tier` for a registered custom field.
    pub name: String,
    /// The JSON type of the value (string, integer, boolean); for a custom field, its registered
    /// data type.
    #[serde(rename = "type")]
    #[schemars(rename = "type")]
    pub filter_type: String,
    pub description: String,
    /// The enum group the value must belong to (select and multiselect custom fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enum_group: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LimitControl {
    pub default: u32,
    pub max: u32,
}

/// The query parameters every list takes (decisions §4).
#[derive(Debug, Serialize, JsonSchema)]
pub struct ListControls {
    pub limit: LimitControl,
    /// The name of the cursor parameter; pass the previous page's `next_cursor`.
    pub cursor: &'static str,
    /// The name of the parameter that lists soft-deleted records too (`=true`).
    pub include_deleted: &'static str,
}

/// The automation capability catalog.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Capabilities {
    /// Always `automation_capabilities`.
    pub object: &'static str,
    /// The events an automation (or sequence) may be triggered by.
    pub trigger_events: Vec<&'static str>,
    pub condition_ops: Vec<OpDoc>,
    /// What a condition's `field` may name.
    pub condition_fields: &'static str,
    pub action_types: Vec<ActionDoc>,
    /// How `{{field}}` placeholders in action text are filled.
    pub placeholders: &'static str,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct OpDoc {
    pub op: &'static str,
    /// False for `exists` and `empty`, which take no `value`.
    pub takes_value: bool,
    /// The operand: none, scalar, array or number_or_date.
    pub value: &'static str,
    pub description: &'static str,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ActionDoc {
    #[serde(rename = "type")]
    #[schemars(rename = "type")]
    pub action_type: &'static str,
    pub description: &'static str,
    /// The trigger events a rule with this action may have.
    pub trigger_events: Vec<&'static str>,
    pub params: Vec<ParamDoc>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ParamDoc {
    pub name: &'static str,
    /// string, or any (a value of the target field's type).
    #[serde(rename = "type")]
    #[schemars(rename = "type")]
    pub param_type: &'static str,
    pub required: bool,
    /// Required unless this other parameter is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_without: Option<&'static str>,
    pub description: &'static str,
}

/// The automation capability catalog, from crm-domain's constants.
pub fn capabilities() -> Capabilities {
    Capabilities {
        object: "automation_capabilities",
        trigger_events: TRIGGER_EVENTS.iter().map(|e| e.as_str()).collect(),
        condition_ops: ConditionOp::ALL
            .iter()
            .map(|op| OpDoc {
                op: op.as_str(),
                takes_value: op.takes_value(),
                value: op.operand().as_str(),
                description: op.description(),
            })
            .collect(),
        condition_fields: CONDITION_FIELDS,
        action_types: ActionType::ALL
            .iter()
            .map(|a| ActionDoc {
                action_type: a.as_str(),
                description: a.description(),
                trigger_events: a.trigger_events().iter().map(|e| e.as_str()).collect(),
                params: a
                    .params()
                    .iter()
                    .map(|p| ParamDoc {
                        name: p.name,
                        param_type: p.param_type.as_str(),
                        required: p.need == Need::Required,
                        required_without: match p.need {
                            Need::RequiredWithout(other) => Some(other),
                            Need::Required | Need::Optional => None,
                        },
                        description: p.description,
                    })
                    .collect(),
            })
            .collect(),
        placeholders: PLACEHOLDERS,
    }
}

/// The collection an object's operations are named and routed by.
fn collection(object: ObjectKind) -> &'static str {
    match object {
        ObjectKind::Contact => "contacts",
        ObjectKind::Company => "companies",
        ObjectKind::Deal => "deals",
        ObjectKind::Activity => "activities",
    }
}

/// The JSON type a property schema declares (the first non-null one), or `any`.
fn json_type(schema: &Value) -> String {
    let declared = match schema.get("type") {
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    };
    declared.unwrap_or("any").to_owned()
}

fn properties(schema: &Value) -> Vec<(String, Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// The container of custom fields in bodies and records; its keys are listed one by one instead.
const CUSTOM_FIELDS: &str = "custom_fields";

/// One object's entry, or `None` while the catalog has no create operation for it.
fn object_doc(object: ObjectKind, registry: &RegistryView) -> Option<ObjectDoc> {
    let create = catalog::find(&format!("svc_create_{}", object.as_str()))?;
    let body = create.body.map(|b| b()).unwrap_or(Value::Null);
    let required_in_schema: Vec<&str> = body
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let writable = properties(&body);
    let description = |s: &Value| {
        s.get("description")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let enum_group = |key: &str| {
        object
            .enum_fields()
            .iter()
            .find(|(f, _)| *f == key)
            .map(|(_, g)| (*g).to_owned())
    };

    let mut fields: Vec<FieldDoc> = writable
        .iter()
        .filter(|(key, _)| key != CUSTOM_FIELDS)
        .map(|(key, schema)| FieldDoc {
            key: key.clone(),
            field_type: json_type(schema),
            required: required_in_schema.contains(&key.as_str())
                || object.required_on_create().contains(&key.as_str()),
            read_only: false,
            custom: false,
            enum_group: enum_group(key),
            label: None,
            description: description(schema),
        })
        .collect();
    let output = (create.output)();
    fields.extend(
        properties(&output)
            .into_iter()
            .filter(|(key, _)| key != CUSTOM_FIELDS && !writable.iter().any(|(w, _)| w == key))
            .map(|(key, schema)| FieldDoc {
                field_type: json_type(&schema),
                required: false,
                read_only: true,
                custom: false,
                enum_group: None,
                label: None,
                description: description(&schema),
                key,
            }),
    );
    fields.extend(
        registry
            .fields
            .iter()
            .filter(|f| f.object == object)
            .map(|f| FieldDoc {
                key: f.key.clone(),
                field_type: f.data_type.as_str().to_owned(),
                required: f.required,
                read_only: false,
                custom: true,
                enum_group: f.enum_group.clone(),
                label: f.label.clone(),
                description: None,
            }),
    );

    let controls = [
        LIMIT.name,
        CURSOR.name,
        INCLUDE_DELETED.name,
        crate::view::FIELDS,
        crate::view::EXPAND,
    ];
    let list_filters = catalog::find(&format!("svc_list_{}", collection(object)))
        .map(|list| {
            list.query
                .iter()
                .filter(|q| !controls.contains(&q.name))
                .flat_map(|q| match q.kind {
                    // One filter per registered custom field: the live registry decides which exist.
                    ParamKind::FieldMap => registry
                        .fields
                        .iter()
                        .filter(|f| f.object == object)
                        .map(|f| FilterDoc {
                            name: format!("{}.{}", q.name, f.key),
                            filter_type: f.data_type.as_str().to_owned(),
                            description: if f.data_type == DataType::Multiselect {
                                format!("Records whose `{}` holds this value.", f.key)
                            } else {
                                format!("Records whose `{}` equals this value.", f.key)
                            },
                            enum_group: f.enum_group.clone(),
                        })
                        .collect::<Vec<_>>(),
                    _ => vec![FilterDoc {
                        name: q.name.to_owned(),
                        filter_type: q.kind.as_str().to_owned(),
                        description: q.description.to_owned(),
                        enum_group: None,
                    }],
                })
                .collect()
        })
        .unwrap_or_default();
    Some(ObjectDoc {
        name: object.as_str(),
        id_prefix: object.id_prefix(),
        path: create.path,
        fields,
        list_filters,
        expand: crate::view::Object::of(object)
            .map(|o| o.relations.iter().map(|r| r.name).collect())
            .unwrap_or_default(),
    })
}

const NOTES: [&str; 10] = [
    "Get and list of contacts, companies, deals and activities take `fields=a,b,custom_fields.k` (only those members, \
     plus id and object) and `expand=` (related records added whole beside their `_id` member; see each object's `expand`).",
    "Custom fields go under `custom_fields` in create and update bodies. Register a key first with POST /fields \
     (svc_create_field); an unregistered key is refused with unknown_field, never created silently.",
    "A field with an `enum_group` accepts only that group's values (see `enums`); add a value with POST /enums \
     (svc_create_enum_value). A value outside the group answers unknown_value with `valid_options`.",
    "PATCH merges `custom_fields`: keys sent are set, null removes a key. Other fields sent are set; null clears them.",
    "Ids are an object's `id_prefix` plus 26 characters. Money is an integer in minor units (cents), as are currency custom \
     fields. Dates are YYYY-MM-DD; timestamps RFC 3339 UTC with milliseconds.",
    "Lists are newest first. Follow `next_cursor` while `has_more` is true. Soft-deleted records are listed only with \
     include_deleted=true, and can be restored with POST /<collection>/{id}/restore.",
    "Creates of contacts, companies, deals and activities accept an Idempotency-Key header; updates accept If-Match with \
     the record's `version` (412 version_conflict when it changed).",
    "An unknown query parameter answers 400 bad_request listing the accepted ones; an unknown body field answers 422 \
     unknown_field with `valid_options` and a `suggestion`.",
    "Errors are RFC 9457 problem documents: read `code`, `field`, `valid_options` and `suggestion`.",
    "Custom object types (`types`) are schema groupings only; they hold no records.",
];

/// The schema document for a registry snapshot.
pub fn document(registry: &RegistryView) -> SchemaDoc {
    SchemaDoc {
        version: SPEC_VERSION,
        objects: ObjectKind::ALL
            .iter()
            .filter_map(|o| object_doc(*o, registry))
            .collect(),
        enums: enum_groups(&registry.enums),
        types: registry.types.iter().map(TypeOut::from).collect(),
        list_controls: ListControls {
            limit: LimitControl {
                default: crm_app::paging::DEFAULT_LIMIT,
                max: crm_app::paging::MAX_LIMIT,
            },
            cursor: CURSOR.name,
            include_deleted: INCLUDE_DELETED.name,
        },
        automation_capabilities: capabilities(),
        toolsets: catalog::toolsets().into_iter().collect(),
        dry_run: DryRunDoc::of_catalog(),
        notes: NOTES.to_vec(),
    }
}

fn to_json<T: Serialize>(out: &T) -> Result<Value, Problem> {
    serde_json::to_value(out).map_err(|e| crm_app::AppError::Internal(e.to_string()).into())
}

handler!(describe_schema(api, caller, _input) {
    let registry = api.app.describe_registry(caller).await?;
    Ok(Reply::new(to_json(&document(&registry))?))
});

/// Built from constants, so the same for everyone: serialized once.
static CAPABILITIES: std::sync::LazyLock<crate::StaticBody> = std::sync::LazyLock::new(|| {
    crate::StaticBody::new(
        serde_json::to_value(capabilities()).expect("the capability catalog serializes"),
    )
});

handler!(get_capabilities(_api, _caller, _input) {
    Ok(Reply::fixed(&CAPABILITIES))
});

pub fn operations() -> Vec<Operation> {
    let read = Scope::read("registry");
    vec![
        Operation {
            name: "svc_describe_schema",
            method: Method::Get,
            path: "/schema",
            summary: "Describe the schema",
            description: "The live schema: objects with their fields, custom fields, filters and `expand` relations; enum groups; toolsets; usage notes. Read it before guessing a field.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<SchemaDoc>(),
            hints: Hints::READ,
            handler: describe_schema,
        },
        Operation {
            name: "svc_get_automation_capabilities",
            method: Method::Get,
            path: "/automations-capabilities",
            summary: "Automation capabilities",
            description: "The trigger events, condition operators and action types automations accept.",
            scope: read,
            idempotency_key: false,
            if_match: false,
            success_status: 200,
            query: &[],
            body: None,
            output: Output::of::<Capabilities>(),
            hints: Hints::READ,
            handler: get_capabilities,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::schema_of;
    use crm_domain::FieldDef;
    use serde_json::json;

    fn registry() -> RegistryView {
        let mut view = RegistryView::default();
        view.fields.push(
            FieldDef::new(
                ObjectKind::Contact,
                "tier",
                Some("Tier".into()),
                DataType::Select,
                None,
                true,
            )
            .unwrap(),
        );
        view.fields.push(
            FieldDef::new(
                ObjectKind::Company,
                "size",
                None,
                DataType::Number,
                None,
                false,
            )
            .unwrap(),
        );
        view.enums.insert("contact.tier".into(), vec![]);
        view
    }

    fn object<'a>(doc: &'a Value, name: &str) -> &'a Value {
        doc["objects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    }

    fn field<'a>(object: &'a Value, key: &str) -> &'a Value {
        object["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["key"] == key)
            .unwrap_or_else(|| panic!("no {key}"))
    }

    #[test]
    fn objects_come_from_the_catalog_and_the_registry() {
        let doc = serde_json::to_value(document(&registry())).unwrap();
        let contact = object(&doc, "contact");
        assert_eq!(contact["id_prefix"], "con_");
        assert_eq!(contact["path"], "/contacts");
        assert_eq!(
            field(contact, "email"),
            &json!({"key": "email", "type": "string", "required": false, "read_only": false, "custom": false,
            "description": "Unique per workspace and mode, compared case-insensitively."})
        );
        assert_eq!(field(contact, "type")["enum_group"], "contact.type");
        assert_eq!(field(contact, "version")["read_only"], true);
        assert_eq!(field(contact, "version")["type"], "integer");
        assert_eq!(
            field(contact, "tier"),
            &json!({"key": "tier", "type": "select", "required": true, "read_only": false, "custom": true,
            "enum_group": "contact.tier", "label": "Tier"})
        );
        assert!(contact["fields"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["key"] != "custom_fields"));
        let filters: Vec<_> = contact["list_filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            filters,
            [
                "q",
                "email",
                "company_id",
                "type",
                "owner_id",
                "custom_fields.tier"
            ]
        );
        assert_eq!(
            contact["list_filters"][5],
            json!({"name": "custom_fields.tier", "type": "select", "enum_group": "contact.tier",
            "description": "Records whose `tier` equals this value."})
        );
        let company = object(&doc, "company");
        assert_eq!(
            field(company, "name")["required"],
            true,
            "required by the rule though optional in the wire schema"
        );
        assert_eq!(field(company, "size")["custom"], true);
        assert!(
            company["fields"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["key"] != "tier"),
            "custom fields stay with their object"
        );
    }

    #[test]
    fn every_operation_of_an_object_is_reflected() {
        // Whatever objects the catalog has create operations for are listed, and only those.
        let doc = serde_json::to_value(document(&RegistryView::default())).unwrap();
        let listed: Vec<_> = doc["objects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["name"].as_str().unwrap().to_owned())
            .collect();
        let expected: Vec<_> = ObjectKind::ALL
            .iter()
            .filter(|o| catalog::find(&format!("svc_create_{}", o.as_str())).is_some())
            .map(|o| o.as_str())
            .collect();
        assert_eq!(listed, expected);
        assert!(listed.contains(&"contact".to_owned()) && listed.contains(&"company".to_owned()));
    }

    #[test]
    fn the_document_matches_its_output_schema() {
        let doc = serde_json::to_value(document(&registry())).unwrap();
        let schema = schema_of::<SchemaDoc>();
        let keys: Vec<_> = doc.as_object().unwrap().keys().cloned().collect();
        assert_eq!(crate::schema::property_names(&schema), keys);
        assert_eq!(
            doc["list_controls"],
            json!({"limit": {"default": 25, "max": 100}, "cursor": "cursor", "include_deleted": "include_deleted"})
        );
        assert_eq!(doc["version"], "0.14.0");
    }

    #[test]
    fn capabilities_say_which_ops_take_no_value_and_which_params_are_required() {
        let caps = serde_json::to_value(capabilities()).unwrap();
        let valueless: Vec<_> = caps["condition_ops"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["takes_value"] == false)
            .map(|o| o["op"].clone())
            .collect();
        assert_eq!(valueless, [json!("exists"), json!("empty")]);
        let send = caps["action_types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["type"] == "send_email")
            .unwrap();
        assert_eq!(
            send["params"][1],
            json!({"name": "subject", "type": "string", "required": false, "required_without": "template_id",
            "description": "the subject; placeholders allowed"})
        );
        let stage = caps["action_types"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["type"] == "move_deal_stage")
            .unwrap();
        assert_eq!(
            stage["trigger_events"],
            json!(["deal.created", "deal.updated", "deal.stage_changed"])
        );
    }
}
