//! Conformance cases of the plan port: workspace settings, usage counts and leases.

use std::sync::Arc;

use crm_app::{
    ports::{PlanCounts, UsageLock},
    Store,
};
use crm_domain::{Mode, Plan, Timestamp};

use crate::fixtures::*;

pub async fn workspace_plan_and_settings_update(store: Arc<dyn Store>) {
    let (mut ws, _) = setup(&store).await;
    ws.plan = Plan::Scale;
    ws.overage_cap_usd = None;
    ws.rate_limit_override = None;
    ws.included_requests_override = Some(5);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.update_workspace(&ws).await.unwrap());
    let mut ghost = workspace();
    ghost.name = "ghost".into();
    assert!(!tx.update_workspace(&ghost).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_workspace(&ws.id).await.unwrap(), Some(ws));
}

pub async fn usage_counts_add_up_per_tenant_and_period(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let (p1, p2) = (Timestamp::from_millis(1_000), Timestamp::from_millis(2_000));
    let far = Timestamp::from_millis(i64::MAX / 2);
    let mut tx = store.begin_write().await.unwrap();
    tx.record_usage(&t, p1, 3, "h", 0, far).await.unwrap();
    tx.record_usage(&t, p1, 4, "h", 0, far).await.unwrap();
    tx.record_usage(&live, p1, 1, "h", 0, far).await.unwrap();
    tx.record_usage(&t, p2, 9, "h", 0, far).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_usage(&t, p1).await.unwrap(), 7);
    assert_eq!(tx.get_usage(&live, p1).await.unwrap(), 1);
    assert_eq!(tx.get_usage(&t, p2).await.unwrap(), 9);
    assert_eq!(
        tx.get_usage(&tenant(&workspace(), Mode::Test), p1)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        tx.count_plan_objects(&t).await.unwrap(),
        PlanCounts::default()
    );
}

pub async fn leases_reserve_until_they_expire(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let p = Timestamp::from_millis(1_000);
    let now = Timestamp::from_millis(10_000);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.lock_usage(&t, p, "a", now).await.unwrap(),
        UsageLock::default(),
        "created at 0"
    );
    tx.record_usage(&t, p, 0, "a", 10, Timestamp::from_millis(20_000))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    tx.lock_usage(&t, p, "b", now).await.unwrap();
    tx.record_usage(&t, p, 2, "b", 5, Timestamp::from_millis(15_000))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    let seen_by_a = tx.lock_usage(&t, p, "a", now).await.unwrap();
    assert_eq!(
        seen_by_a,
        UsageLock {
            used: 2,
            others_reserved: 5,
            own_reserved: 10
        }
    );
    // a moves 4 of its reservation to used and keeps 6.
    tx.record_usage(&t, p, 4, "a", 6, Timestamp::from_millis(20_000))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // Once b's lease has expired, its reservation is free again (and its row is gone).
    let later = Timestamp::from_millis(16_000);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.lock_usage(&t, p, "a", later).await.unwrap(),
        UsageLock {
            used: 6,
            others_reserved: 0,
            own_reserved: 6
        }
    );
    tx.record_usage(&t, p, 0, "a", 0, later).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.lock_usage(&t, p, "b", later).await.unwrap(),
        UsageLock {
            used: 6,
            others_reserved: 0,
            own_reserved: 0
        },
        "a's reservation dropped b's expired lease"
    );
}
