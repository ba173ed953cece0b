//! The registry through the REST API: `POST /fields`, `GET/POST /enums`, `POST /types`, and the
//! custom field rules of the spec ("Custom field definition" 1-5) and decisions §6, proved on
//! contacts and companies.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::Server;

async fn register(s: &Server, body: Value) -> Value {
    s.post("/fields", body).await.ok(201).clone()
}

async fn add_values(s: &Server, group: &str, values: &[&str]) {
    for v in values {
        s.post("/enums", json!({"group": group, "value": v}))
            .await
            .ok(201);
    }
}

fn keys(set: &Value) -> Vec<&str> {
    set["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["key"].as_str().unwrap())
        .collect()
}

async fn fields_register_idempotently_keeping_the_original_type(s: Server) {
    let set = register(
        &s,
        json!({"object": "contact", "key": "tier", "label": "Tier", "data_type": "select"}),
    )
    .await;
    assert_eq!(
        set,
        json!({"object": "contact", "created": true, "fields": [
            {"object": "contact", "key": "tier", "label": "Tier", "data_type": "select", "enum_group": "contact.tier", "required": false}
        ]})
    );
    let set = register(
        &s,
        json!({"object": "contact", "key": "score", "data_type": "number", "required": true}),
    )
    .await;
    assert_eq!(
        keys(&set),
        ["tier", "score"],
        "the whole set, in registration order"
    );
    assert_eq!(set["fields"][1]["required"], true);
    assert_eq!(set["fields"][1]["enum_group"], Value::Null);

    // Registering an existing key is a no-op that answers the current set.
    let again = register(
        &s,
        json!({"object": "contact", "key": "tier", "data_type": "text", "label": "Other"}),
    )
    .await;
    assert_eq!(again["created"], false);
    assert_eq!(
        again["fields"][0], set["fields"][0],
        "the field keeps its original definition"
    );
    // The default data type is text, and fields belong to their object.
    let company = register(&s, json!({"object": "company", "key": "tier"})).await;
    assert_eq!(company["object"], "company");
    assert_eq!(company["created"], true);
    assert_eq!(
        company["fields"],
        json!([{"object": "company", "key": "tier", "label": null, "data_type": "text", "enum_group": null, "required": false}])
    );
}

async fn field_registration_refuses_unknown_objects_types_and_malformed_keys(s: Server) {
    let res = s
        .post("/fields", json!({"object": "lead", "key": "x"}))
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["field"], "object");
    assert_eq!(
        p["valid_options"],
        json!(["contact", "company", "deal", "activity"])
    );
    let res = s
        .post(
            "/fields",
            json!({"object": "contact", "key": "x", "data_type": "string"}),
        )
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["field"], "data_type");
    assert_eq!(
        p["valid_options"],
        json!([
            "text",
            "number",
            "boolean",
            "date",
            "select",
            "multiselect",
            "currency",
            "reference",
            "email",
            "url"
        ])
    );
    for bad in ["Tier", "has space", "1st", ""] {
        let res = s
            .post("/fields", json!({"object": "contact", "key": bad}))
            .await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "key",
            "{bad:?}"
        );
    }
    let res = s.post("/fields", json!({"key": "x"})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "object");
    let res = s
        .post(
            "/fields",
            json!({"object": "deal", "key": "x", "enum_group": "deal.x"}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "enum_group",
        "only select fields take a group"
    );
    let res = s
        .post(
            "/fields",
            json!({"object": "deal", "key": "x", "datatype": "text"}),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_field")["suggestion"],
        "did you mean `data_type`?"
    );
    // Nothing was registered by the refused calls.
    assert!(s.get("/schema").await.ok(200)["objects"][0]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["custom"] == false));
}

async fn seeded_enum_groups_are_listed(s: Server) {
    let enums = s.get("/enums").await.ok(200).clone();
    assert_eq!(
        enums,
        json!({"object": "enums", "groups": {
            "activity.type": [
                {"value": "note", "label": null}, {"value": "call", "label": null},
                {"value": "email", "label": null}, {"value": "task", "label": null}
            ],
            "contact.type": []
        }})
    );
}

