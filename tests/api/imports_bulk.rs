//! Bulk imports, continued (issue 36): what the chunk-at-a-time write path must keep. A dry run
//! finds a duplicate of a row of an earlier chunk; updates apply to stored contacts (restoring
//! soft-deleted ones) and to contacts an earlier row of the same chunk creates, each with its
//! history and no event; an import counts one request per 100 rows written; a file over the
//! size limit answers 413.

use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{
    imports::{counts, emails, errors, finished, post_csv, row_errors},
    support::Server,
};

/// 601 records (two stored chunks of at most 500): the last repeats the first's email in
/// another case. The header is row 1, so the repeat is row 602.
fn two_chunk_file() -> String {
    let mut csv = String::from("email,first_name\n");
    for i in 0..600 {
        csv.push_str(&format!("d{i}@example.com,D{i}\n"));
    }
    csv.push_str("D0@Example.COM,Again\n");
    csv
}

async fn import_and_wait(s: &Server, query: &str, csv: String) -> (String, Value) {
    let import = post_csv(s, query, csv).await.ok(202).clone();
    let id = import["id"].as_str().unwrap().to_owned();
    let done = finished(s, &id).await;
    (id, done)
}

async fn a_dry_run_sees_duplicates_across_chunks(s: Server) {
    let conflict = vec![(602, "conflict".to_owned(), String::new())];
    for (on_duplicate, expected, row_errs) in [
        ("error", [601, 601, 600, 0, 0, 1], conflict.clone()),
        ("skip", [601, 601, 600, 0, 1, 0], vec![]),
        ("update", [601, 601, 600, 1, 0, 0], vec![]),
    ] {
        let query = format!("object=contact&on_duplicate={on_duplicate}&dry_run=true");
        let (id, done) = import_and_wait(&s, &query, two_chunk_file()).await;
        assert_eq!(done["status"], "validated", "{on_duplicate}: {done:#}");
        assert_eq!(counts(&done), expected, "{on_duplicate}");
        assert_eq!(
            row_errors(&errors(&s, &id).await),
            row_errs,
            "{on_duplicate}"
        );
    }
    assert!(emails(&s).await.is_empty(), "a dry run writes nothing");
    // The real import agrees with its dry run.
    let (id, done) = import_and_wait(&s, "object=contact", two_chunk_file()).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(counts(&done), [601, 601, 600, 0, 0, 1]);
    assert_eq!(row_errors(&errors(&s, &id).await), conflict);
    assert_eq!(emails(&s).await.len(), 600);
}

