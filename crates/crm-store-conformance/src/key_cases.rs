//! Conformance cases of the key port: listing, state updates and last use.

use std::sync::Arc;

use crm_app::{
    ports::{KeyUse, Slice},
    Store,
};
use crm_domain::{Mode, Timestamp};

use crate::fixtures::*;

pub async fn keys_are_listed_per_tenant_newest_first_and_their_state_updates(
    store: Arc<dyn Store>,
) {
    let (ws, t) = setup(&store).await;
    let (a, b, live) = (
        api_key(&ws, Mode::Test, "h-a"),
        api_key(&ws, Mode::Test, "h-b"),
        api_key(&ws, Mode::Live, "h-live"),
    );
    let mut tx = store.begin_write().await.unwrap();
    for k in [&a, &b, &live] {
        tx.insert_api_key(k).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let listed: Vec<_> = tx
        .list_api_keys(&t, &all())
        .await
        .unwrap()
        .into_iter()
        .map(|k| k.id)
        .collect();
    assert_eq!(
        listed,
        vec![b.id.clone(), a.id.clone()],
        "newest first, test mode only"
    );
    let after_b = Slice {
        before: Some(b.id.to_string()),
        limit: 10,
    };
    assert_eq!(tx.list_api_keys(&t, &after_b).await.unwrap().len(), 1);
    drop(tx);

    let mut revoked = a.clone();
    revoked.revoked_at = Some(Timestamp::from_millis(1_700_000_100_000));
    revoked.expires_at = None;
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.update_api_key_state(&revoked).await.unwrap());
    let mut elsewhere = revoked.clone();
    elsewhere.mode = Mode::Live;
    assert!(
        !tx.update_api_key_state(&elsewhere).await.unwrap(),
        "a key is found in its own tenant only"
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_api_key(&t, &a.id).await.unwrap(), Some(revoked));
}

pub async fn touching_keys_only_ever_raises_last_used_at(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let key = api_key(&ws, Mode::Test, "h-touch");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_api_key(&key).await.unwrap();
    tx.commit().await.unwrap();
    let touch = |ms| KeyUse {
        tenant: t.clone(),
        id: key.id.clone(),
        at: Timestamp::from_millis(ms),
    };
    let missing = KeyUse {
        tenant: t.clone(),
        id: api_key(&ws, Mode::Test, "x").id,
        at: Timestamp::from_millis(5),
    };
    for batch in [vec![touch(2_000), missing], vec![touch(1_000)]] {
        let mut tx = store.begin_write().await.unwrap();
        tx.touch_api_keys(&batch).await.unwrap();
        tx.commit().await.unwrap();
    }
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_api_key(&t, &key.id)
            .await
            .unwrap()
            .unwrap()
            .last_used_at,
        Some(Timestamp::from_millis(2_000))
    );
}
