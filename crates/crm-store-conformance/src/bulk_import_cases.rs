//! Conformance cases of what a bulk import reads and writes a chunk with: the contacts holding
//! a chunk's emails in one read, the changed contacts written in one statement guarded by their
//! stored version, and the keys a dry run keeps for its later chunks.

use std::sync::Arc;

use crm_app::Store;
use crm_domain::{
    history::{Author, Via},
    import::{Import, ImportStatus, OnDuplicate, Target},
    Email, ImportId, Mode, ObjectKind, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn email(e: &str) -> Email {
    Email::parse(e).expect("valid email")
}

/// `contacts_by_emails`: soft-deleted holders are found, merged tombstones and other tenants'
/// contacts are not, and emails nobody holds are simply absent.
pub async fn contacts_are_found_by_their_emails_in_one_read(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let active = contact(Some("active@b.co"));
    let mut deleted = contact(Some("deleted@b.co"));
    deleted.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let merged = contact(Some("merged@b.co"));
    let elsewhere = contact(Some("elsewhere@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    for c in [&active, &deleted, &merged] {
        tx.insert_contact(&t, c, &[]).await.unwrap();
    }
    tx.insert_contact(&live, &elsewhere, &[]).await.unwrap();
    let now = Timestamp::from_millis(1_700_000_002_000);
    tx.tombstone(
        &t,
        ObjectKind::Contact,
        &[merged.id.as_str()],
        active.id.as_str(),
        now,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let asked = [
        "active@b.co",
        "deleted@b.co",
        "merged@b.co",
        "elsewhere@b.co",
        "none@b.co",
    ]
    .map(email);
    let mut found = tx.contacts_by_emails(&t, &asked).await.unwrap();
    found.sort_by(|a, b| a.email.cmp(&b.email));
    assert_eq!(found, vec![active.clone(), deleted.clone()]);
    assert!(tx.contacts_by_emails(&t, &[]).await.unwrap().is_empty());
    assert_eq!(
        tx.contacts_by_emails(&live, &asked).await.unwrap(),
        vec![elsewhere]
    );
}

/// `update_contacts`: each contact is written when its stored version is the one paired with
/// it, and left alone otherwise; only the ids written come back.
pub async fn contacts_updated_together_are_written_only_at_their_stored_version(
    store: Arc<dyn Store>,
) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let a = contact(Some("a@b.co"));
    let b = contact(Some("b@b.co"));
    let mut deleted = contact(Some("c@b.co"));
    deleted.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let mut tx = store.begin_write().await.unwrap();
    for c in [&a, &b, &deleted] {
        tx.insert_contact(&t, c, &[]).await.unwrap();
    }
    tx.commit().await.unwrap();

    let later = Timestamp::from_millis(1_700_000_009_000);
    let mut a2 = a.clone();
    a2.first_name = Some("Grace".into());
    a2.phone = Some("+1 555".into());
    a2.contact_type = Some("lead".into());
    a2.custom_fields = json!({"score": 3, "tags": ["x"]})
        .as_object()
        .unwrap()
        .clone();
    a2.updated_at = later;
    a2.version = 2;
    let mut b2 = b.clone();
    b2.last_name = None;
    b2.version = 3;
    // Restored and changed: two versions on.
    let mut restored = deleted.clone();
    restored.deleted_at = None;
    restored.first_name = Some("Back".into());
    restored.updated_at = later;
    restored.version = 3;
    let mut tx = store.begin_write().await.unwrap();
    let mut written = tx
        .update_contacts(&t, &[(&a2, 1), (&b2, 2), (&restored, 1)])
        .await
        .unwrap();
    written.sort();
    let mut expected = vec![a.id.clone(), deleted.id.clone()];
    expected.sort();
    assert_eq!(written, expected, "b is not at version 2");
    // Another tenant's contact is never written.
    assert!(tx
        .update_contacts(&live, &[(&b2, 1)])
        .await
        .unwrap()
        .is_empty());
    assert!(tx.update_contacts(&t, &[]).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &a.id).await.unwrap(), Some(a2));
    assert_eq!(tx.get_contact(&t, &b.id).await.unwrap(), Some(b));
    assert_eq!(
        tx.get_contact(&t, &deleted.id).await.unwrap(),
        Some(restored)
    );
}

/// A dry run's keys: recorded once, found among others, per import and tenant, and dropped
/// with the import's chunks.
pub async fn import_keys_are_kept_per_import_until_its_chunks_go(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let new_import = || {
        let mut author = Author::system();
        author.via = Via::Import;
        let mut i = Import::new(
            ImportId::from_uuid(uuid()),
            ObjectKind::Contact,
            OnDuplicate::Skip,
            true,
            vec![Target::Field("email")],
            author,
            Timestamp::from_millis(1_000),
        );
        i.status = ImportStatus::Running;
        i
    };
    let (one, two) = (new_import(), new_import());
    let keys = |k: &[&str]| k.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_import(&t, &one).await.unwrap();
    tx.insert_import(&t, &two).await.unwrap();
    tx.insert_import_keys(&t, &one.id, &keys(&["a@b.co", "c@b.co"]))
        .await
        .unwrap();
    tx.insert_import_keys(&t, &one.id, &keys(&["a@b.co", "d@b.co"]))
        .await
        .unwrap();
    tx.insert_import_keys(&t, &two.id, &keys(&["b@b.co"]))
        .await
        .unwrap();
    tx.insert_import_keys(&t, &two.id, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    let asked = keys(&["a@b.co", "b@b.co", "c@b.co", "d@b.co", "e@b.co"]);
    let mut found = tx.import_keys_among(&t, &one.id, &asked).await.unwrap();
    found.sort();
    assert_eq!(found, keys(&["a@b.co", "c@b.co", "d@b.co"]));
    assert_eq!(
        tx.import_keys_among(&t, &two.id, &asked).await.unwrap(),
        keys(&["b@b.co"])
    );
    assert!(tx
        .import_keys_among(&live, &one.id, &asked)
        .await
        .unwrap()
        .is_empty());
    // Dropping some chunks keeps the keys; dropping them all drops the keys too.
    tx.delete_import_chunks(&t, &one.id, Some(3)).await.unwrap();
    assert_eq!(
        tx.import_keys_among(&t, &one.id, &asked)
            .await
            .unwrap()
            .len(),
        3
    );
    tx.delete_import_chunks(&t, &one.id, None).await.unwrap();
    assert!(tx
        .import_keys_among(&t, &one.id, &asked)
        .await
        .unwrap()
        .is_empty());
    tx.delete_import(&t, &two.id).await.unwrap();
    assert!(tx
        .import_keys_among(&t, &two.id, &asked)
        .await
        .unwrap()
        .is_empty());
    tx.commit().await.unwrap();
}
