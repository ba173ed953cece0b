//! Users (decisions §21, §24): created with a one-time sign-in link built from the public URL,
//! listed, changed and deleted through `/v1/users`; a key gives a role only when it holds every
//! scope of it; the last admin stays; emails are unique across the installation; no password
//! or token is ever shown but the link itself; every change is audited; `crm-server user
//! create` adds users from the command line.

use std::{
    io::Write,
    process::{Command, Stdio},
};

use reqwest::Method;
use serde_json::{json, Value};

use crate::support::{create_workspace, fresh_database, start, Backend, Server, BIN};

const PUBLIC_URL: &str = "https://crm.example.test";

/// A server whose public URL is [`PUBLIC_URL`], so that links can be told from its address.
async fn serve(backend: Backend) -> Server {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(&database_url, &[]);
    start(
        backend,
        database_url,
        keys,
        &[("CRM_PUBLIC_URL", PUBLIC_URL)],
    )
}

fn id(v: &Value) -> &str {
    v["id"].as_str().expect("an id")
}

async fn new_user(s: &Server, email: &str, role: &str) -> Value {
    s.post(
        "/users",
        json!({"email": email, "name": "Kate", "role": role}),
    )
    .await
    .ok(201)
    .clone()
}

/// A key with `scopes`, made with the full-scope test key; its secret.
async fn key_with(s: &Server, scopes: &[&str]) -> String {
    let key = s
        .post("/keys", json!({"name": "scoped", "scopes": scopes}))
        .await;
    key.ok(201)["secret"].as_str().unwrap().to_owned()
}

async fn users_are_created_listed_changed_and_deleted(s: Server) {
    let created = new_user(&s, " Kate@Example.COM ", "member").await;
    let user_id = id(&created).to_owned();
    assert!(user_id.starts_with("usr_"));
    assert_eq!(created["object"], "user");
    assert_eq!(created["email"], "kate@example.com");
    assert_eq!(created["role"], "member");
    assert_eq!(created["last_login_at"], Value::Null);
    let url = created["sign_in_link"]["url"].as_str().unwrap();
    assert!(
        url.starts_with(&format!("{PUBLIC_URL}/sign-in/")) && url.len() > PUBLIC_URL.len() + 30,
        "the link is built from CRM_PUBLIC_URL: {url}"
    );
    assert!(created["sign_in_link"]["expires_at"].is_string());
    assert!(created.get("password").is_none() && created.get("password_hash").is_none());

    let got = s.get(&format!("/users/{user_id}")).await.ok(200).clone();
    assert_eq!(got["email"], "kate@example.com");
    assert!(got.get("sign_in_link").is_none(), "the link is shown once");
    let list = s.get("/users").await.ok(200).clone();
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_eq!(list["data"][0]["id"], user_id.as_str());

    // Emails are unique across the installation, however they are spelled.
    let taken = s
        .post(
            "/users",
            json!({"email": "KATE@example.com", "name": "K", "role": "viewer"}),
        )
        .await;
    taken.problem(409, "conflict");

    let patched = s
        .patch(
            &format!("/users/{user_id}"),
            json!({"name": "Kate B", "role": "viewer"}),
        )
        .await;
    assert_eq!(patched.ok(200)["name"], "Kate B");
    assert_eq!(patched.body["role"], "viewer");
    let other = new_user(&s, "ann@example.com", "viewer").await;
    s.patch(
        &format!("/users/{}", id(&other)),
        json!({"email": "kate@example.com"}),
    )
    .await
    .problem(409, "conflict");

    let deleted = s.delete(&format!("/users/{user_id}")).await;
    assert_eq!(deleted.ok(200)["deleted"], true);
    s.get(&format!("/users/{user_id}"))
        .await
        .problem(404, "not_found");
    s.delete(&format!("/users/{user_id}"))
        .await
        .problem(404, "not_found");
    // The freed email may be used again.
    new_user(&s, "kate@example.com", "viewer").await;
}

async fn bad_input_gets_the_right_problem(s: Server) {
    let bad_email = s
        .post(
            "/users",
            json!({"email": "kate", "name": "Kate", "role": "viewer"}),
        )
        .await;
    assert_eq!(
        bad_email.problem(422, "validation_failed")["field"],
        "email"
    );
    let bad_role = s
        .post(
            "/users",
            json!({"email": "k@example.com", "name": "Kate", "role": "owner"}),
        )
        .await;
    let p = bad_role.problem(422, "unknown_value");
    assert_eq!(p["field"], "role");
    assert_eq!(p["valid_options"], json!(["admin", "member", "viewer"]));
    let blank = s
        .post(
            "/users",
            json!({"email": "k@example.com", "name": "  ", "role": "viewer"}),
        )
        .await;
    assert_eq!(blank.problem(422, "validation_failed")["field"], "name");
    let missing = s.post("/users", json!({"email": "k@example.com"})).await;
    missing.problem(422, "validation_failed");
    s.get("/users/usr_nope").await.problem(404, "not_found");
    s.patch("/users/usr_nope", json!({"name": "x"}))
        .await
        .problem(404, "not_found");
    assert_eq!(
        s.get("/users").await.ok(200)["data"],
        json!([]),
        "nothing refused was written"
    );
}

