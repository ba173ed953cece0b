//! Strict input (decisions §22-§24): NUL in query values, strong `If-Match`, integers in any
//! spelling, cursors bound to their tenant, text lengths and sizes, e-mail lookalikes.

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{self, Backend, Res, Server};

/// `tools/call` over MCP with the test key: the tool result.
async fn call_tool(s: &Server, name: &str, arguments: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}});
    let res: Res = s
        .anon(Method::POST, "!/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/call")
        .header("authorization", &format!("Bearer {}", s.keys.test))
        .json(&body)
        .send()
        .await;
    res.ok(200)["result"].clone()
}

async fn nul_in_a_query_value_is_a_bad_request_everywhere(s: Server) {
    s.post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201);
    s.post("/companies", json!({"name": "Acme"})).await.ok(201);
    for path in [
        "/contacts?q=a%00b",
        "/contacts?q=%00a",
        "/contacts?email=%00",
        "/contacts?custom_fields.tier=%00",
        "/companies?q=a%00b",
        "/companies?q=%00a",
        "/deals?q=a%00b",
        "/search?q=a%00b",
        "/search?q=%00a",
        "/events?type=%00",
        "/contacts?q%00=a",
        "/pipelines/a%00b",
    ] {
        let res = s.get(path).await;
        let p = res.problem(400, "bad_request");
        assert!(
            !p["field"].as_str().unwrap().contains('\0'),
            "{path}: the field is printable"
        );
    }
    // Agents reach the same check through their string arguments.
    let res = call_tool(&s, "svc_list_contacts", json!({"q": "\u{0}a"})).await;
    assert_eq!(res["isError"], true);
    assert_eq!(res["structuredContent"]["code"], "bad_request");
    let res = call_tool(&s, "svc_search_records", json!({"q": "a\u{0}"})).await;
    assert_eq!(res["structuredContent"]["code"], "bad_request");
}

