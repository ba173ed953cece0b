//! The HTTP/1.1 server at the edge (decisions §22-24): accepts connections within the caps,
//! serves each with hyper in a task of its own, holds each to the edge's timers, and on shutdown
//! stops accepting, lets every connection finish the request it is serving and closes the idle
//! ones.
//!
//! Its own accept loop rather than `axum::serve`, which has neither timers nor caps and tells
//! every connection to stop through one `watch` channel whose waiter-list mutex every request's
//! wake then takes; here each connection has its own `oneshot`. HTTP/1.1 only (the workspace
//! builds axum without HTTP/2), no upgrades (no route uses them).
//!
//! - `io.rs`: the socket's timers (head, idle, write);
//! - `body.rs`: the request body's timers (408 `request_timeout` from the REST transport);
//! - `own_answers.rs`: hyper's answers to unparsable heads, as problem documents.

mod body;
mod io;
mod own_answers;

use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    net::{IpAddr, SocketAddr},
    pin::{pin, Pin},
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::{body::Body, extract::Request, response::Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::{oneshot, Semaphore},
    task::JoinSet,
};
use tower::{Service, ServiceExt};

pub use body::BodyTimeout;

use self::{
    body::DeadlineBody,
    io::{EdgeIo, Serving, Timers},
    own_answers::OwnAnswers,
};

/// The edge's timers and caps; every one a setting of `crm-server serve` (docs/operations.md).
#[derive(Debug, Clone, Copy)]
pub struct EdgeConfig {
    /// First byte of a connection, and a whole request head after its first byte.
    pub head_timeout: Duration,
    /// Between requests on a kept-alive connection.
    pub idle_timeout: Duration,
    /// A request body without a byte for this long answers 408; a whole body may take twice it.
    pub body_timeout: Duration,
    /// A response the client takes none of for this long is dropped.
    pub write_timeout: Duration,
    /// Connections served at once; the rest wait in the listener's accept queue.
    pub max_connections: usize,
    /// Connections from one client address at once; one beyond it is closed at once.
    pub max_connections_per_address: usize,
    /// Requests whose path starts with one of these carry the client's address in their
    /// extensions (axum's `ConnectInfo<SocketAddr>`): the console's sign-in, which throttles by
    /// it. No other request pays for the insert.
    pub address_paths: &'static [&'static str],
}

impl Default for EdgeConfig {
    fn default() -> EdgeConfig {
        EdgeConfig {
            head_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(75),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            max_connections_per_address: 256,
            address_paths: &[],
        }
    }
}

/// A request head may be this large at most, and have this many header lines (431 beyond).
const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 100;

/// What every connection shares.
struct Shared<S> {
    app: S,
    config: EdgeConfig,
    answers: Arc<OwnAnswers>,
}

/// Serves `app` on `listener` until `stop` resolves, then returns once every connection is done.
/// `errors_base_url`: where the problem `type`s of the edge's own answers point.
pub async fn serve<S>(
    listener: TcpListener,
    app: S,
    errors_base_url: &str,
    config: EdgeConfig,
    stop: impl Future<Output = ()>,
) where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    let shared = Arc::new(Shared {
        app,
        config,
        answers: Arc::new(OwnAnswers::new(errors_base_url)),
    });
    let slots = Arc::new(Semaphore::new(config.max_connections.max(1)));
    let mut stop = pin!(stop);
    let mut connections = JoinSet::new();
    // Each open connection's way to be told to finish (dropping its sender), and its address.
    let mut open: HashMap<tokio::task::Id, (oneshot::Sender<Infallible>, IpAddr)> = HashMap::new();
    let mut per_address: HashMap<IpAddr, usize> = HashMap::new();
    loop {
        tokio::select! {
            // A slot first: beyond the cap, connections wait in the kernel's accept queue.
            accepted = accept_within(&listener, &slots) => match accepted {
                Ok((stream, peer, slot)) => {
                    let address = peer.ip();
                    let count = per_address.entry(address).or_default();
                    if *count >= config.max_connections_per_address {
                        tracing::debug!(%address, "connection refused: too many from this address");
                        drop(stream);
                        continue;
                    }
                    *count += 1;
                    let (close, closing) = oneshot::channel::<Infallible>();
                    let task = connections.spawn(serve_connection(stream, peer, shared.clone(), closing, slot));
                    open.insert(task.id(), (close, address));
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
                if let Some((_, address)) = open.remove(&id) {
                    if let Some(count) = per_address.get_mut(&address) {
                        *count -= 1;
                        if *count == 0 {
                            per_address.remove(&address);
                        }
                    }
                }
            }
            () = &mut stop => break,
        }
    }
    drop(listener);
    // Dropping a connection's sender is what tells it (its receiver resolves).
    drop(open);
    while connections.join_next().await.is_some() {}
}

