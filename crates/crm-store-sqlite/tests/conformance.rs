//! The shared store conformance suite, on a fresh SQLite file per test.

use std::sync::Arc;

use crm_app::Store;
use crm_store_sqlite::SqliteStore;

async fn fresh_store() -> Arc<dyn Store> {
    let path = std::env::temp_dir().join(format!("crm-conformance-{}.db", uuid::Uuid::now_v7().simple()));
    let store = SqliteStore::connect(&format!("sqlite://{}", path.display())).await.expect("open sqlite");
    store.migrate().await.expect("migrate");
    Arc::new(store)
}

crm_store_conformance::conformance_suite!(fresh_store());
