//! Conformance cases of the deal port: filters, versions and stage moves.

use std::sync::Arc;

use crm_app::{ports::DealFilter, Store, StoreError};
use crm_domain::{CompanyId, ObjectKind, Timestamp};
use serde_json::json;

use crate::fixtures::*;

pub async fn deals_round_trip_and_filter(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let sales = pipeline("sales", &["new", "won"]);
    let hiring = pipeline("hiring", &["new"]);
    let mut big = deal("Big Rocket Order", &sales, "new");
    big.custom_fields = json!({"source": "web"}).as_object().unwrap().clone();
    big.company_id = Some(CompanyId::from_uuid(uuid()));
    big.primary_contact_id = Some(crm_domain::ContactId::from_uuid(uuid()));
    let won = deal("Small order", &sales, "won");
    let hire = deal("Hire a rocket engineer", &hiring, "new");
    let mut tx = store.begin_write().await.unwrap();
    for p in [&sales, &hiring] {
        tx.insert_pipeline(&t, p).await.unwrap();
    }
    for d in [&big, &won, &hire] {
        tx.insert_deal(&t, d).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_deal(&t, &big.id).await.unwrap(), Some(big.clone()));
    let ids = |v: Vec<crm_domain::Deal>| v.into_iter().map(|d| d.id).collect::<Vec<_>>();
    let f = |f: DealFilter| f;
    assert_eq!(
        ids(tx
            .list_deals(&t, &DealFilter::default(), &all())
            .await
            .unwrap()),
        vec![hire.id.clone(), won.id.clone(), big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    stage: Some("new".into()),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![hire.id.clone(), big.id.clone()],
        "stage keys repeat across pipelines"
    );
    let sales_new = DealFilter {
        pipeline_id: Some(sales.id.clone()),
        stage: Some("new".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(tx.list_deals(&t, &sales_new, &all()).await.unwrap()),
        vec![big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    q: Some("ROCKET".into()),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![hire.id.clone(), big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    company_id: big.company_id.clone(),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    primary_contact_id: big.primary_contact_id.clone(),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![big.id.clone()]
    );
    assert_eq!(tx.count_deals(&t, &sales.id, None).await.unwrap(), 2);
    assert_eq!(tx.count_deals(&t, &sales.id, Some("won")).await.unwrap(), 1);
    assert!(tx
        .record_exists(&t, ObjectKind::Deal, big.id.as_str())
        .await
        .unwrap());
}

pub async fn deal_updates_check_the_version_and_stage_moves_keep_types(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut sales = pipeline("sales", &["new", "won"]);
    let mut d = deal("Order", &sales, "new");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    d.title = "Order 2".into();
    d.version = 2;
    d.deleted_at = Some(Timestamp::from_millis(1_800_000_000_000));
    tx.update_deal(&t, &d).await.unwrap();
    assert!(matches!(
        tx.update_deal(&t, &d).await,
        Err(StoreError::Stale)
    ));
    assert_eq!(
        tx.move_deals(
            &t,
            &sales.id,
            "new",
            "won",
            crm_domain::StageType::Open,
            Timestamp::from_millis(1_800_000_000_001)
        )
        .await
        .unwrap(),
        1
    );
    sales
        .update_stage("won", None, Some("won".into()), None)
        .unwrap();
    tx.set_deals_stage_type(&t, &sales.id, "won", crm_domain::StageType::Won)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let got = tx.get_deal(&t, &d.id).await.unwrap().unwrap();
    assert_eq!(
        (got.stage.as_str(), got.stage_type, got.version),
        ("won", crm_domain::StageType::Won, 3)
    );
    assert!(
        tx.list_deals(&t, &DealFilter::default(), &all())
            .await
            .unwrap()
            .is_empty(),
        "soft-deleted"
    );
    assert_eq!(
        tx.list_deals(
            &t,
            &DealFilter {
                include_deleted: true,
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
}
