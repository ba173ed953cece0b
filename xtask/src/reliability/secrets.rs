//! The secrets row: every secret the server is given or makes (the workspace's API keys, a key
//! made over the API and a revoked one, a webhook secret before and after a roll, an email
//! provider's API key) is used for real (requests, a signed delivery, a live send through a
//! local fake provider), then looked for in the server's log at `debug`, in the bodies of error
//! answers to requests that carry them, and in a dump of the database (SQLite: the file, its WAL
//! and shared memory; Postgres: `pg_dump --data-only`). Each whole, and its random part alone.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};

use super::{
    client::{request, Answer},
    fakes::FakeHttp,
    Row, Store,
};
use crate::bench::{load::block_on, procs};

pub fn run(bin: &Path, store: Store, db_url: &str, run_dir: &Path) -> Result<Vec<Row>> {
    let ws = super::workspace(bin, db_url)?;
    let log = run_dir.join(format!("secrets-{}.log", store.name()));
    let server = procs::start_server_env(
        bin,
        db_url,
        &log,
        &[
            ("CRM_LOG", "debug"),
            ("CRM_WEBHOOK_POLL", "50ms"),
            ("CRM_EMAIL_POLL_MS", "50"),
        ],
    )?;
    let addr = server.addr.clone();
    let used = block_on(async move { use_every_secret(&addr, &ws).await })?;
    // Dumped while the server runs (SQLite's WAL still holds the latest pages) and after it stops.
    let mut dump = dump(store, db_url)?;
    drop(server);
    dump.extend(self::dump(store, db_url)?);
    let log_bytes = std::fs::read(&log).with_context(|| format!("reading {}", log.display()))?;
    if !contains(&log_bytes, "listening") {
        bail!("{} is not the server's log", log.display());
    }
    if !contains(&dump, &used.marker) {
        bail!("the database dump does not hold the connection's sender: not a dump of its rows");
    }
    let errors: Vec<u8> = used
        .error_answers
        .iter()
        .flat_map(|a| {
            let mut bytes = a.body.clone();
            for (k, v) in &a.headers {
                bytes.extend_from_slice(format!("\n{k}: {v}").as_bytes());
            }
            bytes
        })
        .collect();
    let not_4xx = used
        .error_answers
        .iter()
        .filter(|a| !(400..500).contains(&a.status))
        .count();
    let mut found = Vec::new();
    for (place, haystack) in [
        ("the server log", &log_bytes),
        ("error answers", &errors),
        ("the database dump", &dump),
    ] {
        for (what, secret) in &used.secrets {
            for needle in [secret.as_str(), random_part(secret)] {
                if contains(haystack, needle) {
                    found.push(format!("{what} in {place}"));
                }
            }
        }
    }
    found.dedup();
    Ok(vec![Row {
        store,
        check: "secrets in logs, error bodies, dumps".into(),
        figures: format!(
            "{} secrets (API keys, webhook secrets, a provider key), each used; looked for whole and by their random part in the debug log ({} KB), {} error answers ({} not 4xx) and the database dump ({} KB): {} found{}",
            used.secrets.len(),
            log_bytes.len() / 1024,
            used.error_answers.len(),
            not_4xx,
            dump.len() / 1024,
            found.len(),
            if found.is_empty() { String::new() } else { format!(": {}", found.join("; ")) }
        ),
        target: "0 found".into(),
        passed: found.is_empty() && not_4xx == 0,
    }])
}

