//! Exports (decisions §25): a list filtered as its list endpoint filters it (a custom field
//! included) comes out row for row as JSON lines and as CSV; the file answers 409 until the
//! export completed and 404 once it expired (the sweep then drops it); the object's read scope
//! is needed; each export is audited; a server killed mid-export resumes after its last
//! committed chunk; `GET /contacts/{id}/export` answers everything held about one contact.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{self, Backend, Server};

/// Workers that look for exports often and sweep expired ones within a second, and chunks of 250
/// rows, so that an export of a few thousand crosses chunk boundaries.
const ENV: &[(&str, &str)] = &[
    ("CRM_EXPORT_CHUNK_ROWS", "250"),
    ("CRM_EXPORT_POLL_MS", "20"),
    ("CRM_EXPORT_SWEEP_MS", "200"),
    ("CRM_IMPORT_POLL_MS", "20"),
];

async fn spawn(backend: Backend) -> Server {
    spawn_with(backend, ENV).await
}

async fn spawn_with(backend: Backend, env: &[(&str, &str)]) -> Server {
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &["--rate-limit-per-minute", "100000"]);
    support::start(backend, database_url, keys, env)
}

/// `n` contacts with a `tier` custom field, every third one `gold`, written by an import. One
/// name holds a comma and a quote, for the CSV.
async fn seed(s: &Server, n: usize) {
    s.post("/fields", json!({"object": "contact", "key": "tier"}))
        .await
        .ok(201);
    let mut csv = String::from("email,first_name,last_name,custom_fields.tier\n");
    for i in 0..n {
        let tier = if i % 3 == 0 { "gold" } else { "silver" };
        let last = if i == 3 {
            "\"O'Neil, \"\"Jr\"\"\""
        } else {
            "Doe"
        };
        csv.push_str(&format!("p{i}@example.com,P{i},{last},{tier}\n"));
    }
    let import = s
        .req(Method::POST, "/imports?object=contact")
        .header("content-type", "text/csv")
        .json_text(csv)
        .send()
        .await
        .ok(202)
        .clone();
    let id = import["id"].as_str().unwrap();
    let done = wait(s, &format!("/imports/{id}"), "completed").await;
    assert_eq!(done["created"], n as i64, "{done:#}");
}

/// Polls `path` until its `status` is no longer queued or running; asserts it is `status`.
async fn wait(s: &Server, path: &str, status: &str) -> Value {
    let started = Instant::now();
    loop {
        let now = s.get(path).await.ok(200).clone();
        if !["queued", "running"].contains(&now["status"].as_str().unwrap()) {
            assert_eq!(now["status"], status, "{now:#}");
            return now;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "{path}: {now:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every record the list `path` answers, following its cursors.
async fn whole_list(s: &Server, path: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page_path = match &cursor {
            None => format!("{path}&limit=100"),
            Some(c) => format!("{path}&limit=100&cursor={c}"),
        };
        let page = s.get(&page_path).await.ok(200).clone();
        out.extend(page["data"].as_array().unwrap().iter().cloned());
        match page["next_cursor"].as_str() {
            Some(c) if page["has_more"] == true => cursor = Some(c.to_owned()),
            _ => return out,
        }
    }
}

/// The raw bytes of a file download, with its content type.
async fn download(s: &Server, id: &str) -> (u16, Option<String>, String) {
    let res = reqwest::Client::new()
        .get(format!("{}/v1/exports/{id}/file", s.base))
        .bearer_auth(&s.keys.test)
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, content_type, res.text().await.unwrap())
}

/// Creates an export and waits for it to complete; answers its id and its file.
async fn export(s: &Server, query: &str) -> (String, String) {
    let created = s
        .req(Method::POST, &format!("/exports?{query}"))
        .send()
        .await
        .ok(202)
        .clone();
    assert_eq!(created["object"], "export");
    assert!(created["id"].as_str().unwrap().starts_with("exp_"));
    let id = created["id"].as_str().unwrap().to_owned();
    let done = wait(s, &format!("/exports/{id}"), "completed").await;
    assert!(done["expires_at"].is_string() && done["finished_at"].is_string());
    let (status, _, text) = download(s, &id).await;
    assert_eq!(status, 200, "{text}");
    (id, text)
}

/// RFC 4180 records of `text` (quoted fields may hold commas, quotes and line breaks).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, '\r') => {}
            (false, c) => field.push(c),
        }
    }
    assert!(
        field.is_empty() && row.is_empty(),
        "the file ends with a line break"
    );
    rows
}

