//! Conformance cases of the company port.

use std::sync::Arc;

use crm_app::{ports::CompanyFilter, Store, StoreError};
use serde_json::json;

use crate::fixtures::*;

pub async fn company_round_trip_update_and_filters(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut acme = company("Acme Rockets", Some("acme.io"));
    acme.custom_fields = json!({"size": 10}).as_object().unwrap().clone();
    let other = company("Initech", Some("initech.com"));
    let twin = company("Acme Twin", Some("acme.io"));
    let mut tx = store.begin_write().await.unwrap();
    for c in [&acme, &other, &twin] {
        tx.insert_company(&t, c).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    acme.name = "Acme Rocket Co".into();
    acme.version = 2;
    tx.update_company(&t, &acme).await.unwrap();
    assert!(matches!(
        tx.update_company(&t, &acme).await,
        Err(StoreError::Stale)
    ));
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_company(&t, &acme.id).await.unwrap(),
        Some(acme.clone())
    );
    let by_domain = CompanyFilter {
        domain: Some("ACME.io".into()),
        ..Default::default()
    };
    let got: Vec<_> = tx
        .list_companies(&t, &by_domain, &all())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(got, vec![twin.id.clone(), acme.id.clone()]);
    let by_q = CompanyFilter {
        q: Some("rocket".into()),
        ..Default::default()
    };
    let got: Vec<_> = tx
        .list_companies(&t, &by_q, &all())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(got, vec![acme.id.clone()]);
}
