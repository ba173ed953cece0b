//! Conformance cases of the user port: users round trip, list newest first in their workspace,
//! keep emails unique across the installation, count admins, and their sign-in links are
//! replaced, read and used once.

use std::sync::Arc;

use crm_app::{
    ports::{SignInLink, Slice},
    Store, StoreError,
};
use crm_domain::{Email, Role, Timestamp, User, UserId, WorkspaceId};

use crate::fixtures::*;

fn user(ws: &WorkspaceId, email: &str, role: Role) -> User {
    User {
        id: UserId::from_uuid(uuid()),
        workspace_id: ws.clone(),
        email: Email::parse(email).unwrap(),
        name: "Kate <b>Ü</b>".into(),
        role,
        password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".into()),
        created_at: Timestamp::from_millis(1_800_000_000_000),
        last_login_at: None,
    }
}

fn link(u: &User, hash: &str) -> SignInLink {
    SignInLink {
        token_hash: hash.to_owned(),
        user_id: u.id.clone(),
        workspace_id: u.workspace_id.clone(),
        created_at: Timestamp::from_millis(1_800_000_000_000),
        expires_at: Timestamp::from_millis(1_800_086_400_000),
    }
}

pub async fn users_round_trip_list_in_their_workspace_and_keep_emails_unique(
    store: Arc<dyn Store>,
) {
    let (ws, _) = setup(&store).await;
    let (other, _) = setup(&store).await;
    let tag = uuid().simple().to_string();
    let email = |n: &str| format!("{n}.{tag}@example.com");
    let admin = user(&ws.id, &email("a"), Role::Admin);
    let mut member = user(&ws.id, &email("m"), Role::Member);
    member.password_hash = None;
    let elsewhere = user(&other.id, &email("o"), Role::Admin);
    let mut tx = store.begin_write().await.unwrap();
    for u in [&admin, &member, &elsewhere] {
        tx.insert_user(u).await.unwrap();
    }
    // The same email in another workspace is taken too, and the transaction stays usable.
    let twin = user(&other.id, &email("a"), Role::Viewer);
    assert!(matches!(
        tx.insert_user(&twin).await,
        Err(StoreError::Duplicate)
    ));
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_user(&ws.id, &admin.id).await.unwrap(),
        Some(admin.clone())
    );
    assert_eq!(tx.get_user(&other.id, &admin.id).await.unwrap(), None);
    assert_eq!(
        tx.find_user_by_email(&admin.email).await.unwrap(),
        Some(admin.clone())
    );
    assert_eq!(
        tx.list_users(&ws.id, &all()).await.unwrap(),
        vec![member.clone(), admin.clone()]
    );
    let page = Slice {
        before: Some(member.id.to_string()),
        limit: 1,
    };
    assert_eq!(
        tx.list_users(&ws.id, &page).await.unwrap(),
        vec![admin.clone()]
    );
    drop(tx);

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.count_admins(&ws.id).await.unwrap(), 1);
    let mut changed = member.clone();
    changed.role = Role::Admin;
    changed.name = "Mo".into();
    changed.last_login_at = Some(Timestamp::from_millis(1_800_000_000_123));
    changed.password_hash = Some("$argon2id$new".into());
    assert!(tx.update_user(&changed).await.unwrap());
    assert_eq!(tx.count_admins(&ws.id).await.unwrap(), 2);
    let mut taken = changed.clone();
    taken.email = admin.email.clone();
    assert!(matches!(
        tx.update_user(&taken).await,
        Err(StoreError::Duplicate)
    ));
    assert_eq!(
        tx.get_user(&ws.id, &member.id).await.unwrap(),
        Some(changed.clone())
    );
    tx.replace_sign_in_link(&link(&changed, &format!("h1{tag}")))
        .await
        .unwrap();
    assert!(tx.delete_user(&ws.id, &changed.id).await.unwrap());
    assert!(!tx.delete_user(&ws.id, &changed.id).await.unwrap());
    assert_eq!(
        tx.get_sign_in_link(&format!("h1{tag}")).await.unwrap(),
        None,
        "a deleted user's links go with it"
    );
    assert_eq!(tx.count_admins(&ws.id).await.unwrap(), 1);
    tx.commit().await.unwrap();
}

pub async fn a_users_newest_sign_in_link_alone_works_and_only_once(store: Arc<dyn Store>) {
    let (ws, _) = setup(&store).await;
    let tag = uuid().simple().to_string();
    let u = user(&ws.id, &format!("l.{tag}@example.com"), Role::Viewer);
    let (first, second) = (link(&u, &format!("a{tag}")), link(&u, &format!("b{tag}")));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_user(&u).await.unwrap();
    tx.replace_sign_in_link(&first).await.unwrap();
    assert_eq!(
        tx.get_sign_in_link(&first.token_hash).await.unwrap(),
        Some(first.clone())
    );
    tx.replace_sign_in_link(&second).await.unwrap();
    assert_eq!(tx.get_sign_in_link(&first.token_hash).await.unwrap(), None);
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.delete_sign_in_link(&second.token_hash).await.unwrap());
    assert!(!tx.delete_sign_in_link(&second.token_hash).await.unwrap());
    tx.commit().await.unwrap();
}

/// A sign-in stamps `last_login_at` alone: a change committed since the user was read stays.
pub async fn a_login_is_stamped_on_the_user_as_it_is_now(store: Arc<dyn Store>) {
    let (ws, _) = setup(&store).await;
    let ws = ws.id;
    let tag = uuid().simple().to_string();
    let read = user(&ws, &format!("l.{tag}@example.com"), Role::Admin);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_user(&read).await.unwrap();
    tx.commit().await.unwrap();
    // Someone demotes the user after it was read.
    let mut demoted = read.clone();
    demoted.role = Role::Viewer;
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.update_user(&demoted).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let at = Timestamp::from_millis(1_900_000_000_000);
    let now = tx.record_login(&ws, &read.id, at).await.unwrap().unwrap();
    assert_eq!(now.role, Role::Viewer, "the demotion is kept");
    assert_eq!(now.last_login_at, Some(at));
    let unknown = UserId::from_uuid(uuid());
    assert!(tx.record_login(&ws, &unknown, at).await.unwrap().is_none());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let stored = tx.get_user(&ws, &read.id).await.unwrap().unwrap();
    assert_eq!(
        (stored.role, stored.last_login_at),
        (Role::Viewer, Some(at))
    );
}
