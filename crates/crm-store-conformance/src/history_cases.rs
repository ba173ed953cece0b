//! Conformance cases of the history port: entries round trip, are listed per record newest
//! first in slices, stay in their tenant, and ride with a write's events.

use std::sync::Arc;

use crm_app::{ports::Slice, Store};
use crm_domain::{
    history::{Actor, ActorType, Author, Channel, Via},
    EventType, Mode, ObjectKind,
};

use crate::fixtures::*;

pub async fn history_lists_a_records_entries_newest_first_in_its_tenant(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let first = sample_change(ObjectKind::Deal, "deal_a");
    let mut second = sample_change(ObjectKind::Deal, "deal_a");
    second.merged_ids = Some(vec!["deal_b".into()]);
    second.author = Author {
        actor: Actor {
            kind: ActorType::ApiKey,
            id: Some("key_1".into()),
            name: Some("ci".into()),
        },
        channel: Channel::Mcp,
        via: Via::Batch,
        request_id: Some("req_1".into()),
    };
    let other_record = sample_change(ObjectKind::Deal, "deal_b");
    let third = sample_change(ObjectKind::Deal, "deal_a");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_changes(&t, &[first.clone(), second.clone(), other_record.clone()])
        .await
        .unwrap();
    tx.insert_changes(&t, std::slice::from_ref(&third))
        .await
        .unwrap();
    tx.insert_changes(&live, &[sample_change(ObjectKind::Deal, "deal_a")])
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_changes(&t, "deal_a", &all()).await.unwrap(),
        vec![third.clone(), second.clone(), first.clone()]
    );
    let page = Slice {
        before: Some(third.id.to_string()),
        limit: 1,
    };
    assert_eq!(
        tx.list_changes(&t, "deal_a", &page).await.unwrap(),
        vec![second]
    );
    assert_eq!(
        tx.list_changes(&t, "deal_b", &all()).await.unwrap(),
        vec![other_record]
    );
    assert_eq!(
        tx.list_changes(&live, "deal_a", &all())
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn events_and_changes_are_written_together(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let events = [
        sample_event(EventType::ContactUpdated, Mode::Test),
        sample_event(EventType::ContactCreated, Mode::Test),
    ];
    let changes = [
        sample_change(ObjectKind::Contact, "con_x"),
        sample_change(ObjectKind::Contact, "con_x"),
    ];
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_events_and_changes(&t, &events, &changes)
        .await
        .unwrap();
    tx.insert_events_and_changes(&t, &[], &changes[..1])
        .await
        .unwrap_err();
    drop(tx);
    // Rolled back: nothing of either.
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.list_events(&t, None, &all()).await.unwrap(), vec![]);
    drop(tx);

    let mut tx = store.begin_write().await.unwrap();
    tx.insert_events_and_changes(&t, &events, &changes)
        .await
        .unwrap();
    tx.insert_events_and_changes(&t, &[], &[]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let mut listed = tx.list_events(&t, None, &all()).await.unwrap();
    listed.reverse();
    assert_eq!(listed, events.to_vec());
    let mut history = tx.list_changes(&t, "con_x", &all()).await.unwrap();
    history.reverse();
    assert_eq!(history, changes.to_vec());
}
