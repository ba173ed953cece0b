//! Conformance cases of the import port: imports round trip and stay in their tenant (receiving
//! ones unlisted), idempotency keys are unique, chunks and errors are kept and dropped as asked,
//! and claims hold a lease that only its token renews, never shared between claimers.

use std::sync::Arc;

use crm_app::{
    ports::{ImportChunk, ImportError, Slice},
    Store, StoreError,
};
use crm_domain::{
    history::{Author, Via},
    import::{Import, ImportStatus, OnDuplicate, Target},
    ImportId, Mode, ObjectKind, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn sample_import(status: ImportStatus) -> Import {
    let mut author = Author::system();
    author.via = Via::Import;
    author.request_id = Some("req_1".into());
    let mut i = Import::new(
        ImportId::from_uuid(uuid()),
        ObjectKind::Contact,
        OnDuplicate::Skip,
        false,
        vec![Target::Field("email"), Target::Custom("score".into())],
        author,
        Timestamp::from_millis(1_000),
    );
    i.status = status;
    i
}

fn chunk(seq: i64, first_row: i64) -> ImportChunk {
    ImportChunk {
        seq,
        first_row,
        row_count: 2,
        data: format!("a{seq}@x.io,1\r\n\"b,{seq}\"@x.io,2\n").into_bytes(),
    }
}

pub async fn imports_round_trip_and_stay_in_their_tenant(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let receiving = sample_import(ImportStatus::Receiving);
    let mut queued = sample_import(ImportStatus::Queued);
    queued.idempotency_key = Some("k1".into());
    queued.fingerprint = Some("f1".into());
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_import(&t, &receiving).await.unwrap();
    tx.insert_import(&t, &queued).await.unwrap();
    let mut again = sample_import(ImportStatus::Queued);
    again.idempotency_key = Some("k1".into());
    assert!(matches!(
        tx.insert_import(&t, &again).await,
        Err(StoreError::Duplicate)
    ));
    // The key is per tenant.
    tx.insert_import(&live, &again).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.get_import(&t, queued.id.as_str()).await.unwrap(),
        Some(queued.clone())
    );
    assert_eq!(
        tx.get_import(&live, queued.id.as_str()).await.unwrap(),
        None
    );
    assert_eq!(
        tx.get_import_by_key(&t, "k1").await.unwrap(),
        Some(queued.clone())
    );
    // Receiving imports are not listed.
    assert_eq!(
        tx.list_imports(&t, &all()).await.unwrap(),
        vec![queued.clone()]
    );
    let mut done = queued.clone();
    done.status = ImportStatus::Failed;
    done.counts.rows_total = 10;
    done.counts.rows_done = 10;
    done.counts.created = 7;
    done.counts.updated = 1;
    done.counts.skipped = 1;
    done.counts.failed = 1;
    done.chunks_total = 3;
    done.chunks_done = 3;
    done.error = Some(json!({"code": "validation_failed"}));
    done.malformed = Some((12, "not UTF-8".into()));
    done.finished_at = Some(Timestamp::from_millis(9_000));
    tx.update_import(&t, &done).await.unwrap();
    let mut taken = receiving.clone();
    taken.idempotency_key = Some("k1".into());
    assert!(matches!(
        tx.update_import(&t, &taken).await,
        Err(StoreError::Duplicate)
    ));
    assert_eq!(
        tx.get_import(&t, done.id.as_str()).await.unwrap(),
        Some(done.clone())
    );
    let page = Slice {
        before: Some(done.id.to_string()),
        limit: 10,
    };
    assert_eq!(tx.list_imports(&t, &page).await.unwrap(), vec![]);
    tx.delete_import(&t, &receiving.id).await.unwrap();
    assert_eq!(
        tx.get_import(&t, receiving.id.as_str()).await.unwrap(),
        None
    );
    tx.commit().await.unwrap();
}

