//! Webhooks end to end: CRUD and validation, real deliveries to a local receiver with both
//! signatures checked by hand (HMAC written here, not the server's code), retries that repeat the
//! same `Svc-Delivery`, dead letters after six failures, manual retry, mode isolation, and the
//! SSRF checks of live mode.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use base64::{engine::general_purpose::STANDARD, Engine};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::support::{self, Backend, Server};

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    /// The status the receiver answered.
    pub answered: u16,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no {name} header in {:?}", self.headers))
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// A local HTTP/1.1 endpoint (keep-alive) that records each request and answers the next status
/// of its script, then `fallback`.
#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    got: Arc<Mutex<Vec<Received>>>,
    script: Arc<Mutex<VecDeque<u16>>>,
    fallback: Arc<Mutex<u16>>,
    /// Answer after this long.
    delay: Duration,
    /// Answer 500 to every n-th request (0: never).
    fail_every: usize,
}

async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Received> {
    let mut chunk = [0u8; 16384];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let mut headers = HashMap::new();
            for line in head.lines().skip(1) {
                if let Some((k, v)) = line.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                }
            }
            let len: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                let n = sock.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return Some(Received {
                headers,
                body,
                answered: 0,
            });
        }
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

impl Receiver {
    pub async fn start(script: &[u16], fallback: u16) -> Receiver {
        Receiver::start_with(script, fallback, Duration::ZERO, 0).await
    }

    pub async fn start_with(
        script: &[u16],
        fallback: u16,
        delay: Duration,
        fail_every: usize,
    ) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://127.0.0.1:{}/hook",
            listener.local_addr().unwrap().port()
        );
        let r = Receiver {
            url,
            got: Arc::default(),
            script: Arc::new(Mutex::new(script.iter().copied().collect())),
            fallback: Arc::new(Mutex::new(fallback)),
            delay,
            fail_every,
        };
        let me = r.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let me = me.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    while let Some(mut req) = read_request(&mut sock, &mut buf).await {
                        if !me.delay.is_zero() {
                            tokio::time::sleep(me.delay).await;
                        }
                        let status = {
                            let mut got = me.got.lock().unwrap();
                            let next = me.script.lock().unwrap().pop_front();
                            let n = got.len() + 1;
                            let status = match next {
                                Some(s) => s,
                                None if n.checked_rem(me.fail_every) == Some(0) => 500,
                                None => *me.fallback.lock().unwrap(),
                            };
                            req.answered = status;
                            got.push(req);
                            status
                        };
                        let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n\r\nok");
                        if sock.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        r
    }

    pub fn set_fallback(&self, status: u16) {
        *self.fallback.lock().unwrap() = status;
    }

    pub fn received(&self) -> Vec<Received> {
        self.got.lock().unwrap().clone()
    }

    /// What was received after the first `from` requests.
    pub fn received_since(&self, from: usize) -> Vec<Received> {
        let got = self.got.lock().unwrap();
        got.get(from..)
            .map(<[Received]>::to_vec)
            .unwrap_or_default()
    }

    /// Waits (up to `secs`) until `pred` holds for what was received.
    pub async fn wait_until(
        &self,
        secs: u64,
        what: &str,
        pred: impl Fn(&[Received]) -> bool,
    ) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let got = self.received();
            if pred(&got) {
                return got;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {what}; received {} requests",
                got.len()
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// `Svc-Signature` checked by hand: HMAC-SHA256 of "t.body" keyed with the whole secret string.
pub fn verify_svc_signature(secret: &str, r: &Received) {
    let header = r.header("svc-signature");
    let (t, v1) = header.split_once(',').expect("t=...,v1=...");
    let t = t.strip_prefix("t=").expect("t=");
    let v1 = v1.strip_prefix("v1=").expect("v1=");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(&r.body);
    let expected: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(v1, expected, "Svc-Signature does not verify");
    let t: i64 = t.parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now - t).abs() < 300,
        "signature timestamp {t} is not current"
    );
}

/// The Standard Webhooks signature, by hand: base64 HMAC-SHA256 of "id.timestamp.body" keyed
/// with the base64-decoded secret.
pub fn verify_standard_signature(secret: &str, r: &Received) {
    let key = STANDARD
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(
        format!(
            "{}.{}.",
            r.header("webhook-id"),
            r.header("webhook-timestamp")
        )
        .as_bytes(),
    );
    mac.update(&r.body);
    let expected = format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()));
    assert!(
        r.header("webhook-signature")
            .split(' ')
            .any(|s| s == expected),
        "webhook-signature does not verify"
    );
    assert_eq!(r.header("webhook-id"), r.header("svc-delivery"));
}

