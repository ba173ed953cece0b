//! A plain HTTP/1.1 client for the reliability rows: one request per connection
//! (`Connection: close`), the whole answer read and kept (status, every header, body), so a row
//! can look at `Retry-After` or an error body. The load generator's client is faster and reads
//! less; these rows need what it leaves out, not its speed.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// How long one request may take before the row counts it as unanswered.
const TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// `method path` on `addr` with `key` as the bearer (if any), extra `headers` and a JSON `body`.
pub async fn request(
    addr: &str,
    key: Option<&str>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<Answer> {
    tokio::time::timeout(TIMEOUT, exchange(addr, key, method, path, headers, body))
        .await
        .with_context(|| format!("{method} {path}: no answer within {TIMEOUT:?}"))?
}

async fn exchange(
    addr: &str,
    key: Option<&str>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> Result<Answer> {
    let mut stream = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(k) = key {
        head.push_str(&format!("Authorization: Bearer {k}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    let payload = body.map(Value::to_string).unwrap_or_default();
    if body.is_some() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            payload.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(&payload);
    stream.write_all(head.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    parse(&raw).with_context(|| format!("{method} {path}"))
}

fn parse(raw: &[u8]) -> Result<Answer> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let httparse::Status::Complete(head) = response.parse(raw).context("the answer's head")? else {
        bail!(
            "the connection closed before a whole answer ({} bytes)",
            raw.len()
        );
    };
    let status = response.code.unwrap_or(0);
    let headers: Vec<(String, String)> = response
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).trim().to_owned(),
            )
        })
        .collect();
    let rest = &raw[head..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok(Answer {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("a chunk size line")?;
        let size_text = String::from_utf8_lossy(&rest[..line_end]);
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .context("a chunk size")?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size + 2 {
            bail!("a chunk cut short");
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
