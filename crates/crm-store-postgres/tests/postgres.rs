//! What the Postgres store must do beyond the shared suite, because SQLite's single writer gives
//! it for free there: concurrent write transactions must not trip over each other, and a
//! uniqueness failure must not abort the transaction it happened in; and where Postgres itself
//! behaves differently (a failed statement aborts the transaction until a savepoint is rolled
//! back; `lower()` is not Rust's `to_lowercase`; a plan follows the table's statistics).

mod support;

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use crm_app::{
    auth::Workspace,
    ports::{ContactFilter, DealFilter, Reference, Referent, Slice},
    Store, StoreError, Tx,
};
use crm_domain::{
    Email, Event, EventId, EventType, Mode, ObjectKind, PipelineId, Role, Tenant, Timestamp, User,
    UserId,
};
use crm_store_conformance::{activity, contact, deal, pipeline, sample_change, tenant, workspace};
use crm_store_postgres::PostgresStore;
use sqlx::{Connection, PgConnection, Row};
use tokio::sync::oneshot;

/// Long enough for the other transactions to reach the same row while one holds it.
const OVERLAP: Duration = Duration::from_millis(50);

const WRITERS: i64 = 4;

async fn setup(store: &Arc<dyn Store>) -> (Workspace, Tenant) {
    let ws = workspace();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    let t = tenant(&ws, Mode::Test);
    (ws, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_to_a_taken_email_leaves_the_transaction_usable() {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let a = contact(Some("a@b.co"));
    let mut b = contact(Some("b@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a, &[]).await.unwrap();
    tx.insert_contact(&t, &b, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    b.email = Some(Email::parse("a@b.co").unwrap());
    b.version = 2;
    assert!(matches!(
        tx.update_contact(&t, &b).await,
        Err(StoreError::Duplicate)
    ));
    // What the use case does next: read the holder of the email, and carry on writing.
    assert_eq!(
        tx.get_contact_by_email(&t, &Email::parse("a@b.co").unwrap())
            .await
            .unwrap(),
        Some(a)
    );
    b.email = Some(Email::parse("c@b.co").unwrap());
    tx.update_contact(&t, &b).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &b.id).await.unwrap(), Some(b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_of_one_contact_queue_instead_of_going_stale() {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (store, t, id) = (store.clone(), t.clone(), c.id.clone());
            tokio::spawn(async move {
                let mut tx = store.begin_write().await?;
                let mut c = tx.get_contact(&t, &id).await?.expect("contact");
                tokio::time::sleep(OVERLAP).await;
                c.first_name = Some(format!("writer {i}"));
                c.version += 1;
                tx.update_contact(&t, &c).await?;
                tx.commit().await
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap().expect("every writer succeeds");
    }
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_contact(&t, &c.id).await.unwrap().unwrap().version,
        1 + WRITERS
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_to_an_enum_group_get_distinct_positions() {
    let url = support::fresh_database().await;
    let store = PostgresStore::connect_with(&url, WRITERS as u32)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let store = store.into_arc();
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(0);
    // The group exists and is committed, so creating it again makes no one wait.
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_enum_group(&t, "deal.source", now).await.unwrap();
    tx.commit().await.unwrap();

    let writers: Vec<_> = (0..WRITERS)
        .map(|i| {
            let (store, t) = (store.clone(), t.clone());
            tokio::spawn(async move {
                let mut tx = store.begin_write().await?;
                tx.insert_enum_value(&t, "deal.source", &format!("v{i}"), None, now)
                    .await?;
                tokio::time::sleep(OVERLAP).await;
                tx.commit().await
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap().expect("every writer succeeds");
    }
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let row = sqlx::query(
        "SELECT COUNT(*) AS all_values, COUNT(DISTINCT position) AS positions FROM enum_values",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(row.get::<i64, _>("all_values"), WRITERS);
    assert_eq!(row.get::<i64, _>("positions"), WRITERS);
}

/// A tenant whose default pipeline is `old`, with two more pipelines `a` and `b`.
async fn three_pipelines(store: &Arc<dyn Store>, t: &Tenant) -> [PipelineId; 3] {
    let mut old = pipeline("old", &["new"]);
    old.is_default = true;
    let (a, b) = (pipeline("a", &["new"]), pipeline("b", &["new"]));
    let mut tx = store.begin_write().await.unwrap();
    for p in [&old, &a, &b] {
        tx.insert_pipeline(t, p).await.unwrap();
    }
    tx.commit().await.unwrap();
    [old.id, a.id, b.id]
}

/// What updating a pipeline does in the use case: read it for update, write it, and when it is
/// the default, clear every other default.
async fn save_pipeline(
    tx: &mut dyn Tx,
    t: &Tenant,
    id: &PipelineId,
    make_default: bool,
) -> Result<(), StoreError> {
    let mut p = tx
        .get_pipeline(t, id, crm_app::ports::RowLock::Update)
        .await?
        .expect("pipeline");
    p.name = format!("{} (edited)", p.name);
    p.is_default |= make_default;
    p.version += 1;
    tx.update_pipeline(t, &p).await?;
    if p.is_default {
        tx.clear_default_pipeline(t, id, Timestamp::from_millis(1_800_000_000_000))
            .await?;
    }
    Ok(())
}

async fn defaults(store: &Arc<dyn Store>, t: &Tenant) -> Vec<PipelineId> {
    let mut tx = store.begin_read().await.unwrap();
    tx.list_pipelines(t)
        .await
        .unwrap()
        .into_iter()
        .filter(|p| p.is_default)
        .map(|p| p.id)
        .collect()
}

/// Some work inside a transaction.
type Work<'a> = Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'a>>;

/// The first transaction runs `first` and holds its locks for a while; the second starts once
/// `first` is done, and runs `second` while the first is still open.
async fn overlapping<F1, F2>(store: &Arc<dyn Store>, first: F1, second: F2)
where
    F1: for<'a> FnOnce(&'a mut dyn Tx) -> Work<'a> + Send + 'static,
    F2: for<'a> FnOnce(&'a mut dyn Tx) -> Work<'a> + Send + 'static,
{
    let (done, started) = oneshot::channel();
    let s1 = store.clone();
    let one = tokio::spawn(async move {
        let mut tx = s1.begin_write().await?;
        first(&mut *tx).await?;
        done.send(()).expect("second transaction waits");
        tokio::time::sleep(OVERLAP).await;
        tx.commit().await
    });
    let s2 = store.clone();
    let two = tokio::spawn(async move {
        started.await.expect("first transaction ran");
        let mut tx = s2.begin_write().await?;
        second(&mut *tx).await?;
        tx.commit().await
    });
    one.await.unwrap().expect("first transaction succeeds");
    two.await.unwrap().expect("second transaction succeeds");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_transactions_making_different_pipelines_the_default_leave_one_default() {
    // The second clears the old default only after waiting for the first, which made `a` the
    // default meanwhile: a single UPDATE, whose snapshot predates that commit, would miss `a`.
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let [old, a, b] = three_pipelines(&store, &t).await;
    let (t1, t2, b2) = (t.clone(), t.clone(), b.clone());
    overlapping(
        &store,
        move |tx| Box::pin(async move { save_pipeline(tx, &t1, &a, true).await }),
        move |tx| Box::pin(async move { save_pipeline(tx, &t2, &b2, true).await }),
    )
    .await;
    assert_eq!(
        defaults(&store, &t).await,
        vec![b.clone()],
        "the later commit wins, alone"
    );
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.default_pipeline(&t).await.unwrap().map(|p| p.id),
        Some(b)
    );
    assert!(
        !tx.get_pipeline(&t, &old, crm_app::ports::RowLock::Update)
            .await
            .unwrap()
            .unwrap()
            .is_default
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_default_while_another_pipeline_becomes_the_default_neither_deadlocks_nor_keeps_two(
) {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let [old, _, b] = three_pipelines(&store, &t).await;
    let (t1, t2, b2) = (t.clone(), t.clone(), b.clone());
    overlapping(
        &store,
        // Renaming the default locks it and clears (no) other defaults.
        move |tx| Box::pin(async move { save_pipeline(tx, &t1, &old, false).await }),
        // Clearing `old` waits for the rename, then clears the renamed row.
        move |tx| Box::pin(async move { save_pipeline(tx, &t2, &b2, true).await }),
    )
    .await;
    assert_eq!(defaults(&store, &t).await, vec![b]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_pipeline_read_for_a_write_follows_a_concurrent_change_of_default() {
    // Locking the default row waits for the transaction moving the default away from it; then
    // the row no longer qualifies, and the answer must be the new default, not "none".
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let [_, _, b] = three_pipelines(&store, &t).await;
    let (t1, t2, b1, b2) = (t.clone(), t.clone(), b.clone(), b.clone());
    overlapping(
        &store,
        move |tx| Box::pin(async move { save_pipeline(tx, &t1, &b1, true).await }),
        move |tx| {
            Box::pin(async move {
                let found = tx.default_pipeline(&t2).await?.map(|p| p.id);
                assert_eq!(found, Some(b2));
                Ok(())
            })
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_key_taken_by_a_concurrent_transaction_is_a_duplicate_once_that_commits() {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let first = pipeline("sales", &["new"]);
    let (t1, t2, f1, first_id) = (t.clone(), t.clone(), first.clone(), first.id.clone());
    overlapping(
        &store,
        move |tx| Box::pin(async move { tx.insert_pipeline(&t1, &f1).await }),
        move |tx| {
            Box::pin(async move {
                // Waits for the first transaction, then reports the clash without aborting.
                assert!(matches!(
                    tx.insert_pipeline(&t2, &pipeline("sales", &["x"])).await,
                    Err(StoreError::Duplicate)
                ));
                let holder = tx
                    .get_pipeline_by_key(&t2, "sales", crm_app::ports::RowLock::Update)
                    .await?
                    .map(|p| p.id);
                assert_eq!(holder, Some(first_id));
                tx.insert_pipeline(&t2, &pipeline("hiring", &["x"])).await
            })
        },
    )
    .await;
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.list_pipelines(&t).await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_back_to_a_savepoint_makes_a_failed_transaction_usable_again() {
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let sales = pipeline("sales", &["new"]);
    let d = deal("Order", &sales, "new");
    let (a, mut b) = (contact(Some("a@b.co")), contact(Some("b@b.co")));
    let note = activity(1_000);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    tx.insert_contact(&t, &a, &[]).await.unwrap();
    tx.insert_contact(&t, &b, &[]).await.unwrap();

    tx.savepoint("op").await.unwrap();
    // The same id again breaks the primary key: an error no ON CONFLICT absorbs, which aborts
    // a Postgres transaction; every statement fails until the savepoint is rolled back.
    assert!(matches!(
        tx.insert_deal(&t, &d).await,
        Err(StoreError::Backend(_))
    ));
    assert!(matches!(
        tx.get_deal(&t, &d.id).await,
        Err(StoreError::Backend(_))
    ));
    tx.rollback_to_savepoint("op").await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    assert_eq!(tx.get_deal(&t, &d.id).await.unwrap(), Some(d.clone()));

    // A `Duplicate` inside a savepoint (the store's own savepoint nests inside it) and a write
    // undone by rolling back to it.
    tx.savepoint("op").await.unwrap();
    b.email = Some(Email::parse("a@b.co").unwrap());
    b.version = 2;
    assert!(matches!(
        tx.update_contact(&t, &b).await,
        Err(StoreError::Duplicate)
    ));
    tx.insert_activity(&t, &note).await.unwrap();
    tx.rollback_to_savepoint("op").await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_deal(&t, &d.id).await.unwrap(), Some(d));
    assert!(tx.get_activity(&t, &note.id).await.unwrap().is_none());
    assert_eq!(tx.get_contact(&t, &b.id).await.unwrap().unwrap().version, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn savepoints_are_no_ops_when_reading_and_refuse_names_that_are_not_identifiers() {
    let store = support::fresh_store().await.into_arc();
    // Postgres refuses SAVEPOINT outside a transaction; a read unit of work has nothing to undo.
    let mut tx = store.begin_read().await.unwrap();
    tx.savepoint("op").await.unwrap();
    tx.rollback_to_savepoint("op").await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    for bad in ["", "1op", "op; COMMIT", "op name"] {
        assert!(
            matches!(tx.savepoint(bad).await, Err(StoreError::Backend(_))),
            "{bad:?}"
        );
    }
    tx.savepoint("batch_op_2").await.unwrap();
    tx.release_savepoint("batch_op_2").await.unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_stored_text_finds_itself_whatever_its_case_mapping() {
    // `search_text` is lower-cased by Postgres; Rust lower-cases differently at the edges (a
    // word-final capital sigma becomes `ς` in Rust, `σ` in Postgres; `İ` becomes `i̇` in
    // Rust), so the needle is lower-cased by Postgres too.
    let store = support::fresh_store().await.into_arc();
    let (_, t) = setup(&store).await;
    let mut c = contact(None);
    c.first_name = Some("İLKAY".into());
    c.last_name = Some("ΣΊΣΥΦΟΣ".into());
    let sales = pipeline("sales", &["new"]);
    let d = deal("ΟΔΥΣΣΕΥΣ renewal", &sales, "new");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    tx.commit().await.unwrap();
    let all = Slice {
        before: None,
        limit: 100,
    };
    let mut tx = store.begin_read().await.unwrap();
    for q in ["ΣΊΣΥΦΟΣ", "İLKAY", "İlkay ΣΊΣ"] {
        let found = tx
            .list_contacts(
                &t,
                &ContactFilter {
                    q: Some(q.into()),
                    ..Default::default()
                },
                &all,
            )
            .await
            .unwrap();
        assert_eq!(found.len(), 1, "q={q}");
    }
    let found = tx
        .list_deals(
            &t,
            &DealFilter {
                q: Some("ΟΔΥΣΣΕΥΣ".into()),
                ..Default::default()
            },
            &all,
        )
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
}

/// The server side of the store's pooled connections to `url`, seen from another connection
/// (not the connection holding the store's idempotency owner lock, which is outside the pool).
async fn backends(url: &str) -> Vec<i32> {
    let mut admin = PgConnection::connect(url).await.unwrap();
    let rows = sqlx::query("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'crm idempotency owner'")
        .fetch_all(&mut admin)
        .await
        .unwrap();
    rows.iter().map(|r| r.get::<i32, _>(0)).collect()
}

/// A migrated store on a fresh database with a pool of `connections`, and the database's URL.
async fn store_with_pool(connections: u32) -> (String, Arc<dyn Store>) {
    let url = support::fresh_database().await;
    let store = PostgresStore::connect_with(&url, connections)
        .await
        .unwrap();
    store.migrate().await.unwrap();
    (url, store.into_arc())
}

/// Ends a backend's session from outside, as a server restart or an operator would.
async fn terminate(url: &str, pid: i32) {
    let mut admin = PgConnection::connect(url).await.unwrap();
    sqlx::query("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_killed_under_the_pool_fails_one_unit_of_work_and_is_replaced() {
    let (url, store) = store_with_pool(1).await;
    store.ping().await.unwrap();
    let before = backends(&url).await;
    assert_eq!(before.len(), 1, "one pooled connection");
    terminate(&url, before[0]).await;
    // The pool hands the dead connection out once (it is not pinged when recently used); the
    // failure marks it, and the next unit of work gets a new connection.
    assert!(
        store.ping().await.is_err(),
        "the killed connection fails its statement"
    );
    store
        .ping()
        .await
        .expect("a new connection replaces the broken one");
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .list_contacts(
            &t,
            &ContactFilter::default(),
            &Slice {
                before: None,
                limit: 10
            }
        )
        .await
        .unwrap()
        .is_empty());
    drop(tx);
    // The killed backend may take a moment to leave pg_stat_activity.
    let mut after = backends(&url).await;
    for _ in 0..50 {
        if !after.contains(&before[0]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = backends(&url).await;
    }
    assert_eq!(after.len(), 1, "still one pooled connection: {after:?}");
    assert_ne!(after, before);
}

/// A create written alone has no `BEGIN` to fail harmlessly on a connection the server dropped
/// while it sat in the pool: one idle for a second or more is pinged first, found dead, replaced,
/// and the write goes through on the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_alone_pings_an_idle_connection_and_replaces_a_dead_one() {
    let (url, store) = store_with_pool(1).await;
    let (_, t) = setup(&store).await;
    let before = backends(&url).await;
    assert_eq!(before.len(), 1, "one pooled connection");
    terminate(&url, before[0]).await;
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let c = contact(Some("a@b.co"));
    let event = Event {
        merged_ids: None,
        id: EventId::from_uuid(uuid::Uuid::now_v7()),
        event_type: EventType::ContactCreated,
        mode: Mode::Test,
        created_at: c.created_at,
        data: serde_json::json!({"id": c.id.as_str(), "object": "contact"}),
        changed_fields: None,
        previous_stage: None,
    };
    store
        .insert_contact_alone(
            &t,
            &c,
            &[],
            &event,
            &sample_change(ObjectKind::Contact, c.id.as_str()),
        )
        .await
        .expect("the dead connection is replaced before the write");
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap(), Some(c));
    assert_eq!(
        tx.list_events(
            &t,
            None,
            &Slice {
                before: None,
                limit: 10
            }
        )
        .await
        .unwrap(),
        vec![event]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_dropped_without_commit_rolls_back_and_frees_its_locks_at_once() {
    let (url, store) = store_with_pool(2).await;
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("a@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();

    // Lock the row, change it, and walk away.
    let mut abandoned = store.begin_write().await.unwrap();
    let mut locked = abandoned.get_contact(&t, &c.id).await.unwrap().unwrap();
    locked.first_name = Some("Never".into());
    locked.version = 2;
    abandoned.update_contact(&t, &locked).await.unwrap();
    drop(abandoned);

    // The pool's connection is idle now and no one uses it: the rollback must not wait for its
    // next user. A writer on a connection of its own (outside the store) gets the row.
    let mut other = PgConnection::connect(&url).await.unwrap();
    sqlx::query("SET lock_timeout = '10s'")
        .execute(&mut other)
        .await
        .unwrap();
    let mut tx = other.begin().await.unwrap();
    let updated =
        sqlx::query("UPDATE contacts SET first_name = 'Grace' WHERE id = $1 AND version = 1")
            .bind(c.id.as_str())
            .execute(&mut *tx)
            .await
            .expect("the abandoned transaction's lock is released")
            .rows_affected();
    assert_eq!(updated, 1, "the abandoned change was rolled back");
    tx.commit().await.unwrap();
    c.first_name = Some("Grace".into());
    let mut read = store.begin_read().await.unwrap();
    assert_eq!(
        read.get_contact(&t, &c.id)
            .await
            .unwrap()
            .and_then(|c| c.first_name),
        Some("Grace".into())
    );
}

/// A user named as an owner by a write transaction (checked with `owner_exists`, or by the
/// guard of an insert that checks its own references) cannot be deleted until that transaction
/// ends, so no record is left owned by a deleted user; a sign-in's stamp on the user is not held
/// up meanwhile (`FOR KEY SHARE`, not `FOR SHARE`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_named_by_a_write_cannot_be_deleted_until_it_ends_but_can_sign_in() {
    let (url, store) = store_with_pool(3).await;
    let (ws, t) = setup(&store).await;
    let owner = User {
        id: UserId::from_uuid(uuid::Uuid::now_v7()),
        workspace_id: ws.id.clone(),
        email: Email::parse("owner@example.com").unwrap(),
        name: "Owner".into(),
        role: Role::Member,
        password_hash: None,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        last_login_at: None,
    };
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_user(&owner).await.unwrap();
    tx.commit().await.unwrap();
    let mut other = PgConnection::connect(&url).await.unwrap();
    sqlx::query("SET lock_timeout = '300ms'")
        .execute(&mut other)
        .await
        .unwrap();
    let named = [Reference {
        referent: Referent::User,
        id: owner.id.as_str(),
    }];
    for by_insert in [false, true] {
        let mut tx = store.begin_write().await.unwrap();
        if by_insert {
            let mut c = contact(None);
            c.owner_id = Some(owner.id.clone());
            tx.insert_contact(&t, &c, &named).await.unwrap();
        } else {
            assert!(tx.owner_exists(&t, owner.id.as_str()).await.unwrap());
        }
        let mut login = store.begin_write().await.unwrap();
        let at = Timestamp::from_millis(1_800_000_000_000);
        let stamped = tokio::time::timeout(
            Duration::from_secs(5),
            login.record_login(&ws.id, &owner.id, at),
        )
        .await
        .expect("a sign-in is not held up")
        .unwrap();
        assert_eq!(stamped.and_then(|u| u.last_login_at), Some(at));
        login.commit().await.unwrap();
        let err = sqlx::query("DELETE FROM users WHERE id = $1")
            .bind(owner.id.as_str())
            .execute(&mut other)
            .await
            .expect_err("the deletion waits for the write");
        assert_eq!(
            err.as_database_error().and_then(|e| e.code()).as_deref(),
            Some("55P03"),
            "{err}"
        );
        tx.commit().await.unwrap();
    }
    let deleted = sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(owner.id.as_str())
        .execute(&mut other)
        .await
        .expect("nothing holds the user once the writes ended")
        .rows_affected();
    assert_eq!(deleted, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_finds_its_pooled_connection_dead_at_begin_takes_another() {
    let (url, store) = store_with_pool(1).await;
    store.ping().await.unwrap();
    terminate(&url, backends(&url).await[0]).await;
    // Nothing was sent but BEGIN, so the write retries on a new connection instead of failing.
    let (_, t) = setup(&store).await;
    let mut tx = store
        .begin_write()
        .await
        .expect("a write begins on a fresh connection");
    tx.insert_contact(&t, &contact(Some("a@b.co")), &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_whose_capped_read_fills_up_reads_the_newest_matches_after_all() {
    // Statistics taken before an old import say its needle is rare, so the capped read of older
    // matches takes the trigram index and reads them in the heap's order, oldest first: its 5,000
    // (for a page under 25) miss the newest. The search must then read the rest newest first.
    let (url, store) = store_with_pool(2).await;
    let (_, t) = setup(&store).await;
    let newer: Vec<crm_domain::Contact> = (0..1_500)
        .map(|i| {
            let mut c = contact(None);
            c.last_name = Some(format!("Row {i}"));
            c
        })
        .collect();
    // Ids below every generated one, in ascending order: the heap holds them oldest first.
    let legacy: Vec<crm_domain::Contact> = (1..=5_001u128)
        .map(|i| {
            let mut c = contact(None);
            c.id = crm_domain::ContactId::from_uuid(uuid::Uuid::from_u128(i));
            c.last_name = Some("Legacy".into());
            c
        })
        .collect();
    let insert = async |rows: &[crm_domain::Contact]| {
        let mut tx = store.begin_write().await.unwrap();
        for chunk in rows.chunks(500) {
            tx.insert_contacts(&t, &chunk.iter().collect::<Vec<_>>())
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
    };
    insert(&newer).await;
    let mut admin = PgConnection::connect(&url).await.unwrap();
    sqlx::query("ANALYZE contacts")
        .execute(&mut admin)
        .await
        .unwrap();
    insert(&legacy).await;
    let mut tx = store.begin_read().await.unwrap();
    let needle = ContactFilter {
        q: Some("legacy".into()),
        ..Default::default()
    };
    let found = tx
        .list_contacts(
            &t,
            &needle,
            &Slice {
                before: None,
                limit: 3,
            },
        )
        .await
        .unwrap();
    let newest: Vec<_> = legacy.iter().rev().take(3).map(|c| c.id.clone()).collect();
    assert_eq!(found.into_iter().map(|c| c.id).collect::<Vec<_>>(), newest);
}
