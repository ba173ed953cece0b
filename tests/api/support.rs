//! Test harness: each test gets its own server process on its own fresh database (SQLite file or
//! Postgres database), with its own workspace and keys, and talks to it over real HTTP.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    time::Duration,
};

use reqwest::{Method, StatusCode};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub const BIN: &str = env!("CARGO_BIN_EXE_crm-server");

/// A fresh, empty database URL for `backend`.
pub async fn fresh_database(backend: Backend) -> String {
    let name = format!("crm_e2e_{}", uuid::Uuid::now_v7().simple());
    match backend {
        Backend::Sqlite => format!(
            "sqlite://{}",
            std::env::temp_dir().join(format!("{name}.db")).display()
        ),
        Backend::Postgres => {
            use sqlx::Connection;
            let admin = crm_store_conformance::postgres_admin_url();
            let mut conn = sqlx::PgConnection::connect(&admin)
                .await
                .unwrap_or_else(|e| panic!("{} ({e})", crm_store_conformance::POSTGRES_HELP));
            sqlx::query(&format!("CREATE DATABASE {name}"))
                .execute(&mut conn)
                .await
                .expect("create database");
            let base = admin
                .rsplit_once('/')
                .map(|(b, _)| b.to_owned())
                .unwrap_or(admin);
            format!("{base}/{name}")
        }
    }
}

/// Keys printed by `crm-server workspace create --json`.
#[derive(Debug, Clone)]
pub struct Keys {
    #[allow(dead_code)] // read by tests of later issues
    pub workspace_id: String,
    pub test: String,
    pub live: String,
}

pub fn create_workspace(database_url: &str, extra: &[&str]) -> Keys {
    let out = Command::new(BIN)
        .args([
            "workspace",
            "create",
            "--name",
            "e2e",
            "--json",
            "--database-url",
            database_url,
        ])
        .args(extra)
        .env("CRM_LOG", "warn")
        .output()
        .expect("run crm-server workspace create");
    assert!(
        out.status.success(),
        "workspace create failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    Keys {
        workspace_id: v["workspace_id"].as_str().unwrap().to_owned(),
        test: v["test_key"].as_str().unwrap().to_owned(),
        live: v["live_key"].as_str().unwrap().to_owned(),
    }
}

/// Runs `crm-server <args> --database-url <database_url>` to completion; returns its stdout.
pub fn cli(database_url: &str, args: &[&str]) -> String {
    let mut command = Command::new(BIN);
    if database_url.starts_with("postgres") {
        // `migrate` and `secrets` need the key on Postgres; the other commands ignore it.
        command.env("CRM_SECRET_KEYS", POSTGRES_SECRET_KEYS);
    }
    let out = command
        .args(args)
        .args(["--database-url", database_url])
        .env("CRM_LOG", "warn")
        .output()
        .expect("run crm-server");
    assert!(
        out.status.success(),
        "crm-server {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running `crm-server serve`, killed when dropped.
#[allow(dead_code)] // database_url and backend serve tests that restart servers
pub struct Server {
    pub base: String,
    pub database_url: String,
    pub keys: Keys,
    pub backend: Backend,
    child: Child,
    client: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a server on a fresh database with one workspace on `plan`.
pub async fn spawn(backend: Backend) -> Server {
    spawn_with(backend, &[]).await
}

pub async fn spawn_with(backend: Backend, workspace_args: &[&str]) -> Server {
    let database_url = fresh_database(backend).await;
    let keys = create_workspace(&database_url, workspace_args);
    start(backend, database_url, keys, &[])
}

/// The secret key servers on Postgres are started with (Postgres has no key file); a test may
/// set its own `CRM_SECRET_KEYS` in `env`.
pub const POSTGRES_SECRET_KEYS: &str = "c2VjcmV0cy1hdC1yZXN0LXRlc3Qta2V5LTMyYnl0ZXM=";

pub fn start(backend: Backend, database_url: String, keys: Keys, env: &[(&str, &str)]) -> Server {
    start_logging_to(backend, database_url, keys, env, Stdio::inherit())
}

/// [`start`], with the server's log (stderr) going to `log`.
pub fn start_logging_to(
    backend: Backend,
    database_url: String,
    keys: Keys,
    env: &[(&str, &str)],
    log: impl Into<Stdio>,
) -> Server {
    let mut command = Command::new(BIN);
    if backend == Backend::Postgres {
        command.env("CRM_SECRET_KEYS", POSTGRES_SECRET_KEYS);
    }
    let mut child = command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &database_url,
        ])
        .env("CRM_LOG", "warn")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("spawn crm-server serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let base = loop {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(addr) = line.strip_prefix("listening on ") {
                    break addr.trim().to_owned();
                }
            }
            _ => panic!("crm-server exited before listening"),
        }
    };
    // Keep draining stdout so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    Server {
        base,
        database_url,
        keys,
        backend,
        child,
        client,
    }
}

