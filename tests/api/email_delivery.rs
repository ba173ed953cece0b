//! Live email delivery: the sending worker reaches each provider with its documented request
//! shape (a local fake provider records what arrives), SMTP through a local sink, provider errors
//! are retried, and test mode never delivers.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpListener,
};

use crate::support::{create_workspace, fresh_database, start, Backend, Server};

/// One request as the fake provider saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A canned answer: status, extra headers, body.
type Reply = (u16, Vec<(&'static str, &'static str)>, &'static str);

/// A tiny HTTP server answering each request with the next of `replies` (the last repeats).
async fn fake_provider(replies: Vec<Reply>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
                continue;
            }
            let mut headers = Vec::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).await.unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    headers.push((k.trim().to_lowercase(), v.trim().to_owned()));
                }
            }
            let len = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; len];
            reader.read_exact(&mut body).await.unwrap();
            let mut parts = request_line.split_whitespace();
            let (method, path) = (
                parts.next().unwrap_or_default().to_owned(),
                parts.next().unwrap_or_default().to_owned(),
            );
            let n = {
                let mut log = log.lock().unwrap();
                log.push(Seen {
                    method,
                    path,
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or(Value::Null),
                });
                log.len()
            };
            let (status, extra, reply) = replies[(n - 1).min(replies.len() - 1)].clone();
            let mut head = format!("HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n", reply.len());
            for (k, v) in extra {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            let mut stream = reader.into_inner();
            let _ = stream
                .write_all(format!("{head}\r\n{reply}").as_bytes())
                .await;
            let _ = stream.shutdown().await;
        }
    });
    (base, seen)
}

/// A pro workspace with a fast email worker.
async fn live_server(backend: Backend) -> Server {
    let db = fresh_database(backend).await;
    let keys = create_workspace(&db, &["--plan", "pro"]);
    start(
        backend,
        db,
        keys,
        &[
            ("CRM_EMAIL_POLL_MS", "50"),
            ("CRM_EMAIL_BACKOFF", "200ms,200ms"),
        ],
    )
}

async fn live(s: &Server, method: Method, path: &str, body: Option<Value>) -> Value {
    let mut req = s.req(method, path).key(&s.keys.live);
    if let Some(b) = &body {
        req = req.json(b);
    }
    let res = req.send().await;
    assert!(res.status.is_success(), "{path}: {:#}", res.body);
    res.body
}

/// Connects `provider` in live mode, installs a welcome rule and creates a contact; returns the
/// live emails once the newest is no longer queued.
async fn send_one(s: &Server, provider: &str, base_url: &str, api_key: &str) -> Value {
    live(s, Method::POST, "/connections", Some(json!({"provider": provider, "api_key": api_key, "from": "Acme <hello@acme.com>", "base_url": base_url}))).await;
    let rule = json!({"name": "welcome", "trigger_event": "contact.created",
                      "actions": [{"type": "send_email", "subject": "Welcome {{first_name}}", "body": "<p>Hi {{first_name}}</p>"}]});
    live(s, Method::POST, "/automations", Some(rule)).await;
    live(
        s,
        Method::POST,
        "/contacts",
        Some(json!({"first_name": "Ada", "email": "ada@example.com"})),
    )
    .await;
    wait_for_final_status(s).await
}