/// How many contacts the row-for-row check exports: `CRM_EXPORT_CHECK_ROWS`, 3,000 by default
/// (a third of them match: four chunks whose boundaries must keep the list's order). The
/// 100,000-row check: `CRM_EXPORT_CHECK_ROWS=100000 cargo xtask test -E 'test(/row_for_row/)'`.
fn check_rows() -> usize {
    std::env::var("CRM_EXPORT_CHECK_ROWS").map_or(3_000, |n| {
        n.parse()
            .expect("CRM_EXPORT_CHECK_ROWS is a number of rows")
    })
}

async fn a_custom_field_filter_exports_what_the_list_answers_row_for_row(s: Server) {
    let n = check_rows();
    seed(&s, n).await;
    let listed = whole_list(&s, "/contacts?custom_fields.tier=gold").await;
    assert_eq!(listed.len(), n.div_ceil(3));

    let (_, jsonl) = export(&s, "object=contact&format=jsonl&custom_fields.tier=gold").await;
    let lines: Vec<Value> = jsonl
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines, listed,
        "JSON lines are the list's bodies, in its order"
    );

    let (_, csv) = export(&s, "object=contact&format=csv&custom_fields.tier=gold").await;
    let rows = parse_csv(&csv);
    let header = &rows[0];
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (id, email, last, tier) = (
        column("id"),
        column("email"),
        column("last_name"),
        column("custom_fields.tier"),
    );
    assert!(!header.contains(&"custom_fields".to_owned()));
    assert_eq!(rows.len() - 1, listed.len());
    for (row, record) in rows[1..].iter().zip(&listed) {
        assert_eq!(row.len(), header.len());
        assert_eq!(row[id], record["id"].as_str().unwrap());
        assert_eq!(row[email], record["email"].as_str().unwrap());
        assert_eq!(row[last], record["last_name"].as_str().unwrap());
        assert_eq!(row[tier], "gold");
    }
    assert!(
        rows.iter().any(|r| r[last] == "O'Neil, \"Jr\""),
        "a comma and quotes survive the CSV"
    );

    // Another object's filter, an unknown format and an unknown object are refused.
    s.req(Method::POST, "/exports?object=company&email=a@example.com")
        .send()
        .await
        .problem(422, "validation_failed");
    s.req(Method::POST, "/exports?object=contact&format=xml")
        .send()
        .await
        .problem(422, "validation_failed");
    s.req(Method::POST, "/exports?object=lead")
        .send()
        .await
        .problem(422, "unknown_value");
    s.req(Method::POST, "/exports?object=contact&custom_fields.nope=1")
        .send()
        .await
        .problem(422, "unknown_field");
}

