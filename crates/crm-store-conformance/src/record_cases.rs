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

/// `companies_by_ids` (the companies of a page's `expand=company`): one read for many ids, within
/// the tenant (the other mode's company is not found), soft-deleted companies included.
pub async fn companies_by_ids_reads_the_tenants_companies_soft_deleted_too(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, crm_domain::Mode::Live);
    let acme = company("Acme", None);
    let mut gone = company("Gone", None);
    gone.deleted_at = Some(Timestamp::from_millis(1));
    let elsewhere = company("Live Co", None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&t, &acme).await.unwrap();
    tx.insert_company(&t, &gone).await.unwrap();
    tx.insert_company(&live, &elsewhere).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let mut found = tx
        .companies_by_ids(
            &t,
            &[acme.id.clone(), gone.id.clone(), elsewhere.id.clone()],
        )
        .await
        .unwrap();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(found, vec![acme, gone]);
    assert!(tx.companies_by_ids(&t, &[]).await.unwrap().is_empty());
    assert_eq!(
        tx.companies_by_ids(&live, std::slice::from_ref(&elsewhere.id))
            .await
            .unwrap(),
        vec![elsewhere]
    );
}
