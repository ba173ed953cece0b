use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    routing::{get, post},
    Router,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpSocket,
    sync::Notify,
};

use super::*;

const SHORT: EdgeConfig = EdgeConfig {
    head_timeout: Duration::from_millis(300),
    idle_timeout: Duration::from_millis(1_200),
    body_timeout: Duration::from_millis(300),
    write_timeout: Duration::from_millis(500),
    max_connections: 10_000,
    max_connections_per_address: 256,
    address_paths: &[],
};

/// Serves `app` with `config` on a free port until the returned sender is dropped or sent to.
async fn start(
    app: Router,
    config: EdgeConfig,
) -> (SocketAddr, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app, "http://x/errors", config, async {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx, server)
}

fn hello() -> Router {
    Router::new()
        .route("/fast", get(|| async { "fast" }))
        .route(
            "/echo",
            post(|body: Body| async move {
                match axum::body::to_bytes(body, 1 << 20).await {
                    Ok(bytes) => format!("read {}", bytes.len()),
                    Err(e) => format!(
                        "failed, timed out: {}",
                        crm_api::body::caused_by::<BodyTimeout>(&e)
                    ),
                }
            }),
        )
}

async fn send(stream: &mut TcpStream, path: &str) {
    let req = format!("GET {path} HTTP/1.1\r\nhost: x\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
}

/// Reads until the peer closes the connection (within five seconds).
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out))
        .await
        .expect("the server closes the connection")
        .unwrap();
    String::from_utf8(out).unwrap()
}

/// How long the server takes to close `stream`, which must receive nothing meanwhile.
async fn closed_silently_after(stream: &mut TcpStream) -> Duration {
    let started = Instant::now();
    assert_eq!(read_to_close(stream).await, "");
    started.elapsed()
}

#[tokio::test]
async fn stopping_answers_the_request_in_flight_closes_idle_connections_and_accepts_no_more() {
    let release = Arc::new(Notify::new());
    let entered = Arc::new(Notify::new());
    let app = hello().route(
        "/slow",
        get({
            let (release, entered) = (release.clone(), entered.clone());
            || async move {
                entered.notify_one();
                release.notified().await;
                "slow"
            }
        }),
    );
    let (addr, stop_tx, server) = start(app, EdgeConfig::default()).await;

    // An idle keep-alive connection, after one answer.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    send(&mut idle, "/fast").await;
    let mut buf = [0u8; 512];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("fast"));
    // A connection that has sent nothing yet.
    let mut silent = TcpStream::connect(addr).await.unwrap();
    // A connection whose request is still being served.
    let mut busy = TcpStream::connect(addr).await.unwrap();
    send(&mut busy, "/slow").await;
    entered.notified().await;

    stop_tx.send(()).unwrap();
    // The idle connection is closed without another answer, and so is the silent one.
    assert_eq!(read_to_close(&mut idle).await, "");
    assert_eq!(read_to_close(&mut silent).await, "");
    // New connections are refused once the loop has stopped accepting.
    tokio::time::timeout(Duration::from_secs(5), async {
        while TcpStream::connect(addr).await.is_ok() {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the listener is closed");
    assert!(!server.is_finished(), "waits for the request in flight");

    release.notify_one();
    let answer = read_to_close(&mut busy).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("connection: close"), "{answer}");
    assert!(answer.ends_with("slow"), "{answer}");
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve returns once every connection is done")
        .unwrap();
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_the_head_timeout() {
    let (addr, _stop, _) = start(hello(), SHORT).await;
    let mut silent = TcpStream::connect(addr).await.unwrap();
    let took = closed_silently_after(&mut silent).await;
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_millis(1_000),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_head_that_stalls_is_closed_after_the_head_timeout_without_an_answer() {
    let (addr, _stop, _) = start(hello(), SHORT).await;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET /fast HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    let took = closed_silently_after(&mut slow).await;
    assert!(took < Duration::from_millis(1_000), "{took:?}");
}

#[tokio::test]
async fn a_kept_alive_connection_outlives_the_head_timeout_and_closes_after_the_idle_timeout() {
    let (addr, _stop, _) = start(hello(), SHORT).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 512];
    for _ in 0..2 {
        send(&mut conn, "/fast").await;
        let n = conn.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).ends_with("fast"));
        // Longer than the head timeout, shorter than the idle one: still open.
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let took = closed_silently_after(&mut conn).await;
    // The idle timer started 600 ms ago.
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1_500),
        "{took:?}"
    );
}

#[tokio::test]
async fn a_body_that_stalls_fails_with_body_timeout() {
    let (addr, _stop, _) = start(hello(), SHORT).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 900000\r\n\r\n0123456789")
        .await
        .unwrap();
    let answer = read_to_close(&mut conn).await;
    assert!(answer.ends_with("failed, timed out: true"), "{answer}");
}