/// Server settings that make retries quick.
pub const FAST: &[(&str, &str)] = &[
    ("CRM_WEBHOOK_BACKOFF", "100ms,100ms,100ms,100ms,100ms"),
    ("CRM_WEBHOOK_POLL", "20ms"),
    ("CRM_WEBHOOK_TIMEOUT", "2s"),
    ("CRM_WEBHOOK_LEASE", "5s"),
];

pub async fn spawn_fast(backend: Backend) -> Server {
    let database_url = support::fresh_database(backend).await;
    let keys = support::create_workspace(&database_url, &[]);
    support::start(backend, database_url, keys, FAST)
}

async fn create_hook(s: &Server, url: &str, events: Value) -> Value {
    s.post("/webhooks", json!({"url": url, "events": events}))
        .await
        .ok(201)
        .clone()
}

async fn webhook_crud_and_validation(s: Server) {
    let created = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/in", "events": ["contact.created", "deal.created"], "description": "CRM sync"}),
        )
        .await;
    let hook = created.ok(201).clone();
    let id = hook["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("wh_") && id.len() == 29);
    let secret = hook["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_") && STANDARD.decode(&secret[6..]).unwrap().len() == 24);
    assert_eq!(hook["object"], "webhook");
    assert_eq!(hook["events"], json!(["contact.created", "deal.created"]));
    assert_eq!(
        (
            hook["enabled"].clone(),
            hook["mode"].clone(),
            hook["version"].clone()
        ),
        (json!(true), json!("test"), json!(1))
    );
    assert_eq!(created.header("etag"), Some("\"1\""));

    // The secret is never shown again.
    let got = s.get(&format!("/webhooks/{id}")).await;
    assert!(got.ok(200).get("secret").is_none());
    assert_eq!(got.body["description"], "CRM sync");
    let list = s.get("/webhooks").await;
    assert_eq!(list.ok(200)["data"].as_array().unwrap().len(), 1);
    assert!(list.body["data"][0].get("secret").is_none());
    // Other mode: not found.
    s.req(Method::GET, &format!("/webhooks/{id}"))
        .key(&s.keys.live)
        .send()
        .await
        .problem(404, "not_found");
    assert_eq!(
        s.req(Method::GET, "/webhooks")
            .key(&s.keys.live)
            .send()
            .await
            .ok(200)["data"],
        json!([])
    );

    let patched = s
        .patch(
            &format!("/webhooks/{id}"),
            json!({"events": ["*"], "description": null, "enabled": false}),
        )
        .await;
    let p = patched.ok(200);
    assert_eq!(
        (
            p["events"].clone(),
            p["description"].clone(),
            p["enabled"].clone(),
            p["version"].clone()
        ),
        (json!(["*"]), Value::Null, json!(false), json!(2))
    );
    s.req(Method::PATCH, &format!("/webhooks/{id}"))
        .header("if-match", "\"1\"")
        .json(&json!({"enabled": true}))
        .send()
        .await
        .problem(412, "version_conflict");
    s.patch(&format!("/webhooks/{id}"), json!({"events": ["deal.won"]}))
        .await
        .problem(422, "unknown_value");

    let rolled = s
        .post(&format!("/webhooks/{id}/roll-secret"), json!({}))
        .await;
    let new_secret = rolled.ok(200)["secret"].as_str().unwrap().to_owned();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);

    s.get(&format!("/webhooks/{id}/deliveries")).await.ok(200);
    s.get("/webhooks/wh_00000000000000000000000000/deliveries")
        .await
        .problem(404, "not_found");
    let deleted = s.delete(&format!("/webhooks/{id}")).await;
    assert_eq!(
        deleted.ok(200).clone(),
        json!({"id": id, "object": "webhook", "deleted": true})
    );
    s.get(&format!("/webhooks/{id}"))
        .await
        .problem(404, "not_found");
    s.delete(&format!("/webhooks/{id}"))
        .await
        .problem(404, "not_found");

    // Validation.
    let p = s.post("/webhooks", json!({"events": ["*"]})).await;
    assert_eq!(p.problem(422, "validation_failed")["field"], "url");
    let p = s
        .post("/webhooks", json!({"url": "http://127.0.0.1:9/"}))
        .await;
    assert_eq!(p.problem(422, "validation_failed")["field"], "events");
    let p = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/", "events": ["contact.created", "contact.deleted"]}),
        )
        .await;
    let body = p.problem(422, "unknown_value");
    assert_eq!(body["field"], "events");
    assert_eq!(
        body["valid_options"],
        json!([
            "*",
            "contact.created",
            "contact.updated",
            "deal.created",
            "deal.updated",
            "deal.stage_changed"
        ])
    );
    let p = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/", "events": []}),
        )
        .await;
    assert_eq!(p.problem(422, "validation_failed")["field"], "events");
    let p = s
        .post(
            "/webhooks",
            json!({"url": "ftp://127.0.0.1/", "events": ["*"]}),
        )
        .await;
    assert_eq!(p.problem(422, "validation_failed")["field"], "url");
    // Test mode may reach loopback, but not the rest of the blocked ranges.
    let p = s
        .post(
            "/webhooks",
            json!({"url": "http://169.254.169.254/latest", "events": ["*"]}),
        )
        .await;
    assert_eq!(p.problem(422, "validation_failed")["field"], "url");
    let p = s
        .post(
            "/webhooks",
            json!({"url": "http://127.0.0.1:9/", "events": ["*"], "secret": "mine"}),
        )
        .await;
    assert_eq!(p.problem(422, "unknown_field")["field"], "secret");
    s.post(
        "/webhooks/wh_00000000000000000000000000/deliveries/dlv_00000000000000000000000000/retry",
        json!({}),
    )
    .await
    .problem(404, "not_found");
}

