//! Conformance cases of the workspace port (workspaces, their keys) and of tenancy: no
//! statement crosses from one tenant to another.

use std::sync::Arc;

use crm_app::{
    ports::{CompanyFilter, ContactFilter},
    Store,
};
use crm_domain::{EventType, Mode, ObjectKind, Timestamp};

use crate::fixtures::*;

pub async fn workspace_and_keys_round_trip(store: Arc<dyn Store>) {
    let mut tx = store.begin_read().await.unwrap();
    assert!(!tx.has_workspaces().await.unwrap());
    drop(tx);
    let (ws, t) = setup(&store).await;
    let key = api_key(&ws, Mode::Test, "abc123");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_api_key(&key).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.has_workspaces().await.unwrap());
    assert_eq!(tx.get_workspace(&ws.id).await.unwrap(), Some(ws.clone()));
    let (found, found_ws) = tx
        .find_api_key("abc123")
        .await
        .unwrap()
        .expect("key by hash");
    assert_eq!(found, key);
    assert_eq!(found_ws, ws);
    assert!(tx.find_api_key("other").await.unwrap().is_none());
    assert_eq!(
        tx.get_api_key(&t, &key.id).await.unwrap(),
        Some(key.clone())
    );
    assert!(tx
        .get_api_key(&tenant(&ws, Mode::Live), &key.id)
        .await
        .unwrap()
        .is_none());
}

pub async fn tenants_never_see_each_other(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    let co = company("Acme", None);
    let event = sample_event(EventType::ContactCreated, Mode::Test);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_event(&t, &event).await.unwrap();
    tx.insert_enum_value(&t, "contact.type", "vip", None, Timestamp::from_millis(0))
        .await
        .unwrap();
    tx.insert_idempotency(&t, &idem("k1")).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for other in [
        tenant(&ws, Mode::Live),
        tenant(&ws2, Mode::Test),
        tenant(&ws2, Mode::Live),
    ] {
        assert!(tx.get_contact(&other, &c.id).await.unwrap().is_none());
        assert!(tx
            .get_contact_by_email(&other, c.email.as_ref().unwrap())
            .await
            .unwrap()
            .is_none());
        assert!(tx.get_company(&other, &co.id).await.unwrap().is_none());
        let everything = ContactFilter {
            include_deleted: true,
            ..Default::default()
        };
        assert!(tx
            .list_contacts(&other, &everything, &all())
            .await
            .unwrap()
            .is_empty());
        assert!(tx
            .list_companies(
                &other,
                &CompanyFilter {
                    include_deleted: true,
                    ..Default::default()
                },
                &all()
            )
            .await
            .unwrap()
            .is_empty());
        assert!(!tx
            .record_exists(&other, ObjectKind::Contact, c.id.as_str())
            .await
            .unwrap());
        assert!(!tx
            .record_exists(&other, ObjectKind::Company, co.id.as_str())
            .await
            .unwrap());
        assert!(tx
            .list_events(&other, None, &all())
            .await
            .unwrap()
            .is_empty());
        assert!(tx
            .load_registry(&other, ObjectKind::Contact)
            .await
            .unwrap()
            .enums
            .is_empty());
        assert!(tx.get_idempotency(&other, "k1").await.unwrap().is_none());
    }
}