async fn every_object_exports_and_each_export_is_audited(s: Server) {
    let contact = s
        .post("/contacts", json!({"email": "ada@example.com"}))
        .await
        .ok(201)
        .clone();
    let cid = contact["id"].as_str().unwrap();
    s.post("/companies", json!({"name": "Acme", "domain": "acme.test"}))
        .await
        .ok(201);
    s.post("/deals", json!({"title": "Big order"}))
        .await
        .ok(201);
    s.post("/activities", json!({"type": "call", "contact_id": cid}))
        .await
        .ok(201);
    for (object, list) in [
        ("company", "/companies?"),
        ("deal", "/deals?"),
        ("activity", "/activities?"),
        ("contact", "/contacts?"),
    ] {
        let (id, jsonl) = export(&s, &format!("object={object}&format=jsonl")).await;
        let lines: Vec<Value> = jsonl
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines, whole_list(&s, list).await, "{object}");
        let audit = s
            .get(&format!("/audit?action=export.created&target_id={id}"))
            .await
            .ok(200)
            .clone();
        let entries = audit["data"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{audit:#}");
        assert_eq!(entries[0]["target"], json!({"object": "export", "id": id}));
        assert_eq!(entries[0]["channel"], "rest");
    }
    // An empty list is a file of its header only.
    let (_, csv) = export(&s, "object=contact&format=csv&email=nobody@example.com").await;
    assert_eq!(parse_csv(&csv).len(), 1);
}

async fn the_file_waits_for_completion_and_is_gone_when_it_expires(backend: Backend) {
    // A worker that looks for exports once a minute: the export stays queued.
    let idle = spawn_with(backend, &[("CRM_EXPORT_POLL_MS", "60000")]).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let queued = idle
        .req(Method::POST, "/exports?object=contact")
        .send()
        .await
        .ok(202)
        .clone();
    assert_eq!(queued["status"], "queued");
    assert_eq!(queued["rows_total"], Value::Null);
    let id = queued["id"].as_str().unwrap();
    idle.get(&format!("/exports/{id}/file"))
        .await
        .problem(409, "conflict");
    drop(idle);

    let s = spawn(backend).await;
    s.post("/contacts", json!({"email": "ada@example.com"}))
        .await
        .ok(201);
    let (id, csv) = export(&s, "object=contact").await;
    assert_eq!(parse_csv(&csv).len(), 2);
    let (_, content_type, _) = download(&s, &id).await;
    assert_eq!(content_type.as_deref(), Some("text/csv; charset=utf-8"));
    let done = s.get(&format!("/exports/{id}")).await.ok(200).clone();
    assert_eq!(done["rows_total"], 1);
    assert_eq!(done["rows_done"], 1);
    // A day later (its expiry moved to the past in the database): 404, and the sweep drops it.
    execute(
        &s,
        &format!("UPDATE exports SET expires_at = 1 WHERE id = '{id}'"),
    )
    .await;
    s.get(&format!("/exports/{id}"))
        .await
        .problem(404, "not_found");
    s.get(&format!("/exports/{id}/file"))
        .await
        .problem(404, "not_found");
    let started = Instant::now();
    while count(
        &s,
        &format!("SELECT COUNT(*) FROM export_chunks WHERE export_id = '{id}'"),
    )
    .await
        + count(
            &s,
            &format!("SELECT COUNT(*) FROM exports WHERE id = '{id}'"),
        )
        .await
        > 0
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the sweep drops it"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn execute(s: &Server, sql: &str) {
    use sqlx::Connection;
    match s.backend {
        Backend::Sqlite => {
            let mut db = sqlx::SqliteConnection::connect(&s.database_url)
                .await
                .unwrap();
            sqlx::query(sql).execute(&mut db).await.unwrap();
        }
        Backend::Postgres => {
            let mut db = sqlx::PgConnection::connect(&s.database_url).await.unwrap();
            sqlx::query(sql).execute(&mut db).await.unwrap();
        }
    }
}

async fn count(s: &Server, sql: &str) -> i64 {
    use sqlx::Connection;
    match s.backend {
        Backend::Sqlite => {
            let mut db = sqlx::SqliteConnection::connect(&s.database_url)
                .await
                .unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut db).await.unwrap()
        }
        Backend::Postgres => {
            let mut db = sqlx::PgConnection::connect(&s.database_url).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut db).await.unwrap()
        }
    }
}