async fn enum_values_are_added_once_and_groups_created_on_demand(s: Server) {
    let res = s
        .post(
            "/enums",
            json!({"group": "contact.type", "value": "customer", "label": "Customer"}),
        )
        .await;
    assert_eq!(
        res.ok(201),
        &json!({"object": "enum_group", "group": "contact.type", "created": true, "values": [{"value": "customer", "label": "Customer"}]})
    );
    let again = s
        .post(
            "/enums",
            json!({"group": "contact.type", "value": " customer ", "label": "Changed"}),
        )
        .await;
    assert_eq!(
        again.ok(201)["created"],
        false,
        "adding an existing value is a no-op"
    );
    assert_eq!(
        again.body["values"],
        json!([{"value": "customer", "label": "Customer"}])
    );
    let lead = s
        .post("/enums", json!({"group": "contact.type", "value": "lead"}))
        .await;
    assert_eq!(
        lead.ok(201)["values"],
        json!([{"value": "customer", "label": "Customer"}, {"value": "lead", "label": null}])
    );
    // A bare group name is created with its first value.
    s.post("/enums", json!({"group": "industry", "value": "aerospace"}))
        .await
        .ok(201);
    let groups = s.get("/enums").await.ok(200)["groups"].clone();
    assert_eq!(
        groups["industry"],
        json!([{"value": "aerospace", "label": null}])
    );
    assert_eq!(groups["contact.type"].as_array().unwrap().len(), 2);

    let res = s
        .post("/enums", json!({"group": "Contact Type", "value": "x"}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "group");
    let res = s
        .post("/enums", json!({"group": "contact.type", "value": "   "}))
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "value");
    let res = s.post("/enums", json!({"group": "contact.type"})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "value");
}

async fn contact_type_is_accepted_once_registered(s: Server) {
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "type": "customer"}),
        )
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["field"], "type");
    assert_eq!(p["valid_options"], json!([]));
    s.get("/contacts?type=customer")
        .await
        .problem(422, "unknown_value");

    add_values(&s, "contact.type", &["customer", "partner"]).await;
    let ada = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "type": "customer"}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(ada["type"], "customer");
    s.post("/contacts", json!({"first_name": "Grace"}))
        .await
        .ok(201);
    let listed = s.get("/contacts?type=customer").await.ok(200).clone();
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(listed["data"][0]["id"], ada["id"]);
    let res = s.get("/contacts?type=vendor").await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!(["customer", "partner"])
    );
    let id = ada["id"].as_str().unwrap();
    assert_eq!(
        s.patch(&format!("/contacts/{id}"), json!({"type": "partner"}))
            .await
            .ok(200)["type"],
        "partner"
    );
    s.patch(&format!("/contacts/{id}"), json!({"type": "vendor"}))
        .await
        .problem(422, "unknown_value");
}

async fn object_types_register_idempotently(s: Server) {
    let res = s
        .post("/types", json!({"key": "partner", "label": "Partner"}))
        .await;
    assert_eq!(
        res.ok(201),
        &json!({"object": "types", "created": true, "types": [{"key": "partner", "label": "Partner"}]})
    );
    s.post("/types", json!({"key": "asset"})).await.ok(201);
    let again = s
        .post("/types", json!({"key": "partner", "label": "Reseller"}))
        .await;
    assert_eq!(
        again.ok(201),
        &json!({"object": "types", "created": false, "types": [{"key": "partner", "label": "Partner"}, {"key": "asset", "label": null}]})
    );
    assert_eq!(s.get("/schema").await.ok(200)["types"], again.body["types"]);
    let res = s.post("/types", json!({"key": "Partner Type"})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "key");
}

