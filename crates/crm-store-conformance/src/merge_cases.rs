//! Conformance cases of the merge port: the records pointing at merged ones are found and
//! pointed at the survivor (built-in columns and reference custom fields, in their tenant only),
//! tombstones are written once, never listed, and release their email.

use std::sync::Arc;

use crm_app::{
    ports::{ContactFilter, RefField, Referrer},
    Store,
};
use crm_domain::{Mode, ObjectKind, Timestamp};
use serde_json::json;

use crate::fixtures::*;

pub async fn merges_repoint_references_and_tombstones_free_their_email(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let a = contact(Some("a@merge.test"));
    let b = contact(Some("b@merge.test"));
    let sales = pipeline("sales", &["new"]);
    let mut d = deal("Engine", &sales, "new");
    d.primary_contact_id = Some(b.id.clone());
    d.custom_fields = json!({"ref": b.id.as_str(), "note": "keep"})
        .as_object()
        .unwrap()
        .clone();
    let mut act = activity(1_700_000_000_000);
    act.contact_id = Some(b.id.clone());
    // The same id in another tenant is not this tenant's reference.
    let mut elsewhere = deal("Elsewhere", &sales, "new");
    elsewhere.primary_contact_id = Some(b.id.clone());
    let mut tx = store.begin_write().await.unwrap();
    for c in [&a, &b] {
        tx.insert_contact(&t, c, &[]).await.unwrap();
    }
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_pipeline(&live, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    tx.insert_deal(&live, &elsewhere).await.unwrap();
    tx.insert_activity(&t, &act).await.unwrap();
    tx.commit().await.unwrap();

    let now = Timestamp::from_millis(1_700_000_100_000);
    let targets = [b.id.as_str()];
    let mut tx = store.begin_write().await.unwrap();
    let held = vec![Referrer {
        id: d.id.as_str().to_owned(),
        target: b.id.as_str().to_owned(),
    }];
    for field in [
        RefField::DealPrimaryContact,
        RefField::Custom(ObjectKind::Deal, "ref"),
    ] {
        assert_eq!(tx.referrers(&t, field, &targets).await.unwrap(), held);
        assert_eq!(
            tx.repoint(&t, field, &[d.id.as_str()], a.id.as_str(), now)
                .await
                .unwrap(),
            1
        );
    }
    assert!(tx
        .referrers(&t, RefField::DealCompany, &targets)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        tx.referrers(&t, RefField::ActivityContact, &targets)
            .await
            .unwrap()
            .len(),
        1
    );
    tx.repoint(
        &t,
        RefField::ActivityContact,
        &[act.id.as_str()],
        a.id.as_str(),
        now,
    )
    .await
    .unwrap();
    let ids = [b.id.as_str()];
    assert_eq!(
        tx.tombstone(&t, ObjectKind::Contact, &ids, a.id.as_str(), now)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        tx.tombstone(&t, ObjectKind::Contact, &ids, a.id.as_str(), now)
            .await
            .unwrap(),
        0,
        "a tombstone is written once"
    );
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    let moved = tx.get_deal(&t, &d.id).await.unwrap().unwrap();
    assert_eq!(moved.primary_contact_id.as_ref(), Some(&a.id));
    assert_eq!(
        serde_json::Value::Object(moved.custom_fields),
        json!({"ref": a.id.as_str(), "note": "keep"})
    );
    assert_eq!((moved.version, moved.updated_at), (3, now));
    let act = tx.get_activity(&t, &act.id).await.unwrap().unwrap();
    assert_eq!((act.contact_id.as_ref(), act.version), (Some(&a.id), 2));
    let other = tx.get_deal(&live, &elsewhere.id).await.unwrap().unwrap();
    assert_eq!(other.primary_contact_id.as_ref(), Some(&b.id));

    let tomb = tx.get_contact(&t, &b.id).await.unwrap().unwrap();
    assert_eq!(tomb.merged_into.as_ref(), Some(&a.id));
    assert_eq!((tomb.deleted_at, tomb.version), (Some(now), 2));
    assert_eq!(tomb.email, b.email, "a tombstone keeps showing its email");
    let email = b.email.clone().unwrap();
    assert_eq!(tx.get_contact_by_email(&t, &email).await.unwrap(), None);
    let listed: Vec<_> = tx
        .list_contacts(
            &t,
            &ContactFilter {
                include_deleted: true,
                ..Default::default()
            },
            &all(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(listed, vec![a.id.clone()], "tombstones are never listed");
    // The email is free again.
    let again = contact(Some("b@merge.test"));
    tx.insert_contact(&t, &again, &[]).await.unwrap();
    assert_eq!(
        tx.get_contact_by_email(&t, &email)
            .await
            .unwrap()
            .map(|c| c.id),
        Some(again.id)
    );
    tx.commit().await.unwrap();
}
