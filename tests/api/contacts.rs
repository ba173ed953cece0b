//! Contacts through the REST API, as the spec and decisions §2-§5 describe them.

use reqwest::Method;
use serde_json::json;

use crate::support::Server;

async fn create(s: &Server, body: serde_json::Value) -> serde_json::Value {
    s.post("/contacts", body).await.ok(201).clone()
}

async fn create_update_delete_restore_walkthrough(s: Server) {
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "Ada", "last_name": "Lovelace", "email": " Ada@Example.COM "}),
        )
        .await;
    let ada = res.ok(201).clone();
    assert!(ada["id"].as_str().unwrap().starts_with("con_"));
    assert_eq!(ada["object"], "contact");
    assert_eq!(
        ada["email"], "ada@example.com",
        "email is trimmed and lower-cased"
    );
    assert_eq!(ada["version"], 1);
    assert_eq!(ada["deleted_at"], serde_json::Value::Null);
    assert_eq!(res.header("etag"), Some("\"1\""));
    let id = ada["id"].as_str().unwrap();

    let got = s.get(&format!("/contacts/{id}")).await;
    assert_eq!(got.ok(200), &ada);
    assert_eq!(got.header("etag"), Some("\"1\""));

    let updated = s
        .req(Method::PATCH, &format!("/contacts/{id}"))
        .header("If-Match", "\"1\"")
        .json(&json!({"phone": "+44 20 7946 0000", "last_name": null}))
        .send()
        .await;
    let body = updated.ok(200);
    assert_eq!(body["phone"], "+44 20 7946 0000");
    assert_eq!(body["last_name"], serde_json::Value::Null);
    assert_eq!(body["version"], 2);
    assert_eq!(updated.header("etag"), Some("\"2\""));

    let stale = s
        .req(Method::PATCH, &format!("/contacts/{id}"))
        .header("If-Match", "\"1\"")
        .json(&json!({"phone": "1"}))
        .send()
        .await;
    stale.problem(412, "version_conflict");

    let deleted = s.delete(&format!("/contacts/{id}")).await;
    assert_eq!(
        deleted.ok(200),
        &json!({"id": id, "object": "contact", "deleted": true})
    );
    assert_eq!(
        s.delete(&format!("/contacts/{id}")).await.ok(200),
        &json!({"id": id, "object": "contact", "deleted": true})
    );
    assert!(s.get("/contacts").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let listed = s.get("/contacts?include_deleted=true").await;
    assert_eq!(listed.ok(200)["data"][0]["id"], id);
    let read_deleted = s.get(&format!("/contacts/{id}")).await;
    assert!(read_deleted.ok(200)["deleted_at"].is_string());

    let restored = s.post(&format!("/contacts/{id}/restore"), json!({})).await;
    assert_eq!(restored.ok(200)["deleted_at"], serde_json::Value::Null);
    assert_eq!(s.get("/contacts").await.ok(200)["data"][0]["id"], id);
    // Restoring an active contact is a no-op that returns it.
    assert_eq!(
        s.post(&format!("/contacts/{id}/restore"), json!({}))
            .await
            .ok(200)["version"],
        restored.body["version"]
    );
}

async fn paging_follows_next_cursor_newest_first(s: Server) {
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            create(&s, json!({"email": format!("p{i}@example.com")})).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    ids.reverse();
    let mut seen = Vec::new();
    let mut url = "/contacts?limit=2".to_owned();
    loop {
        let page = s.get(&url).await.ok(200).clone();
        assert_eq!(page["object"], "list");
        seen.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["id"].as_str().unwrap().to_owned()),
        );
        if !page["has_more"].as_bool().unwrap() {
            assert_eq!(page["next_cursor"], serde_json::Value::Null);
            break;
        }
        url = format!(
            "/contacts?limit=2&cursor={}",
            page["next_cursor"].as_str().unwrap()
        );
    }
    assert_eq!(seen, ids);
}

