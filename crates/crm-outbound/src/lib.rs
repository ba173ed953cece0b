//! Outbound HTTP for webhooks: the [`Outbound`] port of `crm-app` over reqwest with rustls.
//!
//! SSRF defence at delivery (decisions §11): the URL is parsed and checked again as a browser
//! parses it (a literal address in any spelling is checked right there); a name is resolved by
//! this crate's own resolver, which refuses the whole name when *any* of its addresses is blocked
//! by the webhook's policy, and hands reqwest only the addresses it checked, so the connection
//! goes to an address that passed (no second lookup an attacker's DNS could answer differently).
//! Redirects are never followed, no proxy from the environment is used, and each attempt has a
//! timeout. One client per policy keeps connections to each receiver alive between deliveries.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use crm_app::webhooks::{Outbound, OutboundRequest, SendResult};
use crm_domain::ssrf::{self, Policy};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Response bytes read (and dropped) so the connection can be reused.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// Resolves names and refuses any whose addresses are not all allowed by `policy`.
struct CheckedResolver {
    policy: Policy,
}

#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// Every address of `host`, or why it may not be reached under `policy`.
async fn resolve_checked(host: &str, port: u16, policy: Policy) -> Result<Vec<SocketAddr>, String> {
    policy
        .allows_name(host)
        .map_err(|b| format!("the host {host} is {}", b.describe()))?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| format!("the host {host} does not resolve ({e})"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("the host {host} does not resolve"));
    }
    for a in &addrs {
        policy
            .allows_ip(a.ip())
            .map_err(|b| format!("the host {host} resolves to {}, {}", a.ip(), b.describe()))?;
    }
    Ok(addrs)
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        Box::pin(async move {
            match resolve_checked(name.as_str(), 0, policy).await {
                Ok(addrs) => Ok(Box::new(addrs.into_iter()) as Addrs),
                Err(e) => Err(Box::new(Refused(e)) as Box<dyn std::error::Error + Send + Sync>),
            }
        })
    }
}

fn client(
    policy: Policy,
    timeout: Duration,
    max_idle_per_host: usize,
) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .dns_resolver(Arc::new(CheckedResolver { policy }))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(max_idle_per_host)
        .pool_idle_timeout(Duration::from_secs(60))
        .user_agent(concat!("crm-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("building the HTTP client: {e}"))
}

/// Sends webhook deliveries; cheap to share.
pub struct HttpOutbound {
    live: reqwest::Client,
    test: reqwest::Client,
    timeout: Duration,
}

impl HttpOutbound {
    /// `timeout` bounds each attempt (connect, send and response headers); `max_idle_per_host`
    /// caps the connections kept alive per receiver.
    pub fn new(timeout: Duration, max_idle_per_host: usize) -> Result<HttpOutbound, String> {
        Ok(HttpOutbound {
            live: client(Policy::LIVE, timeout, max_idle_per_host)?,
            test: client(Policy::TEST, timeout, max_idle_per_host)?,
            timeout,
        })
    }

    fn client(&self, policy: Policy) -> &reqwest::Client {
        if policy == Policy::LIVE {
            &self.live
        } else {
            &self.test
        }
    }
}

/// The innermost cause of an error, which says what actually went wrong.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

fn describe(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        format!("timed out after {} ms", timeout.as_millis())
    } else if e.is_connect() {
        format!("could not connect: {}", root_cause(e))
    } else {
        format!("request failed: {}", root_cause(e))
    }
}