async fn live_mode_refuses_http_and_blocked_hosts(s: Server) {
    let live = |url: &str| {
        s.req(Method::POST, "/webhooks")
            .key(&s.keys.live)
            .json(&json!({"url": url, "events": ["*"]}))
            .send()
    };
    for url in [
        "http://example.com/hook",
        "https://127.0.0.1/",
        "https://2130706433/",
        "https://0x7f.1/",
        "https://0177.0.0.1/",
        "https://127.1/",
        "https://[::1]/",
        "https://[::ffff:127.0.0.1]/",
        "https://[64:ff9b::a9fe:a9fe]/",
        "https://[2002:a9fe:a9fe::1]/",
        "https://localhost/",
        "https://api.localhost/",
        "https://10.0.0.8/",
        "https://192.168.0.1/",
        "https://100.64.1.1/",
        "https://169.254.169.254/latest/meta-data/",
        "https://metadata.google.internal/",
        "https://[fd00::1]/",
        "https://[fe80::1]/",
        "https://0.0.0.0/",
        "https://user:pw@example.com/",
        "https://example.com@127.0.0.1/",
        "https://does-not-exist.invalid/",
    ] {
        let res = live(url).await;
        assert_eq!(
            res.problem(422, "validation_failed")["field"],
            "url",
            "{url}: {:#}",
            res.body
        );
    }
    // A public address needs no lookup and is accepted.
    let ok = live("https://93.184.216.34/hook").await;
    assert_eq!(ok.ok(201)["mode"], "live");
}