async fn filters_narrow_the_list(s: Server) {
    let acme = s.post("/companies", json!({"name": "Acme"})).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let grace = create(&s, json!({"first_name": "Grace", "last_name": "Hopper", "email": "grace@navy.mil", "company_id": acme})).await;
    let alan = create(&s, json!({"first_name": "Alan", "phone": "+1 555 0100", "linkedin_url": "https://linkedin.com/in/alan"})).await;
    let ids = |v: &serde_json::Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        ids(s.get("/contacts?q=hopp").await.ok(200)),
        vec![grace["id"].clone()]
    );
    assert_eq!(
        ids(s.get("/contacts?q=LINKEDIN.com/in/al").await.ok(200)),
        vec![alan["id"].clone()]
    );
    assert_eq!(
        ids(s.get("/contacts?email=GRACE@navy.mil").await.ok(200)),
        vec![grace["id"].clone()]
    );
    assert_eq!(
        ids(s.get(&format!("/contacts?company_id={acme}")).await.ok(200)),
        vec![grace["id"].clone()]
    );
    // A malformed id filter says what is wrong with it.
    let res = s
        .get("/contacts?company_id=cmp_zkccp76qbapy3hwwvgt8btbhmt")
        .await;
    let detail = res.problem(422, "validation_failed")["detail"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(detail.contains("must be `0` to `7`"), "{detail}");
    // `type` is validated against the registered contact.type values (none yet).
    let res = s.get("/contacts?type=customer").await;
    assert_eq!(
        res.problem(422, "unknown_value")["valid_options"],
        json!([])
    );
}

async fn duplicate_email_conflicts_with_the_existing_contact(s: Server) {
    let first = create(&s, json!({"email": "dup@example.com", "first_name": "One"})).await;
    let res = s
        .post("/contacts", json!({"email": "DUP@example.com"}))
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"], first);
    // A soft-deleted contact still holds its email; the 409 shows it deleted so it can be restored.
    let id = first["id"].as_str().unwrap();
    s.delete(&format!("/contacts/{id}")).await.ok(200);
    let res = s
        .post("/contacts", json!({"email": "dup@example.com"}))
        .await;
    let existing = &res.problem(409, "conflict")["existing"];
    assert_eq!(existing["id"], id);
    assert!(existing["deleted_at"].is_string());
    // Changing another contact's email to a taken one conflicts too.
    let other = create(&s, json!({"email": "other@example.com"})).await;
    let res = s
        .patch(
            &format!("/contacts/{}", other["id"].as_str().unwrap()),
            json!({"email": "dup@example.com"}),
        )
        .await;
    assert_eq!(res.problem(409, "conflict")["existing"]["id"], id);
}

async fn create_rules_are_enforced(s: Server) {
    s.post("/contacts", json!({}))
        .await
        .problem(422, "identifier_required");
    s.post("/contacts", json!({"first_name": "  "}))
        .await
        .problem(422, "identifier_required");
    let res = s.post("/contacts", json!({"email": "not-an-email"})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "email");
    let res = s.post("/contacts", json!({"first_name": 42})).await;
    assert_eq!(res.problem(422, "validation_failed")["field"], "first_name");
    let res = s
        .post(
            "/contacts",
            json!({"company_id": "cmp_00000000000000000000000000"}),
        )
        .await;
    assert_eq!(res.problem(422, "invalid_reference")["field"], "company_id");
    let res = s.post("/contacts", json!({"company_id": "nonsense"})).await;
    assert_eq!(res.problem(422, "invalid_reference")["field"], "company_id");
    let res = s
        .post("/contacts", json!({"type": "lead", "first_name": "A"}))
        .await;
    assert_eq!(res.problem(422, "unknown_value")["field"], "type");
    let res = s
        .post(
            "/contacts",
            json!({"first_name": "A", "custom_fields": {"tier": "gold"}}),
        )
        .await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(p["field"], "custom_fields.tier");
    assert!(p["suggestion"].as_str().unwrap().contains("POST /fields"));
}

async fn unknown_fields_are_refused_with_a_suggestion(s: Server) {
    let res = s.post("/contacts", json!({"frist_name": "Ada"})).await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(p["field"], "frist_name");
    assert_eq!(p["suggestion"], "did you mean `first_name`?");
    assert!(p["valid_options"]
        .as_array()
        .unwrap()
        .contains(&json!("first_name")));
    let res = s
        .post("/contacts", json!({"first_name": "Ada", "tier": "gold"}))
        .await;
    let p = res.problem(422, "unknown_field");
    assert!(
        p["suggestion"].as_str().unwrap().contains("custom_fields"),
        "{p}"
    );
}