pub async fn import_chunks_and_errors_are_kept_until_dropped(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let import = sample_import(ImportStatus::Queued);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_import(&t, &import).await.unwrap();
    for seq in 0..3 {
        tx.insert_import_chunk(&t, &import.id, &chunk(seq, 2 + 2 * seq))
            .await
            .unwrap();
    }
    let errors: Vec<ImportError> = [9, 3, 5]
        .into_iter()
        .map(|row| ImportError {
            row,
            problem: json!({"code": "validation_failed", "row": row}),
        })
        .collect();
    tx.insert_import_errors(&t, &import.id, &errors)
        .await
        .unwrap();
    // A row keeps its first error.
    tx.insert_import_errors(
        &t,
        &import.id,
        &[ImportError {
            row: 3,
            problem: json!({"code": "conflict"}),
        }],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.get_import_chunk(&t, &import.id, 1).await.unwrap(),
        Some(chunk(1, 4))
    );
    assert_eq!(
        tx.get_import_chunk(&live, &import.id, 1).await.unwrap(),
        None
    );
    let rows = |e: Vec<ImportError>| e.into_iter().map(|e| e.row).collect::<Vec<_>>();
    assert_eq!(
        rows(
            tx.list_import_errors(&t, &import.id, None, 2)
                .await
                .unwrap()
        ),
        vec![3, 5]
    );
    assert_eq!(
        rows(
            tx.list_import_errors(&t, &import.id, Some(5), 2)
                .await
                .unwrap()
        ),
        vec![9]
    );
    assert_eq!(
        tx.list_import_errors(&t, &import.id, None, 1)
            .await
            .unwrap()[0]
            .problem["code"],
        "validation_failed"
    );
    assert!(tx
        .list_import_errors(&live, &import.id, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        tx.delete_import_chunks(&t, &import.id, Some(1))
            .await
            .unwrap(),
        2
    );
    assert_eq!(tx.get_import_chunk(&t, &import.id, 1).await.unwrap(), None);
    assert!(tx
        .get_import_chunk(&t, &import.id, 2)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        tx.delete_import_chunks(&t, &import.id, None).await.unwrap(),
        1
    );
    tx.commit().await.unwrap();
}

pub async fn imports_are_claimed_once_under_a_lease_only_its_token_renews(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let queued = sample_import(ImportStatus::Queued);
    let other = sample_import(ImportStatus::Queued);
    let finished = sample_import(ImportStatus::Completed);
    let receiving = sample_import(ImportStatus::Receiving);
    let mut tx = store.begin_write().await.unwrap();
    for i in [&queued, &other, &finished, &receiving] {
        tx.insert_import(&t, i).await.unwrap();
    }
    tx.commit().await.unwrap();
    let at = Timestamp::from_millis;

    let claim = |token: &'static str, now: i64| {
        let store = store.clone();
        async move {
            let mut tx = store.begin_write().await.unwrap();
            let got = tx
                .claim_import(at(now), at(now + 60_000), token)
                .await
                .unwrap();
            tx.commit().await.unwrap();
            got
        }
    };
    let (tenant_a, a) = claim("a", 10_000).await.expect("a queued import");
    assert_eq!(tenant_a, t);
    assert_eq!(a.status, ImportStatus::Running);
    let (_, b) = claim("b", 10_000).await.expect("the other queued import");
    assert_ne!(a.id, b.id);
    assert!([&queued.id, &other.id].contains(&&a.id) && [&queued.id, &other.id].contains(&&b.id));
    // Both leases hold: nothing more to claim.
    assert!(claim("c", 20_000).await.is_none());

    let mut tx = store.begin_write().await.unwrap();
    assert!(tx
        .renew_import_claim(&t, &a.id, "a", at(90_000))
        .await
        .unwrap());
    assert!(!tx
        .renew_import_claim(&t, &a.id, "b", at(90_000))
        .await
        .unwrap());
    tx.commit().await.unwrap();

    // b's lease ends at 70,000, a's (renewed) at 90,000: a stopped worker's import is claimed
    // again, and its old token no longer renews it.
    let (_, again) = claim("d", 80_000).await.expect("the expired claim");
    assert_eq!(again.id, b.id);
    let mut tx = store.begin_write().await.unwrap();
    assert!(!tx
        .renew_import_claim(&t, &b.id, "b", at(150_000))
        .await
        .unwrap());
    assert!(tx
        .renew_import_claim(&t, &b.id, "d", at(150_000))
        .await
        .unwrap());
    // A cancelled import is renewed by no one and claimed by no one; cancelling keeps the counts
    // and cannot happen twice.
    let mut before = tx.get_import(&t, a.id.as_str()).await.unwrap().unwrap();
    before.counts.created = 42;
    tx.update_import(&t, &before).await.unwrap();
    assert!(tx.cancel_import(&t, &a.id, at(95_000)).await.unwrap());
    assert!(!tx.cancel_import(&t, &a.id, at(96_000)).await.unwrap());
    let cancelled = tx.get_import(&t, a.id.as_str()).await.unwrap().unwrap();
    assert_eq!(cancelled.status, ImportStatus::Cancelled);
    assert_eq!(cancelled.counts.created, 42);
    assert_eq!(cancelled.finished_at, Some(at(95_000)));
    assert!(!tx
        .renew_import_claim(&t, &a.id, "a", at(150_000))
        .await
        .unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.claim_import_by_id(&t, &b.id, at(100_000), at(200_000), "g")
            .await
            .unwrap(),
        None,
        "d's lease still holds"
    );
    assert_eq!(
        tx.claim_import_by_id(&t, &a.id, at(1_000_000), at(2_000_000), "g")
            .await
            .unwrap(),
        None,
        "a cancelled import"
    );
    let mine = tx
        .claim_import_by_id(&t, &b.id, at(160_000), at(200_000), "g")
        .await
        .unwrap()
        .expect("b's lease ended");
    assert_eq!(mine.status, ImportStatus::Running);
    assert!(tx
        .renew_import_claim(&t, &b.id, "g", at(300_000))
        .await
        .unwrap());
    tx.commit().await.unwrap();
    assert!(claim("e", 1_000_000).await.map(|(_, i)| i.id) == Some(b.id.clone()));
    assert!(claim("f", 10_000_000).await.map(|(_, i)| i.id) == Some(b.id));
}