async fn unregistered_custom_field_keys_are_refused_naming_the_closest_key(s: Server) {
    register(
        &s,
        json!({"object": "contact", "key": "lifetime_value", "data_type": "currency"}),
    )
    .await;
    register(
        &s,
        json!({"object": "company", "key": "employee_count", "data_type": "number"}),
    )
    .await;
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"lifetime_valeu": 100}}),
        )
        .await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(p["field"], "custom_fields.lifetime_valeu");
    assert_eq!(p["suggestion"], "did you mean `lifetime_value`?");
    assert_eq!(p["valid_options"], json!(["lifetime_value"]));
    let res = s
        .post(
            "/companies",
            json!({"name": "Acme", "custom_fields": {"employees_count": 5}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_field")["suggestion"],
        "did you mean `employee_count`?"
    );
    // A key of another object is not registered for this one.
    let res = s
        .post(
            "/companies",
            json!({"name": "Acme", "custom_fields": {"lifetime_value": 5}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "unknown_field")["field"],
        "custom_fields.lifetime_value"
    );
    // Updates are held to the same rule, and nothing is created silently.
    let c = s
        .post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201)
        .clone();
    let res = s
        .patch(
            &format!("/contacts/{}", c["id"].as_str().unwrap()),
            json!({"custom_fields": {"nickname": "A"}}),
        )
        .await;
    res.problem(422, "unknown_field");
    let fields = s.get("/schema").await.ok(200)["objects"][0]["fields"].clone();
    assert!(fields
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["key"] != "nickname" && f["key"] != "lifetime_valeu"));
}

