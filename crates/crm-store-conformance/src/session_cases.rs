//! Conformance cases of the session port: console sessions round trip and are found by their
//! hash alone, are touched, switched and deleted one at a time, per user or by age, and failed
//! sign-ins are counted per email (and address) from a time on until they are forgotten.

use std::sync::Arc;

use crm_app::{ports::Session, Store};
use crm_domain::{Email, Mode, Role, Timestamp, User, UserId, WorkspaceId};

use crate::fixtures::*;

/// Far enough from the epoch that a timestamp stored in 32 bits would not read back.
const T: i64 = 1_800_000_000_000;

fn session(ws: &WorkspaceId, user: &UserId, mode: Mode, created_at: i64) -> Session {
    Session {
        id_hash: uuid().simple().to_string(),
        user_id: user.clone(),
        workspace_id: ws.clone(),
        mode,
        csrf_token: format!("csrf-{}", uuid().simple()),
        created_at: Timestamp::from_millis(created_at),
        last_seen_at: Timestamp::from_millis(created_at + 60_000),
    }
}

fn user_id() -> UserId {
    UserId::from_uuid(uuid())
}

pub async fn sessions_round_trip_every_field_and_are_found_only_by_their_hash(
    store: Arc<dyn Store>,
) {
    let (ws, _) = setup(&store).await;
    let (other, _) = setup(&store).await;
    let live = session(&ws.id, &user_id(), Mode::Live, T);
    let test = session(&other.id, &user_id(), Mode::Test, T + 1);
    let mut tx = store.begin_write().await.unwrap();
    for s in [&live, &test] {
        tx.insert_session(s).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_session(&live.id_hash).await.unwrap(),
        Some(live.clone())
    );
    assert_eq!(
        tx.get_session(&test.id_hash).await.unwrap(),
        Some(test.clone())
    );
    assert_eq!(tx.get_session("unknown").await.unwrap(), None);
    assert_eq!(tx.get_session(&live.id_hash[..10]).await.unwrap(), None);
    assert_eq!(
        tx.get_session(&live.id_hash.to_uppercase()).await.unwrap(),
        None
    );
    assert_eq!(tx.get_session(&live.csrf_token).await.unwrap(), None);
}

pub async fn touching_a_session_or_setting_its_mode_changes_that_session_alone(
    store: Arc<dyn Store>,
) {
    let (ws, _) = setup(&store).await;
    let user = user_id();
    let mine = session(&ws.id, &user, Mode::Test, T);
    let twin = session(&ws.id, &user, Mode::Test, T);
    let mut tx = store.begin_write().await.unwrap();
    for s in [&mine, &twin] {
        tx.insert_session(s).await.unwrap();
    }
    let seen = Timestamp::from_millis(T + 3_600_000);
    assert!(tx.touch_session(&mine.id_hash, seen).await.unwrap());
    assert!(tx
        .set_session_mode(&mine.id_hash, Mode::Live)
        .await
        .unwrap());
    assert!(!tx.touch_session("unknown", seen).await.unwrap());
    assert!(!tx.set_session_mode("unknown", Mode::Live).await.unwrap());
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    let changed = Session {
        last_seen_at: seen,
        mode: Mode::Live,
        ..mine.clone()
    };
    assert_eq!(
        tx.get_session(&mine.id_hash).await.unwrap(),
        Some(changed.clone())
    );
    assert_eq!(
        tx.get_session(&twin.id_hash).await.unwrap(),
        Some(twin.clone())
    );
    // Back to test: the mode is written, not toggled or only ever set to live.
    assert!(tx
        .set_session_mode(&mine.id_hash, Mode::Test)
        .await
        .unwrap());
    assert_eq!(
        tx.get_session(&mine.id_hash).await.unwrap(),
        Some(Session {
            mode: Mode::Test,
            ..changed
        })
    );
    tx.commit().await.unwrap();
}

pub async fn a_session_is_deleted_once_and_alone(store: Arc<dyn Store>) {
    let (ws, _) = setup(&store).await;
    let user = user_id();
    let gone = session(&ws.id, &user, Mode::Test, T);
    let kept = session(&ws.id, &user, Mode::Test, T);
    let mut tx = store.begin_write().await.unwrap();
    for s in [&gone, &kept] {
        tx.insert_session(s).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.delete_session(&gone.id_hash).await.unwrap());
    assert!(!tx.delete_session(&gone.id_hash).await.unwrap());
    assert!(!tx.delete_session("unknown").await.unwrap());
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_session(&gone.id_hash).await.unwrap(), None);
    assert_eq!(tx.get_session(&kept.id_hash).await.unwrap(), Some(kept));
}