/// A delivery answered 500 is retried with the same `Svc-Delivery`, both signatures verify, the
/// body is the event; a webhook receives only the events it subscribed to, of its own mode.
async fn deliveries_are_signed_and_retried(backend: Backend) {
    let s = spawn_fast(backend).await;
    let rx = Receiver::start(&[500], 200).await;
    let hook = create_hook(&s, &rx.url, json!(["contact.created"])).await;
    let secret = hook["secret"].as_str().unwrap().to_owned();
    let hook_id = hook["id"].as_str().unwrap().to_owned();

    // A live-mode event and an unsubscribed type come first; neither may reach this webhook.
    s.req(Method::POST, "/contacts")
        .key(&s.keys.live)
        .json(&json!({"email": "live@example.com"}))
        .send()
        .await
        .ok(201);
    s.post("/deals", json!({"title": "Not subscribed"}))
        .await
        .ok(201);
    let contact = s
        .post(
            "/contacts",
            json!({"email": "ada@example.com", "first_name": "Ada"}),
        )
        .await
        .ok(201)
        .clone();

    let got = rx
        .wait_until(20, "a retry after the 500", |g| {
            g.iter()
                .filter(|r| r.json()["data"]["id"] == contact["id"])
                .count()
                >= 2
        })
        .await;
    for r in &got {
        verify_svc_signature(&secret, r);
        verify_standard_signature(&secret, r);
        assert_eq!(r.header("content-type"), "application/json");
        let body = r.json();
        assert_eq!(
            body["type"], "contact.created",
            "only subscribed types arrive"
        );
        assert_eq!(body["mode"], "test", "only the webhook's mode");
        assert_eq!(r.header("svc-event"), "contact.created");
    }
    let mine: Vec<&Received> = got
        .iter()
        .filter(|r| r.json()["data"]["id"] == contact["id"])
        .collect();
    assert_eq!(
        mine[0].header("svc-delivery"),
        mine[1].header("svc-delivery"),
        "a retry repeats Svc-Delivery"
    );
    assert!(mine[0].header("svc-delivery").starts_with("dlv_"));
    let body = mine[1].json();
    assert!(body["id"].as_str().unwrap().starts_with("evt_"));
    assert_eq!(
        (body["object"].clone(), body["data"]["email"].clone()),
        (json!("contact"), json!("ada@example.com"))
    );
    assert!(body["created_at"].as_str().unwrap().ends_with('Z'));
    // The delivered body is the event exactly as GET /events shows it (the store's encoding of
    // the outbox event and the API's event body must agree).
    let events = s.get("/events?type=contact.created").await.ok(200).clone();
    let shown = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == body["id"])
        .expect("the delivered event is listed");
    assert_eq!(shown, &body);

    // The attempt log: newest first, the 500 then the success, one delivery id.
    let log = rx_log(&s, &hook_id, |l| {
        l.iter()
            .filter(|a| a["delivery_id"].as_str() == Some(mine[0].header("svc-delivery")))
            .count()
            == 2
    })
    .await;
    let attempts: Vec<&Value> = log
        .iter()
        .filter(|a| a["delivery_id"].as_str() == Some(mine[0].header("svc-delivery")))
        .collect();
    assert_eq!(attempts[0]["attempt"], 2);
    assert_eq!(
        (
            attempts[0]["status"].clone(),
            attempts[0]["response_status"].clone(),
            attempts[0]["next_attempt_at"].clone()
        ),
        (json!("succeeded"), json!(200), Value::Null)
    );
    assert_eq!(
        (
            attempts[1]["status"].clone(),
            attempts[1]["response_status"].clone()
        ),
        (json!("retrying"), json!(500))
    );
    assert!(attempts[1]["next_attempt_at"].is_string() && attempts[1]["error"].is_string());
    assert_eq!(
        (
            attempts[1]["event_type"].clone(),
            attempts[1]["event_id"].clone()
        ),
        (json!("contact.created"), body["id"].clone())
    );
    assert!(attempts[0]["duration_ms"].is_u64());
    // Paging.
    let page = s
        .get(&format!("/webhooks/{hook_id}/deliveries?limit=1"))
        .await
        .ok(200)
        .clone();
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    assert_eq!(page["has_more"], true);
    let next = s
        .get(&format!(
            "/webhooks/{hook_id}/deliveries?limit=1&cursor={}",
            page["next_cursor"].as_str().unwrap()
        ))
        .await
        .ok(200)
        .clone();
    assert_ne!(next["data"][0], page["data"][0]);
    // A succeeded delivery cannot be retried.
    let dlv = mine[0].header("svc-delivery");
    s.post(
        &format!("/webhooks/{hook_id}/deliveries/{dlv}/retry"),
        json!({}),
    )
    .await
    .problem(409, "conflict");
}