struct Used {
    secrets: Vec<(&'static str, String)>,
    error_answers: Vec<Answer>,
    /// A value the dump must hold (so that an empty dump cannot pass).
    marker: String,
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// The part of a secret after its last `_` (`whsec_…`, `sk_test_…`), if long enough to be the
/// random part; else the whole.
fn random_part(secret: &str) -> &str {
    match secret.rsplit_once('_') {
        Some((_, tail)) if tail.len() >= 16 => tail,
        _ => secret,
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    !needle.is_empty()
        && haystack
            .windows(needle.len())
            .any(|w| w == needle.as_bytes())
}

async fn must(
    addr: &str,
    key: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> Result<Value> {
    let a = request(addr, Some(key), method, path, &[], body).await?;
    if !a.ok() {
        bail!(
            "{method} {path} answered {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        );
    }
    Ok(a.json())
}

fn text(v: &Value, field: &str) -> Result<String> {
    Ok(v[field]
        .as_str()
        .with_context(|| format!("{field} in {v}"))?
        .to_owned())
}

async fn use_every_secret(addr: &str, ws: &procs::Workspace) -> Result<Used> {
    let (test, live) = (ws.test_key.as_str(), ws.live_key.as_str());
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let receiver = FakeHttp::start(loopback, "{}").await?;
    let provider = FakeHttp::start(loopback, r#"{"id":"msg_reliability"}"#).await?;
    let provider_key = format!("re_{}", random_hex(20));
    let marker = format!("sender-{}@reliability.example", random_hex(4));

    // A webhook (test mode, so a local receiver is allowed), its secret rolled.
    let hook = must(
        addr,
        test,
        "POST",
        "/v1/webhooks",
        Some(&json!({"url": format!("{}/hook", receiver.url()), "events": ["contact.created"]})),
    )
    .await?;
    let first_secret = text(&hook, "secret")?;
    let hook_id = text(&hook, "id")?;
    let rolled = must(
        addr,
        test,
        "POST",
        &format!("/v1/webhooks/{hook_id}/roll-secret"),
        Some(&json!({})),
    )
    .await?;
    let secret = text(&rolled, "secret")?;
    // A live provider connection to the fake provider, and a rule that sends through it.
    must(
        addr,
        live,
        "POST",
        "/v1/connections",
        Some(&json!({"provider": "resend", "api_key": provider_key, "from": marker, "base_url": provider.url()})),
    )
    .await?;
    must(
        addr,
        live,
        "POST",
        "/v1/automations",
        Some(
            &json!({"name": "welcome", "trigger_event": "contact.created",
        "actions": [{"type": "send_email", "subject": "Welcome", "body": "<p>Hi</p>"}]}),
        ),
    )
    .await?;
    // Keys made over the API: one kept, one revoked.
    let made = must(
        addr,
        test,
        "POST",
        "/v1/keys",
        Some(&json!({"name": "made", "scopes": ["*"]})),
    )
    .await?;
    let made_secret = text(&made, "secret")?;
    let revoked = must(
        addr,
        test,
        "POST",
        "/v1/keys",
        Some(&json!({"name": "revoked", "scopes": ["*"]})),
    )
    .await?;
    let revoked_secret = text(&revoked, "secret")?;
    must(
        addr,
        test,
        "DELETE",
        &format!("/v1/keys/{}", text(&revoked, "id")?),
        None,
    )
    .await?;

    // Use them: a contact in each mode (a signed delivery, a live send), reads with the made key.
    must(
        addr,
        test,
        "POST",
        "/v1/contacts",
        Some(&json!({"email": "ada@reliability.example"})),
    )
    .await?;
    must(
        addr,
        live,
        "POST",
        "/v1/contacts",
        Some(&json!({"first_name": "Grace", "email": "grace@reliability.example"})),
    )
    .await?;
    must(addr, &made_secret, "GET", "/v1/contacts", None).await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while receiver.requests().is_empty() || provider.requests().is_empty() {
        if Instant::now() > deadline {
            bail!(
                "after 30 s: {} deliveries, {} provider sends (want one each)",
                receiver.requests().len(),
                provider.requests().len()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !provider
        .requests()
        .iter()
        .any(|r| r.header("authorization") == Some(&format!("Bearer {provider_key}")))
    {
        bail!("the fake provider never saw the connection's key");
    }

    // Requests that carry a secret and must fail: their answers may not repeat it.
    let wrong = format!("{test}x");
    let mut error_answers = Vec::new();
    for (key, method, path, body) in [
        (Some(revoked_secret.as_str()), "GET", "/v1/contacts", None),
        (Some(wrong.as_str()), "GET", "/v1/contacts", None),
        (
            Some(revoked_secret.as_str()),
            "POST",
            "/mcp",
            Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        ),
        (
            Some(live),
            "POST",
            "/v1/connections",
            Some(json!({"provider": "nope", "api_key": provider_key, "from": "a@b.example"})),
        ),
        (
            Some(live),
            "POST",
            "/v1/connections",
            Some(json!({"provider": "resend", "api_key": provider_key, "from": "not an address"})),
        ),
        (
            Some(live),
            "POST",
            "/v1/connections",
            Some(
                json!({"provider": "resend", "api_key": provider_key, "from": "a@b.example", "base_url": "ftp://x"}),
            ),
        ),
        (
            Some(test),
            "POST",
            "/v1/webhooks",
            Some(json!({"url": "ftp://x", "events": ["contact.created"], "secret": secret})),
        ),
        (
            Some(test),
            "POST",
            "/v1/keys",
            Some(json!({"name": made_secret, "scopes": ["nope"]})),
        ),
        (
            Some(test),
            "GET",
            &format!("/v1/contacts?q={}&limit=x", secret),
            None,
        ),
    ] {
        let headers: &[(&str, &str)] = if path == "/mcp" {
            &[
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/list"),
            ]
        } else {
            &[]
        };
        error_answers.push(request(addr, key, method, path, headers, body.as_ref()).await?);
    }
    Ok(Used {
        secrets: vec![
            ("the test key", ws.test_key.clone()),
            ("the live key", ws.live_key.clone()),
            ("a key made over the API", made_secret),
            ("a revoked key", revoked_secret),
            ("a webhook secret before its roll", first_secret),
            ("a webhook secret", secret),
            ("a provider API key", provider_key),
        ],
        error_answers,
        marker,
    })
}

/// Everything the database holds: SQLite's files, or Postgres's rows as `pg_dump` writes them.
fn dump(store: Store, db_url: &str) -> Result<Vec<u8>> {
    match store {
        Store::Sqlite => {
            let file = db_url
                .strip_prefix("sqlite://")
                .context("a sqlite:// URL")?
                .split('?')
                .next()
                .unwrap_or_default();
            let mut bytes = Vec::new();
            for suffix in ["", "-wal", "-shm"] {
                if let Ok(b) = std::fs::read(format!("{file}{suffix}")) {
                    bytes.extend(b);
                }
            }
            Ok(bytes)
        }
        Store::Postgres => {
            let out = Command::new("pg_dump")
                .args(["--data-only", "--no-owner", db_url])
                .output()
                .context("running pg_dump")?;
            if !out.status.success() {
                bail!("pg_dump failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            Ok(out.stdout)
        }
    }
}
