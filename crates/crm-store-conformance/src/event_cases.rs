//! Conformance cases of the event port (the outbox).

use std::sync::Arc;

use crm_app::Store;
use crm_domain::{Event, EventType, Mode, Timestamp};

use crate::fixtures::*;

pub async fn events_are_listed_newest_first_by_type(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let events: Vec<_> = [
        EventType::ContactCreated,
        EventType::ContactUpdated,
        EventType::ContactCreated,
    ]
    .into_iter()
    .map(|ty| sample_event(ty, Mode::Test))
    .collect();
    let mut tx = store.begin_write().await.unwrap();
    for e in &events {
        tx.insert_event(&t, e).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let every = tx.list_events(&t, None, &all()).await.unwrap();
    assert_eq!(every, events.iter().rev().cloned().collect::<Vec<_>>());
    let created = tx
        .list_events(&t, Some("contact.created"), &all())
        .await
        .unwrap();
    assert_eq!(created, vec![events[2].clone(), events[0].clone()]);
}

/// `insert_events` (grouped creates) writes what `insert_event` one by one would, and queues each
/// event for dispatch with its type and time.
pub async fn events_inserted_together_read_back_as_one_by_one(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    // Inserted newest first, so that the queue's order (oldest first) is not the insert's.
    let events: Vec<_> = [
        EventType::ContactCreated,
        EventType::ContactUpdated,
        EventType::DealCreated,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, ty)| Event {
        created_at: Timestamp::from_millis(1_700_000_000_010 - i as i64),
        ..sample_event(ty, Mode::Test)
    })
    .collect();
    let live = Event {
        created_at: Timestamp::from_millis(1_700_000_000_020),
        ..sample_event(EventType::ContactCreated, Mode::Live)
    };
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_events(&t, &events).await.unwrap();
    tx.insert_events(&t, &[]).await.unwrap();
    tx.insert_events(&tenant(&ws, Mode::Live), std::slice::from_ref(&live))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_events(&t, None, &all()).await.unwrap(),
        events.iter().rev().cloned().collect::<Vec<_>>()
    );
    assert_eq!(
        tx.list_events(&t, Some("contact.updated"), &all())
            .await
            .unwrap(),
        vec![events[1].clone()]
    );
    assert_eq!(
        tx.list_events(&tenant(&ws, Mode::Live), None, &all())
            .await
            .unwrap(),
        vec![live.clone()]
    );
    drop(tx);
    // Each is queued for dispatch once, with its type, oldest first.
    let mut tx = store.begin_write().await.unwrap();
    let queued: Vec<(&str, String, EventType)> = tx
        .take_events_to_dispatch(1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant.workspace_id == t.workspace_id)
        .map(|r| (r.tenant.mode.as_str(), r.event_id.to_string(), r.event_type))
        .collect();
    tx.commit().await.unwrap();
    let expected: Vec<(&str, String, EventType)> = events
        .iter()
        .rev()
        .map(|e| ("test", e.id.to_string(), e.event_type))
        .chain([("live", live.id.to_string(), live.event_type)])
        .collect();
    assert_eq!(queued, expected);

    // More than a store's chunk of rows per statement (SQLite: 1,000), all queued.
    let many: Vec<Event> = (0..1_201)
        .map(|_| sample_event(EventType::ContactCreated, Mode::Test))
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_events(&t, &many).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let queued: std::collections::HashSet<String> = tx
        .take_events_to_dispatch(5_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant.workspace_id == t.workspace_id)
        .map(|r| r.event_id.to_string())
        .collect();
    tx.commit().await.unwrap();
    // The first four were taken but not marked dispatched: taken again.
    let first_four = expected.iter().map(|(_, id, _)| id.clone());
    assert_eq!(
        queued,
        many.iter()
            .map(|e| e.id.to_string())
            .chain(first_four)
            .collect()
    );
}