async fn a_key_gives_only_roles_whose_every_scope_it_holds(s: Server) {
    let users_only = key_with(&s, &["users:write"]).await;
    let post = |key: String, role: &'static str| {
        let s = &s;
        async move {
            s.req(Method::POST, "/users")
                .key(&key)
                .json(&json!({"email": format!("{role}@example.com"), "name": "N", "role": role}))
                .send()
                .await
        }
    };
    let r = post(users_only.clone(), "viewer").await;
    assert_eq!(r.problem(403, "forbidden")["scope"], "contacts:read");
    let r = post(users_only.clone(), "admin").await;
    assert_eq!(r.problem(403, "forbidden")["scope"], "*");

    let resources = [
        "contacts",
        "companies",
        "deals",
        "activities",
        "pipelines",
        "registry",
        "automations",
        "sequences",
        "webhooks",
        "connections",
        "templates",
        "settings",
        "usage",
        "events",
        "emails",
        "keys",
        "imports",
    ];
    let mut scopes: Vec<String> = resources.iter().map(|r| format!("{r}:read")).collect();
    scopes.push("users:write".into());
    let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
    let reader = key_with(&s, &scopes).await;
    let viewer = post(reader.clone(), "viewer").await.ok(201).clone();
    let r = post(reader.clone(), "member").await;
    assert_eq!(r.problem(403, "forbidden")["scope"], "contacts:write");
    // Moving a user to a role, or changing its email, needs that role's scopes too.
    let promote = s
        .req(Method::PATCH, &format!("/users/{}", id(&viewer)))
        .key(&reader)
        .json(&json!({"role": "member"}))
        .send()
        .await;
    assert_eq!(promote.problem(403, "forbidden")["scope"], "contacts:write");
    let rename = s
        .req(Method::PATCH, &format!("/users/{}", id(&viewer)))
        .key(&users_only)
        .json(&json!({"name": "Renamed"}))
        .send()
        .await;
    assert_eq!(
        rename.ok(200)["name"],
        "Renamed",
        "a name needs users:write only"
    );
    let reemail = s
        .req(Method::PATCH, &format!("/users/{}", id(&viewer)))
        .key(&users_only)
        .json(&json!({"email": "new@example.com"}))
        .send()
        .await;
    assert_eq!(reemail.problem(403, "forbidden")["scope"], "contacts:read");
    // A new sign-in link is a way into the account: the role's scopes again.
    let link = s
        .req(
            Method::POST,
            &format!("/users/{}/sign-in-link", id(&viewer)),
        )
        .key(&users_only)
        .send()
        .await;
    assert_eq!(link.problem(403, "forbidden")["scope"], "contacts:read");

    let no_users = key_with(&s, &["contacts:read"]).await;
    let list = s.req(Method::GET, "/users").key(&no_users).send().await;
    assert_eq!(list.problem(403, "forbidden")["scope"], "users:read");
    let read_users = key_with(&s, &["users:read"]).await;
    s.req(Method::GET, "/users")
        .key(&read_users)
        .send()
        .await
        .ok(200);
    let write = s
        .req(Method::DELETE, &format!("/users/{}", id(&viewer)))
        .key(&read_users)
        .send()
        .await;
    assert_eq!(write.problem(403, "forbidden")["scope"], "users:write");
}

async fn the_last_admin_stays(s: Server) {
    let first = new_user(&s, "first@example.com", "admin").await;
    let path = format!("/users/{}", id(&first));
    s.patch(&path, json!({"role": "member"}))
        .await
        .problem(409, "conflict");
    s.delete(&path).await.problem(409, "conflict");
    let second = new_user(&s, "second@example.com", "admin").await;
    assert_eq!(
        s.patch(&path, json!({"role": "member"})).await.ok(200)["role"],
        "member"
    );
    s.delete(&format!("/users/{}", id(&second)))
        .await
        .problem(409, "conflict");
    s.delete(&path).await.ok(200);
}