/// A response, read whole.
#[derive(Debug)]
pub struct Res {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Res {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts a problem document with this status and code; returns the body.
    #[track_caller]
    pub fn problem(&self, status: u16, code: &str) -> &Value {
        assert_eq!(self.status.as_u16(), status, "status of {:#}", self.body);
        assert_eq!(self.body["code"], code, "code of {:#}", self.body);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        assert!(self.body["type"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/errors/{code}")));
        assert_eq!(self.body["status"], status);
        assert!(self.body["title"].is_string() && self.body["detail"].is_string());
        &self.body
    }

    #[track_caller]
    pub fn ok(&self, status: u16) -> &Value {
        assert_eq!(self.status.as_u16(), status, "status of {:#}", self.body);
        &self.body
    }
}

/// A request being built.
pub struct Req<'a> {
    _server: &'a Server,
    builder: reqwest::RequestBuilder,
    key: Option<String>,
}

impl<'a> Req<'a> {
    /// Use this key instead of the test key.
    pub fn key(mut self, key: &str) -> Self {
        self.key = Some(key.to_owned());
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.builder = self.builder.header(name, value);
        self
    }

    pub fn json(mut self, body: &Value) -> Self {
        self.builder = self.builder.json(body);
        self
    }

    pub fn raw(mut self, body: impl Into<reqwest::Body>) -> Self {
        self.builder = self
            .builder
            .header("content-type", "application/json")
            .body(body);
        self
    }

    /// A body sent as it is, with no Content-Type of its own (set one with `header`).
    pub fn json_text(mut self, body: impl Into<reqwest::Body>) -> Self {
        self.builder = self.builder.body(body);
        self
    }

    pub async fn send(self) -> Res {
        let builder = match &self.key {
            Some(key) => self.builder.bearer_auth(key),
            None => self.builder,
        };
        let res = builder.send().await.expect("request");
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.expect("body");
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or(Value::String(String::from_utf8_lossy(&bytes).into()))
        };
        assert!(
            headers.contains_key("request-id"),
            "every response carries Request-Id"
        );
        Res {
            status,
            headers,
            body,
        }
    }
}

impl Server {
    /// A request with the test key; `path` is relative to `/v1` unless it starts with `!`.
    pub fn req(&self, method: Method, path: &str) -> Req<'_> {
        let url = match path.strip_prefix('!') {
            Some(raw) => format!("{}{raw}", self.base),
            None => format!("{}/v1{path}", self.base),
        };
        Req {
            _server: self,
            builder: self.client.request(method, url),
            key: Some(self.keys.test.clone()),
        }
    }

    /// Like `req` but with no Authorization header.
    pub fn anon(&self, method: Method, path: &str) -> Req<'_> {
        let url = match path.strip_prefix('!') {
            Some(raw) => format!("{}{raw}", self.base),
            None => format!("{}/v1{path}", self.base),
        };
        Req {
            _server: self,
            builder: self.client.request(method, url),
            key: None,
        }
    }

    pub async fn get(&self, path: &str) -> Res {
        self.req(Method::GET, path).send().await
    }

    pub async fn post(&self, path: &str, body: Value) -> Res {
        self.req(Method::POST, path).json(&body).send().await
    }

    pub async fn patch(&self, path: &str, body: Value) -> Res {
        self.req(Method::PATCH, path).json(&body).send().await
    }

    pub async fn delete(&self, path: &str) -> Res {
        self.req(Method::DELETE, path).send().await
    }
}

/// Declares each listed `async fn name(s: Server)` as two tests, one per store.
#[macro_export]
macro_rules! on_both_stores {
    // Each test gets the server `$serve(backend)` starts (a module's own settings).
    (served_by $serve:path; $($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($serve($crate::support::Backend::Sqlite).await).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($serve($crate::support::Backend::Postgres).await).await;
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        $crate::on_both_stores!(served_by $crate::support::spawn; $($name),*);
    };
}

/// Declares each listed `async fn name(backend: Backend)` as two tests, one per store, for tests
/// that start their servers themselves (with their own plan, or several servers).
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Sqlite).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Postgres).await;
                }
            )*
        }
    };
}

/// The OpenAPI document `doc` with each reference to a component schema under `paths` replaced
/// by the component, for tests that read a body's members.
pub fn inline_refs(mut doc: Value) -> Value {
    fn walk(v: &mut Value, schemas: &serde_json::Map<String, Value>, depth: usize) {
        let target = v
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .map(str::to_owned);
        if let Some(name) = target {
            assert!(depth < 16, "{name} refers to itself");
            *v = schemas[&name].clone();
            return walk(v, schemas, depth + 1);
        }
        match v {
            Value::Object(members) => members.values_mut().for_each(|m| walk(m, schemas, depth)),
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, schemas, depth)),
            _ => {}
        }
    }
    let schemas = doc["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    walk(&mut doc["paths"], &schemas, 0);
    doc
}