pub async fn deleting_a_users_sessions_removes_theirs_alone_and_counts_them(store: Arc<dyn Store>) {
    let (ws, _) = setup(&store).await;
    let (user, other) = (user_id(), user_id());
    let theirs = [
        session(&ws.id, &user, Mode::Test, T),
        session(&ws.id, &user, Mode::Live, T + 1),
    ];
    let kept = session(&ws.id, &other, Mode::Test, T);
    let mut tx = store.begin_write().await.unwrap();
    for s in theirs.iter().chain([&kept]) {
        tx.insert_session(s).await.unwrap();
    }
    assert_eq!(tx.delete_user_sessions(&user).await.unwrap(), 2);
    assert_eq!(tx.delete_user_sessions(&user).await.unwrap(), 0);
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    for s in &theirs {
        assert_eq!(tx.get_session(&s.id_hash).await.unwrap(), None);
    }
    assert_eq!(
        tx.get_session(&kept.id_hash).await.unwrap(),
        Some(kept.clone())
    );
    drop(tx);

    // Deleting the user deletes their sessions too.
    let u = User {
        id: other.clone(),
        workspace_id: ws.id.clone(),
        email: Email::parse(&format!("s.{}@example.com", uuid().simple())).unwrap(),
        name: "Sam".into(),
        role: Role::Member,
        password_hash: None,
        created_at: Timestamp::from_millis(T),
        last_login_at: None,
    };
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_user(&u).await.unwrap();
    assert!(tx.delete_user(&ws.id, &other).await.unwrap());
    assert_eq!(
        tx.get_session(&kept.id_hash).await.unwrap(),
        None,
        "a deleted user's sessions go with it"
    );
    tx.commit().await.unwrap();
}

pub async fn sessions_created_before_a_time_are_deleted_and_no_others(store: Arc<dyn Store>) {
    let (ws, _) = setup(&store).await;
    let user = user_id();
    // Seen lately, but created before the cut: it goes all the same.
    let old = Session {
        last_seen_at: Timestamp::from_millis(T + 3_600_000),
        ..session(&ws.id, &user, Mode::Test, T - 1)
    };
    let at_the_cut = session(&ws.id, &user, Mode::Test, T);
    let newer = session(&ws.id, &user, Mode::Live, T + 1);
    let mut tx = store.begin_write().await.unwrap();
    for s in [&old, &at_the_cut, &newer] {
        tx.insert_session(s).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    let cut = Timestamp::from_millis(T);
    assert_eq!(tx.delete_sessions_created_before(cut).await.unwrap(), 1);
    assert_eq!(tx.delete_sessions_created_before(cut).await.unwrap(), 0);
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_session(&old.id_hash).await.unwrap(), None);
    assert_eq!(
        tx.get_session(&at_the_cut.id_hash).await.unwrap(),
        Some(at_the_cut)
    );
    assert_eq!(tx.get_session(&newer.id_hash).await.unwrap(), Some(newer));
}

pub async fn session_sign_in_failures_count_per_email_and_address_from_a_time_until_forgotten(
    store: Arc<dyn Store>,
) {
    let tag = uuid().simple().to_string();
    let (email, stranger) = (
        format!("f.{tag}@example.com"),
        format!("g.{tag}@example.com"),
    );
    let (here, there) = ("203.0.113.7", "2001:db8::1");
    let at = Timestamp::from_millis;
    let mut tx = store.begin_write().await.unwrap();
    for (e, address, ms) in [
        (&email, here, T - 1),
        (&email, here, T),
        (&email, here, T + 1),
        (&email, there, T + 2),
        (&stranger, here, T + 3),
    ] {
        tx.record_sign_in_failure(e, address, at(ms)).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let since = at(T);
    assert_eq!(
        tx.count_sign_in_failures(&email, Some(here), since)
            .await
            .unwrap(),
        2,
        "from the address, at or after `since`"
    );
    assert_eq!(
        tx.count_sign_in_failures(&email, Some(there), since)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        tx.count_sign_in_failures(&email, Some("198.51.100.1"), since)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        tx.count_sign_in_failures(&email, None, since)
            .await
            .unwrap(),
        3,
        "from every address"
    );
    assert_eq!(
        tx.count_sign_in_failures(&email, Some(here), at(T - 1))
            .await
            .unwrap(),
        3
    );
    assert_eq!(
        tx.count_sign_in_failures(&email, None, at(T + 3))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        tx.count_sign_in_failures(&stranger, None, since)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        tx.count_sign_in_failures("nobody@example.com", None, at(0))
            .await
            .unwrap(),
        0
    );
    drop(tx);

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.delete_sign_in_failures_before(at(T)).await.unwrap(), 1);
    assert_eq!(tx.delete_sign_in_failures_before(at(T)).await.unwrap(), 0);
    assert_eq!(
        tx.count_sign_in_failures(&email, Some(here), at(0))
            .await
            .unwrap(),
        2,
        "the failure before the cut is forgotten, the one at it kept"
    );
    assert_eq!(
        tx.count_sign_in_failures(&email, None, at(0))
            .await
            .unwrap(),
        3
    );
    // One attempt forgotten by its email, address and time: the others stay.
    tx.delete_sign_in_failure(&email, here, at(T))
        .await
        .unwrap();
    tx.delete_sign_in_failure(&email, there, at(T + 1))
        .await
        .unwrap();
    assert_eq!(
        tx.count_sign_in_failures(&email, None, at(0))
            .await
            .unwrap(),
        2,
        "only the failure at that time from that address is forgotten"
    );
    tx.commit().await.unwrap();
}