async fn updates_reach_stored_contacts_and_rows_created_earlier_in_the_chunk(s: Server) {
    let kept = s
        .post(
            "/contacts",
            serde_json::json!({"first_name": "Old", "email": "kept@example.com"}),
        )
        .await
        .ok(201)
        .clone();
    let gone = s
        .post(
            "/contacts",
            serde_json::json!({"first_name": "Gone", "email": "gone@example.com"}),
        )
        .await
        .ok(201)
        .clone();
    let gone_id = gone["id"].as_str().unwrap();
    s.delete(&format!("/contacts/{gone_id}")).await.ok(200);
    let events_before = event_count(&s).await;
    let csv = "email,first_name,last_name\n\
               new@example.com,New,One\n\
               kept@example.com,Kept,\n\
               NEW@example.com,,Two\n\
               gone@example.com,Back,\n\
               kept@example.com,Kept,\n\
               not-an-email,Bad,\n"
        .to_owned();
    let (id, done) = import_and_wait(&s, "object=contact&on_duplicate=update", csv).await;
    assert_eq!(counts(&done), [6, 6, 1, 4, 0, 1], "{done:#}");
    assert_eq!(
        row_errors(&errors(&s, &id).await),
        vec![(7, "validation_failed".to_owned(), "email".to_owned())]
    );

    let one = |email: &'static str| {
        let s = &s;
        async move {
            s.get(&format!("/contacts?email={email}&include_deleted=true"))
                .await
                .ok(200)["data"][0]
                .clone()
        }
    };
    let history = |id: String| {
        let s = &s;
        async move {
            s.get(&format!("/contacts/{id}/history")).await.ok(200)["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    format!(
                        "{} via {}",
                        e["action"].as_str().unwrap(),
                        e["via"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
        }
    };
    // Created by row 2, then updated by row 4 (an empty cell leaves a field as it is).
    let new = one("new@example.com").await;
    assert_eq!(
        (&new["first_name"], &new["last_name"]),
        (&"New".into(), &"Two".into())
    );
    assert_eq!(new["version"], 2);
    assert_eq!(
        history(new["id"].as_str().unwrap().to_owned()).await,
        ["updated via import", "created via import"]
    );
    // Updated once by row 3; row 6 changed nothing.
    let kept_now = one("kept@example.com").await;
    assert_eq!(kept_now["id"], kept["id"]);
    assert_eq!(kept_now["first_name"], "Kept");
    assert_eq!(kept_now["version"], 2);
    // Restored, then updated.
    let back = one("gone@example.com").await;
    assert_eq!(back["id"], gone["id"]);
    assert_eq!(back["deleted_at"], Value::Null);
    assert_eq!(back["first_name"], "Back");
    assert_eq!(
        back["version"], 4,
        "created 1, deleted 2, restored 3, updated 4"
    );
    assert_eq!(
        history(gone_id.to_owned()).await,
        [
            "updated via import",
            "restored via import",
            "deleted via direct",
            "created via direct"
        ]
    );
    assert_eq!(
        event_count(&s).await,
        events_before,
        "imports are event-silent"
    );
}

async fn event_count(s: &Server) -> usize {
    s.get("/events?limit=100").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .len()
}

/// `requests.used` of the usage (reading it counts nothing).
async fn used(s: &Server) -> i64 {
    s.get("/usage").await.ok(200)["requests"]["used"]
        .as_i64()
        .unwrap()
}

async fn an_import_counts_one_request_per_hundred_rows_written(s: Server) {
    let file = |n: usize, from: usize| {
        let mut csv = String::from("email\n");
        for i in from..from + n {
            csv.push_str(&format!("m{i}@example.com\n"));
        }
        csv
    };
    // Polled here by hand so that every request is counted.
    let run = |query: &'static str, csv: String| {
        let s = &s;
        async move {
            let import = post_csv(s, query, csv).await.ok(202).clone();
            let path = format!("/imports/{}", import["id"].as_str().unwrap());
            let mut polls = 0;
            loop {
                polls += 1;
                let now = s.get(&path).await.ok(200).clone();
                if !["queued", "running"].contains(&now["status"].as_str().unwrap()) {
                    return (now, 1 + polls);
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    // 250 rows written: the request itself, the polls, and three for the rows.
    let before = used(&s).await;
    let (done, requests) = run("object=contact", file(250, 0)).await;
    assert_eq!(done["created"], 250);
    assert_eq!(used(&s).await - before, requests + 3);
    // 300 rows of which 200 are skipped: 100 written, one more.
    let before = used(&s).await;
    let (done, requests) = run("object=contact&on_duplicate=skip", file(300, 50)).await;
    assert_eq!(
        (&done["created"], &done["skipped"]),
        (&100.into(), &200.into())
    );
    assert_eq!(used(&s).await - before, requests + 1);
    // A dry run writes nothing and counts only its own requests.
    let before = used(&s).await;
    let (done, requests) = run("object=contact&dry_run=true", file(150, 1000)).await;
    assert_eq!(done["created"], 150);
    assert_eq!(used(&s).await - before, requests);
}

/// The size limit is a constant (256 MiB, decisions §24), not a setting: a request declaring a
/// larger body is refused from its head, before a byte of it is read. (The limit on a body
/// without `Content-Length` is checked as the bytes pass it: crm-http's unit tests.)
async fn a_file_over_the_limit_answers_413(s: Server) {
    let addr = s.base.trim_start_matches("http://");
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/imports?object=contact HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: text/csv\r\nContent-Length: {}\r\nConnection: close\r\n\r\nemail\n",
        s.keys.test,
        256 * 1024 * 1024 + 1
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        conn.read_to_end(&mut answer),
    )
    .await
    .expect("the server answers and closes")
    .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let body: Value = serde_json::from_str(answer.split_once("\r\n\r\n").unwrap().1).unwrap();
    assert_eq!(body["code"], "payload_too_large", "{body:#}");
    assert!(
        s.get("/imports").await.ok(200)["data"]
            .as_array()
            .unwrap()
            .is_empty(),
        "nothing was queued"
    );
}

crate::on_both_stores!(
    served_by crate::imports::spawn;
    a_dry_run_sees_duplicates_across_chunks,
    updates_reach_stored_contacts_and_rows_created_earlier_in_the_chunk,
    an_import_counts_one_request_per_hundred_rows_written,
    a_file_over_the_limit_answers_413,
);
