//! Conformance cases of the audit port (entries round trip, filter, page, stay in their tenant,
//! expire) and of the retention port (settings read back, old history entries dropped).

use std::sync::Arc;

use crm_app::{
    ports::{AuditFilter, Slice},
    Store,
};
use crm_domain::{
    audit::{AuditEntry, Target},
    history::{Actor, ActorType, Channel, FieldChange},
    AuditId, ChangeId, Mode, ObjectKind, Timestamp,
};
use serde_json::json;
use uuid::Uuid;

use crate::fixtures::*;

fn entry(action: &str, target: &str, actor: Option<&str>, at: i64) -> AuditEntry {
    AuditEntry {
        id: AuditId::from_uuid(uuid()),
        at: Timestamp::from_millis(at),
        actor: Actor {
            kind: if actor.is_some() {
                ActorType::ApiKey
            } else {
                ActorType::System
            },
            id: actor.map(str::to_owned),
            name: Some("ci ü".into()),
        },
        channel: Channel::Rest,
        request_id: Some("req_1".into()),
        action: action.to_owned(),
        target: Target {
            object: "webhook".into(),
            id: target.to_owned(),
        },
        changes: vec![FieldChange {
            field: "url".into(),
            from: json!(null),
            to: json!({"nested": ["é", 1]}),
        }],
    }
}

pub async fn audit_entries_round_trip_filter_page_and_stay_in_their_tenant(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let now = 1_800_000_000_000;
    let a = entry("webhook.created", "wh_1", Some("key_1"), now);
    let b = entry("webhook.updated", "wh_1", Some("key_2"), now + 1);
    let c = entry("key.created", "key_9", None, now + 2);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_audit(&t, &[a.clone(), b.clone()]).await.unwrap();
    tx.insert_audit(&t, std::slice::from_ref(&c)).await.unwrap();
    tx.insert_audit(&live, &[entry("key.created", "key_9", None, now)])
        .await
        .unwrap();
    tx.insert_audit(&t, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let none = AuditFilter::default();
    assert_eq!(
        tx.list_audit(&t, &none, &all()).await.unwrap(),
        vec![c.clone(), b.clone(), a.clone()]
    );
    let page = Slice {
        before: Some(c.id.to_string()),
        limit: 1,
    };
    assert_eq!(
        tx.list_audit(&t, &none, &page).await.unwrap(),
        vec![b.clone()]
    );
    let by = |action: Option<&str>, target: Option<&str>, actor: Option<&str>| AuditFilter {
        action: action.map(str::to_owned),
        target_id: target.map(str::to_owned),
        actor_id: actor.map(str::to_owned),
    };
    assert_eq!(
        tx.list_audit(&t, &by(Some("key.created"), None, None), &all())
            .await
            .unwrap(),
        vec![c.clone()]
    );
    assert_eq!(
        tx.list_audit(&t, &by(None, Some("wh_1"), None), &all())
            .await
            .unwrap(),
        vec![b.clone(), a.clone()]
    );
    assert_eq!(
        tx.list_audit(&t, &by(None, Some("wh_1"), Some("key_1")), &all())
            .await
            .unwrap(),
        vec![a.clone()]
    );
    assert_eq!(tx.list_audit(&live, &none, &all()).await.unwrap().len(), 1);
    drop(tx);

    // Retention: entries before the cut go, in every tenant; the others stay.
    let mut tx = store.begin_write().await.unwrap();
    let gone = tx
        .delete_audit_before(Timestamp::from_millis(now + 1))
        .await
        .unwrap();
    assert_eq!(gone, 2, "`a` and the live entry");
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.list_audit(&t, &none, &all()).await.unwrap(), vec![c, b]);
    assert!(tx
        .list_audit(&live, &none, &all())
        .await
        .unwrap()
        .is_empty());
}

/// A history entry whose id was made at `ms`.
fn change_at(record: &str, ms: u64) -> crm_domain::history::Change {
    let mut c = sample_change(ObjectKind::Contact, record);
    let random = Uuid::now_v7().as_u128() & ((1u128 << 80) - 1);
    c.id = ChangeId::from_uuid(Uuid::from_u128((u128::from(ms) << 80) | random));
    c
}

