//! Conformance cases of the record port (whether a record of any kind exists).

use std::sync::Arc;

use crm_app::Store;
use crm_domain::{ObjectKind, Timestamp};

use crate::fixtures::*;

pub async fn record_exists_sees_soft_deleted_records(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(None);
    c.deleted_at = Some(Timestamp::from_millis(1));
    let co = company("Acme", None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .record_exists(&t, ObjectKind::Contact, c.id.as_str())
        .await
        .unwrap());
    assert!(tx
        .record_exists(&t, ObjectKind::Company, co.id.as_str())
        .await
        .unwrap());
    assert!(!tx
        .record_exists(&t, ObjectKind::Company, c.id.as_str())
        .await
        .unwrap());
}
