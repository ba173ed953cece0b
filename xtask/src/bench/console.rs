//! The console's rows (issue 38): a session of a viewer of the bench's workspace, switched to
//! test mode where the data set lives, for the `console_board` and `console_contacts` scenarios;
//! and each page's weight, its HTML with the stylesheet and script it loads, against 100 KB.

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{bail, Context, Result};

use super::report::Row;

const EMAIL: &str = "bench-console@example.com";
const PASSWORD: &str = "bench console pass phrase";
/// A page with its stylesheet and script at most this large (issue 38).
pub const PAGE_WEIGHT_MAX: usize = 100 * 1024;
/// The pages weighed, as the console scenarios request them.
pub const BOARD: &str = "/?pipeline=partners";
pub const CONTACTS: &str = "/contacts";

/// An answer read whole: status, `Set-Cookie` values (`name=value`) and body.
struct Answer {
    status: u16,
    cookies: Vec<String>,
    body: String,
}

/// One request on its own connection (`Connection: close`), read to the end.
fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    cookie: &str,
    form: Option<&str>,
) -> Result<Answer> {
    let mut stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    let body = form.unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if !cookie.is_empty() {
        head.push_str(&format!("Cookie: {cookie}\r\n"));
    }
    if form.is_some() {
        head.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    stream.write_all(format!("{head}\r\n{body}").as_bytes())?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").context("no end of head")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status")?;
    let cookies = head
        .lines()
        .filter_map(|l| l.strip_prefix("set-cookie: "))
        .map(|v| v.split(';').next().unwrap_or_default().to_owned())
        .collect();
    Ok(Answer {
        status,
        cookies,
        body: body.to_owned(),
    })
}

fn cookie_value<'a>(answer: &'a Answer, name: &str) -> Option<&'a str> {
    answer
        .cookies
        .iter()
        .find_map(|c| c.strip_prefix(name)?.strip_prefix('='))
}

/// A viewer of `workspace` signed in and switched to test mode: its `crm_session` cookie.
pub fn session(bin: &Path, database_url: &str, workspace: &str, addr: &str) -> Result<String> {
    let mut child = Command::new(bin)
        .args(["user", "create", "--workspace", workspace, "--email", EMAIL])
        .args(["--name", "Bench", "--role", "viewer", "--password-stdin"])
        .args(["--database-url", database_url])
        .env("CRM_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("crm-server user create")?;
    child
        .stdin
        .take()
        .context("stdin")?
        .write_all(format!("{PASSWORD}\n").as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "crm-server user create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let login = exchange(addr, "GET", "/login", "", None)?;
    let pre = cookie_value(&login, "crm_pre_session").context("no pre-session cookie")?;
    let form = format!(
        "csrf={pre}&email={EMAIL}&password={}",
        PASSWORD.replace(' ', "+")
    );
    let signed = exchange(
        addr,
        "POST",
        "/login",
        &format!("crm_pre_session={pre}"),
        Some(&form),
    )?;
    let session = cookie_value(&signed, "crm_session")
        .with_context(|| format!("sign-in answered {}", signed.status))?
        .to_owned();
    let cookie = format!("crm_session={session}");
    let board = exchange(addr, "GET", "/", &cookie, None)?;
    let csrf = board
        .body
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .context("no CSRF token on the board")?
        .to_owned();
    let switched = exchange(
        addr,
        "POST",
        "/mode",
        &cookie,
        Some(&format!("csrf={csrf}&mode=test")),
    )?;
    if switched.status != 303 {
        bail!("switching to test mode answered {}", switched.status);
    }
    Ok(session)
}

/// Each console page's weight with the stylesheet and script it loads, checked against
/// [`PAGE_WEIGHT_MAX`].
pub fn weights(store: &'static str, addr: &str, session: &str, rows: &mut Vec<Row>) -> Result<()> {
    let cookie = format!("crm_session={session}");
    let assets: usize = ["/assets/console.css", "/assets/console.js"]
        .iter()
        .map(|p| exchange(addr, "GET", p, "", None).map(|a| a.body.len()))
        .sum::<Result<usize>>()?;
    for (name, path) in [
        ("console_board_weight", BOARD),
        ("console_contacts_weight", CONTACTS),
    ] {
        let page = exchange(addr, "GET", path, &cookie, None)?;
        if page.status != 200 {
            bail!("GET {path} answered {}", page.status);
        }
        let total = page.body.len() + assets;
        let mut row = Row::new(store, name, 0, "-");
        row.note = Some(format!(
            "{} bytes ({} HTML + {assets} CSS and JS)",
            total,
            page.body.len()
        ));
        row.check(
            format!("page + CSS + JS ≤ {} KB", PAGE_WEIGHT_MAX / 1024),
            total <= PAGE_WEIGHT_MAX,
        );
        rows.push(row);
    }
    Ok(())
}
