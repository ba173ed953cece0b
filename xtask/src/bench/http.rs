//! A minimal keep-alive HTTP/1.1 client for the load generator: one TCP connection per worker,
//! requests written in one `write_all`, responses read by `Content-Length` (or chunked). It does
//! what `wrk` does and nothing more, so the client costs little of the two cores it shares with
//! the server.

use anyhow::{bail, Context, Result};
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::TcpStream,
};

/// One request, as the scenario builds it.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: &'static str,
    pub path: String,
    pub body: Option<String>,
    /// Extra header lines, each `Name: value`.
    pub headers: Vec<String>,
}

impl Req {
    pub fn get(path: impl Into<String>) -> Req {
        Req { method: "GET", path: path.into(), body: None, headers: Vec::new() }
    }

    pub fn with_body(method: &'static str, path: impl Into<String>, body: String) -> Req {
        Req { method, path: path.into(), body: Some(body), headers: Vec::new() }
    }

    pub fn header(mut self, line: String) -> Req {
        self.headers.push(line);
        self
    }
}

/// A response; its body borrows the connection's buffer, which the next response reuses (no
/// allocation and no zeroing per response: the client reads a body as `wrk` does).
#[derive(Debug)]
pub struct Resp<'a> {
    pub status: u16,
    pub etag: Option<String>,
    pub body: &'a [u8],
}

pub struct Conn {
    stream: BufReader<TcpStream>,
    host: String,
    auth: Option<String>,
    buf: Vec<u8>,
    line: String,
    body: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: &str, key: Option<&str>) -> Result<Conn> {
        let stream = TcpStream::connect(addr).await.with_context(|| format!("connecting to {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::with_capacity(64 * 1024, stream),
            host: addr.to_owned(),
            auth: key.map(|k| format!("Authorization: Bearer {k}\r\n")),
            buf: Vec::with_capacity(4096),
            body: Vec::new(),
            line: String::new(),
        })
    }

    pub async fn send(&mut self, req: &Req) -> Result<Resp<'_>> {
        use std::fmt::Write as _;
        let mut head = String::with_capacity(256);
        let _ = write!(head, "{} {} HTTP/1.1\r\nHost: {}\r\n", req.method, req.path, self.host);
        if let Some(a) = &self.auth {
            head.push_str(a);
        }
        for h in &req.headers {
            head.push_str(h);
            head.push_str("\r\n");
        }
        if let Some(body) = &req.body {
            let _ = write!(head, "Content-Type: application/json\r\nContent-Length: {}\r\n", body.len());
        }
        head.push_str("\r\n");
        self.buf.clear();
        self.buf.extend_from_slice(head.as_bytes());
        if let Some(body) = &req.body {
            self.buf.extend_from_slice(body.as_bytes());
        }
        self.stream.get_mut().write_all(&self.buf).await?;
        self.read_response().await
    }

    async fn read_line(&mut self) -> Result<&str> {
        self.line.clear();
        let n = self.stream.read_line(&mut self.line).await?;
        if n == 0 {
            bail!("connection closed by the server");
        }
        Ok(self.line.trim_end())
    }

    async fn read_response(&mut self) -> Result<Resp<'_>> {
        let status_line = self.read_line().await?;
        let status: u16 = status_line.split(' ').nth(1).and_then(|s| s.parse().ok()).with_context(|| format!("bad status line {status_line:?}"))?;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        let mut etag = None;
        loop {
            let line = self.read_line().await?;
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else { continue };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") && value.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if name.eq_ignore_ascii_case("etag") {
                etag = Some(value.to_owned());
            }
        }
        let len = if chunked {
            let mut len = 0;
            loop {
                let size = usize::from_str_radix(self.read_line().await?.split(';').next().unwrap_or("0").trim(), 16)?;
                if size == 0 {
                    self.read_line().await?;
                    break;
                }
                self.read_body(len, size).await?;
                len += size;
                self.read_line().await?;
            }
            len
        } else if let Some(n) = length {
            self.read_body(0, n).await?;
            n
        } else {
            0
        };
        Ok(Resp { status, etag, body: &self.body[..len] })
    }

    /// Reads `n` body bytes to `self.body[at..]`, growing the buffer only when it is too small.
    async fn read_body(&mut self, at: usize, n: usize) -> Result<()> {
        if self.body.len() < at + n {
            self.body.resize(at + n, 0);
        }
        self.stream.read_exact(&mut self.body[at..at + n]).await?;
        Ok(())
    }
}

/// A one-off request on a fresh connection (setup work, not measured).
pub async fn call(addr: &str, key: &str, req: &Req) -> Result<(u16, serde_json::Value)> {
    let mut conn = Conn::open(addr, Some(key)).await?;
    let resp = conn.send(req).await?;
    let value = if resp.body.is_empty() { serde_json::Value::Null } else { serde_json::from_slice(resp.body).unwrap_or(serde_json::Value::Null) };
    Ok((resp.status, value))
}

/// Like [`call`], failing unless the status is 2xx.
pub async fn call_ok(addr: &str, key: &str, req: &Req) -> Result<serde_json::Value> {
    let (status, value) = call(addr, key, req).await?;
    if !(200..300).contains(&status) {
        bail!("{} {} answered {status}: {value}", req.method, req.path);
    }
    Ok(value)
}