#[async_trait]
impl Outbound for HttpOutbound {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, String> {
        let addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| e.to_string())?;
        Ok(addrs.map(|a| a.ip()).collect())
    }

    async fn send(&self, request: OutboundRequest) -> SendResult {
        let started = Instant::now();
        let elapsed = |s: Instant| s.elapsed().as_millis() as u64;
        // Checked again at every attempt: the policy may have tightened, and the stored URL is
        // parsed exactly as it is about to be requested.
        let checked = match ssrf::check_url(&request.url, request.policy) {
            Ok(c) => c,
            Err(e) => {
                return SendResult {
                    status: None,
                    error: Some(format!("refused: {}", e.detail)),
                    duration_ms: 0,
                }
            }
        };
        let mut builder = self
            .client(request.policy)
            .post(&checked.url)
            .header("content-type", "application/json");
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        let mut response = match builder.body(request.body).send().await {
            Ok(r) => r,
            Err(e) => {
                return SendResult {
                    status: None,
                    error: Some(describe(&e, self.timeout)),
                    duration_ms: elapsed(started),
                }
            }
        };
        let status = response.status().as_u16();
        // Drain a little of the body so the connection goes back to the pool.
        let mut read = 0;
        while read < MAX_RESPONSE_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => read += chunk.len(),
                _ => break,
            }
        }
        SendResult {
            status: Some(status),
            error: None,
            duration_ms: elapsed(started),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::TcpListener,
    };

    /// A one-shot HTTP server answering `status`; returns its port and the raw request it got.
    async fn serve_once(
        status: u16,
        extra_headers: &'static str,
    ) -> (u16, tokio::task::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 65536];
            let mut got = Vec::new();
            loop {
                let n = sock.read(&mut buf).await.unwrap();
                got.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&got).to_string();
                if let Some(head_end) = text.find("\r\n\r\n") {
                    let len = text[..head_end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if got.len() >= head_end + 4 + len {
                        break;
                    }
                }
                if n == 0 {
                    break;
                }
            }
            let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\n{extra_headers}\r\n");
            sock.write_all(reply.as_bytes()).await.unwrap();
            String::from_utf8_lossy(&got).to_string()
        });
        (port, task)
    }

    fn request(url: String, policy: Policy) -> OutboundRequest {
        OutboundRequest {
            url,
            policy,
            headers: vec![("svc-event", "contact.created".into())],
            body: br#"{"a":1}"#.to_vec(),
        }
    }

    #[tokio::test]
    async fn sends_the_body_and_headers_and_reports_the_status() {
        let out = HttpOutbound::new(Duration::from_secs(5), 4).unwrap();
        let (port, got) = serve_once(204, "").await;
        let r = out
            .send(request(
                format!("http://127.0.0.1:{port}/hook"),
                Policy::TEST,
            ))
            .await;
        assert_eq!(r.status, Some(204));
        assert!(r.succeeded());
        let raw = got.await.unwrap();
        assert!(raw.starts_with("POST /hook HTTP/1.1"));
        assert!(raw.contains("svc-event: contact.created"));
        assert!(raw.ends_with(r#"{"a":1}"#));
    }

    #[tokio::test]
    async fn redirects_are_not_followed() {
        let out = HttpOutbound::new(Duration::from_secs(5), 4).unwrap();
        let (port, _got) = serve_once(302, "location: http://169.254.169.254/\r\n").await;
        let r = out
            .send(request(format!("http://localhost:{port}/"), Policy::TEST))
            .await;
        assert_eq!(r.status, Some(302));
        assert!(!r.succeeded());
    }

    #[tokio::test]
    async fn live_policy_refuses_loopback_in_any_spelling_and_by_name() {
        let out = HttpOutbound::new(Duration::from_secs(5), 4).unwrap();
        let (port, _got) = serve_once(200, "").await;
        for url in [
            format!("https://127.0.0.1:{port}/"),
            format!("https://0x7f.1:{port}/"),
            format!("https://localhost:{port}/"),
            format!("http://127.0.0.1:{port}/"),
        ] {
            let r = out.send(request(url.clone(), Policy::LIVE)).await;
            assert_eq!(r.status, None, "{url}");
            assert!(
                r.error.as_deref().unwrap().starts_with("refused"),
                "{url}: {:?}",
                r.error
            );
        }
    }

    #[tokio::test]
    async fn the_resolver_refuses_blocked_names_and_checks_their_addresses() {
        // `localhost` passes the test policy; under a policy without loopback its address is refused.
        let strict_but_http = Policy {
            allow_http: true,
            allow_loopback: false,
        };
        let e = resolve_checked("localhost", 80, strict_but_http)
            .await
            .unwrap_err();
        assert!(e.contains("localhost"), "{e}");
        assert!(resolve_checked("localhost", 80, Policy::TEST).await.is_ok());
        assert!(
            resolve_checked("metadata.google.internal", 80, Policy::TEST)
                .await
                .is_err()
        );
    }

    #[tokio::test]
    async fn a_silent_endpoint_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let (sock, _) = listener.accept().await.unwrap();
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(sock);
        });
        let out = HttpOutbound::new(Duration::from_millis(300), 4).unwrap();
        let r = out
            .send(request(format!("http://127.0.0.1:{port}/"), Policy::TEST))
            .await;
        assert_eq!(r.status, None);
        assert!(
            r.error.as_deref().unwrap().contains("timed out"),
            "{:?}",
            r.error
        );
        hold.abort();
    }
}