async fn exports_need_the_objects_read_scope(s: Server) {
    let key = |scopes: Value| {
        let s = &s;
        async move {
            s.post("/keys", json!({"name": "narrow", "scopes": scopes}))
                .await
                .ok(201)["secret"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let companies = key(json!(["companies:read"])).await;
    let contacts = key(json!(["contacts:read"])).await;
    let refused = s
        .req(Method::POST, "/exports?object=contact")
        .key(&companies)
        .send()
        .await;
    assert_eq!(
        refused.problem(403, "forbidden")["detail"]
            .as_str()
            .map(|d| d.contains("contacts:read")),
        Some(true)
    );
    let created = s
        .req(Method::POST, "/exports?object=contact")
        .key(&contacts)
        .send()
        .await
        .ok(202)
        .clone();
    let id = created["id"].as_str().unwrap();
    wait(&s, &format!("/exports/{id}"), "completed").await;
    for path in [format!("/exports/{id}"), format!("/exports/{id}/file")] {
        s.req(Method::GET, &path)
            .key(&companies)
            .send()
            .await
            .problem(403, "forbidden");
    }
    s.req(Method::GET, &format!("/exports/{id}"))
        .key(&contacts)
        .send()
        .await
        .ok(200);
    // The one-contact export needs the read scope of every part of it.
    let cid = s
        .post("/contacts", json!({"email": "ada@example.com"}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.req(Method::GET, &format!("/contacts/{cid}/export"))
        .key(&contacts)
        .send()
        .await
        .problem(403, "forbidden");
}

async fn one_contact_exports_everything_held_about_it(s: Server) {
    let contact = s
        .post(
            "/contacts",
            json!({"email": "ada@example.com", "first_name": "Ada"}),
        )
        .await
        .ok(201)
        .clone();
    let cid = contact["id"].as_str().unwrap().to_owned();
    s.patch(
        &format!("/contacts/{cid}"),
        json!({"last_name": "Lovelace"}),
    )
    .await
    .ok(200);
    let activity = s
        .post(
            "/activities",
            json!({"type": "call", "contact_id": cid, "body": "first call"}),
        )
        .await
        .ok(201)
        .clone();
    let deal = s
        .post(
            "/deals",
            json!({"title": "Engine", "primary_contact_id": cid}),
        )
        .await
        .ok(201)
        .clone();
    let other = s
        .post("/contacts", json!({"email": "grace@example.com"}))
        .await
        .ok(201)
        .clone();
    s.post(
        "/activities",
        json!({"type": "note", "contact_id": other["id"]}),
    )
    .await
    .ok(201);

    let dossier = s
        .get(&format!("/contacts/{cid}/export"))
        .await
        .ok(200)
        .clone();
    assert_eq!(dossier["object"], "contact_export");
    assert_eq!(dossier["contact"]["id"], cid.as_str());
    assert_eq!(dossier["contact"]["last_name"], "Lovelace");
    assert_eq!(dossier["activities"], json!([activity]));
    assert_eq!(dossier["deals"].as_array().unwrap().len(), 1);
    assert_eq!(dossier["deals"][0]["id"], deal["id"]);
    let history = dossier["history"].as_array().unwrap();
    assert_eq!(
        history
            .iter()
            .map(|h| h["action"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["updated", "created"]
    );
    assert_eq!(dossier["emails"], json!([]));
    assert_eq!(dossier["enrollments"], json!([]));
    let audit = s
        .get(&format!("/audit?action=contact.exported&target_id={cid}"))
        .await
        .ok(200)
        .clone();
    assert_eq!(audit["data"].as_array().unwrap().len(), 1, "{audit:#}");
    s.get("/contacts/con_00000000000000000000000000/export")
        .await
        .problem(404, "not_found");
}

/// A worker that writes 50 records a chunk, and whose lease ends a second after it stopped.
const KILL_ENV: &[(&str, &str)] = &[
    ("CRM_EXPORT_LEASE_MS", "1000"),
    ("CRM_EXPORT_POLL_MS", "20"),
    ("CRM_EXPORT_CHUNK_ROWS", "50"),
    ("CRM_IMPORT_POLL_MS", "20"),
];

async fn a_killed_server_resumes_the_export_without_a_row_twice(backend: Backend) {
    const ROWS: usize = 3000;
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &["--rate-limit-per-minute", "100000"]);
    let s = support::start(backend, database_url.clone(), keys.clone(), KILL_ENV);
    seed(&s, ROWS).await;
    let created = s
        .req(Method::POST, "/exports?object=contact&format=jsonl")
        .send()
        .await
        .ok(202)
        .clone();
    let id = created["id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let at_kill = loop {
        let now = s.get(&format!("/exports/{id}")).await.ok(200).clone();
        if now["rows_done"].as_i64().unwrap() > 0 || now["status"] == "completed" {
            break now;
        }
        assert!(started.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    drop(s); // SIGKILL
    let done_at_kill = at_kill["rows_done"].as_i64().unwrap();
    assert!(
        done_at_kill > 0 && done_at_kill < ROWS as i64,
        "killed mid-export: {at_kill:#}"
    );
    let s = support::start(backend, database_url, keys, KILL_ENV);
    let done = wait(&s, &format!("/exports/{id}"), "completed").await;
    assert_eq!(done["rows_total"], ROWS as i64);
    let (_, jsonl) = {
        let (status, _, text) = download(&s, &id).await;
        assert_eq!(status, 200);
        ((), text)
    };
    let ids: Vec<String> = jsonl
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let listed: Vec<String> = whole_list(&s, "/contacts?")
        .await
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, listed, "every contact once, in the list's order");
}

crate::on_both_stores!(
    served_by super::spawn;
    a_custom_field_filter_exports_what_the_list_answers_row_for_row,
    every_object_exports_and_each_export_is_audited,
    exports_need_the_objects_read_scope,
    one_contact_exports_everything_held_about_it,
);

mod expiry {
    crate::on_both_backends!(the_file_waits_for_completion_and_is_gone_when_it_expires);
    use super::the_file_waits_for_completion_and_is_gone_when_it_expires;
}

mod killed {
    crate::on_both_backends!(a_killed_server_resumes_the_export_without_a_row_twice);
    use super::a_killed_server_resumes_the_export_without_a_row_twice;
}