async fn an_empty_patch_changes_nothing(s: Server) {
    let c = create(&s, json!({"first_name": "Ada"})).await;
    let id = c["id"].as_str().unwrap();
    let same = s
        .patch(&format!("/contacts/{id}"), json!({"first_name": "Ada"}))
        .await;
    assert_eq!(
        same.ok(200)["version"],
        1,
        "a same-body PATCH is naturally idempotent"
    );
    assert!(s.get("/events?type=contact.updated").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let changed = s
        .patch(&format!("/contacts/{id}"), json!({"first_name": "Augusta"}))
        .await;
    assert_eq!(changed.ok(200)["version"], 2);
    let events = s.get("/events?type=contact.updated").await;
    let e = &events.ok(200)["data"][0];
    assert_eq!(e["changed_fields"], json!(["first_name"]));
    assert_eq!(e["data"]["first_name"], "Augusta");
}

async fn updating_a_deleted_contact_conflicts(s: Server) {
    let c = create(&s, json!({"first_name": "Ada"})).await;
    let id = c["id"].as_str().unwrap();
    s.delete(&format!("/contacts/{id}")).await.ok(200);
    s.patch(&format!("/contacts/{id}"), json!({"first_name": "B"}))
        .await
        .problem(409, "conflict");
}

async fn unknown_ids_are_not_found(s: Server) {
    s.get("/contacts/con_00000000000000000000000000")
        .await
        .problem(404, "not_found");
    s.get("/contacts/nonsense").await.problem(404, "not_found");
    s.patch(
        "/contacts/con_00000000000000000000000000",
        json!({"first_name": "x"}),
    )
    .await
    .problem(404, "not_found");
    s.delete("/contacts/con_00000000000000000000000000")
        .await
        .problem(404, "not_found");
    s.post(
        "/contacts/con_00000000000000000000000000/restore",
        json!({}),
    )
    .await
    .problem(404, "not_found");
}

/// Registers the custom fields the filter tests use: one of each kind of value.
async fn register_filter_fields(s: &Server) {
    for (key, data_type) in [
        ("tier", "select"),
        ("score", "number"),
        ("vip", "boolean"),
        ("tags", "multiselect"),
        ("since", "date"),
        ("alt", "email"),
        ("note", "text"),
    ] {
        s.post(
            "/fields",
            json!({"object": "contact", "key": key, "data_type": data_type}),
        )
        .await
        .ok(201);
    }
    for (group, value) in [
        ("contact.tier", "gold"),
        ("contact.tier", "silver"),
        ("contact.tags", "x"),
        ("contact.tags", "y"),
        ("contact.type", "customer"),
    ] {
        s.post("/enums", json!({"group": group, "value": value}))
            .await
            .ok(201);
    }
}

fn list_ids(v: &serde_json::Value) -> Vec<String> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn custom_field_filters_match_by_the_fields_type(s: Server) {
    register_filter_fields(&s).await;
    let acme = s.post("/companies", json!({"name": "Acme"})).await.ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let a = create(&s, json!({"first_name": "Ada", "type": "customer", "company_id": acme,
        "custom_fields": {"tier": "gold", "score": 5, "vip": true, "tags": ["x", "y"], "since": "2020-01-02", "alt": "Ada@Example.com"}})).await;
    let b = create(&s, json!({"first_name": "Bea", "custom_fields": {"tier": "gold", "score": 5.0, "vip": false, "tags": ["y"], "note": "gold"}})).await;
    let c = create(
        &s,
        json!({"first_name": "Cy", "custom_fields": {"tier": "silver", "score": 6}}),
    )
    .await;
    let id = |v: &serde_json::Value| v["id"].as_str().unwrap().to_owned();
    let (a, b, c) = (id(&a), id(&b), id(&c));
    for (query, expected) in [
        ("custom_fields.tier=gold", vec![&b, &a]),
        ("custom_fields[tier]=gold", vec![&b, &a]),
        ("custom_fields%5Btier%5D=gold", vec![&b, &a]),
        ("custom_fields.tier=silver", vec![&c]),
        ("custom_fields.score=5", vec![&b, &a]),
        ("custom_fields.score=5.0", vec![&b, &a]),
        ("custom_fields.score=6", vec![&c]),
        ("custom_fields.vip=true", vec![&a]),
        ("custom_fields.vip=false", vec![&b]),
        ("custom_fields.tags=y", vec![&b, &a]),
        ("custom_fields.tags=x", vec![&a]),
        ("custom_fields.since=2020-01-02", vec![&a]),
        ("custom_fields.alt=ADA@example.COM", vec![&a]),
        ("custom_fields.note=gold", vec![&b]),
        ("custom_fields.note=Gold", vec![]),
        ("custom_fields.tier=gold&custom_fields.tags=x", vec![&a]),
        (
            "custom_fields.tier=gold&custom_fields.vip=false&custom_fields.score=5",
            vec![&b],
        ),
        ("custom_fields.tier=silver&custom_fields.tags=x", vec![]),
        ("custom_fields.tier=gold&type=customer", vec![&a]),
        (
            &format!("custom_fields.tier=gold&company_id={acme}"),
            vec![&a],
        ),
        ("custom_fields.tier=gold&q=bea", vec![&b]),
        // A filter given empty is absent, as every filter.
        ("custom_fields.tier=", vec![&c, &b, &a]),
    ] {
        let got = list_ids(s.get(&format!("/contacts?{query}")).await.ok(200));
        assert_eq!(
            got,
            expected.into_iter().cloned().collect::<Vec<_>>(),
            "{query}"
        );
    }

    // Writes move contacts in and out at once; deleted ones only with include_deleted.
    s.patch(
        &format!("/contacts/{b}"),
        json!({"custom_fields": {"tier": "silver"}}),
    )
    .await
    .ok(200);
    s.patch(
        &format!("/contacts/{a}"),
        json!({"custom_fields": {"tags": null}}),
    )
    .await
    .ok(200);
    s.delete(&format!("/contacts/{c}")).await.ok(200);
    assert_eq!(
        list_ids(s.get("/contacts?custom_fields.tier=gold").await.ok(200)),
        vec![a.clone()]
    );
    assert_eq!(
        list_ids(s.get("/contacts?custom_fields.tier=silver").await.ok(200)),
        vec![b.clone()]
    );
    assert_eq!(
        list_ids(
            s.get("/contacts?custom_fields.tier=silver&include_deleted=true")
                .await
                .ok(200)
        ),
        vec![c.clone(), b.clone()]
    );
    assert_eq!(
        list_ids(s.get("/contacts?custom_fields.tags=x").await.ok(200)),
        Vec::<String>::new()
    );
}

async fn custom_field_filter_errors_name_the_field(s: Server) {
    register_filter_fields(&s).await;
    let res = s.get("/contacts?custom_fields.teir=gold").await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(p["field"], "custom_fields.teir");
    assert_eq!(p["suggestion"], "did you mean `tier`?");
    assert!(p["valid_options"]
        .as_array()
        .unwrap()
        .contains(&json!("tier")));
    let p = s
        .get("/contacts?custom_fields.nothing_like_it=1")
        .await
        .problem(422, "unknown_field")
        .clone();
    assert!(
        p["suggestion"].as_str().unwrap().contains("POST /fields"),
        "{p}"
    );

    for (query, field) in [
        ("custom_fields.score=five", "custom_fields.score"),
        ("custom_fields.score=", ""),
        ("custom_fields.vip=yes", "custom_fields.vip"),
        ("custom_fields.since=2020-13-01", "custom_fields.since"),
        ("custom_fields.alt=not-an-address", "custom_fields.alt"),
    ] {
        if field.is_empty() {
            s.get(&format!("/contacts?{query}")).await.ok(200);
            continue;
        }
        assert_eq!(
            s.get(&format!("/contacts?{query}"))
                .await
                .problem(422, "validation_failed")["field"],
            field,
            "{query}"
        );
    }
    let p = s
        .get("/contacts?custom_fields.tier=platinum")
        .await
        .problem(422, "unknown_value")
        .clone();
    assert_eq!(
        (p["field"].clone(), p["valid_options"].clone()),
        (json!("custom_fields.tier"), json!(["gold", "silver"]))
    );
    let p = s
        .get("/contacts?custom_fields.tags=z")
        .await
        .problem(422, "unknown_value")
        .clone();
    assert_eq!(p["valid_options"], json!(["x", "y"]));

    // The parameter's shape is checked before the registry: 400 as any unknown parameter.
    for query in [
        "custom_fields=gold",
        "custom_fields.=gold",
        "custom_fields[tier=gold",
        "customfields.tier=gold",
    ] {
        let p = s
            .get(&format!("/contacts?{query}"))
            .await
            .problem(400, "bad_request")
            .clone();
        assert!(
            p["valid_options"]
                .as_array()
                .unwrap()
                .contains(&json!("custom_fields.<key>")),
            "{query}: {p}"
        );
    }
    let p = s
        .get("/contacts?custom_fields.tier=gold&custom_fields[tier]=silver")
        .await
        .problem(400, "bad_request")
        .clone();
    assert_eq!(p["field"], "custom_fields.tier");
    let six = "custom_fields.tier=gold&custom_fields.score=1&custom_fields.vip=true&custom_fields.tags=x&custom_fields.since=2020-01-01&custom_fields.note=n";
    assert_eq!(
        s.get(&format!("/contacts?{six}"))
            .await
            .problem(422, "validation_failed")["field"],
        "custom_fields"
    );
}

async fn custom_field_filter_pages_are_bound_to_their_filters(s: Server) {
    register_filter_fields(&s).await;
    let mut gold = Vec::new();
    for i in 0..5 {
        gold.push(
            create(
                &s,
                json!({"first_name": format!("g{i}"), "custom_fields": {"tier": "gold"}}),
            )
            .await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        create(
            &s,
            json!({"first_name": format!("s{i}"), "custom_fields": {"tier": "silver"}}),
        )
        .await;
    }
    gold.reverse();
    let mut seen = Vec::new();
    let mut url = "/contacts?custom_fields.tier=gold&limit=2".to_owned();
    let mut cursors = Vec::new();
    loop {
        let page = s.get(&url).await.ok(200).clone();
        seen.extend(list_ids(&page));
        if !page["has_more"].as_bool().unwrap() {
            break;
        }
        let cursor = page["next_cursor"].as_str().unwrap().to_owned();
        url = format!("/contacts?custom_fields.tier=gold&limit=2&cursor={cursor}");
        cursors.push(cursor);
    }
    assert_eq!(seen, gold);
    let cursor = &cursors[0];
    // The other spelling is the same filter, so its cursor carries over.
    assert_eq!(
        list_ids(
            s.get(&format!(
                "/contacts?custom_fields[tier]=gold&limit=2&cursor={cursor}"
            ))
            .await
            .ok(200)
        ),
        gold[2..4].to_vec()
    );
    for other in [
        "custom_fields.tier=silver",
        "",
        "custom_fields.tier=gold&include_deleted=true",
        "custom_fields.tier=gold&custom_fields.score=1",
    ] {
        s.get(&format!("/contacts?{other}&limit=2&cursor={cursor}"))
            .await
            .problem(400, "invalid_cursor");
    }
    let unfiltered = s.get("/contacts?limit=2").await.ok(200)["next_cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    s.get(&format!(
        "/contacts?custom_fields.tier=gold&limit=2&cursor={unfiltered}"
    ))
    .await
    .problem(400, "invalid_cursor");
}

async fn the_schema_lists_a_filter_per_custom_field(s: Server) {
    register_filter_fields(&s).await;
    let doc = s.get("/schema").await.ok(200).clone();
    let contact = doc["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "contact")
        .unwrap();
    let filters = contact["list_filters"].as_array().unwrap();
    let tier = filters
        .iter()
        .find(|f| f["name"] == "custom_fields.tier")
        .expect("a filter for the registered field");
    assert_eq!(
        (tier["type"].clone(), tier["enum_group"].clone()),
        (json!("select"), json!("contact.tier"))
    );
    assert!(filters
        .iter()
        .any(|f| f["name"] == "custom_fields.since" && f["type"] == "date"));
    assert!(filters.iter().all(|f| f["name"] != "custom_fields"));
}

crate::on_both_stores!(
    create_update_delete_restore_walkthrough,
    paging_follows_next_cursor_newest_first,
    filters_narrow_the_list,
    duplicate_email_conflicts_with_the_existing_contact,
    create_rules_are_enforced,
    unknown_fields_are_refused_with_a_suggestion,
    an_empty_patch_changes_nothing,
    updating_a_deleted_contact_conflicts,
    unknown_ids_are_not_found,
    custom_field_filters_match_by_the_fields_type,
    custom_field_filter_errors_name_the_field,
    custom_field_filter_pages_are_bound_to_their_filters,
    the_schema_lists_a_filter_per_custom_field,
);