pub async fn retention_settings_round_trip_and_old_history_goes(store: Arc<dyn Store>) {
    let (mut ws, t) = setup(&store).await;
    let (other, other_t) = setup(&store).await;
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.retention_settings().await.unwrap().is_empty());
    drop(tx);

    ws.history_retention_days = Some(30);
    ws.email_retention_days = Some(400);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.update_workspace(&ws).await.unwrap());
    let cut = 1_800_000_000_000u64;
    let old = change_at("con_a", cut - 1);
    let new = change_at("con_a", cut);
    let other_old = change_at("con_b", cut - 1);
    tx.insert_changes(&t, &[old, new.clone()]).await.unwrap();
    tx.insert_changes(&other_t, std::slice::from_ref(&other_old))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.get_workspace(&ws.id).await.unwrap().unwrap(),
        ws,
        "the retention settings read back"
    );
    let settings = tx.retention_settings().await.unwrap();
    assert_eq!(settings.len(), 1);
    assert_eq!(settings[0].workspace_id, ws.id);
    assert_eq!(
        (settings[0].history_days, settings[0].email_days),
        (Some(30), Some(400))
    );
    let gone = tx
        .delete_changes_before(&ws.id, Timestamp::from_millis(cut as i64))
        .await
        .unwrap();
    assert_eq!(gone, 1);
    assert_eq!(
        tx.delete_emails_before(&ws.id, Timestamp::from_millis(cut as i64))
            .await
            .unwrap(),
        0
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_changes(&t, "con_a", &all()).await.unwrap(),
        vec![new]
    );
    assert_eq!(
        tx.list_changes(&other_t, "con_b", &all()).await.unwrap(),
        vec![other_old],
        "another workspace's entries stay"
    );
    let _ = other;
}

pub async fn erasing_a_contact_removes_it_and_scrubs_what_holds_it(store: Arc<dyn Store>) {
    use crm_domain::{EventType, Timestamp};
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let c = contact(Some("erase.me@example.com"));
    let id = c.id.as_str().to_owned();
    let sales = pipeline("sales", &["new"]);
    let mut d = deal("Renewal", &sales, "new");
    d.primary_contact_id = Some(c.id.clone());
    let mut event = sample_event(EventType::ContactCreated, Mode::Test);
    event.data = json!({"id": id, "object": "contact", "email": "erase.me@example.com"});
    let mut change = sample_change(ObjectKind::Contact, &id);
    change.changes[0].to = json!("erase.me@example.com");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    tx.insert_events_and_changes(
        &t,
        std::slice::from_ref(&event),
        std::slice::from_ref(&change),
    )
    .await
    .unwrap();
    // The same id in the other mode is another record's business: untouched.
    tx.insert_changes(&live, &[sample_change(ObjectKind::Contact, &id)])
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let now = Timestamp::from_millis(1_900_000_000_000);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.erase_record(&t, ObjectKind::Contact, "con_nobody", now)
            .await
            .unwrap(),
        None
    );
    // Rolled back, an erasure leaves everything as it was.
    let dry = tx
        .erase_record(&t, ObjectKind::Contact, &id, now)
        .await
        .unwrap()
        .unwrap();
    drop(tx);
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.get_contact(&t, &c.id).await.unwrap().is_some());
    assert_eq!(
        tx.list_changes(&t, &id, &all()).await.unwrap(),
        vec![change.clone()]
    );
    drop(tx);

    let mut tx = store.begin_write().await.unwrap();
    let erased = tx
        .erase_record(&t, ObjectKind::Contact, &id, now)
        .await
        .unwrap()
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(erased, dry);
    assert_eq!((erased.history_entries, erased.events_scrubbed), (1, 1));
    assert_eq!(erased.references.len(), 1);
    assert_eq!(erased.references[0].id, d.id.as_str());
    assert_eq!(erased.references[0].field, "primary_contact_id");
    assert_eq!(erased.references[0].version, d.version + 1);

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap(), None);
    let history = tx.list_changes(&t, &id, &all()).await.unwrap();
    assert_eq!(history.len(), 1);
    assert!(history[0].erased);
    assert!(history[0]
        .changes
        .iter()
        .all(|f| f.from.is_null() && f.to.is_null()));
    assert_eq!(history[0].changes[0].field, change.changes[0].field);
    let events = tx.list_events(&t, None, &all()).await.unwrap();
    assert_eq!(
        events[0].data,
        json!({"id": id, "object": "contact", "erased": true})
    );
    let deal_now = tx.get_deal(&t, &d.id).await.unwrap().unwrap();
    assert_eq!(deal_now.primary_contact_id, None);
    assert_eq!(deal_now.version, d.version + 1);
    assert!(!tx.list_changes(&live, &id, &all()).await.unwrap()[0].erased);
}
