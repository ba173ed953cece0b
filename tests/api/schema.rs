//! `GET /schema` and `GET /automations-capabilities` (decisions §14): the schema is built from
//! the operation catalog and the live registry, so every filter and field it lists is accepted.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

fn object<'a>(schema: &'a Value, name: &str) -> &'a Value {
    schema["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no object {name}"))
}

fn field<'a>(object: &'a Value, key: &str) -> &'a Value {
    object["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == key)
        .unwrap_or_else(|| panic!("no field {key} in {object}"))
}

async fn schema_lists_objects_fields_enums_types_and_controls(s: Server) {
    s.post("/fields", json!({"object": "contact", "key": "tier", "label": "Tier", "data_type": "select", "required": true})).await.ok(201);
    s.post(
        "/fields",
        json!({"object": "company", "key": "arr", "data_type": "currency"}),
    )
    .await
    .ok(201);
    s.post("/enums", json!({"group": "contact.tier", "value": "gold"}))
        .await
        .ok(201);
    s.post("/types", json!({"key": "partner"})).await.ok(201);
    let schema = s.get("/schema").await.ok(200).clone();

    assert_eq!(schema["version"], "0.14.0");
    let contact = object(&schema, "contact");
    assert_eq!(contact["id_prefix"], "con_");
    assert_eq!(contact["path"], "/contacts");
    let email = field(contact, "email");
    assert_eq!(
        (
            &email["type"],
            &email["required"],
            &email["read_only"],
            &email["custom"]
        ),
        (
            &json!("string"),
            &json!(false),
            &json!(false),
            &json!(false)
        )
    );
    assert_eq!(field(contact, "type")["enum_group"], "contact.type");
    for read_only in [
        "id",
        "object",
        "created_at",
        "updated_at",
        "version",
        "deleted_at",
    ] {
        assert_eq!(field(contact, read_only)["read_only"], true, "{read_only}");
    }
    assert_eq!(
        field(contact, "tier"),
        &json!({"key": "tier", "type": "select", "required": true, "read_only": false, "custom": true, "enum_group": "contact.tier", "label": "Tier"})
    );
    let filters: Vec<&str> = contact["list_filters"]
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
        ],
        "one filter per registered custom field"
    );

    let company = object(&schema, "company");
    assert_eq!(company["id_prefix"], "cmp_");
    assert_eq!(field(company, "name")["required"], true);
    assert_eq!(field(company, "arr")["type"], "currency");
    assert!(company["fields"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["key"] != "tier"));

    assert_eq!(
        schema["enums"],
        s.get("/enums").await.ok(200)["groups"],
        "the same groups as GET /enums"
    );
    assert_eq!(
        schema["enums"]["contact.tier"],
        json!([{"value": "gold", "label": null}])
    );
    assert_eq!(schema["types"], json!([{"key": "partner", "label": null}]));
    assert_eq!(
        schema["list_controls"],
        json!({"limit": {"default": 25, "max": 100}, "cursor": "cursor", "include_deleted": "include_deleted"})
    );
    assert_eq!(
        schema["automation_capabilities"],
        s.get("/automations-capabilities").await.ok(200).clone()
    );
    assert!(schema["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("custom_fields")));
}

/// A value of the JSON type a field or filter declares.
fn sample(kind: &str) -> Value {
    match kind {
        "boolean" => json!(true),
        "integer" | "number" | "currency" => json!(1),
        "object" => json!({}),
        "array" | "multiselect" => json!([]),
        _ => json!("x"),
    }
}

/// Every filter `/schema` lists is a parameter the list endpoint knows (no 400 bad_request), and
/// every writable field it lists is one the create endpoint knows (no unknown_field): custom
/// fields under `custom_fields`, the others at the top level. Written over whatever objects the
/// schema returns, so objects added to the catalog are covered as they arrive.
async fn every_listed_filter_and_writable_field_is_accepted(s: Server) {
    for object in ["contact", "company", "deal", "activity"] {
        s.post(
            "/fields",
            json!({"object": object, "key": "probe", "data_type": "text"}),
        )
        .await
        .ok(201);
    }
    let schema = s.get("/schema").await.ok(200).clone();
    let objects = schema["objects"].as_array().unwrap();
    assert!(objects.len() >= 2, "contacts and companies at least");
    for o in objects {
        let (name, path) = (o["name"].as_str().unwrap(), o["path"].as_str().unwrap());
        for f in o["list_filters"].as_array().unwrap() {
            let filter = f["name"].as_str().unwrap();
            let value = match sample(f["type"].as_str().unwrap()) {
                Value::String(v) => v,
                other => other.to_string(),
            };
            let res = s.get(&format!("{path}?{filter}={value}")).await;
            let status = res.status.as_u16();
            assert!(
                status == 200 || (status == 422 && res.body["code"] != "unknown_field"),
                "{name} filter {filter}: {:#}",
                res.body
            );
        }
        let fields = o["fields"].as_array().unwrap();
        assert!(
            fields
                .iter()
                .any(|f| f["custom"] == true && f["key"] == "probe"),
            "{name} lists its custom field"
        );
        for f in fields.iter().filter(|f| f["read_only"] == false) {
            let key = f["key"].as_str().unwrap();
            let value = sample(f["type"].as_str().unwrap());
            let body = if f["custom"] == true {
                json!({"custom_fields": {key: value}})
            } else {
                json!({key: value})
            };
            let res = s.post(path, body).await;
            assert!(
                res.body["code"] != "unknown_field" && res.body["code"] != "bad_request",
                "{name} field {key}: {:#}",
                res.body
            );
            assert!(
                res.status.as_u16() == 201
                    || res.status.as_u16() == 409
                    || res.status.as_u16() == 422,
                "{name} field {key}: {:#}",
                res.body
            );
        }
        // A read-only field is not part of the create body.
        let id = fields
            .iter()
            .find(|f| f["key"] == "id")
            .expect("every object lists its id");
        assert_eq!(id["read_only"], true);
        let res = s
            .post(
                path,
                json!({"id": format!("{}x", o["id_prefix"].as_str().unwrap())}),
            )
            .await;
        res.problem(422, "unknown_field");
    }
}

async fn automation_capabilities_are_the_spec_catalog(s: Server) {
    let caps = s.get("/automations-capabilities").await.ok(200).clone();
    assert_eq!(caps["object"], "automation_capabilities");
    assert_eq!(
        caps["trigger_events"],
        json!([
            "contact.created",
            "contact.updated",
            "deal.created",
            "deal.updated",
            "deal.stage_changed"
        ])
    );
    let ops: Vec<(&str, bool)> = caps["condition_ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["op"].as_str().unwrap(),
                o["takes_value"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("eq", true),
            ("neq", true),
            ("in", true),
            ("nin", true),
            ("exists", false),
            ("empty", false),
            ("contains", true),
            ("gt", true),
            ("lt", true),
            ("gte", true),
            ("lte", true)
        ]
    );
    let actions: Vec<(&str, Vec<&str>)> = caps["action_types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["type"].as_str().unwrap(),
                a["params"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["name"].as_str().unwrap())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("create_activity", vec!["activity_type", "body"]),
            ("set_field", vec!["field", "value"]),
            ("move_deal_stage", vec!["stage"]),
            (
                "send_email",
                vec!["to", "subject", "body", "text", "template_id"]
            ),
        ]
    );
    let send = &caps["action_types"][3]["params"];
    assert_eq!(
        (&send[0]["required"], &send[1]["required_without"]),
        (&json!(false), &json!("template_id"))
    );
    assert_eq!(caps["action_types"][2]["params"][0]["required"], true);
}

