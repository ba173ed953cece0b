//! Conformance cases of the export port: exports round trip and stay in their tenant, chunks are
//! kept in order, claims hold a lease that only its token renews, and the purge drops expired
//! exports with their chunks and nothing else.

use std::sync::Arc;

use crm_app::Store;
use crm_domain::{
    export::{Export, ExportFormat, ExportStatus},
    history::Author,
    ExportId, Mode, ObjectKind, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn sample_export() -> Export {
    let mut author = Author::system();
    author.request_id = Some("req_1".into());
    Export::new(
        ExportId::from_uuid(uuid()),
        ObjectKind::Contact,
        ExportFormat::Csv,
        json!({"q": "ada", "custom_fields": [{"key": "tier", "value": "gold"}]}),
        vec!["id".into(), "email".into(), "custom_fields.tier".into()],
        author,
        Timestamp::from_millis(1_000),
    )
}

pub async fn exports_round_trip_with_their_chunks_and_stay_in_their_tenant(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let mut export = sample_export();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_export(&t, &export).await.unwrap();
    tx.insert_export_chunk(&t, &export.id, 0, b"id,email\n")
        .await
        .unwrap();
    tx.insert_export_chunk(&t, &export.id, 1, b"con_1,\"a,b\"\n")
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.get_export(&t, export.id.as_str()).await.unwrap(),
        Some(export.clone())
    );
    assert_eq!(
        tx.get_export(&live, export.id.as_str()).await.unwrap(),
        None
    );
    assert_eq!(
        tx.get_export_chunk(&t, &export.id, 1).await.unwrap(),
        Some(b"con_1,\"a,b\"\n".to_vec())
    );
    assert_eq!(
        tx.get_export_chunk(&live, &export.id, 1).await.unwrap(),
        None
    );
    assert_eq!(tx.get_export_chunk(&t, &export.id, 2).await.unwrap(), None);
    export.rows_done = 1;
    export.chunks_total = 2;
    export.resume_after = Some("con_1".into());
    export.finish(ExportStatus::Completed, Timestamp::from_millis(5_000));
    tx.update_export(&t, &export).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_export(&t, export.id.as_str()).await.unwrap(),
        Some(export)
    );
}

pub async fn exports_are_claimed_once_under_a_lease_only_its_token_renews(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let queued = sample_export();
    let other = sample_export();
    let mut finished = sample_export();
    finished.finish(ExportStatus::Completed, Timestamp::from_millis(2_000));
    let mut tx = store.begin_write().await.unwrap();
    for e in [&queued, &other, &finished] {
        tx.insert_export(&t, e).await.unwrap();
    }
    tx.commit().await.unwrap();
    let at = Timestamp::from_millis;
    let claim = |token: &'static str, now: i64| {
        let store = store.clone();
        async move {
            let mut tx = store.begin_write().await.unwrap();
            let got = tx
                .claim_export(at(now), at(now + 60_000), token)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            got
        }
    };
    let (tenant_a, a) = claim("a", 10_000).await.expect("a queued export");
    assert_eq!(tenant_a, t);
    assert_eq!(a.status, ExportStatus::Running);
    let (_, b) = claim("b", 10_000).await.expect("the other queued export");
    assert_ne!(a.id, b.id);
    assert!(claim("c", 20_000).await.is_none(), "both leases hold");

    let mut tx = store.begin_write().await.unwrap();
    assert!(tx
        .renew_export_claim(&t, &a.id, "a", at(90_000))
        .await
        .unwrap());
    assert!(!tx
        .renew_export_claim(&t, &a.id, "b", at(90_000))
        .await
        .unwrap());
    tx.commit().await.unwrap();
    // b's lease ended at 70,000: claimed again, and its old token no longer renews it.
    let (_, again) = claim("d", 80_000).await.expect("the expired claim");
    assert_eq!(again.id, b.id);
    let mut tx = store.begin_write().await.unwrap();
    assert!(!tx
        .renew_export_claim(&t, &b.id, "b", at(150_000))
        .await
        .unwrap());
    assert!(tx
        .renew_export_claim(&t, &b.id, "d", at(150_000))
        .await
        .unwrap());
    // A finished export is renewed by no one and claimed by no one.
    let mut done = again.clone();
    done.finish(ExportStatus::Completed, at(100_000));
    tx.update_export(&t, &done).await.unwrap();
    assert!(!tx
        .renew_export_claim(&t, &b.id, "d", at(160_000))
        .await
        .unwrap());
    tx.commit().await.unwrap();
    assert!(claim("e", 1_000_000)
        .await
        .is_some_and(|(_, e)| e.id == a.id));
    assert!(claim("f", 10_000_000)
        .await
        .is_some_and(|(_, e)| e.id == a.id));
}

pub async fn purging_drops_expired_exports_with_their_chunks(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut old = sample_export();
    old.finish(ExportStatus::Completed, Timestamp::from_millis(1_000));
    let mut fresh = sample_export();
    fresh.finish(ExportStatus::Completed, Timestamp::from_millis(500_000_000));
    let running = sample_export();
    let mut tx = store.begin_write().await.unwrap();
    for e in [&old, &fresh, &running] {
        tx.insert_export(&t, e).await.unwrap();
        tx.insert_export_chunk(&t, &e.id, 0, b"x\n").await.unwrap();
    }
    tx.commit().await.unwrap();
    // The old one expired a day after 1,000 ms; the fresh one not yet; the running one never.
    let now = Timestamp::from_millis(1_000 + crm_domain::export::KEPT_MS + 1);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.purge_exports(now).await.unwrap(), 1);
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_export(&t, old.id.as_str()).await.unwrap(), None);
    assert_eq!(tx.get_export_chunk(&t, &old.id, 0).await.unwrap(), None);
    for kept in [&fresh, &running] {
        assert!(tx.get_export(&t, kept.id.as_str()).await.unwrap().is_some());
        assert!(tx
            .get_export_chunk(&t, &kept.id, 0)
            .await
            .unwrap()
            .is_some());
    }
}
