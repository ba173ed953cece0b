//! Who holds an idempotency claim (`IdempotencyRepo::get_idempotency`): a claim is alive while
//! the process that wrote it runs, whichever process asks, and abandoned within a second of that
//! process ending. "A process" here is a store: the two-store cases are run by each store's tests
//! with two stores on one database, the first dropped to stand for a process that died.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use crm_app::{
    idempotency::{IdemRecord, StoredReply},
    Store,
};
use crm_domain::{Mode, Tenant, Timestamp};

use crate::fixtures::*;

fn claim(key: &str) -> IdemRecord {
    IdemRecord {
        key: key.into(),
        fingerprint: "fp".into(),
        reply: None,
        created_at: Timestamp::from_millis(10),
        // A lease far from its end: only the owner can make these abandoned.
        locked_until: Timestamp::from_millis(i64::MAX / 2),
        owner_alive: true,
    }
}

async fn setup(store: &Arc<dyn Store>) -> Tenant {
    let ws = workspace();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    tenant(&ws, Mode::Test)
}

async fn owner_alive(store: &Arc<dyn Store>, t: &Tenant, key: &str) -> bool {
    let mut tx = store.begin_write().await.unwrap();
    let record = tx
        .get_idempotency(t, key)
        .await
        .unwrap()
        .expect("the claim");
    tx.commit().await.unwrap();
    record.owner_alive
}

/// A claim this process wrote is alive to itself, before and after it is replaced by a new
/// claim of its own; a finished record is never abandoned.
pub async fn a_claim_of_this_process_is_alive(store: Arc<dyn Store>) {
    let t = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.insert_idempotency(&t, &claim("k")).await.unwrap());
    assert!(tx.insert_idempotency(&t, &claim("done")).await.unwrap());
    let reply = StoredReply {
        status: 201,
        body: b"{}".to_vec(),
    };
    tx.finish_idempotency(&t, "done", &reply).await.unwrap();
    tx.commit().await.unwrap();
    assert!(owner_alive(&store, &t, "k").await);
    assert!(owner_alive(&store, &t, "done").await);
    let mut tx = store.begin_write().await.unwrap();
    tx.put_idempotency(&t, &claim("k")).await.unwrap();
    tx.commit().await.unwrap();
    assert!(owner_alive(&store, &t, "k").await);
}

/// `first` and `second` are two processes on one database. A claim of `first` is alive to
/// `second` while `first` runs; once `first` is gone (dropped), it is abandoned within a second,
/// while a finished record of `first` stays replayable and a claim `second` took over is its own.
pub async fn a_claim_is_alive_while_its_process_runs_and_abandoned_once_it_is_gone(
    first: Arc<dyn Store>,
    second: Arc<dyn Store>,
) {
    let t = setup(&first).await;
    let mut tx = first.begin_write().await.unwrap();
    assert!(tx.insert_idempotency(&t, &claim("k")).await.unwrap());
    assert!(tx.insert_idempotency(&t, &claim("done")).await.unwrap());
    let reply = StoredReply {
        status: 201,
        body: b"{}".to_vec(),
    };
    tx.finish_idempotency(&t, "done", &reply).await.unwrap();
    tx.commit().await.unwrap();
    assert!(
        owner_alive(&second, &t, "k").await,
        "a claim of another live process is alive"
    );
    // Asking twice changes nothing (the check must not take the claim's ownership away).
    assert!(owner_alive(&second, &t, "k").await);
    assert!(owner_alive(&first, &t, "k").await);

    drop(first);
    let died = Instant::now();
    while owner_alive(&second, &t, "k").await {
        assert!(
            died.elapsed() < Duration::from_secs(1),
            "the claim of a process that is gone is still alive after a second"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(owner_alive(&second, &t, "done").await);

    let mut tx = second.begin_write().await.unwrap();
    tx.put_idempotency(&t, &claim("k")).await.unwrap();
    tx.commit().await.unwrap();
    assert!(owner_alive(&second, &t, "k").await, "taken over");
}

pub async fn idempotency_records_round_trip(store: Arc<dyn Store>) {
    let t = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.insert_idempotency(&t, &idem("k")).await.unwrap());
    assert!(!tx.insert_idempotency(&t, &idem("k")).await.unwrap());
    let reply = StoredReply {
        status: 201,
        body: br#"{"id":"con_1"}"#.to_vec(),
    };
    tx.finish_idempotency(&t, "k", &reply).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let got = tx.get_idempotency(&t, "k").await.unwrap().unwrap();
    assert_eq!(
        got,
        IdemRecord {
            reply: Some(reply),
            ..idem("k")
        }
    );
    let mut replaced = idem("k");
    replaced.fingerprint = "other".into();
    tx.put_idempotency(&t, &replaced).await.unwrap();
    assert_eq!(tx.get_idempotency(&t, "k").await.unwrap(), Some(replaced));
    tx.delete_idempotency(&t, "k").await.unwrap();
    assert!(tx.get_idempotency(&t, "k").await.unwrap().is_none());
    tx.commit().await.unwrap();
}