async fn if_match_compares_strongly(s: Server) {
    let id = s
        .post("/contacts", json!({"first_name": "Ada"}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let patch = |tag: &'static str| {
        s.req(Method::PATCH, &format!("/contacts/{id}"))
            .header("If-Match", tag)
            .json(&json!({"last_name": "Lovelace"}))
    };
    // A weak tag never matches, even the current version's.
    let res = patch("W/\"1\"").send().await;
    assert_eq!(res.problem(412, "version_conflict")["current_version"], 1);
    for malformed in ["\"1", "1\"", "W/1", "\"\"", "\"1\"x"] {
        let res = patch(malformed).send().await;
        assert_eq!(
            res.problem(400, "bad_request")["field"],
            "If-Match",
            "{malformed}"
        );
    }
    let read = s.get(&format!("/contacts/{id}")).await;
    assert_eq!(
        read.ok(200)["version"],
        1,
        "nothing matched, nothing changed"
    );
    patch("\"1\"").send().await.ok(200);
}

async fn integers_take_any_spelling_up_to_two_to_the_63(s: Server) {
    for (raw, want) in [
        ("1e18", json!(1_000_000_000_000_000_000_i64)),
        ("1000000000000000000", json!(1_000_000_000_000_000_000_i64)),
        ("3.0", json!(3)),
        ("9223372036854775807", json!(i64::MAX)),
    ] {
        let res = s
            .req(Method::POST, "/deals")
            .raw(format!(r#"{{"title": "t", "value_cents": {raw}}}"#))
            .send()
            .await;
        assert_eq!(res.ok(201)["value_cents"], want, "{raw}");
    }
    for raw in ["3.5", "9223372036854775808", "1e19", "1e300"] {
        let res = s
            .req(Method::POST, "/deals")
            .raw(format!(r#"{{"title": "t", "value_cents": {raw}}}"#))
            .send()
            .await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "value_cents",
            "{raw}"
        );
    }
}

async fn a_cursor_belongs_to_its_workspace_and_mode(s: Server) {
    for i in 0..3 {
        s.post("/contacts", json!({"first_name": format!("c{i}")}))
            .await
            .ok(201);
    }
    let page = s.get("/contacts?limit=1").await.ok(200).clone();
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    s.get(&format!("/contacts?limit=1&cursor={cursor}"))
        .await
        .ok(200);
    // The same list and filters in the live mode of the workspace...
    s.req(Method::GET, &format!("/contacts?limit=1&cursor={cursor}"))
        .key(&s.keys.live)
        .send()
        .await
        .problem(400, "invalid_cursor");
    // ... and in another workspace.
    let other = support::create_workspace(&s.database_url, &[]);
    s.req(Method::GET, &format!("/contacts?limit=1&cursor={cursor}"))
        .key(&other.test)
        .send()
        .await
        .problem(400, "invalid_cursor");
    // Other filters.
    s.get(&format!(
        "/contacts?limit=1&include_deleted=true&cursor={cursor}"
    ))
    .await
    .problem(400, "invalid_cursor");
}

async fn lookalike_emails_are_one_contact(s: Server) {
    let first = s
        .post(
            "/contacts",
            json!({"email": "\u{ff4b}ate@ex\u{e4}mple.com"}),
        )
        .await;
    let kate = first.ok(201).clone();
    assert_eq!(
        kate["email"], "kate@xn--exmple-cua.com",
        "stored normalised"
    );
    for lookalike in [
        "kate@xn--exmple-cua.com",
        "kate@ex\u{e4}mple.com",
        "KATE@EXA\u{308}MPLE.COM",
    ] {
        let res = s.post("/contacts", json!({"email": lookalike})).await;
        assert_eq!(
            res.problem(409, "conflict")["existing"]["id"],
            kate["id"],
            "{lookalike}"
        );
    }
    // The filter normalises as a write does.
    let found = s.get("/contacts?email=KATE%40EX%C3%84MPLE.COM").await;
    assert_eq!(found.ok(200)["data"][0]["id"], kate["id"]);
    // An update to a lookalike of another contact's address is the same conflict.
    let other = s
        .post("/contacts", json!({"email": "other@example.com"}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.patch(
        &format!("/contacts/{other}"),
        json!({"email": "\u{ff2b}ate@exämple.com"}),
    )
    .await
    .problem(409, "conflict");
}

async fn text_lengths_and_sizes_are_bounded(s: Server) {
    let line = |n: usize| "x".repeat(n);
    let field_of = |res: &Res| res.problem(422, "validation_failed")["field"].clone();
    s.post("/contacts", json!({"first_name": line(1024)}))
        .await
        .ok(201);
    let res = s.post("/contacts", json!({"first_name": line(1025)})).await;
    assert_eq!(field_of(&res), "first_name");
    let res = s.post("/companies", json!({"name": line(1025)})).await;
    assert_eq!(field_of(&res), "name");
    let res = s.post("/deals", json!({"title": line(1025)})).await;
    assert_eq!(field_of(&res), "title");
    // Characters, not bytes: 1,024 two-byte letters fit.
    s.post("/deals", json!({"title": "é".repeat(1024)}))
        .await
        .ok(201);

    let body = |n: usize| "b".repeat(n);
    s.post(
        "/activities",
        json!({"type": "note", "body": body(100_000)}),
    )
    .await
    .ok(201);
    let res = s
        .post(
            "/activities",
            json!({"type": "note", "body": body(100_001)}),
        )
        .await;
    assert_eq!(field_of(&res), "body");
    let res = s
        .post(
            "/templates",
            json!({"name": "t", "subject": "s", "body": body(100_001)}),
        )
        .await;
    assert_eq!(field_of(&res), "body");
    let step = |b: String| json!({"wait_days": 1, "subject": "s", "body": b});
    let res = s
        .post(
            "/sequences",
            json!({"name": "n", "steps": [step("a".into()), step("b".into()), step(body(100_001))]}),
        )
        .await;
    assert_eq!(field_of(&res), "steps[2].body");

    s.post("/fields", json!({"object": "contact", "key": "note"}))
        .await
        .ok(201);
    s.post(
        "/fields",
        json!({"object": "contact", "key": "tags", "data_type": "multiselect"}),
    )
    .await
    .ok(201);
    s.post("/enums", json!({"group": "contact.tags", "value": "a"}))
        .await
        .ok(201);
    s.post(
        "/contacts",
        json!({"custom_fields": {"note": line(10_000)}}),
    )
    .await
    .ok(201);
    let res = s
        .post(
            "/contacts",
            json!({"custom_fields": {"note": line(10_001)}}),
        )
        .await;
    assert_eq!(field_of(&res), "custom_fields.note");
    let res = s
        .post(
            "/contacts",
            json!({"custom_fields": {"tags": vec!["a"; 101]}}),
        )
        .await;
    assert_eq!(field_of(&res), "custom_fields.tags");
    // 27 text values of 10,000 characters: each allowed, together over 256 KiB.
    let mut values = serde_json::Map::new();
    for i in 0..27 {
        s.post(
            "/fields",
            json!({"object": "contact", "key": format!("t{i}")}),
        )
        .await
        .ok(201);
        values.insert(format!("t{i}"), json!(line(10_000)));
    }
    let res = s.post("/contacts", json!({"custom_fields": values})).await;
    assert_eq!(field_of(&res), "custom_fields");
}

/// Runs `statements` on the database of `backend` at `url`.
async fn sql(backend: Backend, url: &str, statements: &[String]) {
    use sqlx::Connection;
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
            for q in statements {
                sqlx::query(q).execute(&mut conn).await.unwrap();
            }
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            for q in statements {
                sqlx::query(q).execute(&mut conn).await.unwrap();
            }
        }
    }
}

/// `contact_id, reason, held_by` of each recorded conflict, by contact id.
async fn conflicts(backend: Backend, url: &str) -> Vec<(String, String, Option<String>)> {
    use sqlx::Connection;
    let q =
        "SELECT contact_id, reason, held_by FROM email_normalisation_conflicts ORDER BY contact_id";
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::query_as(q).fetch_all(&mut conn).await.unwrap()
        }
        Backend::Postgres => {
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query_as(q).fetch_all(&mut conn).await.unwrap()
        }
    }
}

/// Addresses stored before normalisation are rewritten once by `migrate`; a contact whose
/// normalised address another holds keeps its own and is reported.
async fn migrate_normalises_stored_emails_and_reports_collisions(backend: Backend) {
    let s = support::spawn(backend).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let res = s
            .post("/contacts", json!({"email": format!("p{i}@example.com")}))
            .await;
        ids.push(res.ok(201)["id"].as_str().unwrap().to_owned());
    }
    let (backend, url, keys) = (s.backend, s.database_url.clone(), s.keys.clone());
    drop(s);
    // As an older version stored them: trimmed and lower-cased only.
    let stored = [
        "kate@ex\u{e4}mple.com",        // free once normalised: rewritten
        "\u{ff4b}ate@ex\u{e4}mple.com", // the same address, younger: reported
        "bob@b\u{fc}cher.de",           // held by the next one, ASCII already
        "bob@xn--bcher-kva.de",
        "ann@exa\u{fffd}mple.com", // no longer an address: reported
    ];
    let mut statements: Vec<String> = ids
        .iter()
        .zip(stored)
        .map(|(id, email)| format!("UPDATE contacts SET email = '{email}' WHERE id = '{id}'"))
        .collect();
    statements.push("DELETE FROM data_migrations".to_owned());
    sql(backend, &url, &statements).await;

    support::cli(&url, &["migrate"]);
    support::cli(&url, &["migrate"]); // once only: a second run changes nothing
    let mut want = vec![
        (ids[1].clone(), "taken".to_owned(), Some(ids[0].clone())),
        (ids[2].clone(), "taken".to_owned(), Some(ids[3].clone())),
        (ids[4].clone(), "invalid".to_owned(), None),
    ];
    want.sort();
    assert_eq!(conflicts(backend, &url).await, want);

    let s = support::start(backend, url, keys, &[]);
    let kate = s.get(&format!("/contacts/{}", ids[0])).await;
    assert_eq!(kate.ok(200)["email"], "kate@xn--exmple-cua.com");
    assert_eq!(
        kate.body["version"], 2,
        "a changed record has a new version"
    );
    for (i, email) in stored.iter().enumerate().skip(1) {
        let res = s.get(&format!("/contacts/{}", ids[i])).await;
        assert_eq!(res.ok(200)["email"], *email, "contact {i} kept its address");
        assert_eq!(res.body["version"], 1);
    }
    s.post("/contacts", json!({"email": "KATE@EX\u{c4}MPLE.COM"}))
        .await
        .problem(409, "conflict");
}

mod migration {
    use super::*;

    crate::on_both_backends!(migrate_normalises_stored_emails_and_reports_collisions);
}

crate::on_both_stores!(
    nul_in_a_query_value_is_a_bad_request_everywhere,
    if_match_compares_strongly,
    integers_take_any_spelling_up_to_two_to_the_63,
    a_cursor_belongs_to_its_workspace_and_mode,
    lookalike_emails_are_one_contact,
    text_lengths_and_sizes_are_bounded,
);