async fn select_and_multiselect_values_must_be_in_their_group(s: Server) {
    register(
        &s,
        json!({"object": "contact", "key": "tier", "data_type": "select"}),
    )
    .await;
    register(&s, json!({"object": "company", "key": "markets", "data_type": "multiselect", "enum_group": "markets"})).await;
    add_values(&s, "contact.tier", &["gold", "silver"]).await;
    add_values(&s, "markets", &["eu", "us"]).await;

    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"tier": "bronze"}}),
        )
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["field"], "custom_fields.tier");
    assert_eq!(p["valid_options"], json!(["gold", "silver"]));
    let res = s
        .post(
            "/companies",
            json!({"name": "Acme", "custom_fields": {"markets": ["eu", "apac"]}}),
        )
        .await;
    let p = res.problem(422, "unknown_value");
    assert_eq!(p["field"], "custom_fields.markets");
    assert_eq!(p["valid_options"], json!(["eu", "us"]));

    let ada = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"tier": "gold"}}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(ada["custom_fields"], json!({"tier": "gold"}));
    let acme = s
        .post(
            "/companies",
            json!({"name": "Acme", "custom_fields": {"markets": ["us", "eu"]}}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(acme["custom_fields"], json!({"markets": ["us", "eu"]}));
    // A value added later is accepted from then on.
    add_values(&s, "contact.tier", &["bronze"]).await;
    let res = s
        .patch(
            &format!("/contacts/{}", ada["id"].as_str().unwrap()),
            json!({"custom_fields": {"tier": "bronze"}}),
        )
        .await;
    assert_eq!(res.ok(200)["custom_fields"]["tier"], "bronze");
}

/// One field of each of the ten data types on `object`, with a good value and wrong ones.
async fn check_every_data_type(s: &Server, object: &str, path: &str, base: Value, reference: &str) {
    let types = [
        "text",
        "number",
        "boolean",
        "date",
        "select",
        "multiselect",
        "currency",
        "reference",
        "email",
        "url",
    ];
    for t in types {
        register(
            s,
            json!({"object": object, "key": format!("f_{t}"), "data_type": t}),
        )
        .await;
    }
    add_values(s, &format!("{object}.f_select"), &["a"]).await;
    add_values(s, &format!("{object}.f_multiselect"), &["a", "b"]).await;
    let good = json!({
        "f_text": "hello", "f_number": -1.116713062210066e-279, "f_boolean": true, "f_date": "2026-02-28", "f_select": "a",
        "f_multiselect": ["a", "b"], "f_currency": 1999, "f_reference": reference, "f_email": "ada@example.com",
        "f_url": "https://example.com/x",
    });
    let wrong: [(&str, Vec<Value>); 10] = [
        ("text", vec![json!(3), json!(true), json!(["a"])]),
        ("number", vec![json!("12"), json!(false), json!({"n": 1})]),
        ("boolean", vec![json!("true"), json!(1)]),
        (
            "date",
            vec![json!("2026-02-30"), json!("28/02/2026"), json!(20260228)],
        ),
        ("select", vec![json!(1), json!(["a"])]),
        ("multiselect", vec![json!("a"), json!([1])]),
        ("currency", vec![json!(12.5), json!("1200")]),
        ("reference", vec![json!(42)]),
        ("email", vec![json!("ada"), json!(7)]),
        (
            "url",
            vec![json!("ftp://example.com"), json!("example.com"), json!(1)],
        ),
    ];
    for (t, values) in wrong {
        for v in values {
            let mut body = base.clone();
            body["custom_fields"] = json!({ format!("f_{t}"): v });
            let res = s.post(path, body).await;
            let p = res.problem(422, "validation_failed");
            assert_eq!(
                p["field"],
                format!("custom_fields.f_{t}"),
                "{object} {t} = {v}"
            );
        }
    }
    let mut body = base.clone();
    body["custom_fields"] = good.clone();
    let created = s.post(path, body).await.ok(201).clone();
    assert_eq!(
        created["custom_fields"], good,
        "every good value is stored as sent"
    );
    let read = s
        .get(&format!("{path}/{}", created["id"].as_str().unwrap()))
        .await;
    assert_eq!(
        read.ok(200)["custom_fields"],
        good,
        "and reads back unchanged (floats exactly)"
    );
}

async fn every_data_type_refuses_values_of_the_wrong_type_on_contacts(s: Server) {
    let acme = s.post("/companies", json!({"name": "Acme"})).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    check_every_data_type(
        &s,
        "contact",
        "/contacts",
        json!({"first_name": "Ada"}),
        &acme,
    )
    .await;
}

async fn every_data_type_refuses_values_of_the_wrong_type_on_companies(s: Server) {
    let ada = s
        .post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    check_every_data_type(&s, "company", "/companies", json!({"name": "Acme"}), &ada).await;
}

async fn re_registration_keeps_the_original_type_for_writes(s: Server) {
    register(
        &s,
        json!({"object": "company", "key": "size", "data_type": "number"}),
    )
    .await;
    assert_eq!(
        register(
            &s,
            json!({"object": "company", "key": "size", "data_type": "text"})
        )
        .await["created"],
        false
    );
    let res = s
        .post(
            "/companies",
            json!({"name": "Acme", "custom_fields": {"size": "large"}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.size"
    );
    s.post(
        "/companies",
        json!({"name": "Acme", "custom_fields": {"size": 250}}),
    )
    .await
    .ok(201);
}

async fn currency_values_are_integer_minor_units(s: Server) {
    register(
        &s,
        json!({"object": "contact", "key": "ltv", "data_type": "currency"}),
    )
    .await;
    register(
        &s,
        json!({"object": "company", "key": "arr", "data_type": "currency"}),
    )
    .await;
    let c = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"ltv": 1200.0}}),
        )
        .await;
    assert_eq!(
        c.ok(201)["custom_fields"]["ltv"],
        json!(1200),
        "a whole float is the integer"
    );
    assert!(c.body["custom_fields"]["ltv"].is_i64());
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"ltv": 12.5}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.ltv"
    );
    let co = s
        .post(
            "/companies",
            json!({"name": "Acme", "custom_fields": {"arr": 500000}}),
        )
        .await;
    assert_eq!(co.ok(201)["custom_fields"]["arr"], json!(500000));
    let res = s
        .patch(
            &format!("/companies/{}", co.body["id"].as_str().unwrap()),
            json!({"custom_fields": {"arr": 0.5}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.arr"
    );
}

async fn required_custom_fields_must_be_given_on_create(s: Server) {
    register(
        &s,
        json!({"object": "contact", "key": "region", "required": true}),
    )
    .await;
    register(
        &s,
        json!({"object": "company", "key": "region", "required": true}),
    )
    .await;
    let res = s.post("/contacts", json!({"first_name": "Ada"})).await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.region"
    );
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"region": null}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.region",
        "null is not a value"
    );
    let res = s.post("/companies", json!({"name": "Acme"})).await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.region"
    );
    let ada = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"region": "eu"}}),
        )
        .await
        .ok(201)
        .clone();
    s.post(
        "/companies",
        json!({"name": "Acme", "custom_fields": {"region": "us"}}),
    )
    .await
    .ok(201);
    // A required field cannot be removed either.
    let res = s
        .patch(
            &format!("/contacts/{}", ada["id"].as_str().unwrap()),
            json!({"custom_fields": {"region": null}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.region"
    );
}

async fn patch_merges_custom_fields_and_null_removes_a_key(s: Server) {
    for object in ["contact", "company"] {
        for (key, t) in [
            ("nickname", "text"),
            ("score", "number"),
            ("vip", "boolean"),
        ] {
            register(&s, json!({"object": object, "key": key, "data_type": t})).await;
        }
    }
    for (path, base) in [
        ("/contacts", json!({"first_name": "Ada"})),
        ("/companies", json!({"name": "Acme"})),
    ] {
        let mut body = base.clone();
        body["custom_fields"] = json!({"nickname": "A", "score": 1});
        let record = s.post(path, body).await.ok(201).clone();
        let url = format!("{path}/{}", record["id"].as_str().unwrap());
        let merged = s
            .patch(&url, json!({"custom_fields": {"score": 2, "vip": true}}))
            .await
            .ok(200)
            .clone();
        assert_eq!(
            merged["custom_fields"],
            json!({"nickname": "A", "score": 2, "vip": true}),
            "{path}: keys sent are set, others kept"
        );
        let removed = s
            .patch(&url, json!({"custom_fields": {"nickname": null}}))
            .await
            .ok(200)
            .clone();
        assert_eq!(
            removed["custom_fields"],
            json!({"score": 2, "vip": true}),
            "{path}: null removes a key"
        );
        assert_eq!(removed["version"], 3);
        let same = s
            .patch(&url, json!({"custom_fields": {"score": 2}}))
            .await
            .ok(200)
            .clone();
        assert_eq!(
            same["version"], 3,
            "{path}: setting the same value changes nothing"
        );
        let other = s
            .patch(&url, json!({"custom_fields": {}}))
            .await
            .ok(200)
            .clone();
        assert_eq!(other["custom_fields"], json!({"score": 2, "vip": true}));
    }
}

async fn reference_fields_must_name_an_existing_record(s: Server) {
    register(
        &s,
        json!({"object": "contact", "key": "referrer", "data_type": "reference"}),
    )
    .await;
    register(
        &s,
        json!({"object": "company", "key": "parent", "data_type": "reference"}),
    )
    .await;
    let missing = "con_00000000000000000000000000";
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"referrer": missing}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "invalid_reference")["field"],
        "custom_fields.referrer"
    );
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"referrer": "usr_123"}}),
        )
        .await;
    assert_eq!(
        res.problem(422, "invalid_reference")["field"],
        "custom_fields.referrer"
    );
    let grace = s
        .post("/contacts", json!({"first_name": "Grace"}))
        .await
        .ok(201)["id"]
        .clone();
    let ada = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"referrer": grace}}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(ada["custom_fields"]["referrer"], grace);
    let parent = s
        .post("/companies", json!({"name": "Parent"}))
        .await
        .ok(201)["id"]
        .clone();
    s.post(
        "/companies",
        json!({"name": "Child", "custom_fields": {"parent": parent}}),
    )
    .await
    .ok(201);
    let res = s.post("/companies", json!({"name": "Orphan", "custom_fields": {"parent": "cmp_00000000000000000000000000"}})).await;
    assert_eq!(
        res.problem(422, "invalid_reference")["field"],
        "custom_fields.parent"
    );
    // A record of another mode does not exist here.
    let live = s
        .req(Method::POST, "/contacts")
        .key(&s.keys.live)
        .json(&json!({"first_name": "Live"}))
        .send()
        .await
        .ok(201)
        .clone();
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "custom_fields": {"referrer": live["id"]}}),
        )
        .await;
    res.problem(422, "invalid_reference");
}

