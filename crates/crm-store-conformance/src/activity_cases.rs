//! Conformance cases of the activity port.

use std::sync::Arc;

use crm_app::{
    ports::{ActivityFilter, Slice},
    Store, StoreError,
};
use crm_domain::ObjectKind;

use crate::fixtures::*;

pub async fn activities_list_newest_first_by_occurrence(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let contact_id = crm_domain::ContactId::from_uuid(uuid());
    let mut old = activity(1_000);
    old.contact_id = Some(contact_id.clone());
    let mut recent = activity(3_000);
    recent.activity_type = "call".into();
    let mut same_time = activity(3_000);
    same_time.contact_id = Some(contact_id.clone());
    let mut tx = store.begin_write().await.unwrap();
    for a in [&old, &recent, &same_time] {
        tx.insert_activity(&t, a).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let ids = |v: Vec<crm_domain::Activity>| v.into_iter().map(|a| a.id).collect::<Vec<_>>();
    let every = tx
        .list_activities(&t, &ActivityFilter::default(), &all())
        .await
        .unwrap();
    assert_eq!(
        ids(every),
        vec![same_time.id.clone(), recent.id.clone(), old.id.clone()]
    );
    let page2 = Slice {
        before: Some(format!("3000:{}", same_time.id)),
        limit: 10,
    };
    assert_eq!(
        ids(tx
            .list_activities(&t, &ActivityFilter::default(), &page2)
            .await
            .unwrap()),
        vec![recent.id.clone(), old.id.clone()]
    );
    let by_contact = ActivityFilter {
        contact_id: Some(contact_id),
        ..Default::default()
    };
    assert_eq!(
        ids(tx.list_activities(&t, &by_contact, &all()).await.unwrap()),
        vec![same_time.id.clone(), old.id.clone()]
    );
    let calls = ActivityFilter {
        activity_type: Some("call".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(tx.list_activities(&t, &calls, &all()).await.unwrap()),
        vec![recent.id.clone()]
    );
    assert_eq!(
        tx.get_activity(&t, &old.id).await.unwrap(),
        Some(old.clone())
    );
    drop(tx);
    let mut tx = store.begin_write().await.unwrap();
    let mut changed = old.clone();
    changed.body = Some("edited".into());
    changed.version = 2;
    tx.update_activity(&t, &changed).await.unwrap();
    assert!(matches!(
        tx.update_activity(&t, &changed).await,
        Err(StoreError::Stale)
    ));
    tx.delete_activity(&t, &recent.id).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_activity(&t, &old.id).await.unwrap(), Some(changed));
    assert!(tx.get_activity(&t, &recent.id).await.unwrap().is_none());
    assert!(!tx
        .record_exists(&t, ObjectKind::Activity, recent.id.as_str())
        .await
        .unwrap());
}
