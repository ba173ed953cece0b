//! The HTTP/1.1 server loop: accepts connections, serves each with hyper in a task of its own, and
//! on shutdown stops accepting, lets every connection finish the request it is serving, and
//! closes the idle ones.
//!
//! In place of `axum::serve`, for one cost it puts on every request: each connection's task
//! waits on the shutdown signal through a `tokio::sync::watch` shared by all connections, and
//! every wake of the task (at least one per request) polls it, which takes the channel's one
//! waiter-list mutex. Both worker threads then pass that mutex's cache line between them for
//! every request. Here each connection has its own `oneshot` to be told with, which a poll reads
//! without a lock or a write; the senders stay in the accept loop, touched once per connection.
//! Otherwise it serves as axum does: HTTP/1.1 only (the workspace builds axum without HTTP/2),
//! no upgrades (no route uses them), no timeouts, the accept errors it skips and the ones it
//! waits out.

use std::{collections::HashMap, convert::Infallible, io, pin::pin, time::Duration};

use axum::{body::Body, extract::Request, response::Response};
use hyper::body::Incoming;
use hyper_util::{rt::TokioIo, service::TowerToHyperService};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::oneshot,
    task::JoinSet,
};
use tower::{Service, ServiceExt};

/// Serves `app` on `listener` until `stop` resolves, then returns once every connection is done.
pub async fn serve<S>(listener: TcpListener, app: S, stop: impl std::future::Future<Output = ()>)
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let mut stop = pin!(stop);
    let mut connections = JoinSet::new();
    // Each open connection's way to be told to finish, by its task's id: dropping its sender.
    let mut closers: HashMap<tokio::task::Id, oneshot::Sender<Infallible>> = HashMap::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let (close, closing) = oneshot::channel::<Infallible>();
                    let task = connections.spawn(serve_connection(stream, app.clone(), closing));
                    closers.insert(task.id(), close);
                }
                Err(e) => tokio::select! {
                    () = wait_out_accept_error(e) => {}
                    () = &mut stop => break,
                },
            },
            Some(done) = connections.join_next_with_id() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => e.id(),
                };
                closers.remove(&id);
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    // Dropping a connection's sender is what tells it (its receiver resolves).
    drop(closers);
    while connections.join_next().await.is_some() {}
}

/// One connection: its requests in turn until the client closes it or the server is stopping
/// (then the request in progress is answered, and the connection closed after it; hyper closes
/// one that has sent nothing yet at once, as the tests check).
async fn serve_connection<S>(stream: TcpStream, app: S, mut closing: oneshot::Receiver<Infallible>)
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    // Answers go out as soon as they are written: a response never waits for an ACK.
    let _ = stream.set_nodelay(true);
    let service = TowerToHyperService::new(
        app.map_request(|req: hyper::Request<Incoming>| req.map(Body::new)),
    );
    let mut conn =
        pin!(hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service));
    let served = tokio::select! {
        biased;
        served = conn.as_mut() => served,
        _ = &mut closing => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = served {
        tracing::trace!(error = %e, "connection ended with an error");
    }
}

/// An error from `accept`: one about the connection being accepted (the client gave up) is
/// skipped; any other (out of file descriptors, say) would repeat at once, so the loop waits a
/// second first, as `axum::serve` and hyper's examples do.
async fn wait_out_accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::{routing::get, Router};
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        sync::Notify,
    };

    use super::*;

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

    #[tokio::test]
    async fn stopping_answers_the_request_in_flight_closes_idle_connections_and_accepts_no_more() {
        let release = Arc::new(Notify::new());
        let entered = Arc::new(Notify::new());
        let app = Router::new()
            .route("/fast", get(|| async { "fast" }))
            .route(
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
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, app, async {
            let _ = stop_rx.await;
        }));

        // An idle keep-alive connection, after one answer.
        let mut idle = TcpStream::connect(addr).await.unwrap();
        send(&mut idle, "/fast").await;
        let mut buf = [0u8; 256];
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
}
