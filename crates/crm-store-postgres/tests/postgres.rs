//! What the Postgres store must do beyond the shared suite, because SQLite's single writer gives
//! it for free there: concurrent write transactions must not trip over each other, and a
//! uniqueness failure must not abort the transaction it happened in.

mod support;

use std::{sync::Arc, time::Duration};

use crm_app::{auth::Workspace, Store, StoreError};
use crm_domain::{Email, Mode, Tenant, Timestamp};
use crm_store_conformance::{contact, tenant, workspace};
use crm_store_postgres::PostgresStore;
use sqlx::{Connection, PgConnection, Row};

/// Long enough for the other transactions to reach the same row while one holds it.
const OVERLAP: Duration = Duration::from_millis(50);

const WRITERS: i64 = 4;

async fn setup(store: &Arc<dyn Store>) -> (Workspace, Tenant) {
    let ws = workspace();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    let t = tenant(&ws, Mode::Test);
    (ws, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_to_a_taken_email_leaves_the_transaction_usable() {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let a = contact(Some("a@b.co"));
    let mut b = contact(Some("b@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a).await.unwrap();
    tx.insert_contact(&t, &b).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    b.email = Some(Email::parse("a@b.co").unwrap());
    b.version = 2;
    assert!(matches!(tx.update_contact(&t, &b).await, Err(StoreError::Duplicate)));
    // What the use case does next: read the holder of the email, and carry on writing.
    assert_eq!(tx.get_contact_by_email(&t, &Email::parse("a@b.co").unwrap()).await.unwrap(), Some(a));
    b.email = Some(Email::parse("c@b.co").unwrap());
    tx.update_contact(&t, &b).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &b.id).await.unwrap(), Some(b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_of_one_contact_queue_instead_of_going_stale() {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    tx.commit().await.unwrap();

    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (store, t, id) = (store.clone(), t.clone(), c.id.clone());
            tokio::spawn(async move {
                let mut tx = store.begin_write().await?;
                let mut c = tx.get_contact(&t, &id).await?.expect("contact");
                tokio::time::sleep(OVERLAP).await;
                c.first_name = Some(format!("writer {i}"));
                c.version += 1;
                tx.update_contact(&t, &c).await?;
                tx.commit().await
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap().expect("every writer succeeds");
    }
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap().unwrap().version, 1 + WRITERS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_to_an_enum_group_get_distinct_positions() {
    let url = support::fresh_database().await;
    let store = PostgresStore::connect_with(&url, WRITERS as u32).await.unwrap();
    store.migrate().await.unwrap();
    let store = store.into_arc();
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(0);
    // The group exists and is committed, so creating it again makes no one wait.
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_enum_group(&t, "deal.source", now).await.unwrap();
    tx.commit().await.unwrap();

    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (store, t) = (store.clone(), t.clone());
            tokio::spawn(async move {
                let mut tx = store.begin_write().await?;
                tx.insert_enum_value(&t, "deal.source", &format!("v{i}"), None, now).await?;
                tokio::time::sleep(OVERLAP).await;
                tx.commit().await
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap().expect("every writer succeeds");
    }
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let row = sqlx::query("SELECT COUNT(*) AS all_values, COUNT(DISTINCT position) AS positions FROM enum_values")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(row.get::<i64, _>("all_values"), WRITERS);
    assert_eq!(row.get::<i64, _>("positions"), WRITERS);
}
