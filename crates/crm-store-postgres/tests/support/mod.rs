//! Fresh Postgres databases for the tests: one per test, on the server tests are pointed at.

use std::{
    str::FromStr,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, SystemTime},
};

use crm_store_conformance::{postgres_admin_url, POSTGRES_HELP};
use crm_store_postgres::PostgresStore;
use sqlx::{postgres::PgConnectOptions, ConnectOptions, Connection, Executor, PgConnection, Row};
use uuid::Uuid;

/// Tests run in parallel against one server, which allows 100 connections by default.
const POOL_SIZE: u32 = 4;

const DB_PREFIX: &str = "crm_t_";

/// Test databases older than this belong to runs that are over.
const STALE_AFTER: Duration = Duration::from_secs(3600);

/// Creates an empty database and returns its URL.
pub async fn fresh_database() -> String {
    let admin_url = postgres_admin_url();
    let mut admin = PgConnection::connect(&admin_url)
        .await
        .unwrap_or_else(|e| panic!("{POSTGRES_HELP}\n{e}"));
    drop_stale_databases_once(&mut admin).await;
    let name = format!("{DB_PREFIX}{}", Uuid::now_v7().simple());
    admin
        .execute(format!(r#"CREATE DATABASE "{name}""#).as_str())
        .await
        .expect("create test database");
    admin.close().await.expect("close admin connection");
    PgConnectOptions::from_str(&admin_url)
        .expect("admin url")
        .database(&name)
        .to_url_lossy()
        .to_string()
}

/// A store on a fresh, migrated database.
pub async fn fresh_store() -> PostgresStore {
    let store = PostgresStore::connect_with(&fresh_database().await, POOL_SIZE)
        .await
        .expect("connect to test database")
        .with_secrets(crm_store_conformance::test_secrets());
    store.migrate().await.expect("migrate");
    store
}

/// A test cannot drop its database when it ends (the suite has no teardown, and a failed test's
/// data is worth a look), so the first test of each run drops those of earlier runs. Their
/// UUIDv7 names tell their age; one still in use makes DROP fail, which is ignored.
async fn drop_stale_databases_once(admin: &mut PgConnection) {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::SeqCst) {
        return;
    }
    let names = sqlx::query("SELECT datname FROM pg_database WHERE starts_with(datname, $1)")
        .bind(DB_PREFIX)
        .fetch_all(&mut *admin)
        .await
        .expect("list test databases");
    for row in names {
        let name: String = row.get(0);
        if is_stale(&name) {
            let _ = admin
                .execute(format!(r#"DROP DATABASE IF EXISTS "{name}""#).as_str())
                .await;
        }
    }
}

fn is_stale(name: &str) -> bool {
    let created = name
        .strip_prefix(DB_PREFIX)
        .and_then(|id| Uuid::parse_str(id).ok())
        .and_then(|id| id.get_timestamp());
    let Some((secs, _)) = created.map(|t| t.to_unix()) else {
        return false;
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    now.saturating_sub(Duration::from_secs(secs)) > STALE_AFTER
}
