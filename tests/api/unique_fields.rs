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

async fn upserts_match_on_a_unique_field(s: Server) {
    for object in ["contact", "company", "deal"] {
        field(&s, json!({"object": object, "key": "ext", "unique": true}))
            .await
            .ok(201);
        field(&s, json!({"object": object, "key": "plain"}))
            .await
            .ok(201);
    }
    let by_ext = "/contacts/upsert?match=custom_fields.ext";
    let first = s
        .post(
            by_ext,
            json!({"first_name": "Ada", "custom_fields": {"ext": "E1"}}),
        )
        .await;
    assert_eq!(first.header("upsert-outcome"), Some("created"));
    let id = first.ok(201)["id"].clone();
    let again = s
        .post(
            by_ext,
            json!({"last_name": "L", "custom_fields": {"ext": "E1"}}),
        )
        .await;
    assert_eq!(again.header("upsert-outcome"), Some("updated"));
    let body = again.ok(200).clone();
    assert_eq!(
        (&body["id"], &body["first_name"], &body["last_name"]),
        (&id, &json!("Ada"), &json!("L"))
    );
    let same = s
        .post(
            by_ext,
            json!({"last_name": "L", "custom_fields": {"ext": "E1"}}),
        )
        .await;
    assert_eq!(same.header("upsert-outcome"), Some("unchanged"));
    // The key must be a unique field, and the body must hold its value.
    let res = s
        .post(
            "/contacts/upsert?match=custom_fields.plain",
            json!({"custom_fields": {"plain": "x"}}),
        )
        .await;
    assert_eq!(
        res.problem(400, "bad_request")["valid_options"],
        json!(["custom_fields.ext"])
    );
    s.post(
        "/contacts/upsert?match=ext",
        json!({"custom_fields": {"ext": "x"}}),
    )
    .await
    .problem(400, "bad_request");
    let res = s.post(by_ext, json!({"first_name": "No value"})).await;
    assert_eq!(
        res.problem(422, "validation_failed")["field"],
        "custom_fields.ext"
    );

    // Companies: a create needs its name.
    let by_ext = "/companies/upsert?match=custom_fields.ext";
    s.post(by_ext, json!({"custom_fields": {"ext": "C1"}}))
        .await
        .problem(422, "validation_failed");
    let made = s
        .post(
            by_ext,
            json!({"name": "Acme", "custom_fields": {"ext": "C1"}}),
        )
        .await;
    assert_eq!(made.header("upsert-outcome"), Some("created"));
    let company = made.ok(201)["id"].clone();
    let res = s
        .post(
            by_ext,
            json!({"domain": "acme.test", "custom_fields": {"ext": "C1"}}),
        )
        .await;
    assert_eq!(res.ok(200)["id"], company);
    assert_eq!(res.body["domain"], "acme.test");

    // Deals upsert only on a unique field: `match` is required.
    let res = s
        .post(
            "/deals/upsert",
            json!({"title": "T", "custom_fields": {"ext": "D1"}}),
        )
        .await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "match");
    let by_ext = "/deals/upsert?match=custom_fields.ext";
    let send = |body: Value| {
        s.req(reqwest::Method::POST, by_ext)
            .header("Idempotency-Key", &format!("deal-{body}"))
            .json(&body)
            .send()
    };
    let made = send(json!({"title": "Engine", "custom_fields": {"ext": "D1"}})).await;
    assert_eq!(made.header("upsert-outcome"), Some("created"));
    let deal = made.ok(201).clone();
    let replay = send(json!({"title": "Engine", "custom_fields": {"ext": "D1"}})).await;
    assert_eq!(replay.header("upsert-outcome"), Some("created"));
    assert_eq!(replay.ok(201)["id"], deal["id"]);
    let moved = send(json!({"stage": "won", "custom_fields": {"ext": "D1"}})).await;
    assert_eq!(moved.header("upsert-outcome"), Some("updated"));
    let body = moved.ok(200).clone();
    assert_eq!(
        (&body["id"], &body["title"], &body["stage"]),
        (&deal["id"], &json!("Engine"), &json!("won"))
    );
    let events: Vec<String> = s.get("/events?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        events.contains(&"deal.stage_changed".to_owned()),
        "{events:?}"
    );
}

/// `POST /batch` upserts take `match` as the single upserts take `?match=`; a deal's needs it.
async fn batch_upserts_match_on_a_unique_field(s: Server) {
    for object in ["contact", "company", "deal"] {
        field(&s, json!({"object": object, "key": "ext", "unique": true}))
            .await
            .ok(201);
    }
    let by = "custom_fields.ext";
    let body = json!({"operations": [
        {"op": "upsert", "object": "contact", "match": by, "data": {"first_name": "Ada", "custom_fields": {"ext": "B1"}}},
        {"op": "upsert", "object": "contact", "match": by, "data": {"last_name": "L", "custom_fields": {"ext": "B1"}}},
        {"op": "upsert", "object": "company", "match": by, "data": {"name": "Acme", "custom_fields": {"ext": "C1"}}},
        {"op": "upsert", "object": "deal", "match": by, "data": {"title": "Engine", "custom_fields": {"ext": "D1"}}},
        {"op": "upsert", "object": "deal", "match": by, "data": {"stage": "won", "custom_fields": {"ext": "D1"}}},
        {"op": "upsert", "object": "deal", "data": {"title": "No match", "custom_fields": {"ext": "D2"}}},
        {"op": "upsert", "object": "contact", "match": "custom_fields.nope", "data": {"custom_fields": {"ext": "B2"}}},
        {"op": "create", "object": "contact", "match": by, "data": {"first_name": "Create"}},
    ]});
    let res = s.post("/batch", body).await.ok(200).clone();
    let results = res["results"].as_array().unwrap();
    let rows: Vec<(Value, Value)> = results
        .iter()
        .map(|r| (r["status"].clone(), r["outcome"].clone()))
        .collect();
    assert_eq!(
        rows,
        [
            (json!(201), json!("created")),
            (json!(200), json!("updated")),
            (json!(201), json!("created")),
            (json!(201), json!("created")),
            (json!(200), json!("updated")),
            (json!(422), Value::Null),
            (json!(400), Value::Null),
            (json!(422), Value::Null),
        ],
        "{res:#}"
    );
    let contact = &results[1]["data"];
    assert_eq!(
        (
            &contact["id"],
            &contact["first_name"],
            &contact["last_name"]
        ),
        (&results[0]["data"]["id"], &json!("Ada"), &json!("L"))
    );
    let deal = &results[4]["data"];
    assert_eq!(
        (&deal["id"], &deal["title"], &deal["stage"]),
        (&results[3]["data"]["id"], &json!("Engine"), &json!("won"))
    );
    assert_eq!(results[5]["error"]["field"], "match");
    assert_eq!(
        results[6]["error"]["valid_options"],
        json!(["custom_fields.ext"])
    );
    assert_eq!(results[7]["error"]["field"], "match");
    let deals = s.get("/deals?limit=10").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(deals, 1, "the second deal upsert updated the first");
}

crate::on_both_stores!(
    batch_upserts_match_on_a_unique_field,
    upserts_match_on_a_unique_field,
    only_text_email_url_and_number_fields_can_be_unique,
    a_unique_value_is_held_once_per_object,
    an_existing_field_becomes_unique_only_when_its_values_are_distinct,
);
