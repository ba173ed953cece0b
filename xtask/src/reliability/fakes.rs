//! Local stand-ins for what the server talks to: an HTTP endpoint that records every request it
//! gets and answers 200 (a webhook receiver, an email provider, or the internal target an SSRF
//! must never reach), keeping connections alive as real receivers do.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
};

use anyhow::Result;
use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the whole request had arrived.
    pub at: std::time::Instant,
}

impl Seen {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone)]
pub struct FakeHttp {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// TCP connections accepted, whether or not a request followed.
    pub connections: Arc<AtomicUsize>,
}

impl FakeHttp {
    /// Listens on `bind` (port 0 for any), answering every request 200 with `reply`.
    pub async fn start(bind: SocketAddr, reply: &'static str) -> Result<FakeHttp> {
        let listener = TcpListener::bind(bind).await?;
        let fake = FakeHttp {
            addr: listener.local_addr()?,
            seen: Arc::new(Mutex::new(Vec::new())),
            connections: Arc::new(AtomicUsize::new(0)),
        };
        let (seen, connections) = (fake.seen.clone(), fake.connections.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, seen.clone(), reply));
            }
        });
        Ok(fake)
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

/// Reads requests off one connection until it closes, recording and answering each.
async fn serve(mut stream: TcpStream, seen: Arc<Mutex<Vec<Seen>>>, reply: &'static str) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        // A whole head, then a body of its Content-Length.
        let (head_len, headers, length) = loop {
            let mut parsed_headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut parsed_headers);
            match req.parse(&buf) {
                Ok(httparse::Status::Complete(n)) => {
                    let headers: Vec<(String, String)> = req
                        .headers
                        .iter()
                        .map(|h| {
                            (
                                h.name.to_ascii_lowercase(),
                                String::from_utf8_lossy(h.value).trim().to_owned(),
                            )
                        })
                        .collect();
                    let length = headers
                        .iter()
                        .find(|(k, _)| k == "content-length")
                        .and_then(|(_, v)| v.parse::<usize>().ok())
                        .unwrap_or(0);
                    break (n, headers, length);
                }
                Ok(httparse::Status::Partial) => match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                },
                Err(_) => return,
            }
        };
        while buf.len() < head_len + length {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let body = buf[head_len..head_len + length].to_vec();
        buf.drain(..head_len + length);
        if let Ok(mut s) = seen.lock() {
            s.push(Seen {
                headers,
                body,
                at: std::time::Instant::now(),
            });
        }
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{reply}",
            reply.len()
        );
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
    }
}