/// The webhook's attempt log once `done` holds (the recorder writes shortly after the send).
async fn rx_log(s: &Server, hook_id: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let page = s
            .get(&format!("/webhooks/{hook_id}/deliveries?limit=100"))
            .await
            .ok(200)
            .clone();
        let data = page["data"].as_array().unwrap().clone();
        if done(&data) {
            return data;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for the attempt log: {data:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Six failures dead-letter a delivery; a manual retry sends it once more, same `Svc-Delivery`.
async fn dead_letter_after_six_failures_then_manual_retry(backend: Backend) {
    let s = spawn_fast(backend).await;
    let rx = Receiver::start(&[], 503).await;
    let hook = create_hook(&s, &rx.url, json!(["*"])).await;
    let hook_id = hook["id"].as_str().unwrap().to_owned();
    s.post("/contacts", json!({"email": "dead@example.com"}))
        .await
        .ok(201);

    let log = rx_log(&s, &hook_id, |l| {
        l.iter().any(|a| a["status"] == "dead_lettered")
    })
    .await;
    assert_eq!(log.len(), 6, "six attempts: {log:#?}");
    assert_eq!(
        log.iter()
            .map(|a| a["attempt"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        vec![6, 5, 4, 3, 2, 1]
    );
    assert_eq!(log[0]["status"], "dead_lettered");
    assert_eq!(log[0]["next_attempt_at"], Value::Null);
    assert!(log[1..]
        .iter()
        .all(|a| a["status"] == "retrying" && a["response_status"] == 503));
    let got = rx.received();
    assert_eq!(got.len(), 6);
    let dlv = log[0]["delivery_id"].as_str().unwrap().to_owned();
    assert!(got.iter().all(|r| r.header("svc-delivery") == dlv));

    rx.set_fallback(200);
    let retried = s
        .post(
            &format!("/webhooks/{hook_id}/deliveries/{dlv}/retry"),
            json!({}),
        )
        .await;
    let d = retried.ok(202);
    assert_eq!(
        (
            d["id"].as_str(),
            d["status"].as_str(),
            d["attempts"].as_u64()
        ),
        (Some(dlv.as_str()), Some("pending"), Some(6))
    );
    let got = rx
        .wait_until(20, "the manual retry", |g| g.len() >= 7)
        .await;
    assert_eq!(got[6].header("svc-delivery"), dlv);
    let log = rx_log(&s, &hook_id, |l| l.len() == 7).await;
    assert_eq!(
        (log[0]["attempt"].clone(), log[0]["status"].clone()),
        (json!(7), json!("succeeded"))
    );
    s.post(
        &format!("/webhooks/{hook_id}/deliveries/{dlv}/retry"),
        json!({}),
    )
    .await
    .problem(409, "conflict");
    // Another webhook's path does not reach this delivery.
    let other = create_hook(&s, &rx.url, json!(["deal.created"])).await;
    s.post(
        &format!(
            "/webhooks/{}/deliveries/{dlv}/retry",
            other["id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await
    .problem(404, "not_found");
}

/// Webhooks are agent tools too.
async fn webhook_tools_are_in_the_catalog(s: Server) {
    let doc = s
        .anon(Method::GET, "/openapi.json")
        .send()
        .await
        .ok(200)
        .clone();
    let names: Vec<String> = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|item| {
            item.as_object()
                .unwrap()
                .values()
                .filter_map(|op| op["operationId"].as_str().map(String::from))
        })
        .collect();
    for tool in [
        "svc_create_webhook",
        "svc_list_webhooks",
        "svc_get_webhook",
        "svc_update_webhook",
        "svc_delete_webhook",
        "svc_roll_webhook_secret",
        "svc_list_webhook_deliveries",
        "svc_retry_webhook_delivery",
    ] {
        assert!(names.iter().any(|n| n == tool), "{tool} missing");
    }
}

crate::on_both_stores!(
    webhook_crud_and_validation,
    live_mode_refuses_http_and_blocked_hosts,
    webhook_tools_are_in_the_catalog
);

mod delivery {
    use super::*;
    crate::on_both_backends!(
        deliveries_are_signed_and_retried,
        dead_letter_after_six_failures_then_manual_retry
    );
}

/// Writing events tells the fan-out loop at once (`Runtime::events_written`); a read does not. (With
/// the configuration cache off, as here, a create runs in a transaction like the update; the
/// one-statement create's signal, after its commit, is not reached.)
async fn writing_events_wakes_the_fan_out(backend: Backend) {
    use crm_app::workspaces::Overrides;
    use crm_domain::{ContactDraft, ContactPatch, Patch, Plan};
    let (runtime, _) = crate::idempotency::runtime_on(backend).await;
    let (app, events_written) = (runtime.app, runtime.events_written);
    let ws = app
        .create_workspace("w", Plan::Free, Overrides::default())
        .await
        .unwrap();
    let caller = app
        .authenticate(Some(&format!("Bearer {}", ws.test_key)))
        .await
        .unwrap();
    // A waiter armed before each step: `notify_waiters` stores nothing for one that is not.
    let armed = || {
        let mut woken = Box::pin(events_written.notified());
        woken.as_mut().enable();
        woken
    };
    let woken = |w| tokio::time::timeout(std::time::Duration::from_millis(50), w);
    let w = armed();
    let draft = ContactDraft {
        first_name: Some("Ada".into()),
        ..Default::default()
    };
    let contact = app.create_contact(&caller, draft, None).await.unwrap();
    assert!(woken(w).await.is_ok(), "a create wakes it");
    let w = armed();
    app.get_contact(&caller, contact.id.as_str()).await.unwrap();
    assert!(woken(w).await.is_err(), "a read does not");
    let w = armed();
    let patch = ContactPatch {
        first_name: Patch::Value("Grace".into()),
        ..Default::default()
    };
    app.update_contact(&caller, contact.id.as_str(), patch, None)
        .await
        .unwrap();
    assert!(
        woken(w).await.is_ok(),
        "an update in a transaction wakes it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_events_wakes_the_fan_out_on_sqlite() {
    writing_events_wakes_the_fan_out(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_events_wakes_the_fan_out_on_postgres() {
    writing_events_wakes_the_fan_out(Backend::Postgres).await;
}
