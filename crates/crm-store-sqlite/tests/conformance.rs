//! The shared store conformance suite, on a fresh SQLite file per test.

use std::sync::Arc;

use crm_app::Store;
use crm_store_sqlite::SqliteStore;

async fn fresh_store() -> Arc<dyn Store> {
    let path = std::env::temp_dir().join(format!(
        "crm-conformance-{}.db",
        uuid::Uuid::now_v7().simple()
    ));
    let store = SqliteStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("open sqlite")
        .with_secrets(crm_store_conformance::test_secrets());
    store.migrate().await.expect("migrate");
    Arc::new(store)
}

crm_store_conformance::conformance_suite!(fresh_store());

/// The CLI writing the same file is another process: the server hears of its changes by polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_reach_another_process_on_the_same_file() {
    let path = std::env::temp_dir().join(format!(
        "crm-conformance-{}.db",
        uuid::Uuid::now_v7().simple()
    ));
    let url = format!("sqlite://{}", path.display());
    let writer = SqliteStore::connect(&url).await.expect("open sqlite");
    writer.migrate().await.expect("migrate");
    let other = SqliteStore::connect(&url).await.expect("open sqlite again");
    crm_store_conformance::config_cases::config_changes_reach_another_process(
        Arc::new(writer),
        Arc::new(other),
    )
    .await;
}

/// Another process on the same file (the CLI, or a second server by mistake) never takes a claim
/// of this one while it runs, and takes it at once when it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_alive_while_its_process_runs_and_abandoned_once_it_is_gone() {
    let path = std::env::temp_dir().join(format!(
        "crm-conformance-{}.db",
        uuid::Uuid::now_v7().simple()
    ));
    let url = format!("sqlite://{}", path.display());
    let first = SqliteStore::connect(&url).await.expect("open sqlite");
    first.migrate().await.expect("migrate");
    let second = SqliteStore::connect(&url).await.expect("open sqlite again");
    crm_store_conformance::idempotency_cases::a_claim_is_alive_while_its_process_runs_and_abandoned_once_it_is_gone(
        Arc::new(first),
        Arc::new(second),
    )
    .await;
}