pub async fn concurrent_import_claimers_never_share_an_import(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..20 {
        let i = sample_import(ImportStatus::Queued);
        ids.push(i.id.clone());
        tx.insert_import(&t, &i).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tasks = Vec::new();
    for n in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let token = format!("w{n}");
            let mut got = Vec::new();
            loop {
                let mut tx = store.begin_write().await.unwrap();
                let claimed = tx
                    .claim_import(
                        Timestamp::from_millis(5_000),
                        Timestamp::from_millis(60_000),
                        &token,
                    )
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                match claimed {
                    Some((_, i)) => got.push(i.id),
                    None => return got,
                }
            }
        }));
    }
    let mut claimed = Vec::new();
    for task in tasks {
        claimed.extend(task.await.unwrap());
    }
    claimed.sort();
    ids.sort();
    assert_eq!(claimed, ids, "each import claimed exactly once");
}

pub async fn purging_drops_old_errors_and_cut_off_uploads(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut old = sample_import(ImportStatus::Completed);
    old.finished_at = Some(Timestamp::from_millis(1_000));
    let mut recent = sample_import(ImportStatus::Completed);
    recent.finished_at = Some(Timestamp::from_millis(100_000));
    let receiving = sample_import(ImportStatus::Receiving);
    let error = [ImportError {
        row: 2,
        problem: json!({"code": "conflict"}),
    }];
    let mut tx = store.begin_write().await.unwrap();
    for i in [&old, &recent, &receiving] {
        tx.insert_import(&t, i).await.unwrap();
        tx.insert_import_errors(&t, &i.id, &error).await.unwrap();
    }
    tx.insert_import_chunk(&t, &receiving.id, &chunk(0, 2))
        .await
        .unwrap();
    tx.purge_imports(
        Timestamp::from_millis(50_000),
        Timestamp::from_millis(50_000),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .list_import_errors(&t, &old.id, None, 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        tx.list_import_errors(&t, &recent.id, None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    assert!(tx.get_import(&t, old.id.as_str()).await.unwrap().is_some());
    assert_eq!(
        tx.get_import(&t, receiving.id.as_str()).await.unwrap(),
        None
    );
    assert_eq!(
        tx.get_import_chunk(&t, &receiving.id, 0).await.unwrap(),
        None
    );
}
