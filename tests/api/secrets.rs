//! Secrets at rest (decisions §22, §24): a webhook secret (also after a roll) and an email
//! provider key appear nowhere in the database's files (SQLite: the file and its WAL; Postgres:
//! every row of every table) nor in the server's log, while deliveries stay signed with the
//! secret; `serve` with a wrong key refuses to start; `secrets rotate` re-encrypts under a new
//! key, after which the old key can go.

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use serde_json::{json, Value};

use crate::{
    support::{self, Backend, Server},
    webhooks::{verify_standard_signature, verify_svc_signature, Receiver, FAST},
};

const API_KEY: &str = "pm_at_rest_4f9c2a7e1b3d5f7a9c0e";

/// Everything the database holds, as text or bytes to search.
async fn database_contents(backend: Backend, url: &str) -> Vec<u8> {
    match backend {
        Backend::Sqlite => {
            let file = url.strip_prefix("sqlite://").unwrap();
            let mut bytes = Vec::new();
            for suffix in ["", "-wal"] {
                if let Ok(b) = std::fs::read(format!("{file}{suffix}")) {
                    bytes.extend(b);
                }
            }
            assert!(!bytes.is_empty(), "no database file at {file}");
            bytes
        }
        Backend::Postgres => {
            use sqlx::{Connection, Row};
            let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
            let tables: Vec<String> = sqlx::query_scalar(
                "SELECT tablename::text FROM pg_tables WHERE schemaname = 'public' ORDER BY 1",
            )
            .fetch_all(&mut conn)
            .await
            .unwrap();
            assert!(tables.iter().any(|t| t == "webhooks"));
            let mut text = String::new();
            for table in tables {
                let rows = sqlx::query(&format!("SELECT t::text AS row FROM \"{table}\" t"))
                    .fetch_all(&mut conn)
                    .await
                    .unwrap();
                for r in rows {
                    text.push_str(&r.get::<String, _>("row"));
                    text.push('\n');
                }
            }
            text.into_bytes()
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// What must never be stored or logged: each secret whole and its random part alone.
fn assert_absent(what: &str, haystack: &[u8], secrets: &[&str]) {
    for s in secrets {
        let random = s.strip_prefix("whsec_").unwrap_or(s);
        assert!(!contains(haystack, s), "{what} holds a secret in plaintext");
        assert!(
            !contains(haystack, random),
            "{what} holds a secret's random part"
        );
    }
}

/// Runs `crm-server serve` with `keys`; it must exit without listening, with an error naming the
/// problem. Returns its stderr.
fn serve_refuses(database_url: &str, keys: &str) -> String {
    let mut child = Command::new(support::BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            database_url,
        ])
        .env("CRM_SECRET_KEYS", keys)
        .env("CRM_LOG", "warn")
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("serve with the wrong key kept running");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!status.success());
    assert!(!stdout.contains("listening on"), "{stdout}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn rotate(database_url: &str, keys: &str) -> String {
    let out = Command::new(support::BIN)
        .args(["secrets", "rotate", "--database-url", database_url])
        .env("CRM_SECRET_KEYS", keys)
        .env("CRM_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "secrets rotate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates a contact and waits for its delivery; checks both signatures with `secret`.
async fn delivered_and_signed(s: &Server, rx: &Receiver, secret: &str, email: &str) {
    let contact = s
        .post("/contacts", json!({"email": email}))
        .await
        .ok(201)
        .clone();
    let got = rx
        .wait_until(20, "the delivery", |g| {
            g.iter().any(|r| r.json()["data"]["id"] == contact["id"])
        })
        .await;
    let r = got
        .iter()
        .find(|r| r.json()["data"]["id"] == contact["id"])
        .unwrap();
    verify_svc_signature(secret, r);
    verify_standard_signature(secret, r);
}

fn key_of(backend: Backend, database_url: &str) -> String {
    match backend {
        Backend::Postgres => support::POSTGRES_SECRET_KEYS.to_owned(),
        Backend::Sqlite => {
            let file = database_url.strip_prefix("sqlite://").unwrap();
            let path = format!("{file}.secret-key");
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let mode = std::fs::metadata(&path).unwrap().permissions().mode();
                assert_eq!(mode & 0o777, 0o600, "the generated key file is private");
            }
            std::fs::read_to_string(path).unwrap().trim().to_owned()
        }
    }
}

async fn secrets_are_encrypted_at_rest(backend: Backend) {
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &[]);
    let log_path = std::env::temp_dir().join(format!(
        "crm-secrets-log-{}.txt",
        uuid::Uuid::now_v7().simple()
    ));
    let env: Vec<(&str, &str)> = FAST.iter().copied().chain([("CRM_LOG", "debug")]).collect();
    let s = support::start_logging_to(
        backend,
        database_url.clone(),
        keys.clone(),
        &env,
        std::fs::File::create(&log_path).unwrap(),
    );
    let rx = Receiver::start(&[], 200).await;
    let hook = s
        .post(
            "/webhooks",
            json!({"url": rx.url, "events": ["contact.created"]}),
        )
        .await
        .ok(201)
        .clone();
    let first_secret = hook["secret"].as_str().unwrap().to_owned();
    let id = hook["id"].as_str().unwrap();
    let rolled: Value = s
        .post(&format!("/webhooks/{id}/roll-secret"), json!({}))
        .await
        .ok(200)
        .clone();
    let secret = rolled["secret"].as_str().unwrap().to_owned();
    assert_ne!(secret, first_secret);
    let conn = s
        .post(
            "/connections",
            json!({"provider": "postmark", "api_key": API_KEY, "from": "ops@example.com"}),
        )
        .await
        .ok(201)
        .clone();
    assert_eq!(conn["api_key_last4"], "9c0e");
    assert_eq!(
        s.get("/connections").await.ok(200)["data"][0]["api_key_last4"],
        "9c0e"
    );
    delivered_and_signed(&s, &rx, &secret, "ada@example.com").await;

    let all = [first_secret.as_str(), secret.as_str(), API_KEY];
    let stored = database_contents(backend, &database_url).await;
    assert!(
        contains(&stored, "ops@example.com"),
        "the search sees the connection's row"
    );
    assert_absent("the database", &stored, &all);
    drop(s);
    let log = std::fs::read(&log_path).unwrap();
    assert!(contains(&log, "listening"), "the log is the server's");
    assert_absent("the server's log", &log, &all);
    let old_key = key_of(backend, &database_url);
    assert!(!contains(&log, &old_key), "the log holds the secret key");
    let _ = std::fs::remove_file(&log_path);

    // The wrong key: refused at start, saying why.
    let new_key = "bmV3LWtleS1mb3ItdGhlLXJvdGF0aW9uLXRlc3QtMzI=";
    let err = serve_refuses(&database_url, new_key);
    assert!(err.contains("cannot decrypt"), "{err}");
    assert!(!contains(err.as_bytes(), new_key) && !contains(err.as_bytes(), &old_key));

    // Rotation: the new key first, the old one kept; then the new key alone serves.
    let out = rotate(&database_url, &format!("{new_key},{old_key}"));
    assert!(out.contains("re-encrypted 2 stored secrets"), "{out}");
    let err = serve_refuses(&database_url, &old_key);
    assert!(err.contains("cannot decrypt"), "{err}");
    let s = support::start(
        backend,
        database_url.clone(),
        keys,
        &[FAST, &[("CRM_SECRET_KEYS", new_key)]].concat(),
    );
    delivered_and_signed(&s, &rx, &secret, "grace@example.com").await;
    assert_absent(
        "the database after rotation",
        &database_contents(backend, &database_url).await,
        &all,
    );
}

crate::on_both_backends!(secrets_are_encrypted_at_rest);
