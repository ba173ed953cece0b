//! Conformance cases of secrets at rest: the row layer stores webhook secrets and connection
//! keys sealed and hands them back plain; the first start with keys seals what was stored in
//! plaintext; a check value refuses other keys; rotation re-seals everything.

use std::sync::{Arc, OnceLock};

use crm_app::{
    ports::Slice,
    secrets::{self, Prepared, SecretBox, SecretsFailure, StoredSecret},
    Store,
};
use crm_domain::{
    mail::{Connection, Provider},
    ConnectionId, Mode, Subscription, Tenant, Timestamp,
};
use crm_secrets::Keyring;

use crate::{fixtures::*, webhook_cases::webhook};

const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const API_KEY: &str = "pm-conformance-api-key-0001";

/// The keys every conformance store is built with (`with_secrets`): one random key per test
/// process.
pub fn test_secrets() -> Arc<Keyring> {
    static RING: OnceLock<Arc<Keyring>> = OnceLock::new();
    RING.get_or_init(|| {
        Arc::new(Keyring::parse(&crm_secrets::generate_key()).expect("a generated key"))
    })
    .clone()
}

fn connection() -> Connection {
    Connection {
        id: ConnectionId::from_uuid(uuid()),
        provider: Provider::Postmark,
        api_key: API_KEY.into(),
        from: "ops@example.com".into(),
        base_url: None,
        created_at: Timestamp::from_millis(1_700_000_000_000),
    }
}

async fn setup(store: &Arc<dyn Store>) -> Tenant {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_webhook(
        &t,
        &webhook(Mode::Test, Subscription::All, 1_700_000_000_000),
    )
    .await
    .unwrap();
    tx.insert_connection(&t, &connection()).await.unwrap();
    tx.commit().await.unwrap();
    t
}

async fn raw(store: &Arc<dyn Store>) -> Vec<StoredSecret> {
    let mut tx = store.begin_write().await.unwrap();
    tx.stored_secrets().await.unwrap()
}

async fn read_back(store: &Arc<dyn Store>, t: &Tenant) -> (String, String) {
    let all = Slice {
        before: None,
        limit: 100,
    };
    let mut tx = store.begin_read().await.unwrap();
    let hooks = tx.list_webhooks(t, &all).await.unwrap();
    let conn = tx.email_connection(t).await.unwrap().unwrap();
    (hooks[0].secret.clone(), conn.api_key)
}

pub async fn secrets_are_stored_sealed_and_read_back_plain(store: Arc<dyn Store>) {
    let t = setup(&store).await;
    assert_eq!(
        read_back(&store, &t).await,
        (WEBHOOK_SECRET.to_owned(), API_KEY.to_owned())
    );
    let stored = raw(&store).await;
    assert_eq!(stored.len(), 2);
    for s in &stored {
        assert!(
            !s.value.contains(WEBHOOK_SECRET) && !s.value.contains(API_KEY),
            "{} holds its plaintext",
            s.table
        );
        assert!(!s.value.contains("whsec_") && !s.value.contains("pm-"));
    }
    // A sealed value copied into another row does not open there.
    let mut tx = store.begin_write().await.unwrap();
    let (hook, conn) = (&stored[0], &stored[1]);
    tx.replace_stored_secret(&StoredSecret {
        value: conn.value.clone(),
        ..hook.clone()
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let all = Slice {
        before: None,
        limit: 100,
    };
    assert!(tx.list_webhooks(&t, &all).await.is_err());
}

pub async fn the_first_start_seals_plaintext_then_checks_and_rotation_reseals(
    store: Arc<dyn Store>,
) {
    let t = setup(&store).await;
    let ring = test_secrets();
    // As a database written before secrets were sealed holds them.
    let mut tx = store.begin_write().await.unwrap();
    for mut s in tx.stored_secrets().await.unwrap() {
        s.value = if s.table == secrets::WEBHOOKS {
            WEBHOOK_SECRET.into()
        } else {
            API_KEY.into()
        };
        tx.replace_stored_secret(&s).await.unwrap();
    }
    tx.commit().await.unwrap();

    assert_eq!(
        secrets::prepare_secrets(&*store, &*ring).await.unwrap(),
        Prepared::SetUp { sealed: 2 }
    );
    let sealed = raw(&store).await;
    assert!(sealed
        .iter()
        .all(|s| s.value != WEBHOOK_SECRET && s.value != API_KEY));
    assert_eq!(
        read_back(&store, &t).await,
        (WEBHOOK_SECRET.to_owned(), API_KEY.to_owned())
    );
    // Later starts only check, and change nothing.
    assert_eq!(
        secrets::prepare_secrets(&*store, &*ring).await.unwrap(),
        Prepared::Verified {
            key_id: ring.key_ids()[0].clone()
        }
    );
    assert_eq!(raw(&store).await, sealed);
    // Other keys are refused by the check value.
    let other = Keyring::parse(&crm_secrets::generate_key()).unwrap();
    assert!(matches!(
        secrets::prepare_secrets(&*store, &other).await,
        Err(SecretsFailure::WrongKeys(_))
    ));
    assert!(matches!(
        secrets::rotate_secrets(&*store, &other).await,
        Err(SecretsFailure::WrongKeys(_))
    ));
    assert_eq!(
        raw(&store).await,
        sealed,
        "a refused rotation changes nothing"
    );

    // Rotation re-seals every value (fresh nonces) and the check, all still opening.
    assert_eq!(secrets::rotate_secrets(&*store, &*ring).await.unwrap(), 2);
    let resealed = raw(&store).await;
    for (before, after) in sealed.iter().zip(&resealed) {
        assert_eq!((before.table, &before.id), (after.table, &after.id));
        assert_ne!(before.value, after.value);
    }
    assert_eq!(
        read_back(&store, &t).await,
        (WEBHOOK_SECRET.to_owned(), API_KEY.to_owned())
    );
    store.scrub_freed_space().await.unwrap();
    assert!(matches!(
        secrets::prepare_secrets(&*store, &*ring).await,
        Ok(Prepared::Verified { .. })
    ));
}

pub async fn a_webhook_whose_secret_does_not_open_holds_up_no_other_delivery(
    store: Arc<dyn Store>,
) {
    use crate::webhook_cases::{claim, event, fan_out, insert_events, insert_webhooks};
    use crm_domain::EventType;

    const T0: i64 = 1_700_000_000_000;
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    let (good, bad) = (
        webhook(Mode::Test, Subscription::All, T0),
        webhook(Mode::Test, Subscription::All, T0),
    );
    insert_webhooks(&store, &[(&t, &good), (&t, &bad)]).await;
    insert_events(
        &store,
        &t,
        &[event(EventType::ContactCreated, Mode::Test, T0 + 1)],
    )
    .await;
    assert_eq!(fan_out(&store, 10).await.len(), 2);
    let mut tx = store.begin_write().await.unwrap();
    let mut row = tx
        .stored_secrets()
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.id == bad.id.as_str())
        .unwrap();
    row.value = "v1.00000000.AAAA".into();
    tx.replace_stored_secret(&row).await.unwrap();
    tx.commit().await.unwrap();

    let claimed = claim(&store, T0 + 10, T0 + 1000, "one", 10).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].webhook_id, good.id);
    assert_eq!(claimed[0].secret, good.secret);
}
