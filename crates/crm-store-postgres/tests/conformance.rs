//! The shared store conformance suite, each case on a fresh Postgres database.

mod support;

use std::sync::Arc;

use crm_app::Store;

async fn fresh_store() -> Arc<dyn Store> {
    support::fresh_store().await.into_arc()
}

crm_store_conformance::conformance_suite!(fresh_store());