async fn the_registry_is_per_mode(s: Server) {
    register(&s, json!({"object": "contact", "key": "tier"})).await;
    s.post(
        "/enums",
        json!({"group": "contact.type", "value": "customer"}),
    )
    .await
    .ok(201);
    let live = |m: Method, p: &str| s.req(m, p).key(&s.keys.live);
    let res = live(Method::POST, "/contacts")
        .json(&json!({"first_name": "Ada", "custom_fields": {"tier": "x"}}))
        .send()
        .await;
    res.problem(422, "unknown_field");
    let res = live(Method::POST, "/contacts")
        .json(&json!({"first_name": "Ada", "type": "customer"}))
        .send()
        .await;
    res.problem(422, "unknown_value");
    let live_enums = live(Method::GET, "/enums").send().await;
    assert_eq!(live_enums.ok(200)["groups"]["contact.type"], json!([]));
    // The same key registers anew, with its own type, in the other mode.
    let set = live(Method::POST, "/fields")
        .json(&json!({"object": "contact", "key": "tier", "data_type": "number"}))
        .send()
        .await;
    assert_eq!(set.ok(201)["created"], true);
    assert_eq!(set.body["fields"][0]["data_type"], "number");
}

/// A custom field may not take the name of a built-in field or a reserved name of its object:
/// `GET /schema` would list the name twice, and conditions, merge tags and `set_field` read a bare
/// name as the built-in one.
async fn custom_field_keys_may_not_shadow_built_in_fields(s: Server) {
    let shadowing = [
        ("deal", "stage"),
        ("deal", "pipeline"),
        ("deal", "version"),
        ("deal", "created_at"),
        ("deal", "primary_contact_id"),
        ("deal", "previous_stage"),
        ("deal", "company"),
        ("contact", "first_name"),
        ("contact", "custom_fields"),
        ("contact", "company"),
        ("company", "id"),
        ("company", "domain"),
        ("activity", "object"),
        ("activity", "body"),
    ];
    for (object, key) in shadowing {
        let res = s
            .post("/fields", json!({"object": object, "key": key}))
            .await;
        let p = res.problem(422, "validation_failed");
        assert_eq!(p["field"], "key", "{object} {key}");
        assert!(
            p["detail"].as_str().unwrap().contains(&format!("`{key}`")),
            "{object} {key}: {p}"
        );
    }
    // Nothing was registered: every object lists each field once, all built in.
    let schema = s.get("/schema").await.ok(200).clone();
    for object in schema["objects"].as_array().unwrap() {
        let fields = object["fields"].as_array().unwrap();
        let mut keys: Vec<&str> = fields.iter().map(|f| f["key"].as_str().unwrap()).collect();
        assert!(
            fields.iter().all(|f| f["custom"] == false),
            "{}",
            object["name"]
        );
        keys.sort_unstable();
        let count = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), count, "{}", object["name"]);
    }
    // A name is reserved only on the objects it belongs to.
    let set = register(&s, json!({"object": "company", "key": "stage"})).await;
    assert_eq!(keys(&set), ["stage"]);
}

crate::on_both_stores!(
    fields_register_idempotently_keeping_the_original_type,
    field_registration_refuses_unknown_objects_types_and_malformed_keys,
    seeded_enum_groups_are_listed,
    enum_values_are_added_once_and_groups_created_on_demand,
    contact_type_is_accepted_once_registered,
    object_types_register_idempotently,
    unregistered_custom_field_keys_are_refused_naming_the_closest_key,
    select_and_multiselect_values_must_be_in_their_group,
    every_data_type_refuses_values_of_the_wrong_type_on_contacts,
    every_data_type_refuses_values_of_the_wrong_type_on_companies,
    re_registration_keeps_the_original_type_for_writes,
    currency_values_are_integer_minor_units,
    required_custom_fields_must_be_given_on_create,
    patch_merges_custom_fields_and_null_removes_a_key,
    reference_fields_must_name_an_existing_record,
    the_registry_is_per_mode,
    custom_field_keys_may_not_shadow_built_in_fields,
);
