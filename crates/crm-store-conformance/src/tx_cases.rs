//! Conformance cases of the unit of work itself: rollback when dropped, savepoints.

use std::sync::Arc;

use crm_app::Store;
use crm_domain::{EventType, Mode};

use crate::fixtures::*;

pub async fn a_dropped_write_transaction_rolls_back(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    {
        let mut tx = store.begin_write().await.unwrap();
        tx.insert_contact(&t, &c, &[]).await.unwrap();
        tx.insert_event(&t, &sample_event(EventType::ContactCreated, Mode::Test))
            .await
            .unwrap();
    }
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.get_contact(&t, &c.id).await.unwrap().is_none());
    assert!(tx.list_events(&t, None, &all()).await.unwrap().is_empty());
    drop(tx);
    // The writer is free again.
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn savepoints_undo_part_of_a_transaction(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let kept = contact(Some("kept@example.com"));
    let undone = contact(Some("undone@example.com"));
    let mut tx = store.begin_write().await.unwrap();
    tx.savepoint("op").await.unwrap();
    tx.insert_contact(&t, &kept, &[]).await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    tx.savepoint("op").await.unwrap();
    tx.insert_contact(&t, &undone, &[]).await.unwrap();
    tx.rollback_to_savepoint("op").await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.get_contact(&t, &kept.id).await.unwrap().is_some());
    assert!(tx.get_contact(&t, &undone.id).await.unwrap().is_none());
}