async fn accept_within(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> std::io::Result<(TcpStream, SocketAddr, tokio::sync::OwnedSemaphorePermit)> {
    let slot = slots
        .clone()
        .acquire_owned()
        .await
        .expect("the semaphore is never closed");
    let (stream, address) = listener.accept().await?;
    Ok((stream, address, slot))
}

/// One connection: its requests in turn until the client closes it, a timer ends it, or the
/// server is stopping (then the request in progress is answered, and the connection closed
/// after it; hyper closes one that has sent nothing yet at once).
async fn serve_connection<S>(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared<S>>,
    mut closing: oneshot::Receiver<Infallible>,
    _slot: tokio::sync::OwnedSemaphorePermit,
) where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    // Answers go out as soon as they are written: a response never waits for an ACK.
    let _ = stream.set_nodelay(true);
    let config = shared.config;
    let serving = Arc::new(Serving::default());
    let io = EdgeIo::new(
        stream,
        serving.clone(),
        Timers {
            max_head: MAX_HEAD_BYTES,
            head: config.head_timeout,
            idle: config.idle_timeout,
            write: config.write_timeout,
        },
        shared.answers.clone(),
        tokio::time::Instant::now(),
    );
    let service = ConnectionService {
        shared,
        serving,
        peer,
    };
    let mut conn = pin!(hyper::server::conn::http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .max_headers(MAX_HEADERS)
        .serve_connection(TokioIo::new(io), service));
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

/// The application as one connection's hyper service: tells the socket when a request is being
/// served, and puts the request body under its timers.
struct ConnectionService<S> {
    shared: Arc<Shared<S>>,
    serving: Arc<Serving>,
    peer: SocketAddr,
}

impl<S> hyper::service::Service<hyper::Request<Incoming>> for ConnectionService<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + Sync + 'static,
    S::Future: Send,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Answering<tower::util::Oneshot<S, Request>>;

    /// A clone of the application, made ready and called (`Oneshot`), as hyper-util's
    /// `TowerToHyperService` does.
    fn call(&self, req: hyper::Request<Incoming>) -> Self::Future {
        self.serving.started();
        let stall = self.shared.config.body_timeout;
        let mut req = req.map(|body| Body::new(DeadlineBody::new(body, stall)));
        let path = req.uri().path();
        if self
            .shared
            .config
            .address_paths
            .iter()
            .any(|p| path.starts_with(p))
        {
            req.extensions_mut()
                .insert(axum::extract::ConnectInfo(self.peer));
        }
        Answering {
            inner: self.shared.app.clone().oneshot(req),
            serving: self.serving.clone(),
        }
    }
}

pin_project_lite::pin_project! {
    /// A request being answered; once the answer is ready, the connection waits for the next.
    pub struct Answering<F> {
        #[pin]
        inner: F,
        serving: Arc<Serving>,
    }
}

impl<F: Future<Output = Result<Response, Infallible>>> Future for Answering<F> {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.inner.poll(cx));
        this.serving.answered();
        Poll::Ready(answer)
    }
}

/// An error from `accept`: one about the connection being accepted (the client gave up) is
/// skipped; any other (out of file descriptors, say) would repeat at once, so the loop waits a
/// second first, as `axum::serve` and hyper's examples do.
async fn wait_out_accept_error(e: std::io::Error) {
    if matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests;
