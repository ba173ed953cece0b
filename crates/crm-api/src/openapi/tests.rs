//! The OpenAPI document's tests.
use super::*;

#[test]
fn every_catalog_operation_is_in_the_document() {
    let doc = document("http://localhost:8080");
    assert_eq!(doc["info"]["version"], "0.14.0");
    for op in catalog() {
        let method = op.method.as_str().to_lowercase();
        assert_eq!(doc["paths"][op.path][&method]["operationId"], op.name);
    }
}

fn status_codes(op: &Value) -> Vec<&str> {
    op["responses"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

#[test]
fn operations_list_every_success_status() {
    let doc = document("http://localhost:8080");
    assert_eq!(
        status_codes(&doc["paths"]["/pipelines/{pipeline}/stages"]["post"]),
        ["201", "200", "401", "429", "default"]
    );
    assert_eq!(
        status_codes(&doc["paths"]["/sequences/{id}/enroll"]["post"]),
        ["201", "200", "401", "429", "default"]
    );
    assert_eq!(
        status_codes(&doc["paths"]["/contacts"]["post"]),
        ["201", "200", "401", "429", "default"],
        "200: the dry run's envelope"
    );
    assert_eq!(
        status_codes(&doc["paths"]["/keys"]["post"]),
        ["201", "401", "429", "default"]
    );
}

#[test]
fn stage_aliases_take_what_their_routes_take() {
    let doc = document("http://localhost:8080");
    let item = &doc["paths"]["/pipelines/{pipeline}/stages/{key}"];
    let names = |op: &Value| {
        op["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                format!(
                    "{} {}",
                    p["in"].as_str().unwrap(),
                    p["name"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&item["delete"]),
        ["path pipeline", "path key", "query move_to"]
    );
    assert!(item["delete"].get("requestBody").is_none());
    assert_eq!(names(&item["patch"]), ["path pipeline", "path key"]);
    let body = &item["patch"]["requestBody"];
    assert_eq!(body["required"], false);
    let schema = &body["content"]["application/json"]["schema"];
    assert_eq!(
        crate::schema::property_names(schema),
        ["label", "type", "position"]
    );
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        status_codes(&item["patch"]),
        ["200", "401", "429", "default"]
    );
}

/// The document with every reference to a component schema replaced by the component, for
/// the tests that read a body's members.
fn inlined(mut doc: Value) -> Value {
    fn walk(v: &mut Value, schemas: &Map<String, Value>, depth: usize) {
        if let Some(name) = component_name(v).map(str::to_owned) {
            assert!(depth < 16, "{name} refers to itself");
            *v = schemas[&name].clone();
            return walk(v, schemas, depth + 1);
        }
        match v {
            Value::Object(members) => members.values_mut().for_each(|m| walk(m, schemas, depth)),
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, schemas, depth)),
            _ => {}
        }
    }
    let schemas = doc["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    walk(&mut doc["paths"], &schemas, 0);
    doc
}

/// A request body is its type's schema under `components.schemas`, by the type's name, closed
/// to unknown members; the types' names are their own (no two share one, so none is numbered).
#[test]
fn request_bodies_are_named_components() {
    let doc = document("http://localhost:8080");
    let schema = |path: &str, method: &str| {
        doc["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"].clone()
    };
    assert_eq!(
        schema("/contacts", "post"),
        json!({"$ref": "#/components/schemas/ContactCreate"})
    );
    assert_eq!(
        schema("/contacts/{id}", "patch"),
        json!({"$ref": "#/components/schemas/ContactUpdate"})
    );
    assert_eq!(
        schema("/settings", "patch"),
        json!({"$ref": "#/components/schemas/SettingsUpdate"})
    );
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for op in catalog()
        .iter()
        .filter(|op| op.body.is_some() && !op.streams_body())
    {
        let body = schema(op.path, &op.method.as_str().to_lowercase());
        let name = component_name(&body).unwrap_or_else(|| panic!("{}: {body}", op.name));
        assert_eq!(schemas[name]["additionalProperties"], false, "{name}");
    }
    for name in schemas.keys() {
        assert!(
            !name.ends_with(|c: char| c.is_ascii_digit()),
            "{name}: two types share a name"
        );
    }
}

#[test]
fn request_bodies_are_closed_and_required_only_with_a_required_field() {
    let doc = inlined(document("http://localhost:8080"));
    let body = |path: &str, method: &str| doc["paths"][path][method]["requestBody"].clone();
    let automation = body("/automations", "post");
    assert_eq!(automation["required"], true);
    let schema = &automation["content"]["application/json"]["schema"];
    assert_eq!(
        (&schema["required"], &schema["additionalProperties"]),
        (&json!(["name", "trigger_event", "actions"]), &json!(false))
    );
    // An absent body is `{}`, which a PATCH takes (a no-op) and so does a contact create's schema.
    for (path, method) in [
        ("/contacts/{id}", "patch"),
        ("/contacts", "post"),
        ("/pipelines/{id}", "patch"),
    ] {
        assert_eq!(body(path, method)["required"], false, "{method} {path}");
    }
    for op in catalog()
        .iter()
        .filter(|op| op.body.is_some() && !op.streams_body())
    {
        let b = body(op.path, &op.method.as_str().to_lowercase());
        assert!(
            b["content"]["application/json"]["schema"]["additionalProperties"] == false,
            "{}",
            op.name
        );
    }
}

/// An import's REST body is the CSV file itself.
#[test]
fn an_import_takes_its_file_as_text_csv() {
    let doc = document("http://localhost:8080");
    let body = &doc["paths"]["/imports"]["post"]["requestBody"];
    assert_eq!(body["required"], true);
    assert_eq!(body["content"]["text/csv"]["schema"]["type"], "string");
    assert!(body["content"].get("application/json").is_none());
}

/// The closed value sets written out in the DTOs' schema attributes are the domain's own.
#[test]
fn enums_in_request_bodies_are_the_domains_value_sets() {
    use crm_domain::{mail::Provider, EventType, StageType};
    let doc = inlined(document("http://localhost:8080"));
    let values = |path: &str, property: &str| -> Vec<String> {
        let schema =
            &doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"];
        let values = schema["properties"][property]["enum"]
            .as_array()
            .unwrap_or_else(|| panic!("{path} {property}: {schema:#}"));
        values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    assert_eq!(
        values("/automations", "trigger_event"),
        EventType::ALL.map(|t| t.as_str())
    );
    assert_eq!(
        values("/connections", "provider"),
        Provider::ALL.map(|p| p.as_str())
    );
    assert_eq!(
        values("/pipelines/{pipeline}/stages", "type"),
        StageType::ALL.map(|t| t.as_str())
    );
    let events = &doc["paths"]["/webhooks"]["post"]["requestBody"]["content"]["application/json"]
        ["schema"]["properties"]["events"];
    assert_eq!(
        events["items"]["enum"],
        json!(crm_domain::Subscription::valid_options()),
        "{events:#}"
    );
    let properties = |path: &str| {
        &doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
            ["properties"]
    };
    assert_eq!(
        properties("/keys")["scopes"]["items"]["enum"],
        json!(crm_app::Scopes::options())
    );
    let automation = properties("/automations");
    let ops = crm_domain::automation::ConditionOp::ALL.map(|o| o.as_str());
    assert_eq!(
        automation["conditions"]["items"]["properties"]["op"]["enum"],
        json!(ops),
        "{automation:#}"
    );
    assert_eq!(
        properties("/sequences")["exit_when"]["items"]["properties"]["op"]["enum"],
        json!(ops)
    );
    assert_eq!(
        automation["actions"]["items"]["properties"]["type"]["enum"],
        json!(crm_domain::automation::ActionType::ALL.map(|t| t.as_str()))
    );
    // The batch parser's own lists (its unknown_value problems name the same ones).
    let batch = &properties("/batch")["operations"]["items"]["properties"];
    assert_eq!(
        (&batch["op"]["enum"], &batch["object"]["enum"]),
        (
            &json!(["create", "update", "delete", "upsert"]),
            &json!(["contact", "company", "deal"])
        )
    );
}

/// A body type is described once, under its name, and each operation refers to it: a
/// generated client has one `Contact` class for create, get, update and list.
#[test]
fn cross_field_rules_are_stated() {
    let doc = inlined(document("http://localhost:8080"));
    let body = |path: &str| {
        doc["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"].clone()
    };
    // One closed shape per action type, needing what the engine needs.
    let actions = body("/automations")["properties"]["actions"]["items"]["oneOf"].clone();
    let shapes = actions.as_array().expect("a shape per action type");
    assert_eq!(shapes.len(), crm_domain::automation::ActionType::ALL.len());
    let set_field = shapes
        .iter()
        .find(|s| s["properties"]["type"]["const"] == "set_field")
        .expect("set_field");
    assert_eq!(set_field["required"], json!(["type", "field", "value"]));
    assert_eq!(set_field["additionalProperties"], false);
    let send_email = shapes
        .iter()
        .find(|s| s["properties"]["type"]["const"] == "send_email")
        .expect("send_email");
    assert_eq!(
        send_email["allOf"][0]["anyOf"][1]["required"],
        json!(["subject", "body"])
    );
    // Exactly one wait per step.
    let step = &body("/sequences")["properties"]["steps"]["items"];
    assert_eq!(step["oneOf"].as_array().map(Vec::len), Some(3), "{step:#}");
    // enum_group only with an enum data type; a batch update or delete names its record, an
    // upsert carries its data (and `match`, or else email or domain).
    assert_eq!(
        body("/fields")["anyOf"][0]["properties"]["data_type"]["enum"],
        json!(["select", "multiselect"])
    );
    let batch = &body("/batch")["properties"]["operations"]["items"]["oneOf"];
    let required = |op: &str| -> Vec<Value> {
        batch
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["properties"]["op"]["const"] == op)
            .map(|b| b["required"].clone())
            .collect()
    };
    assert_eq!(required("update"), [json!(["id"]), json!(["id"])]);
    assert_eq!(required("delete"), [json!(["id"])]);
    // Contacts and companies by `match` or else by email or domain; deals by `match` only.
    let by_match = json!(["data", "match"]);
    assert_eq!(
        required("upsert"),
        [
            by_match.clone(),
            json!(["data"]),
            by_match.clone(),
            json!(["data"]),
            by_match
        ]
    );
    // Shapes of text the parsers check.
    let contact = body("/contacts");
    assert_eq!(
        contact["properties"]["email"]["pattern"],
        crate::schema::EMAIL_OR_BLANK
    );
}

#[test]
fn no_schema_is_a_bare_boolean() {
    fn check(v: &Value, path: &str) {
        if let Value::Object(map) = v {
            for (k, x) in map {
                let here = format!("{path}/{k}");
                if let ("properties", Value::Object(members)) = (k.as_str(), x) {
                    for (name, m) in members {
                        assert!(!m.is_boolean(), "{here}/{name} is a boolean schema");
                    }
                }
                if matches!(k.as_str(), "items" | "not") {
                    assert!(!x.is_boolean(), "{here} is a boolean schema");
                }
                check(x, &here);
            }
        } else if let Value::Array(items) = v {
            for (i, x) in items.iter().enumerate() {
                assert!(!(x.is_boolean() && path.ends_with("Of")), "{path}/{i}");
                check(x, &format!("{path}/{i}"));
            }
        }
    }
    check(&document("http://localhost"), "");
}

#[test]
fn bodies_are_referred_to_by_name() {
    let doc = document("http://localhost:8080");
    let schema = |path: &str, method: &str, status: &str| {
        doc["paths"][path][method]["responses"][status]["content"]["application/json"]["schema"]
            .clone()
    };
    let contact = json!({"$ref": "#/components/schemas/Contact"});
    assert_eq!(schema("/contacts", "post", "201"), contact);
    // Reads that `fields=` may shape answer records that need only `id` and `object`.
    assert_eq!(
        schema("/contacts/{id}", "get", "200"),
        json!({"$ref": "#/components/schemas/ContactShaped"})
    );
    let dry_run = json!({"$ref": "#/components/schemas/DryRun"});
    assert_eq!(
        schema("/contacts/{id}", "patch", "200"),
        json!({"anyOf": [contact, dry_run]}),
        "an update answers the record, or with dry_run=true the envelope"
    );
    assert_eq!(schema("/contacts", "post", "200"), dry_run);
    assert_eq!(
        schema("/contacts", "get", "200"),
        json!({"$ref": "#/components/schemas/ContactListShaped"})
    );
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["ContactList"]["properties"]["data"]["items"],
        contact
    );
    assert_eq!(
        schemas["ContactShaped"]["required"],
        json!(["id", "object"])
    );
    assert_eq!(
        schemas["ContactListShaped"]["properties"]["data"]["items"],
        json!({"$ref": "#/components/schemas/ContactShaped"})
    );
    assert_eq!(
        crate::schema::property_names(&schemas["ContactShaped"]),
        crate::schema::property_names(&schemas["Contact"])
    );
    assert_eq!(
        crate::schema::property_names(&schemas["Contact"]),
        crate::schema::property_names(&crate::schema::schema_of::<crate::bodies::ContactBody>())
    );
    // Every reference resolves.
    let text = doc.to_string();
    for reference in text.split("\"$ref\":\"").skip(1) {
        let target = &reference[..reference.find('"').unwrap()];
        let pointer = target.strip_prefix('#').unwrap();
        assert!(doc.pointer(pointer).is_some(), "{target} does not resolve");
    }
}

#[test]
fn responses_document_the_headers_sent() {
    let doc = document("http://localhost:8080");
    let headers = |path: &str, method: &str, status: &str| {
        doc["paths"][path][method]["responses"][status]["headers"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        headers("/contacts/{id}", "get", "200"),
        [
            "Request-Id",
            "RateLimit-Limit",
            "RateLimit-Remaining",
            "RateLimit-Reset",
            "ETag"
        ]
    );
    assert_eq!(
        headers("/contacts", "get", "200"),
        [
            "Request-Id",
            "RateLimit-Limit",
            "RateLimit-Remaining",
            "RateLimit-Reset"
        ]
    );
    assert!(headers("/contacts", "post", "default").contains(&"Idempotent-Replayed".to_owned()));
    assert!(headers("/contacts", "post", "201").contains(&"Idempotent-Replayed".to_owned()));
    assert!(headers("/contacts", "get", "401").contains(&"WWW-Authenticate".to_owned()));
    assert!(headers("/contacts", "get", "429").contains(&"Retry-After".to_owned()));
    for name in doc["components"]["headers"].as_object().unwrap().keys() {
        assert!(
            doc.to_string()
                .contains(&format!("#/components/headers/{name}")),
            "{name} is used"
        );
    }
}
