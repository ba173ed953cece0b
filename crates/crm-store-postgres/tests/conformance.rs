//! The shared store conformance suite, each case on a fresh Postgres database.

mod support;

use std::sync::Arc;

use crm_app::Store;

async fn fresh_store() -> Arc<dyn Store> {
    support::fresh_store().await.into_arc()
}

crm_store_conformance::conformance_suite!(fresh_store());

/// Two server processes on one database: a change committed by one is NOTIFYed to the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_changes_reach_another_process_on_the_same_database() {
    let url = support::fresh_database().await;
    let writer = crm_store_postgres::PostgresStore::connect_with(&url, 2)
        .await
        .expect("connect");
    writer.migrate().await.expect("migrate");
    let other = crm_store_postgres::PostgresStore::connect_with(&url, 2)
        .await
        .expect("connect again");
    crm_store_conformance::config_cases::config_changes_reach_another_process(
        writer.into_arc(),
        other.into_arc(),
    )
    .await;
}

/// Two server processes on one database: neither takes a claim of the other while it runs; a
/// claim of one that is gone is taken at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_alive_while_its_process_runs_and_abandoned_once_it_is_gone() {
    let url = support::fresh_database().await;
    let first = crm_store_postgres::PostgresStore::connect_with(&url, 2)
        .await
        .expect("connect");
    first.migrate().await.expect("migrate");
    let second = crm_store_postgres::PostgresStore::connect_with(&url, 2)
        .await
        .expect("connect again");
    crm_store_conformance::idempotency_cases::a_claim_is_alive_while_its_process_runs_and_abandoned_once_it_is_gone(
        first.into_arc(),
        second.into_arc(),
    )
    .await;
}
