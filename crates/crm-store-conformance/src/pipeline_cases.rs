//! Conformance cases of the pipeline port: keys, versions and the default pipeline.

use std::sync::Arc;

use crm_app::{Store, StoreError};
use crm_domain::{Mode, Timestamp};

use crate::fixtures::*;

pub async fn pipelines_round_trip_by_id_and_key_with_unique_keys(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let mut sales = pipeline("sales", &["new", "won"]);
    sales.is_default = true;
    let other = pipeline("hiring", &["applied"]);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_pipeline(&t, &other).await.unwrap();
    assert!(matches!(
        tx.insert_pipeline(&t, &pipeline("sales", &["x"])).await,
        Err(StoreError::Duplicate)
    ));
    // The transaction survives the duplicate, and the same key is free in the other mode.
    tx.insert_pipeline(&tenant(&ws, Mode::Live), &pipeline("sales", &["x"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_pipeline(&t, &sales.id, crm_app::ports::RowLock::Update)
            .await
            .unwrap(),
        Some(sales.clone())
    );
    assert_eq!(
        tx.get_pipeline_by_key(&t, "hiring", crm_app::ports::RowLock::Update)
            .await
            .unwrap(),
        Some(other.clone())
    );
    assert_eq!(tx.default_pipeline(&t).await.unwrap(), Some(sales.clone()));
    assert_eq!(
        tx.list_pipelines(&t).await.unwrap(),
        vec![sales, other],
        "oldest first"
    );
}

pub async fn pipeline_updates_check_the_version_and_default_moves(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut a = pipeline("a", &["one"]);
    a.is_default = true;
    let mut b = pipeline("b", &["one"]);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &a).await.unwrap();
    tx.insert_pipeline(&t, &b).await.unwrap();
    b.set_default(true);
    b.add_stage(
        crm_domain::StageDraft {
            key: "two".into(),
            ..Default::default()
        },
        None,
        crm_domain::StageId::from_uuid(uuid()),
    )
    .unwrap();
    b.touch(Timestamp::from_millis(1_800_000_000_000));
    tx.update_pipeline(&t, &b).await.unwrap();
    assert!(matches!(
        tx.update_pipeline(&t, &b).await,
        Err(StoreError::Stale)
    ));
    tx.clear_default_pipeline(&t, &b.id, Timestamp::from_millis(1_800_000_000_001))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.default_pipeline(&t).await.unwrap().map(|p| p.id),
        Some(b.id.clone())
    );
    let a_now = tx
        .get_pipeline(&t, &a.id, crm_app::ports::RowLock::Update)
        .await
        .unwrap()
        .unwrap();
    assert!(!a_now.is_default);
    assert_eq!(a_now.version, 2);
    assert_eq!(
        tx.get_pipeline(&t, &b.id, crm_app::ports::RowLock::Update)
            .await
            .unwrap()
            .unwrap()
            .stage_keys(),
        ["one", "two"]
    );
    drop(tx);
    let mut tx = store.begin_write().await.unwrap();
    tx.delete_pipeline(&t, &a.id).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .get_pipeline(&t, &a.id, crm_app::ports::RowLock::Update)
        .await
        .unwrap()
        .is_none());
}
