//! Unique custom fields (decisions §24, "Upsert, corrected"): `POST /fields` takes `"unique": true`
//! for text, email, url and number fields; a value is held once per object, workspace and mode
//! (409 `conflict` with the holder under `existing`); making an existing field unique while values
//! collide answers 409.

use serde_json::{json, Value};

use crate::support::{Res, Server};

async fn field(s: &Server, body: Value) -> Res {
    s.post("/fields", body).await
}

async fn create(s: &Server, path: &str, body: Value) -> String {
    s.post(path, body).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn only_text_email_url_and_number_fields_can_be_unique(s: Server) {
    for data_type in ["boolean", "date", "select", "reference", "currency"] {
        let res = field(
            &s,
            json!({"object": "contact", "key": format!("k_{data_type}"), "data_type": data_type, "unique": true}),
        )
        .await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "unique",
            "{data_type}"
        );
    }
    for data_type in ["text", "email", "url", "number"] {
        let res = field(
            &s,
            json!({"object": "deal", "key": format!("k_{data_type}"), "data_type": data_type, "unique": true}),
        )
        .await;
        let fields = res.ok(201)["fields"].as_array().unwrap().clone();
        let made = fields
            .iter()
            .find(|f| f["key"] == format!("k_{data_type}"))
            .unwrap();
        assert_eq!(made["unique"], true);
    }
}

async fn a_unique_value_is_held_once_per_object(s: Server) {
    for object in ["contact", "company", "deal"] {
        field(
            &s,
            json!({"object": object, "key": "external_id", "unique": true}),
        )
        .await
        .ok(201);
    }
    let (path, body): (&str, fn(&str) -> Value) = (
        "/contacts",
        |v| json!({"first_name": "A", "custom_fields": {"external_id": v}}),
    );
    let first = create(&s, path, body("X-1")).await;
    let res = s.post(path, body("X-1")).await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(first));
    // A soft-deleted holder still holds its value.
    s.delete(&format!("/contacts/{first}")).await.ok(200);
    s.post(path, body("X-1")).await.problem(409, "conflict");
    s.post(&format!("/contacts/{first}/restore"), json!({}))
        .await
        .ok(200);
    // Updates: to a held value 409; keeping one's own value is fine.
    let second = create(&s, path, body("X-2")).await;
    let res = s
        .patch(
            &format!("/contacts/{second}"),
            json!({"custom_fields": {"external_id": "X-1"}}),
        )
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(first));
    s.patch(
        &format!("/contacts/{second}"),
        json!({"first_name": "B", "custom_fields": {"external_id": "X-2"}}),
    )
    .await
    .ok(200);
    // Another object, another workspace of values; companies and deals alike.
    let company = create(
        &s,
        "/companies",
        json!({"name": "Acme", "custom_fields": {"external_id": "X-1"}}),
    )
    .await;
    let res = s
        .post(
            "/companies",
            json!({"name": "Acme 2", "custom_fields": {"external_id": "X-1"}}),
        )
        .await;
    assert_eq!(
        res.problem(409, "conflict")["existing"]["id"],
        json!(company)
    );
    let deal = create(
        &s,
        "/deals",
        json!({"title": "One", "custom_fields": {"external_id": "X-1"}}),
    )
    .await;
    let other = create(&s, "/deals", json!({"title": "Two"})).await;
    let res = s
        .patch(
            &format!("/deals/{other}"),
            json!({"custom_fields": {"external_id": "X-1"}}),
        )
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(deal));
    // A merged tombstone's value no longer counts.
    let tomb = create(&s, path, body("X-9")).await;
    s.post(
        &format!("/contacts/{second}/merge"),
        json!({"merge_ids": [tomb]}),
    )
    .await
    .ok(200);
    create(&s, path, body("X-9")).await;
}

async fn an_existing_field_becomes_unique_only_when_its_values_are_distinct(s: Server) {
    field(
        &s,
        json!({"object": "contact", "key": "code", "data_type": "number"}),
    )
    .await
    .ok(201);
    let a = create(&s, "/contacts", json!({"custom_fields": {"code": 7}})).await;
    create(&s, "/contacts", json!({"custom_fields": {"code": 7}})).await;
    let again = json!({"object": "contact", "key": "code", "unique": true});
    field(&s, again.clone()).await.problem(409, "conflict");
    s.patch(
        &format!("/contacts/{a}"),
        json!({"custom_fields": {"code": 8}}),
    )
    .await
    .ok(200);
    let res = field(&s, again).await;
    assert!(res.status.is_success(), "{:#}", res.body);
    let code = res.body["fields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "code")
        .unwrap()
        .clone();
    assert_eq!(code["unique"], true);
    let res = s
        .post("/contacts", json!({"custom_fields": {"code": 8}}))
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], json!(a));
}

crate::on_both_stores!(
    only_text_email_url_and_number_fields_can_be_unique,
    a_unique_value_is_held_once_per_object,
    an_existing_field_becomes_unique_only_when_its_values_are_distinct,
);
