//! Bulk imports (decisions §20, §23, §24): a CSV file posted as `text/csv` becomes a background
//! import; quoted commas, embedded newlines, a BOM and CRLF are read as CSV; duplicates (within
//! the file and against the workspace) follow `on_duplicate`; bad rows are row errors with their
//! problem documents; a dry run counts the same and writes nothing; cancel stops it; a server
//! killed mid-import resumes after its last committed chunk without writing a row twice.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{self, Backend, Res, Server};

/// The file: a BOM, CRLF line ends, a quoted comma (row 2), an embedded newline (row 3),
/// an email already in the workspace (row 4), the email of row 2 again in another case (row 6),
/// an unknown `type` (row 7) and a bad email (row 9). The header is row 1.
const FILE: &str = "\u{feff}first_name,last_name,email,type,phone\r\n\
Ada,\"Lovelace, Countess\",ada@example.com,lead,\r\n\
Grace,\"Hopper\r\nRear Admiral\",grace@example.com,,+1 555\r\n\
Old,Timer,existing@example.com,,\r\n\
Alan,Turing,alan@example.com,customer,\r\n\
Ada,Again,ADA@Example.com,,\r\n\
Bad,Enum,enum@example.com,martian,\r\n\
Eight,Ok,eight@example.com,,\r\n\
Bad,Email,not-an-email,,\r\n\
Ten,Ok,ten@example.com,lead,\r\n";

pub(crate) async fn post_csv(s: &Server, query: &str, csv: impl Into<reqwest::Body>) -> Res {
    s.req(Method::POST, &format!("/imports?{query}"))
        .header("content-type", "text/csv")
        .json_text(csv)
        .send()
        .await
}

/// Servers whose workspace polls its imports as often as it likes.
pub(crate) async fn spawn(backend: Backend) -> Server {
    support::spawn_with(backend, &["--rate-limit-per-minute", "100000"]).await
}

/// Waits until the import is finished; returns it.
pub(crate) async fn finished(s: &Server, id: &str) -> Value {
    let started = Instant::now();
    loop {
        let import = s.get(&format!("/imports/{id}")).await.ok(200).clone();
        if !["queued", "running"].contains(&import["status"].as_str().unwrap()) {
            return import;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "import {id} did not finish: {import:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) async fn errors(s: &Server, id: &str) -> Vec<Value> {
    s.get(&format!("/imports/{id}/errors?limit=100"))
        .await
        .ok(200)["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// Every contact's email, paging through the list.
pub(crate) async fn emails(s: &Server) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = "/contacts?limit=100".to_owned();
    loop {
        let page = s.get(&path).await.ok(200).clone();
        out.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["email"].as_str().unwrap_or_default().to_owned()),
        );
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/contacts?limit=100&cursor={c}"),
            None => return out,
        }
    }
}

async fn prepare(s: &Server) {
    for value in ["lead", "customer"] {
        s.post("/enums", json!({"group": "contact.type", "value": value}))
            .await
            .ok(201);
    }
    s.post(
        "/contacts",
        json!({"first_name": "Already", "email": "existing@example.com"}),
    )
    .await
    .ok(201);
}

pub(crate) fn counts(import: &Value) -> [i64; 6] {
    [
        "rows_total",
        "rows_done",
        "created",
        "updated",
        "skipped",
        "failed",
    ]
    .map(|k| {
        import[k]
            .as_i64()
            .unwrap_or_else(|| panic!("{k} of {import:#}"))
    })
}