async fn users_refuse_dry_run_and_issue_new_links(s: Server) {
    let dry = s
        .req(Method::POST, "/users?dry_run=true")
        .json(&json!({"email": "d@example.com", "name": "D", "role": "viewer"}))
        .send()
        .await;
    dry.problem(400, "bad_request");
    assert_eq!(s.get("/users").await.ok(200)["data"], json!([]));
    let user = new_user(&s, "l@example.com", "viewer").await;
    let path = format!("/users/{}", id(&user));
    s.req(Method::DELETE, &format!("{path}?dry_run=true"))
        .send()
        .await
        .problem(400, "bad_request");
    let again = s
        .req(Method::POST, &format!("{path}/sign-in-link"))
        .send()
        .await;
    let again = again.ok(201).clone();
    assert_eq!(again["id"], user["id"]);
    assert_ne!(again["sign_in_link"]["url"], user["sign_in_link"]["url"]);
    assert!(again["sign_in_link"]["url"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{PUBLIC_URL}/sign-in/")));
}

async fn every_change_to_users_is_audited_without_the_link(s: Server) {
    let user = new_user(&s, "audit@example.com", "viewer").await;
    let uid = id(&user).to_owned();
    s.patch(&format!("/users/{uid}"), json!({"name": "Renamed"}))
        .await
        .ok(200);
    s.patch(&format!("/users/{uid}"), json!({"role": "member"}))
        .await
        .ok(200);
    let link = s
        .req(Method::POST, &format!("/users/{uid}/sign-in-link"))
        .send()
        .await;
    let token_urls = [
        user["sign_in_link"]["url"].as_str().unwrap().to_owned(),
        link.ok(201)["sign_in_link"]["url"]
            .as_str()
            .unwrap()
            .to_owned(),
    ];
    s.delete(&format!("/users/{uid}")).await.ok(200);
    let entries = s
        .get(&format!("/audit?target_id={uid}"))
        .await
        .ok(200)
        .clone();
    let actions: Vec<&str> = entries["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "user.deleted",
            "user.sign_in_link_created",
            "user.role_changed",
            "user.updated",
            "user.sign_in_link_created",
            "user.created"
        ]
    );
    let text = entries.to_string();
    for url in &token_urls {
        let token = url.rsplit('/').next().unwrap();
        assert!(
            !text.contains(token),
            "a link's token leaked into the audit log"
        );
    }
    let role_change = &entries["data"][2]["changes"];
    assert_eq!(
        role_change,
        &json!([{"field": "role", "from": "viewer", "to": "member"}])
    );
    // Users belong to the workspace: the live mode's auditors see the same entries.
    let live = s
        .req(Method::GET, &format!("/audit?target_id={uid}"))
        .key(&s.keys.live)
        .send()
        .await;
    assert_eq!(live.ok(200)["data"].as_array().unwrap().len(), 6);
}

/// Runs `crm-server user create` with `args`, writing `stdin` to it; (success, stdout, stderr).
pub(crate) fn user_create(
    database_url: &str,
    args: &[&str],
    stdin: &str,
) -> (bool, String, String) {
    let mut child = Command::new(BIN)
        .args(["user", "create", "--database-url", database_url])
        .args(args)
        .env("CRM_LOG", "warn")
        .env("CRM_PUBLIC_URL", PUBLIC_URL)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run crm-server user create");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

async fn the_cli_creates_users_with_a_link_or_a_password(s: Server) {
    let ws = s.keys.workspace_id.clone();
    let base = ["--workspace", ws.as_str(), "--name", "Op Erator"];
    let with = |extra: &[&'static str]| -> Vec<&str> {
        base.iter().copied().chain(extra.iter().copied()).collect()
    };
    let (ok, out, err) = user_create(
        &s.database_url,
        &with(&["--email", "op@example.com", "--role", "admin", "--json"]),
        "",
    );
    assert!(ok, "{err}");
    let line: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(line["user_id"].as_str().unwrap().starts_with("usr_"));
    assert!(line["sign_in_url"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{PUBLIC_URL}/sign-in/")));

    let (ok, out, err) = user_create(
        &s.database_url,
        &with(&[
            "--email",
            "pw@example.com",
            "--role",
            "viewer",
            "--password-stdin",
        ]),
        "a long passphrase\n",
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("password set") && !out.contains("/sign-in/"),
        "{out}"
    );
    assert!(!out.contains("a long passphrase") && !err.contains("a long passphrase"));

    let (ok, _, err) = user_create(
        &s.database_url,
        &with(&[
            "--email",
            "short@example.com",
            "--role",
            "viewer",
            "--password-stdin",
        ]),
        "short\n",
    );
    assert!(!ok && err.contains("password"), "{err}");
    let (ok, _, err) = user_create(
        &s.database_url,
        &with(&["--email", "op@example.com", "--role", "viewer"]),
        "",
    );
    assert!(!ok && err.contains("already exists"), "{err}");
    let (ok, _, err) = user_create(
        &s.database_url,
        &with(&["--email", "r@example.com", "--role", "owner"]),
        "",
    );
    assert!(!ok && err.contains("owner"), "{err}");

    let list = s.get("/users").await.ok(200).clone();
    let emails: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["email"].as_str().unwrap())
        .collect();
    assert_eq!(emails, ["pw@example.com", "op@example.com"]);
    let entries = s.get("/audit?action=user.created").await.ok(200).clone();
    assert_eq!(entries["data"][0]["channel"], "cli");
    assert_eq!(entries["data"][0]["actor"]["name"], "operator");
}

crate::on_both_stores!(
    served_by super::serve;
    users_are_created_listed_changed_and_deleted,
    bad_input_gets_the_right_problem,
    a_key_gives_only_roles_whose_every_scope_it_holds,
    the_last_admin_stays,
    users_refuse_dry_run_and_issue_new_links,
    every_change_to_users_is_audited_without_the_link,
    the_cli_creates_users_with_a_link_or_a_password,
);
