//! API keys: scopes enforced with 403 naming the scope, revocation at once, rolling with an
//! expiry for the old secret, secrets shown once, keys kept per mode (decisions §7).

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{start, Server};

/// Creates a key with `scopes` through the API (with the full-scope test key); returns the body.
async fn new_key(s: &Server, scopes: &[&str]) -> Value {
    let res = s
        .post("/keys", json!({"name": "scoped", "scopes": scopes}))
        .await;
    res.ok(201).clone()
}

fn secret(key: &Value) -> &str {
    key["secret"]
        .as_str()
        .expect("a new key carries its secret")
}

async fn a_read_only_key_gets_403_naming_the_scope_on_a_write(s: Server) {
    let key = new_key(&s, &["contacts:read"]).await;
    let read_only = secret(&key);
    s.req(Method::GET, "/contacts")
        .key(read_only)
        .send()
        .await
        .ok(200);
    let write = s
        .req(Method::POST, "/contacts")
        .key(read_only)
        .json(&json!({"first_name": "Ada"}))
        .send()
        .await;
    assert_eq!(write.problem(403, "forbidden")["scope"], "contacts:write");
    assert!(write.body["detail"]
        .as_str()
        .unwrap()
        .contains("contacts:write"));
    let other = s.req(Method::GET, "/companies").key(read_only).send().await;
    assert_eq!(other.problem(403, "forbidden")["scope"], "companies:read");
    let keys = s.req(Method::GET, "/keys").key(read_only).send().await;
    assert_eq!(keys.problem(403, "forbidden")["scope"], "keys:read");
    assert_eq!(
        s.get("/contacts").await.ok(200)["data"],
        json!([]),
        "the refused write wrote nothing"
    );
}

async fn a_revoked_key_gets_401_at_once(s: Server) {
    let key = new_key(&s, &["*"]).await;
    let (id, doomed) = (key["id"].as_str().unwrap(), secret(&key));
    s.req(Method::GET, "/contacts")
        .key(doomed)
        .send()
        .await
        .ok(200);
    let revoked = s.delete(&format!("/keys/{id}")).await;
    assert_eq!(revoked.ok(200)["deleted"], true);
    assert!(revoked.body["revoked_at"].is_string());
    let res = s.req(Method::GET, "/contacts").key(doomed).send().await;
    assert!(res.problem(401, "unauthorized")["detail"]
        .as_str()
        .unwrap()
        .contains("revoked"));
    // Revoking again answers the same; the key stays listed, revoked.
    assert_eq!(
        s.delete(&format!("/keys/{id}")).await.ok(200)["revoked_at"],
        revoked.body["revoked_at"]
    );
    assert_eq!(
        s.get(&format!("/keys/{id}")).await.ok(200)["revoked_at"],
        revoked.body["revoked_at"]
    );
}