/// (row, code, field) of each row error.
pub(crate) fn row_errors(errors: &[Value]) -> Vec<(i64, String, String)> {
    errors
        .iter()
        .map(|e| {
            let p = &e["problem"];
            assert!(p["type"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/errors/{}", p["code"].as_str().unwrap())));
            assert!(p["status"].is_number() && p["detail"].is_string(), "{p:#}");
            (
                e["row"].as_i64().unwrap(),
                p["code"].as_str().unwrap().to_owned(),
                p["field"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn with_skip_duplicates_are_skipped_and_bad_rows_are_row_errors(s: Server) {
    prepare(&s).await;
    let res = post_csv(&s, "object=contact&on_duplicate=skip", FILE).await;
    let import = res.ok(202).clone();
    assert_eq!(import["object"], "import");
    assert!(import["id"].as_str().unwrap().starts_with("imp_"));
    assert_eq!(import["object_type"], "contact");
    assert_eq!(import["rows_total"], 9);
    let id = import["id"].as_str().unwrap();
    let done = finished(&s, id).await;
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(counts(&done), [9, 9, 5, 0, 2, 2]);
    assert!(done["finished_at"].is_string());
    assert_eq!(
        row_errors(&errors(&s, id).await),
        vec![
            (7, "unknown_value".to_owned(), "type".to_owned()),
            (9, "validation_failed".to_owned(), "email".to_owned()),
        ]
    );
    // The rest is imported once, as CSV says.
    let mut all = emails(&s).await;
    all.sort();
    assert_eq!(
        all,
        [
            "ada@example.com",
            "alan@example.com",
            "eight@example.com",
            "existing@example.com",
            "grace@example.com",
            "ten@example.com"
        ]
    );
    let ada = &s.get("/contacts?email=ada@example.com").await.ok(200)["data"][0].clone();
    assert_eq!(ada["last_name"], "Lovelace, Countess");
    assert_eq!(
        ada["first_name"], "Ada",
        "the BOM is not part of the first header"
    );
    assert_eq!(ada["type"], "lead");
    let grace = &s.get("/contacts?email=grace@example.com").await.ok(200)["data"][0].clone();
    assert_eq!(grace["last_name"], "Hopper\r\nRear Admiral");
    assert_eq!(grace["phone"], "+1 555");
    // An empty cell leaves the field unset; history says the import wrote it.
    assert_eq!(ada["phone"], Value::Null);
    let history = s
        .get(&format!(
            "/contacts/{}/history",
            ada["id"].as_str().unwrap()
        ))
        .await
        .ok(200)
        .clone();
    assert_eq!(history["data"][0]["via"], "import");
    assert_eq!(history["data"][0]["channel"], "rest");
    assert_eq!(history["data"][0]["action"], "created");
    assert_eq!(history["data"][0]["actor"]["type"], "api_key");
    // Imports are event-silent.
    let events = s.get("/events?type=contact.created").await.ok(200).clone();
    assert_eq!(
        events["data"].as_array().unwrap().len(),
        1,
        "only the one created by hand"
    );
    // The list shows it; a finished import cannot be cancelled.
    let list = s.get("/imports").await.ok(200).clone();
    assert_eq!(list["data"][0]["id"], id);
    s.delete(&format!("/imports/{id}"))
        .await
        .problem(409, "conflict");
}

async fn by_default_duplicates_are_conflicts(s: Server) {
    prepare(&s).await;
    let import = post_csv(&s, "object=contact", FILE).await.ok(202).clone();
    assert_eq!(import["on_duplicate"], "error");
    let id = import["id"].as_str().unwrap();
    let done = finished(&s, id).await;
    assert_eq!(counts(&done), [9, 9, 5, 0, 0, 4]);
    let rows: Vec<(i64, String)> = row_errors(&errors(&s, id).await)
        .into_iter()
        .map(|(row, code, _)| (row, code))
        .collect();
    assert_eq!(
        rows,
        vec![
            (4, "conflict".to_owned()),
            (6, "conflict".to_owned()),
            (7, "unknown_value".to_owned()),
            (9, "validation_failed".to_owned()),
        ]
    );
    assert_eq!(emails(&s).await.len(), 6);
}

async fn a_dry_run_counts_the_same_and_writes_nothing(s: Server) {
    prepare(&s).await;
    let import = post_csv(&s, "object=contact&on_duplicate=skip&dry_run=true", FILE)
        .await
        .ok(202)
        .clone();
    assert_eq!(import["dry_run"], true);
    let id = import["id"].as_str().unwrap();
    let done = finished(&s, id).await;
    assert_eq!(done["status"], "validated");
    assert_eq!(counts(&done), [9, 9, 5, 0, 2, 2]);
    assert_eq!(
        row_errors(&errors(&s, id).await)
            .into_iter()
            .map(|(row, _, _)| row)
            .collect::<Vec<_>>(),
        vec![7, 9]
    );
    assert_eq!(emails(&s).await, ["existing@example.com"]);
}

async fn an_unknown_column_is_refused_before_anything_is_written(s: Server) {
    let res = post_csv(&s, "object=contact", "first_name,emial\nA,a@example.com\n").await;
    let p = res.problem(422, "unknown_field");
    assert_eq!(p["field"], "emial");
    assert!(p["valid_options"]
        .as_array()
        .unwrap()
        .contains(&json!("email")));
    assert!(p["suggestion"].as_str().unwrap().contains("`email`"));
    assert!(s.get("/imports").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .is_empty());
    // A mapping renames columns to targets.
    let import = post_csv(
        &s,
        "object=contact&mapping=%7B%22emial%22%3A%22email%22%7D",
        "first_name,emial\nA,a@example.com\n",
    )
    .await
    .ok(202)
    .clone();
    let done = finished(&s, import["id"].as_str().unwrap()).await;
    assert_eq!(counts(&done), [1, 1, 1, 0, 0, 0]);
    post_csv(&s, "object=activity", "type\ncall\n")
        .await
        .problem(422, "unknown_value");
    post_csv(&s, "object=contact&on_duplicate=maybe", "email\n")
        .await
        .problem(422, "unknown_value");
    s.req(Method::POST, "/imports?object=contact")
        .header("content-type", "application/json")
        .json_text("{}")
        .send()
        .await
        .problem(415, "unsupported_media_type");
    s.get("/imports/imp_00000000000000000000000000")
        .await
        .problem(404, "not_found");
    // A key without the object's write scope may not import it.
    let key = s
        .post(
            "/keys",
            json!({"name": "importer", "scopes": ["imports:write", "contacts:read"]}),
        )
        .await
        .ok(201)["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    s.req(Method::POST, "/imports?object=contact")
        .key(&key)
        .header("content-type", "text/csv")
        .json_text("email\na@b.io\n")
        .send()
        .await
        .problem(403, "forbidden");
}

async fn companies_dedupe_on_the_domain_and_contacts_reference_them(s: Server) {
    let csv =
        "name,domain\nAcme,https://www.Acme.io/about\nAcme Again,acme.io\nGlobex,globex.com\n";
    let import = post_csv(&s, "object=company&on_duplicate=update", csv)
        .await
        .ok(202)
        .clone();
    let done = finished(&s, import["id"].as_str().unwrap()).await;
    assert_eq!(counts(&done), [3, 3, 2, 1, 0, 0]);
    let acme = s.get("/companies?domain=acme.io").await.ok(200)["data"][0].clone();
    assert_eq!(acme["name"], "Acme Again");
    let csv = "email,company.domain\nwile@example.com,ACME.io\nnone@example.com,nowhere.io\n";
    let import = post_csv(&s, "object=contact", csv).await.ok(202).clone();
    let id = import["id"].as_str().unwrap();
    let done = finished(&s, id).await;
    assert_eq!(counts(&done), [2, 2, 1, 0, 0, 1]);
    assert_eq!(
        row_errors(&errors(&s, id).await),
        vec![(
            3,
            "invalid_reference".to_owned(),
            "company.domain".to_owned()
        )]
    );
    let wile = s.get("/contacts?email=wile@example.com").await.ok(200)["data"][0].clone();
    assert_eq!(wile["company_id"], acme["id"]);
}

async fn a_malformed_file_fails_at_its_row_keeping_the_rows_before(s: Server) {
    let mut csv = b"email\na@example.com\nb@example.com\n".to_vec();
    csv.extend_from_slice(b"\xff\xfe@example.com\nc@example.com\n");
    let import = post_csv(&s, "object=contact", csv).await.ok(202).clone();
    let done = finished(&s, import["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["created"], 2);
    assert_eq!(done["error"]["code"], "validation_failed");
    assert!(done["error"]["detail"].as_str().unwrap().contains("row 4"));
    let import = post_csv(
        &s,
        "object=contact",
        "email\nd@example.com\n\"e@example.com\n",
    )
    .await
    .ok(202)
    .clone();
    let done = finished(&s, import["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["created"], 1);
    assert!(done["error"]["detail"].as_str().unwrap().contains("row 3"));
}

async fn agents_import_with_a_csv_argument(s: Server) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "svc_create_import", "arguments": {
            "object": "contact", "on_duplicate": "skip", "csv": "email,first_name\nagent@example.com,Smith\n"}}});
    let res = s
        .req(Method::POST, "!/mcp")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&body)
        .send()
        .await;
    let result = &res.ok(200)["result"];
    assert_ne!(result["isError"], true, "{result:#}");
    let import = &result["structuredContent"];
    let done = finished(&s, import["id"].as_str().unwrap()).await;
    assert_eq!(counts(&done), [1, 1, 1, 0, 0, 0]);
    let history = s.get("/contacts?email=agent@example.com").await.ok(200)["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let entry = s.get(&format!("/contacts/{history}/history")).await.ok(200)["data"][0].clone();
    assert_eq!(entry["channel"], "mcp");
    assert_eq!(entry["via"], "import");
}

async fn an_idempotency_key_names_one_import(s: Server) {
    let send = |csv: &'static str| {
        s.req(Method::POST, "/imports?object=contact&on_duplicate=skip")
            .header("content-type", "text/csv")
            .header("idempotency-key", "file-1")
            .json_text(csv)
            .send()
    };
    let first = send("email\nonce@example.com\n").await;
    let import = first.ok(202).clone();
    assert_eq!(first.header("idempotent-replayed"), None);
    let done = finished(&s, import["id"].as_str().unwrap()).await;
    let again = send("email\nonce@example.com\n").await;
    assert_eq!(again.ok(202)["id"], import["id"]);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body["created"], done["created"]);
    send("email\nother@example.com\n")
        .await
        .problem(409, "idempotency_key_reused");
    assert_eq!(
        s.get("/imports").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "the repeats left no import behind"
    );
    assert_eq!(emails(&s).await, ["once@example.com"]);
}

async fn operators_import_a_file_from_the_command_line(backend: Backend) {
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &[]);
    let path = std::env::temp_dir().join(format!("import-{}.csv", std::process::id()));
    std::fs::write(&path, FILE).unwrap();
    // Neither the enum values nor the existing contact are there: rows 2, 5, 7 and 10 name
    // unknown types, so row 6 (row 2's email) and row 4 are created.
    let out = support::cli(
        &database_url,
        &[
            "import",
            "--workspace",
            &keys.workspace_id,
            "--mode",
            "test",
            "--object",
            "contact",
            "--on-duplicate",
            "skip",
            path.to_str().unwrap(),
        ],
    );
    std::fs::remove_file(&path).ok();
    assert!(
        out.contains("completed: 9 of 9 rows; 4 created, 0 updated, 0 skipped, 5 failed"),
        "{out}"
    );
    let s = support::start(backend, database_url, keys, &[]);
    let list = s.get("/imports").await.ok(200).clone();
    assert_eq!(list["data"][0]["created"], 4);
    let mut all = emails(&s).await;
    all.sort();
    assert_eq!(
        all,
        [
            "ada@example.com",
            "eight@example.com",
            "existing@example.com",
            "grace@example.com"
        ]
    );
    let id = s.get("/contacts?email=grace@example.com").await.ok(200)["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let entry = s.get(&format!("/contacts/{id}/history")).await.ok(200)["data"][0].clone();
    assert_eq!(
        (&entry["channel"], &entry["via"]),
        (&json!("cli"), &json!("import"))
    );
    assert_eq!(entry["actor"]["type"], "system");
}

/// `n` rows, every 50th repeating the email of the row before it.
fn big_file(n: usize) -> String {
    let mut csv = String::from("email,first_name\n");
    for i in 0..n {
        let k = if i % 50 == 49 { i - 1 } else { i };
        csv.push_str(&format!("p{k}@example.com,P{i}\n"));
    }
    csv
}

async fn cancel_stops_an_import(s: Server) {
    let import = post_csv(&s, "object=contact&on_duplicate=skip", big_file(5000))
        .await
        .ok(202)
        .clone();
    let id = import["id"].as_str().unwrap();
    let cancelled = s.delete(&format!("/imports/{id}")).await.ok(200).clone();
    assert_eq!(cancelled["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = s.get(&format!("/imports/{id}")).await.ok(200).clone();
    assert_eq!(after["status"], "cancelled");
    assert!(after["rows_done"].as_i64().unwrap() < 5000, "{after:#}");
    assert_eq!(
        emails(&s).await.len() as i64,
        after["created"].as_i64().unwrap(),
        "it stopped where it says"
    );
    s.delete(&format!("/imports/{id}"))
        .await
        .problem(409, "conflict");
}

const KILL_ENV: &[(&str, &str)] = &[
    ("CRM_IMPORT_LEASE_MS", "1000"),
    ("CRM_IMPORT_POLL_MS", "20"),
];

async fn a_killed_server_resumes_without_writing_a_row_twice(backend: Backend) {
    const ROWS: usize = 6000;
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &["--rate-limit-per-minute", "100000"]);
    let s = support::start(backend, database_url.clone(), keys.clone(), KILL_ENV);
    let import = post_csv(&s, "object=contact&on_duplicate=skip", big_file(ROWS))
        .await
        .ok(202)
        .clone();
    let id = import["id"].as_str().unwrap().to_owned();
    // Kill it (SIGKILL) once part of the file is written.
    let started = Instant::now();
    loop {
        let now = s.get(&format!("/imports/{id}")).await.ok(200).clone();
        let done = now["rows_done"].as_i64().unwrap();
        if done > 0 || now["status"] != "queued" && now["status"] != "running" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let at_kill = s.get(&format!("/imports/{id}")).await.ok(200).clone();
    let at = at_kill["rows_done"].as_i64().unwrap();
    assert!(at > 0 && at < ROWS as i64, "killed mid-import: {at_kill:#}");
    drop(s);
    let s = support::start(backend, database_url, keys, KILL_ENV);
    let done = finished(&s, &id).await;
    assert_eq!(done["status"], "completed");
    // What an uninterrupted run counts: every 50th row repeats an email.
    let dups = (ROWS / 50) as i64;
    assert_eq!(
        counts(&done),
        [ROWS as i64, ROWS as i64, ROWS as i64 - dups, 0, dups, 0]
    );
    let mut all = emails(&s).await;
    assert_eq!(all.len(), ROWS - dups as usize);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), ROWS - dups as usize, "no contact twice");
}

/// Decisions §25: an erasure drops the import row errors that quote the record (here a duplicate
/// of the erased contact's email, refused as a conflict naming it).
async fn erasing_a_contact_drops_the_import_errors_that_quote_it(s: Server) {
    let contact = s
        .post("/contacts", json!({"email": "erased-later@example.com"}))
        .await
        .ok(201)
        .clone();
    let contact_id = contact["id"].as_str().unwrap().to_owned();
    let csv = "email\nerased-later@example.com\nkept-row@example.com\n";
    let import = post_csv(&s, "object=contact", csv).await.ok(202).clone();
    let id = import["id"].as_str().unwrap().to_owned();
    finished(&s, &id).await;
    let before = errors(&s, &id).await;
    assert_eq!(before.len(), 1, "{before:?}");
    let text = before[0].to_string();
    assert!(
        text.contains(&contact_id) || text.contains("erased-later@example.com"),
        "the conflict quotes the contact: {text}"
    );
    s.post(&format!("/contacts/{contact_id}/erase"), json!({}))
        .await
        .ok(200);
    assert_eq!(errors(&s, &id).await, Vec::<Value>::new());
}

crate::on_both_stores!(
    served_by super::spawn;
    with_skip_duplicates_are_skipped_and_bad_rows_are_row_errors,
    by_default_duplicates_are_conflicts,
    a_dry_run_counts_the_same_and_writes_nothing,
    an_unknown_column_is_refused_before_anything_is_written,
    companies_dedupe_on_the_domain_and_contacts_reference_them,
    a_malformed_file_fails_at_its_row_keeping_the_rows_before,
    agents_import_with_a_csv_argument,
    cancel_stops_an_import,
    an_idempotency_key_names_one_import,
    erasing_a_contact_drops_the_import_errors_that_quote_it,
);

mod cli {
    crate::on_both_backends!(operators_import_a_file_from_the_command_line);
    use super::operators_import_a_file_from_the_command_line;
}

mod killed {
    crate::on_both_backends!(a_killed_server_resumes_without_writing_a_row_twice);
    use super::a_killed_server_resumes_without_writing_a_row_twice;
}
