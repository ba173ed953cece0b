//! A minimal keep-alive HTTP/1.1 client for the load generator: one TCP connection per worker,
//! requests written in one `write_all`, responses parsed in place in the connection's read
//! buffer (`httparse`, as `wrk` parses with its C parser) and their bodies borrowed from it. It
//! does what `wrk` does and nothing more, so the client costs little of the two cores it shares
//! with the server, and a response with more header lines costs it little more (a line-by-line
//! reader into `String`s cost the client about as much per response header as the server spent
//! writing it, which counted against the server in every ratio).

use anyhow::{bail, Context, Result};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
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
        Req {
            method: "GET",
            path: path.into(),
            body: None,
            headers: Vec::new(),
        }
    }

    pub fn with_body(method: &'static str, path: impl Into<String>, body: String) -> Req {
        Req {
            method,
            path: path.into(),
            body: Some(body),
            headers: Vec::new(),
        }
    }

    pub fn header(mut self, line: String) -> Req {
        self.headers.push(line);
        self
    }
}

/// A response; its body borrows the connection's buffer, which the next response reuses (no
/// allocation and no copy per response: the client reads a body as `wrk` does).
#[derive(Debug)]
pub struct Resp<'a> {
    pub status: u16,
    pub etag: Option<String>,
    pub body: &'a [u8],
}

/// The most response header lines the client reads (the server sends under a dozen).
const MAX_HEADERS: usize = 32;
const READ_BUFFER: usize = 64 * 1024;

pub struct Conn {
    stream: TcpStream,
    host: String,
    auth: Option<String>,
    /// The request being written.
    out: Vec<u8>,
    /// Bytes read from the server: `input[start..end]` is not yet consumed.
    input: Vec<u8>,
    start: usize,
    end: usize,
    /// Where the last response ended: consumed when the next one is read (its body was lent out).
    consumed: usize,
    /// A chunked body, decoded (the server sends `Content-Length`; chunked is read for safety).
    chunked: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: &str, key: Option<&str>) -> Result<Conn> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {addr}"))?;
        Conn::over(stream, addr, key)
    }

    /// Like [`Conn::open`], from the local address `local` (another loopback address than the
    /// server sees the rest of the traffic come from).
    pub async fn open_from(addr: &str, local: std::net::IpAddr, key: Option<&str>) -> Result<Conn> {
        let server: std::net::SocketAddr =
            addr.parse().with_context(|| format!("address {addr}"))?;
        let socket = tokio::net::TcpSocket::new_v4()?;
        socket.bind(std::net::SocketAddr::new(local, 0))?;
        let stream = socket
            .connect(server)
            .await
            .with_context(|| format!("connecting to {addr} from {local}"))?;
        Conn::over(stream, addr, key)
    }

    fn over(stream: TcpStream, addr: &str, key: Option<&str>) -> Result<Conn> {
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            host: addr.to_owned(),
            auth: key.map(|k| format!("Authorization: Bearer {k}\r\n")),
            out: Vec::with_capacity(4096),
            input: vec![0; READ_BUFFER],
            start: 0,
            end: 0,
            consumed: 0,
            chunked: Vec::new(),
        })
    }

    pub async fn send(&mut self, req: &Req) -> Result<Resp<'_>> {
        use std::io::Write as _;
        self.out.clear();
        let _ = write!(
            self.out,
            "{} {} HTTP/1.1\r\nHost: {}\r\n",
            req.method, req.path, self.host
        );
        if let Some(a) = &self.auth {
            self.out.extend_from_slice(a.as_bytes());
        }
        for h in &req.headers {
            self.out.extend_from_slice(h.as_bytes());
            self.out.extend_from_slice(b"\r\n");
        }
        if let Some(body) = &req.body {
            let _ = write!(
                self.out,
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            );
        }
        self.out.extend_from_slice(b"\r\n");
        if let Some(body) = &req.body {
            self.out.extend_from_slice(body.as_bytes());
        }
        self.stream.write_all(&self.out).await?;
        self.read_response().await
    }

    /// Reads more from the socket after `input[..end]`, making room first (compacting the
    /// unconsumed bytes to the front, growing the buffer only when they fill it).
    async fn fill(&mut self) -> Result<()> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        }
        if self.end == self.input.len() {
            if self.start > 0 {
                self.input.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else {
                self.input.resize(self.input.len() * 2, 0);
            }
        }
        let n = self.stream.read(&mut self.input[self.end..]).await?;
        if n == 0 {
            bail!("connection closed by the server");
        }
        self.end += n;
        Ok(())
    }

    /// Makes `n` unconsumed bytes available at `input[start..]`.
    async fn need(&mut self, n: usize) -> Result<()> {
        if self.input.len() - self.start < n {
            self.input.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
            if self.input.len() < n {
                self.input.resize(n, 0);
            }
        }
        while self.end - self.start < n {
            self.fill().await?;
        }
        Ok(())
    }

    async fn read_response(&mut self) -> Result<Resp<'_>> {
        self.start += std::mem::take(&mut self.consumed);
        let (status, head, length, chunked, etag) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed
                .parse(&self.input[self.start..self.end])
                .context("malformed response head")?
            {
                httparse::Status::Complete(head) => {
                    let (mut length, mut chunked, mut etag) = (None, false, None);
                    for h in parsed.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            length = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<usize>().ok());
                        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            chunked = h.value.eq_ignore_ascii_case(b"chunked");
                        } else if h.name.eq_ignore_ascii_case("etag") {
                            etag = Some(String::from_utf8_lossy(h.value).trim().to_owned());
                        }
                    }
                    break (parsed.code.unwrap_or(0), head, length, chunked, etag);
                }
                httparse::Status::Partial => self.fill().await?,
            }
        };
        self.start += head;
        if chunked {
            self.read_chunked().await?;
            return Ok(Resp {
                status,
                etag,
                body: &self.chunked,
            });
        }
        let len = length.unwrap_or(0);
        self.need(len).await?;
        self.consumed = len;
        Ok(Resp {
            status,
            etag,
            body: &self.input[self.start..self.start + len],
        })
    }

    /// Decodes a chunked body into `self.chunked` (trailers are skipped).
    async fn read_chunked(&mut self) -> Result<()> {
        self.chunked.clear();
        loop {
            let line = self.line().await?;
            let size = usize::from_str_radix(line.split(';').next().unwrap_or("0").trim(), 16)
                .context("bad chunk size")?;
            if size == 0 {
                while !self.line().await?.is_empty() {}
                return Ok(());
            }
            self.need(size + 2).await?;
            self.chunked
                .extend_from_slice(&self.input[self.start..self.start + size]);
            self.start += size + 2;
        }
    }

    /// One CRLF-terminated line, consumed.
    async fn line(&mut self) -> Result<String> {
        loop {
            if let Some(at) = self.input[self.start..self.end]
                .windows(2)
                .position(|w| w == b"\r\n")
            {
                let line =
                    String::from_utf8_lossy(&self.input[self.start..self.start + at]).into_owned();
                self.start += at + 2;
                return Ok(line);
            }
            self.fill().await?;
        }
    }
}

/// A one-off request on a fresh connection (setup work, not measured).
pub async fn call(addr: &str, key: &str, req: &Req) -> Result<(u16, serde_json::Value)> {
    let mut conn = Conn::open(addr, Some(key)).await?;
    let resp = conn.send(req).await?;
    let value = if resp.body.is_empty() {
        serde_json::Value::Null
    } else {
        serde_json::from_slice(resp.body).unwrap_or(serde_json::Value::Null)
    };
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