async fn a_rolled_keys_old_secret_stops_at_its_expiry(s: Server) {
    let key = new_key(&s, &["contacts:read"]).await;
    let (old_id, old) = (
        key["id"].as_str().unwrap().to_owned(),
        secret(&key).to_owned(),
    );
    let rolled = s
        .post(
            &format!("/keys/{old_id}/roll"),
            json!({"expire_old_after_seconds": 2}),
        )
        .await;
    let rolled = rolled.ok(201).clone();
    let new = secret(&rolled);
    assert_ne!(rolled["id"], old_id.as_str());
    assert_ne!(new, old);
    assert_eq!(
        (rolled["name"].clone(), rolled["scopes"].clone()),
        (key["name"].clone(), key["scopes"].clone())
    );
    let expires_at = s.get(&format!("/keys/{old_id}")).await.ok(200)["expires_at"]
        .as_str()
        .unwrap()
        .to_owned();
    s.req(Method::GET, "/contacts")
        .key(&old)
        .send()
        .await
        .ok(200);
    s.req(Method::GET, "/contacts")
        .key(new)
        .send()
        .await
        .ok(200);

    tokio::time::sleep(Duration::from_millis(2_200)).await;
    let res = s.req(Method::GET, "/contacts").key(&old).send().await;
    assert!(
        res.problem(401, "unauthorized")["detail"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "old secret after {expires_at}"
    );
    s.req(Method::GET, "/contacts")
        .key(new)
        .send()
        .await
        .ok(200);

    // Without a grace period the old secret stops at once; an expired key cannot be rolled again.
    let again = s
        .post(
            &format!("/keys/{}/roll", rolled["id"].as_str().unwrap()),
            json!({}),
        )
        .await
        .ok(201)
        .clone();
    s.req(Method::GET, "/contacts")
        .key(new)
        .send()
        .await
        .problem(401, "unauthorized");
    s.req(Method::GET, "/contacts")
        .key(secret(&again))
        .send()
        .await
        .ok(200);
    s.post(&format!("/keys/{old_id}/roll"), json!({}))
        .await
        .problem(409, "conflict");
    let too_long = s
        .post(
            &format!("/keys/{}/roll", again["id"].as_str().unwrap()),
            json!({"expire_old_after_seconds": 604_801}),
        )
        .await;
    assert_eq!(
        too_long.problem(422, "validation_failed")["field"],
        "expire_old_after_seconds"
    );
}

async fn secrets_are_shown_once_and_keys_stay_in_their_mode(s: Server) {
    let key = new_key(&s, &["contacts:read", "contacts:read"]).await;
    let id = key["id"].as_str().unwrap();
    assert!(
        secret(&key).starts_with("svc_test_"),
        "a key is created in the caller's mode"
    );
    assert_eq!(key["mode"], "test");
    assert_eq!(key["scopes"], json!(["contacts:read"]));
    let fetched = s.get(&format!("/keys/{id}")).await.ok(200).clone();
    assert!(fetched.get("secret").is_none());
    let listed = s.get("/keys").await.ok(200).clone();
    let data = listed["data"].as_array().unwrap();
    assert_eq!(data.len(), 2, "the workspace's test key and the new one");
    assert_eq!(data[0]["id"], id, "newest first");
    assert!(data
        .iter()
        .all(|k| k.get("secret").is_none() && k["mode"] == "test"));

    let live = |m: Method, p: &str| s.req(m, p).key(&s.keys.live);
    live(Method::GET, &format!("/keys/{id}"))
        .send()
        .await
        .problem(404, "not_found");
    live(Method::DELETE, &format!("/keys/{id}"))
        .send()
        .await
        .problem(404, "not_found");
    let live_keys = live(Method::GET, "/keys").send().await.ok(200).clone();
    assert!(live_keys["data"]
        .as_array()
        .unwrap()
        .iter()
        .all(|k| k["mode"] == "live"));
    let live_key = live(Method::POST, "/keys")
        .json(&json!({"name": "l", "scopes": ["*"]}))
        .send()
        .await
        .ok(201)
        .clone();
    assert!(secret(&live_key).starts_with("svc_live_"));
}

async fn a_key_grants_only_scopes_it_holds_and_known_ones(s: Server) {
    let manager = new_key(&s, &["keys:write", "contacts:read"]).await;
    let create = |body: Value| {
        s.req(Method::POST, "/keys")
            .key(secret(&manager))
            .json(&body)
            .send()
    };
    let res = create(json!({"name": "escalate", "scopes": ["*"]})).await;
    assert_eq!(res.problem(403, "forbidden")["scope"], "*");
    create(json!({"name": "fine", "scopes": ["contacts:read", "keys:read"]}))
        .await
        .ok(201);
    let unknown = create(json!({"name": "typo", "scopes": ["contact:read"]})).await;
    let body = unknown.problem(422, "unknown_value");
    assert!(body["valid_options"]
        .as_array()
        .unwrap()
        .contains(&json!("contacts:read")));
    assert_eq!(
        create(json!({"name": "none", "scopes": []}))
            .await
            .problem(422, "validation_failed")["field"],
        "scopes"
    );
    assert_eq!(
        create(json!({"scopes": ["contacts:read"]}))
            .await
            .problem(422, "validation_failed")["field"],
        "name"
    );
    // Rolling hands out the rolled key's scopes, so it needs them too.
    let full_id = s.get("/keys").await.ok(200)["data"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let roll = s
        .req(Method::POST, &format!("/keys/{full_id}/roll"))
        .key(secret(&manager))
        .json(&json!({}))
        .send()
        .await;
    assert_eq!(roll.problem(403, "forbidden")["scope"], "*");
}

async fn last_used_at_is_written_in_batches(s: Server) {
    let key = new_key(&s, &["contacts:read"]).await;
    let id = key["id"].as_str().unwrap();
    assert_eq!(key["last_used_at"], Value::Null);
    s.req(Method::GET, "/contacts")
        .key(secret(&key))
        .send()
        .await
        .ok(200);
    assert!(
        s.get(&format!("/keys/{id}")).await.ok(200)["last_used_at"].is_string(),
        "this server knows at once"
    );
    // Another server on the same database sees it once the first has flushed (about a second).
    let other = start(s.backend, s.database_url.clone(), s.keys.clone(), &[]);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(other.get(&format!("/keys/{id}")).await.ok(200)["last_used_at"].is_string());
}

crate::on_both_stores!(
    a_read_only_key_gets_403_naming_the_scope_on_a_write,
    a_revoked_key_gets_401_at_once,
    a_rolled_keys_old_secret_stops_at_its_expiry,
    secrets_are_shown_once_and_keys_stay_in_their_mode,
    a_key_grants_only_scopes_it_holds_and_known_ones,
    last_used_at_is_written_in_batches,
);