#[tokio::test]
async fn a_body_that_arrives_in_pieces_within_the_timer_is_read() {
    let (addr, _stop, _) = start(hello(), SHORT).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(
        b"POST /echo HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\nconnection: close\r\n\r\n12",
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    conn.write_all(b"34").await.unwrap();
    let answer = read_to_close(&mut conn).await;
    assert!(answer.ends_with("read 4"), "{answer}");
}

#[tokio::test]
async fn unparsable_heads_answer_problem_documents_with_a_request_id() {
    let (addr, _stop, _) = start(hello(), SHORT).await;
    let mut many = String::from("GET /fast HTTP/1.1\r\nhost: x\r\n");
    for i in 0..150 {
        many.push_str(&format!("x-h{i}: 1\r\n"));
    }
    many.push_str("\r\n");
    let huge = format!(
        "GET /fast HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(70_000)
    );
    for (head, status, code) in [
        ("NOT A REQUEST\r\n\r\n".to_owned(), "400", "bad_request"),
        (
            "GET /fa st HTTP/1.1\r\nhost: x\r\n\r\n".to_owned(),
            "400",
            "bad_request",
        ),
        (many, "431", "headers_too_large"),
        (huge, "431", "headers_too_large"),
    ] {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        // The server may close before it has read all of a head over the limit.
        let _ = conn.write_all(head.as_bytes()).await;
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut out)).await;
        let answer = String::from_utf8_lossy(&out);
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status} ")),
            "{head:.40}: {answer}"
        );
        assert!(
            answer.contains("content-type: application/problem+json"),
            "{answer}"
        );
        assert!(answer.contains("request-id: req_"), "{answer}");
        assert!(
            answer.contains(&format!("\"type\":\"http://x/errors/{code}\"")),
            "{answer}"
        );
    }
}

async fn connect_from(local: &str, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    socket.connect(addr).await.unwrap()
}

async fn answers_fast(conn: &mut TcpStream) -> bool {
    send(conn, "/fast").await;
    let mut buf = [0u8; 512];
    matches!(
        tokio::time::timeout(Duration::from_secs(2), conn.read(&mut buf)).await,
        Ok(Ok(n)) if String::from_utf8_lossy(&buf[..n]).ends_with("fast")
    )
}

#[tokio::test]
async fn one_address_beyond_its_cap_is_closed_while_others_are_served() {
    let config = EdgeConfig {
        max_connections_per_address: 2,
        ..EdgeConfig::default()
    };
    let (addr, _stop, _) = start(hello(), config).await;
    let mut first = connect_from("127.0.0.1", addr).await;
    let mut second = connect_from("127.0.0.1", addr).await;
    assert!(answers_fast(&mut first).await && answers_fast(&mut second).await);
    let mut third = connect_from("127.0.0.1", addr).await;
    assert_eq!(read_to_close(&mut third).await, "");
    let mut other = connect_from("127.0.0.2", addr).await;
    assert!(answers_fast(&mut other).await);
    // A slot given back is taken again.
    drop(first);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut again = connect_from("127.0.0.1", addr).await;
    assert!(answers_fast(&mut again).await);
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_in_the_accept_queue() {
    let config = EdgeConfig {
        max_connections: 1,
        ..EdgeConfig::default()
    };
    let (addr, _stop, _) = start(hello(), config).await;
    let mut first = TcpStream::connect(addr).await.unwrap();
    assert!(answers_fast(&mut first).await);
    let mut waiting = TcpStream::connect(addr).await.unwrap();
    send(&mut waiting, "/fast").await;
    let mut buf = [0u8; 512];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), waiting.read(&mut buf))
            .await
            .is_err(),
        "not served while the cap is reached"
    );
    drop(first);
    let n = tokio::time::timeout(Duration::from_secs(2), waiting.read(&mut buf))
        .await
        .expect("served once a slot is free")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).ends_with("fast"));
}

#[tokio::test]
async fn a_client_that_reads_none_of_a_large_answer_is_dropped_after_the_write_timeout() {
    const SIZE: usize = 64 << 20;
    let app = Router::new().route("/big", get(|| async { Bytes::from(vec![b'x'; SIZE]) }));
    let (addr, _stop, _) = start(app, SHORT).await;
    let mut conn = TcpStream::connect(addr).await.unwrap();
    send(&mut conn, "/big").await;
    // Long past the write timeout, then read what the server had sent before it gave up.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => total += n,
            Err(_) => panic!("the server neither finished nor dropped the connection"),
        }
    }
    assert!(total < SIZE, "the whole answer went out: {total}");
}