async fn wait_for_final_status(s: &Server) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let emails = live(s, Method::GET, "/emails", None).await;
        let email = emails["data"][0].clone();
        if email["status"] != "queued" {
            return email;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still queued: {email:#}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn resend_gets_its_documented_request_and_errors_are_retried(backend: Backend) {
    let s = live_server(backend).await;
    let (base, seen) = fake_provider(vec![
        (503, vec![], r#"{"message":"busy"}"#),
        (200, vec![], r#"{"id":"re_msg_1"}"#),
    ])
    .await;
    let email = send_one(&s, "resend", &base, "re_live_key").await;
    assert_eq!(
        (email["status"].as_str(), email["attempts"].as_u64()),
        (Some("sent"), Some(2)),
        "{email:#}"
    );
    assert_eq!(email["provider_message_id"], "re_msg_1");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "one failed attempt, one retry");
    let r = &seen[1];
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/emails"));
    assert_eq!(r.header("authorization"), Some("Bearer re_live_key"));
    assert!(r
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    assert_eq!(
        r.body,
        json!({"from": "Acme <hello@acme.com>", "to": ["ada@example.com"], "subject": "Welcome Ada", "html": "<p>Hi Ada</p>", "text": "Hi Ada"})
    );
}

async fn postmark_gets_its_documented_request(backend: Backend) {
    let s = live_server(backend).await;
    let (base, seen) = fake_provider(vec![(
        200,
        vec![],
        r#"{"ErrorCode":0,"Message":"OK","MessageID":"pm-1"}"#,
    )])
    .await;
    let email = send_one(&s, "postmark", &base, "pm-server-token").await;
    assert_eq!(
        (
            email["status"].as_str(),
            email["provider_message_id"].as_str()
        ),
        (Some("sent"), Some("pm-1"))
    );
    let r = seen.lock().unwrap()[0].clone();
    assert_eq!((r.method.as_str(), r.path.as_str()), ("POST", "/email"));
    assert_eq!(r.header("x-postmark-server-token"), Some("pm-server-token"));
    assert_eq!(r.header("accept"), Some("application/json"));
    assert_eq!(
        r.body,
        json!({"From": "Acme <hello@acme.com>", "To": "ada@example.com", "Subject": "Welcome Ada", "HtmlBody": "<p>Hi Ada</p>",
               "TextBody": "Hi Ada", "MessageStream": "outbound"})
    );
}

async fn sendgrid_gets_its_documented_request_and_a_refusal_fails_the_email(backend: Backend) {
    let s = live_server(backend).await;
    let (base, seen) = fake_provider(vec![(202, vec![("x-message-id", "sg-1")], "")]).await;
    let email = send_one(&s, "sendgrid", &base, "SG.key").await;
    assert_eq!(
        (
            email["status"].as_str(),
            email["provider_message_id"].as_str()
        ),
        (Some("sent"), Some("sg-1"))
    );
    let r = seen.lock().unwrap()[0].clone();
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v3/mail/send")
    );
    assert_eq!(r.header("authorization"), Some("Bearer SG.key"));
    assert_eq!(
        r.body,
        json!({"personalizations": [{"to": [{"email": "ada@example.com"}]}], "from": {"email": "hello@acme.com", "name": "Acme"},
               "subject": "Welcome Ada", "content": [{"type": "text/plain", "value": "Hi Ada"}, {"type": "text/html", "value": "<p>Hi Ada</p>"}]})
    );

    // A provider that refuses for good (401): recorded and failed at once, no retries.
    let (bad, _) =
        fake_provider(vec![(401, vec![], r#"{"errors":[{"message":"bad key"}]}"#)]).await;
    live(&s, Method::POST, "/connections", Some(json!({"provider": "sendgrid", "api_key": "SG.bad", "from": "hello@acme.com", "base_url": bad}))).await;
    live(
        &s,
        Method::POST,
        "/contacts",
        Some(json!({"first_name": "Bob", "email": "bob@example.com"})),
    )
    .await;
    let failed = wait_for_final_status(&s).await;
    assert_eq!(
        (failed["status"].as_str(), failed["attempts"].as_u64()),
        (Some("failed"), Some(1)),
        "{failed:#}"
    );
    assert!(failed["error"].as_str().unwrap().contains("401"));
}

/// A minimal SMTP server: advertises AUTH, accepts one message per connection, records it.
async fn smtp_sink() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                write.write_all(b"220 sink ESMTP\r\n").await.unwrap();
                let mut transcript = String::new();
                while let Ok(Some(line)) = lines.next_line().await {
                    transcript.push_str(&line);
                    transcript.push('\n');
                    let upper = line.to_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-sink\r\n250-AUTH PLAIN LOGIN\r\n250 8BITMIME\r\n"
                    } else if upper.starts_with("AUTH") {
                        b"235 2.7.0 Authentication successful\r\n"
                    } else if upper.starts_with("DATA") {
                        write.write_all(b"354 go ahead\r\n").await.unwrap();
                        while let Ok(Some(l)) = lines.next_line().await {
                            if l == "." {
                                break;
                            }
                            transcript.push_str(&l);
                            transcript.push('\n');
                        }
                        b"250 2.0.0 queued as sink-1\r\n"
                    } else if upper.starts_with("QUIT") {
                        write.write_all(b"221 bye\r\n").await.unwrap();
                        break;
                    } else {
                        b"250 ok\r\n"
                    };
                    write.write_all(reply).await.unwrap();
                }
                seen.lock().unwrap().push(transcript);
            });
        }
    });
    (port, log)
}

async fn smtp_delivers_to_the_server_with_credentials(backend: Backend) {
    let s = live_server(backend).await;
    let (port, transcripts) = smtp_sink().await;
    let email = send_one(
        &s,
        "smtp",
        &format!("smtp://mailer@127.0.0.1:{port}?tls=none"),
        "smtp-password",
    )
    .await;
    assert_eq!(email["status"], "sent", "{email:#}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let t = loop {
        if let Some(t) = transcripts.lock().unwrap().first().cloned() {
            break t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the sink saw no session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    use base64::Engine;
    let plain = base64::engine::general_purpose::STANDARD.encode("\0mailer\0smtp-password");
    assert!(
        t.contains(&format!("AUTH PLAIN {plain}")),
        "credentials are the URL's user and the api_key:\n{t}"
    );
    assert!(
        t.contains("MAIL FROM:<hello@acme.com>") && t.contains("RCPT TO:<ada@example.com>"),
        "{t}"
    );
    assert!(
        t.contains("Subject: Welcome Ada") && t.contains("multipart/alternative"),
        "{t}"
    );
    assert!(t.contains("Hi Ada") && t.contains("<p>Hi Ada</p>"), "{t}");
}

async fn test_mode_never_delivers(backend: Backend) {
    let s = live_server(backend).await;
    let (base, seen) = fake_provider(vec![(200, vec![], r#"{"id":"x"}"#)]).await;
    s.post("/connections", json!({"provider": "resend", "api_key": "re_test", "from": "hello@acme.com", "base_url": base})).await.ok(201);
    s.post("/automations", json!({"name": "w", "trigger_event": "contact.created", "actions": [{"type": "send_email", "subject": "s", "body": "b"}]})).await.ok(201);
    s.post("/contacts", json!({"email": "ada@example.com"}))
        .await
        .ok(201);
    // A live send through the same fake proves the worker ran while the test email sat there.
    let live_email = send_one(&s, "resend", &base, "re_live").await;
    assert_eq!(live_email["status"], "sent");
    let test_emails = s.get("/emails").await.ok(200)["data"].clone();
    assert_eq!(test_emails.as_array().unwrap().len(), 1);
    assert_eq!(
        (
            test_emails[0]["status"].as_str(),
            test_emails[0]["attempts"].as_u64()
        ),
        (Some("simulated"), Some(0))
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only the live email reached the provider");
    assert_eq!(seen[0].header("authorization"), Some("Bearer re_live"));
}

crate::on_both_backends!(
    resend_gets_its_documented_request_and_errors_are_retried,
    postmark_gets_its_documented_request,
    sendgrid_gets_its_documented_request_and_a_refusal_fails_the_email,
    smtp_delivers_to_the_server_with_credentials,
    test_mode_never_delivers,
);
