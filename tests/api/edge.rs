//! The HTTP edge (decisions §22-24): timers, caps, the answers of the HTTP layer itself, and
//! strict reading of bodies. The server runs with short timers so the tests take little time.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

use crate::support::{self, Backend, Server};

async fn serve(backend: Backend) -> Server {
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &[]);
    support::start(
        backend,
        database_url,
        keys,
        &[
            ("CRM_HTTP_HEAD_TIMEOUT", "400ms"),
            ("CRM_HTTP_IDLE_TIMEOUT", "1500ms"),
            ("CRM_HTTP_BODY_TIMEOUT", "400ms"),
            ("CRM_HTTP_MAX_CONNECTIONS_PER_ADDRESS", "40"),
        ],
    )
}

fn address(s: &Server) -> std::net::SocketAddr {
    s.base.trim_start_matches("http://").parse().unwrap()
}

async fn connect_from(local: &str, s: &Server) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    socket.connect(address(s)).await.unwrap()
}

/// Everything the server sends until it closes the connection (within five seconds).
async fn read_to_close(conn: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out))
        .await
        .expect("the server closes the connection");
    String::from_utf8_lossy(&out).into_owned()
}

/// The status, the lower-cased head, and the body of one raw answer.
fn parse_answer(answer: &str) -> (u16, String, Value) {
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (
        status,
        head.to_ascii_lowercase(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

#[track_caller]
fn assert_problem(answer: &str, status: u16, code: &str) {
    let (got, head, body) = parse_answer(answer);
    assert_eq!(got, status, "{answer}");
    assert!(
        head.contains("\r\ncontent-type: application/problem+json"),
        "{answer}"
    );
    assert!(head.contains("\r\nrequest-id: req_"), "{answer}");
    assert_eq!(body["code"], code, "{answer}");
    assert_eq!(body["status"], status, "{answer}");
}

async fn methods_a_path_does_not_serve_answer_405_with_allow(s: Server) {
    for method in ["PUT", "TRACE"] {
        let res = s
            .req(Method::from_bytes(method.as_bytes()).unwrap(), "/contacts")
            .send()
            .await;
        res.problem(405, "method_not_allowed");
        assert_eq!(res.header("allow"), Some("GET, HEAD, POST"));
    }
    let res = s
        .req(Method::PUT, "/contacts/con_00000000000000000000000000")
        .send()
        .await;
    res.problem(405, "method_not_allowed");
    assert_eq!(res.header("allow"), Some("GET, HEAD, PATCH, DELETE"));
    // Beside the operations too.
    let res = s.anon(Method::POST, "!/healthz").send().await;
    res.problem(405, "method_not_allowed");
    assert!(
        res.header("allow").unwrap().contains("GET"),
        "{:?}",
        res.headers
    );
    // A path that serves no method at all is still not found.
    s.req(Method::PUT, "/nothing-here")
        .send()
        .await
        .problem(404, "not_found");
}

async fn bodies_that_are_not_json_answer_415(s: Server) {
    for content_type in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/jsonx",
    ] {
        s.req(Method::POST, "/contacts")
            .header("content-type", content_type)
            .json_text(r#"{"first_name": "Ada"}"#)
            .send()
            .await
            .problem(415, "unsupported_media_type");
    }
    for content_type in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/merge-patch+json",
    ] {
        s.req(Method::POST, "/contacts")
            .header("content-type", content_type)
            .json_text(r#"{"first_name": "Ada"}"#)
            .send()
            .await
            .ok(201);
    }
    // No Content-Type at all is read as JSON.
    s.req(Method::POST, "/contacts")
        .json_text(r#"{"first_name": "Grace"}"#)
        .send()
        .await
        .ok(201);
}

async fn an_empty_body_where_one_is_needed_is_a_bad_request(s: Server) {
    let id = s
        .post("/contacts", json!({"first_name": "A"}))
        .await
        .ok(201)["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (method, path) in [
        (Method::POST, "/deals".to_owned()),
        (Method::POST, "/fields".to_owned()),
        (Method::POST, "/webhooks".to_owned()),
    ] {
        let res = s
            .req(method.clone(), &path)
            .header("content-type", "application/json")
            .send()
            .await;
        res.problem(400, "bad_request");
        assert!(
            res.body["detail"].as_str().unwrap().contains("body"),
            "{method} {path}"
        );
    }
    // Operations whose body is all optional take an empty one, as their OpenAPI entry says.
    s.req(Method::POST, &format!("/contacts/{id}/restore"))
        .send()
        .await
        .ok(200);
    s.req(Method::PATCH, &format!("/contacts/{id}"))
        .send()
        .await
        .ok(200);
}

async fn duplicate_keys_are_refused(s: Server) {
    let res = s
        .req(Method::POST, "/contacts")
        .json_text(r#"{"first_name": "Ada", "first_name": "Eve"}"#)
        .send()
        .await;
    assert!(res.problem(400, "bad_request")["detail"]
        .as_str()
        .unwrap()
        .contains("twice"));
    s.req(Method::POST, "/contacts")
        .json_text(r#"{"first_name": "Ada", "custom_fields": {"a": 1, "a": 2}}"#)
        .send()
        .await
        .problem(400, "bad_request");
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    s.req(Method::POST, "/contacts")
        .json_text(deep)
        .send()
        .await
        .problem(400, "bad_request");
}

async fn heads_the_server_cannot_parse_answer_problem_documents(s: Server) {
    let mut many = String::from("GET /v1/contacts HTTP/1.1\r\nhost: x\r\n");
    for i in 0..101 {
        many.push_str(&format!("x-h{i}: 1\r\n"));
    }
    many.push_str("\r\n");
    let long = format!(
        "GET /v1/contacts HTTP/1.1\r\nhost: x\r\nx-long: {}\r\n\r\n",
        "a".repeat(66_000)
    );
    for (head, status, code) in [
        ("HELLO\r\n\r\n".to_owned(), 400, "bad_request"),
        (
            "GET /v1/con tacts HTTP/1.1\r\nhost: x\r\n\r\n".to_owned(),
            400,
            "bad_request",
        ),
        (many, 431, "headers_too_large"),
        (long, 431, "headers_too_large"),
    ] {
        let mut conn = TcpStream::connect(address(&s)).await.unwrap();
        let _ = conn.write_all(head.as_bytes()).await;
        assert_problem(&read_to_close(&mut conn).await, status, code);
    }
}

async fn a_stalled_body_answers_408_and_closes_the_connection(s: Server) {
    let mut conn = TcpStream::connect(address(&s)).await.unwrap();
    let head = format!(
        "POST /v1/contacts HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: 900000\r\n\r\n{{\"first_",
        s.keys.test
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let answer = read_to_close(&mut conn).await;
    assert_problem(&answer, 408, "request_timeout");
    assert!(
        parse_answer(&answer).1.contains("\r\nconnection: close"),
        "{answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // Nothing was written.
    assert_eq!(s.get("/contacts").await.ok(200)["data"], json!([]));
}

/// The MCP endpoint reads its bodies itself (for the repeated-key check): a stalled one answers
/// 408 and closes the connection as REST's does.
async fn a_stalled_mcp_body_answers_408_and_closes_the_connection(s: Server) {
    let mut conn = TcpStream::connect(address(&s)).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: 900000\r\n\r\n{{\"jsonrpc",
        s.keys.test
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let answer = read_to_close(&mut conn).await;
    assert_problem(&answer, 408, "request_timeout");
    assert!(
        parse_answer(&answer).1.contains("\r\nconnection: close"),
        "{answer}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// One MCP request sent chunked (no Content-Length), as a streaming client sends it.
async fn chunked_mcp(s: &Server, method: &str, body: &[u8]) -> String {
    let mut conn = TcpStream::connect(address(s)).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2025-11-25\r\nmcp-method: {method}\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n",
        s.keys.test
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    for chunk in body.chunks(64 * 1024) {
        let _ = conn
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await;
        let _ = conn.write_all(chunk).await;
        let _ = conn.write_all(b"\r\n").await;
    }
    let _ = conn.write_all(b"0\r\n\r\n").await;
    read_to_close(&mut conn).await
}

/// A chunked MCP body gets the repeated-key check a sized one gets (decisions §22), and one past
/// the 1 MiB limit the 413 REST answers.
async fn a_chunked_mcp_body_gets_the_checks_of_a_sized_one(s: Server) {
    let answer = chunked_mcp(
        &s,
        "tools/call",
        br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "svc_create_contact", "arguments": {"email": "a@example.com", "email": "b@example.com"}}}"#,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("appears twice"), "{answer}");
    assert!(answer.contains("bad_request"), "{answer}");
    assert_eq!(s.get("/contacts").await.ok(200)["data"], json!([]));
    // Without the repeated key the same chunked call is made.
    let answer = chunked_mcp(
        &s,
        "tools/call",
        br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "svc_create_contact", "arguments": {"email": "a@example.com"}}}"#,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(
        s.get("/contacts").await.ok(200)["data"][0]["email"],
        "a@example.com"
    );
    let big = format!(
        r#"{{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {{"x": "{}"}}}}"#,
        "a".repeat(1_100_000)
    );
    assert_problem(
        &chunked_mcp(&s, "tools/list", big.as_bytes()).await,
        413,
        "payload_too_large",
    );
}

async fn silent_slow_and_idle_connections_are_closed_by_their_timers(s: Server) {
    // Nothing sent: closed after the head timeout, without an answer.
    let mut silent = TcpStream::connect(address(&s)).await.unwrap();
    let started = Instant::now();
    assert_eq!(read_to_close(&mut silent).await, "");
    assert!(
        started.elapsed() < Duration::from_millis(1_400),
        "{:?}",
        started.elapsed()
    );
    // Half a head: the same.
    let mut slow = TcpStream::connect(address(&s)).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    assert_eq!(read_to_close(&mut slow).await, "");
    // Kept alive after an answer: open past the head timeout, closed after the idle one.
    let mut idle = TcpStream::connect(address(&s)).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("ok"));
    tokio::time::sleep(Duration::from_millis(800)).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let n = idle.read(&mut buf).await.unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).ends_with("ok"),
        "still open after 800 ms"
    );
    let started = Instant::now();
    assert_eq!(read_to_close(&mut idle).await, "");
    let took = started.elapsed();
    assert!(
        took > Duration::from_millis(1_000) && took < Duration::from_millis(3_000),
        "{took:?}"
    );
}

async fn a_flood_from_one_address_leaves_other_clients_served(s: Server) {
    // Far more idle sockets than the per-address cap (40 here), all from 127.0.0.1.
    let mut flood = Vec::new();
    for _ in 0..400 {
        flood.push(connect_from("127.0.0.1", &s).await);
    }
    // A client from another address is answered at once, and keeps being answered.
    let client = reqwest::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    for _ in 0..5 {
        let started = Instant::now();
        let res = client
            .get(format!("{}/v1/contacts", s.base))
            .bearer_auth(&s.keys.test)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    // Of the flood, the ones beyond the cap were closed at once.
    let mut closed = 0;
    for conn in &mut flood {
        let mut buf = [0u8; 1];
        if let Ok(Ok(0)) = tokio::time::timeout(Duration::from_millis(5), conn.read(&mut buf)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 400 - 40, "closed {closed}");
}

crate::on_both_stores!(
    served_by super::serve;
    methods_a_path_does_not_serve_answer_405_with_allow,
    bodies_that_are_not_json_answer_415,
    an_empty_body_where_one_is_needed_is_a_bad_request,
    duplicate_keys_are_refused,
    heads_the_server_cannot_parse_answer_problem_documents,
    a_stalled_body_answers_408_and_closes_the_connection,
    a_stalled_mcp_body_answers_408_and_closes_the_connection,
    a_chunked_mcp_body_gets_the_checks_of_a_sized_one,
    silent_slow_and_idle_connections_are_closed_by_their_timers,
    a_flood_from_one_address_leaves_other_clients_served,
);