/// The served OpenAPI document states what the server enforces: the fields a create requires
/// (an absent one is 422), closed bodies (an unknown field is 422 `unknown_field`), every
/// success status, the stage aliases' own parameters and body, and the headers sent.
async fn the_openapi_document_states_what_the_server_enforces(s: Server) {
    let doc = crate::support::inline_refs(
        s.anon(Method::GET, "/openapi.json")
            .send()
            .await
            .ok(200)
            .clone(),
    );
    let body = |path: &str, method: &str| doc["paths"][path][method]["requestBody"].clone();
    let automation = body("/automations", "post");
    let schema = &automation["content"]["application/json"]["schema"];
    assert_eq!(
        (
            &automation["required"],
            &schema["required"],
            &schema["additionalProperties"]
        ),
        (
            &json!(true),
            &json!(["name", "trigger_event", "actions"]),
            &json!(false)
        )
    );
    assert_eq!(
        s.post("/automations", json!({}))
            .await
            .problem(422, "validation_failed")["field"],
        "name"
    );
    assert_eq!(
        s.post("/automations", json!({"nmae": "x"}))
            .await
            .problem(422, "unknown_field")["field"],
        "nmae"
    );
    assert_eq!(
        body("/contacts/{id}", "patch")["required"],
        false,
        "an absent body is read as {{}}"
    );

    let stage = &doc["paths"]["/pipelines/{pipeline}/stages"]["post"]["responses"];
    assert!(
        stage.get("200").is_some() && stage.get("201").is_some(),
        "add answers 201, update and remove 200"
    );
    let alias = &doc["paths"]["/pipelines/{pipeline}/stages/{key}"];
    assert!(alias["delete"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["in"] == "query" && p["name"] == "move_to"));
    let patch = &alias["patch"]["requestBody"]["content"]["application/json"]["schema"];
    assert_eq!(
        patch["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["label", "type", "position"]
    );

    let got = &doc["paths"]["/contacts/{id}"]["get"]["responses"]["200"]["headers"];
    for header in [
        "Request-Id",
        "ETag",
        "RateLimit-Limit",
        "RateLimit-Remaining",
        "RateLimit-Reset",
    ] {
        assert!(
            got.get(header).is_some(),
            "GET /contacts/{{id}} documents {header}"
        );
    }
    assert!(doc["components"]["headers"]["Idempotent-Replayed"].is_object());
}

crate::on_both_stores!(
    the_openapi_document_states_what_the_server_enforces,
    schema_lists_objects_fields_enums_types_and_controls,
    every_listed_filter_and_writable_field_is_accepted,
    automation_capabilities_are_the_spec_catalog,
);
