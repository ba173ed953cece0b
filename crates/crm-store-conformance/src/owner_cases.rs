//! Conformance cases of records' owners (decisions §24): `owner_id` on every write and list of
//! contacts, companies and deals, a reference to an owner, and a deleted user's records left
//! without one.

use std::sync::Arc;

use crm_app::{
    ports::{
        ClearedReference, CompanyFilter, ContactFilter, DealFilter, FieldFilter, Reference,
        Referent, StageTotal,
    },
    Store, StoreError,
};
use crm_domain::{
    Contact, Email, Event, EventType, Mode, ObjectKind, Role, Timestamp, User, UserId, WorkspaceId,
};
use serde_json::json;

use crate::fixtures::*;

/// A user of `ws`, with an email no other test uses (emails are unique across workspaces).
fn user(ws: &WorkspaceId) -> User {
    User {
        id: UserId::from_uuid(uuid()),
        workspace_id: ws.clone(),
        email: Email::parse(&format!("owner.{}@example.com", uuid().simple())).unwrap(),
        name: "Owner".into(),
        role: Role::Member,
        password_hash: None,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        last_login_at: None,
    }
}

/// `n` users of `ws`, committed.
async fn users(store: &Arc<dyn Store>, ws: &WorkspaceId, n: usize) -> Vec<User> {
    let users: Vec<User> = (0..n).map(|_| user(ws)).collect();
    let mut tx = store.begin_write().await.unwrap();
    for u in &users {
        tx.insert_user(u).await.unwrap();
    }
    tx.commit().await.unwrap();
    users
}

fn owner_ref(id: &str) -> Reference<'_> {
    Reference {
        referent: Referent::User,
        id,
    }
}

fn owned(c: Contact, owner: &UserId) -> Contact {
    Contact {
        owner_id: Some(owner.clone()),
        ..c
    }
}

fn created(c: &Contact) -> Event {
    Event {
        merged_ids: None,
        data: json!({"id": c.id.as_str(), "object": "contact"}),
        ..sample_event(EventType::ContactCreated, Mode::Test)
    }
}

pub async fn owners_round_trip_on_every_write_of_contacts_companies_and_deals(
    store: Arc<dyn Store>,
) {
    let (ws, t) = setup(&store).await;
    let [ann, bob] = <[User; 2]>::try_from(users(&store, &ws.id, 2).await).unwrap();
    let mut c = owned(contact(Some("a@b.co")), &ann.id);
    let mut co = company("Acme", Some("acme.com"));
    co.owner_id = Some(ann.id.clone());
    let sales = pipeline("sales", &["new"]);
    let mut d = deal("Order", &sales, "new");
    d.owner_id = Some(ann.id.clone());
    let mut grouped = owned(contact(Some("g@b.co")), &bob.id);
    let unowned = contact(Some("u@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[owner_ref(ann.id.as_str())])
        .await
        .unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    let mut inserted = tx.insert_contacts(&t, &[&grouped, &unowned]).await.unwrap();
    inserted.sort();
    let mut expected = vec![grouped.id.clone(), unowned.id.clone()];
    expected.sort();
    assert_eq!(inserted, expected);
    tx.commit().await.unwrap();
    let alone = owned(contact(Some("alone@b.co")), &bob.id);
    store
        .insert_contact_alone(
            &t,
            &alone,
            &[owner_ref(bob.id.as_str())],
            &created(&alone),
            &sample_change(ObjectKind::Contact, alone.id.as_str()),
        )
        .await
        .unwrap();

    let mut tx = store.begin_read().await.unwrap();
    for x in [&c, &grouped, &unowned, &alone] {
        assert_eq!(tx.get_contact(&t, &x.id).await.unwrap().as_ref(), Some(x));
    }
    assert_eq!(
        tx.get_contact_by_email(&t, alone.email.as_ref().unwrap())
            .await
            .unwrap(),
        Some(alone.clone())
    );
    assert_eq!(tx.get_company(&t, &co.id).await.unwrap(), Some(co.clone()));
    assert_eq!(tx.get_deal(&t, &d.id).await.unwrap(), Some(d.clone()));
    drop(tx);

    // Owners change and go, one by one and together.
    let later = Timestamp::from_millis(1_700_000_009_000);
    c.owner_id = Some(bob.id.clone());
    c.version = 2;
    co.owner_id = None;
    co.version = 2;
    d.owner_id = Some(bob.id.clone());
    d.version = 2;
    grouped.owner_id = None;
    grouped.updated_at = later;
    grouped.version = 2;
    let mut now_owned = owned(unowned.clone(), &ann.id);
    now_owned.updated_at = later;
    now_owned.version = 2;
    let mut tx = store.begin_write().await.unwrap();
    tx.update_contact(&t, &c).await.unwrap();
    tx.update_company(&t, &co).await.unwrap();
    tx.update_deal(&t, &d).await.unwrap();
    let mut written = tx
        .update_contacts(&t, &[(&grouped, 1), (&now_owned, 1)])
        .await
        .unwrap();
    written.sort();
    let mut expected = vec![grouped.id.clone(), now_owned.id.clone()];
    expected.sort();
    assert_eq!(written, expected);
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    for x in [&c, &grouped, &now_owned] {
        assert_eq!(tx.get_contact(&t, &x.id).await.unwrap().as_ref(), Some(x));
    }
    assert_eq!(tx.get_company(&t, &co.id).await.unwrap(), Some(co.clone()));
    assert_eq!(tx.get_deal(&t, &d.id).await.unwrap(), Some(d.clone()));
    // The records of a page, read by id, carry their owners too.
    assert_eq!(
        tx.companies_by_ids(&t, std::slice::from_ref(&co.id))
            .await
            .unwrap(),
        vec![co]
    );
}

/// The owner filter holds on every way a list is read: alone, with a text search (long and short
/// needles), with the other filters, with custom fields, and with deleted records.
pub async fn lists_filter_by_owner_on_every_path(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let (ann, bob) = (UserId::from_uuid(uuid()), UserId::from_uuid(uuid()));
    let nobody = UserId::from_uuid(uuid());
    let co = company("Acme", None);
    let shaped = |owner: Option<&UserId>| {
        let mut c = contact(None);
        c.owner_id = owner.cloned();
        c.company_id = Some(co.id.clone());
        c.contact_type = Some("customer".into());
        c.custom_fields = json!({"tier": "gold"}).as_object().unwrap().clone();
        c
    };
    let a = shaped(Some(&ann));
    let b = shaped(Some(&bob));
    let mut gone = shaped(Some(&ann));
    gone.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let none = shaped(None);
    let elsewhere = shaped(Some(&ann));

    let mut rocket = company("Rocket Co", Some("rocket.com"));
    rocket.owner_id = Some(ann.clone());
    let mut rival = company("Rocket Inc", Some("rocket.io"));
    rival.owner_id = Some(bob.clone());
    let mut closed = company("Rocket Ltd", None);
    closed.owner_id = Some(ann.clone());
    closed.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));

    let sales = pipeline("sales", &["new"]);
    let hiring = pipeline("hiring", &["new"]);
    let deal_of = |title: &str, p: &crm_domain::Pipeline, owner: &UserId| {
        let mut d = deal(title, p, "new");
        d.owner_id = Some(owner.clone());
        d
    };
    let order = deal_of("Rocket order", &sales, &ann);
    let other_order = deal_of("Rocket order 2", &sales, &bob);
    let hire = deal_of("Hire a rocket engineer", &hiring, &ann);
    let mut lost = deal_of("Rocket lost", &sales, &ann);
    lost.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));

    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    for c in [&a, &b, &gone, &none] {
        tx.insert_contact(&t, c, &[]).await.unwrap();
    }
    tx.insert_contact(&live, &elsewhere, &[]).await.unwrap();
    for c in [&rocket, &rival, &closed] {
        tx.insert_company(&t, c).await.unwrap();
    }
    for p in [&sales, &hiring] {
        tx.insert_pipeline(&t, p).await.unwrap();
    }
    for d in [&order, &other_order, &hire, &lost] {
        tx.insert_deal(&t, d).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let of = |owner: &UserId| ContactFilter {
        owner_id: Some(owner.clone()),
        ..ContactFilter::default()
    };
    let gold = vec![FieldFilter {
        key: "tier".into(),
        value: json!("gold"),
    }];
    for (filter, expected) in [
        (of(&ann), vec![&a]),
        (of(&bob), vec![&b]),
        (of(&nobody), vec![]),
        (
            ContactFilter {
                include_deleted: true,
                ..of(&ann)
            },
            vec![&gone, &a],
        ),
        (
            ContactFilter {
                q: Some("lovelace".into()),
                ..of(&ann)
            },
            vec![&a],
        ),
        (
            ContactFilter {
                q: Some("lo".into()),
                ..of(&ann)
            },
            vec![&a],
        ),
        (
            ContactFilter {
                custom_fields: gold.clone(),
                ..of(&ann)
            },
            vec![&a],
        ),
        (
            ContactFilter {
                custom_fields: gold.clone(),
                q: Some("lovelace".into()),
                include_deleted: true,
                ..of(&ann)
            },
            vec![&gone, &a],
        ),
        (
            ContactFilter {
                company_id: Some(co.id.clone()),
                contact_type: Some("customer".into()),
                ..of(&bob)
            },
            vec![&b],
        ),
        (
            ContactFilter {
                q: Some("lovelace".into()),
                ..ContactFilter::default()
            },
            vec![&none, &b, &a],
        ),
    ] {
        let got = tx.list_contacts(&t, &filter, &all()).await.unwrap();
        let expected: Vec<Contact> = expected.into_iter().cloned().collect();
        assert_eq!(got, expected, "{filter:?}");
    }
    assert_eq!(
        tx.list_contacts(&live, &of(&ann), &all()).await.unwrap(),
        vec![elsewhere]
    );

    let of = |owner: &UserId| CompanyFilter {
        owner_id: Some(owner.clone()),
        ..CompanyFilter::default()
    };
    for (filter, expected) in [
        (of(&ann), vec![&rocket]),
        (of(&bob), vec![&rival]),
        (
            CompanyFilter {
                include_deleted: true,
                ..of(&ann)
            },
            vec![&closed, &rocket],
        ),
        (
            CompanyFilter {
                q: Some("rocket".into()),
                ..of(&ann)
            },
            vec![&rocket],
        ),
        (
            CompanyFilter {
                q: Some("ro".into()),
                ..of(&bob)
            },
            vec![&rival],
        ),
        (
            CompanyFilter {
                domain: Some("rocket.com".into()),
                ..of(&ann)
            },
            vec![&rocket],
        ),
        (
            CompanyFilter {
                domain: Some("rocket.io".into()),
                ..of(&ann)
            },
            vec![],
        ),
    ] {
        let got = tx.list_companies(&t, &filter, &all()).await.unwrap();
        let expected: Vec<crm_domain::Company> = expected.into_iter().cloned().collect();
        assert_eq!(got, expected, "{filter:?}");
    }

    let of = |owner: &UserId| DealFilter {
        owner_id: Some(owner.clone()),
        ..DealFilter::default()
    };
    for (filter, expected) in [
        (of(&ann), vec![&hire, &order]),
        (of(&bob), vec![&other_order]),
        (
            DealFilter {
                include_deleted: true,
                ..of(&ann)
            },
            vec![&lost, &hire, &order],
        ),
        (
            DealFilter {
                q: Some("rocket".into()),
                ..of(&ann)
            },
            vec![&hire, &order],
        ),
        (
            DealFilter {
                q: Some("ro".into()),
                ..of(&bob)
            },
            vec![&other_order],
        ),
        (
            DealFilter {
                pipeline_id: Some(sales.id.clone()),
                stage: Some("new".into()),
                ..of(&ann)
            },
            vec![&order],
        ),
    ] {
        let got = tx.list_deals(&t, &filter, &all()).await.unwrap();
        let expected: Vec<crm_domain::Deal> = expected.into_iter().cloned().collect();
        assert_eq!(got, expected, "{filter:?}");
    }
}

pub async fn stage_totals_count_only_an_owners_deals_when_asked(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let (ann, bob) = (UserId::from_uuid(uuid()), UserId::from_uuid(uuid()));
    let sales = pipeline("sales", &["new", "won"]);
    let other = pipeline("other", &["new"]);
    let deal_of = |p: &crm_domain::Pipeline,
                   stage: &str,
                   owner: Option<&UserId>,
                   cents: i64,
                   currency: &str| {
        let mut d = deal("Order", p, stage);
        d.owner_id = owner.cloned();
        d.value_cents = Some(cents);
        d.currency = Some(currency.into());
        d
    };
    let mut deleted = deal_of(&sales, "new", Some(&ann), 1_000, "EUR");
    deleted.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let deals = [
        deal_of(&sales, "new", Some(&ann), 100, "EUR"),
        deal_of(&sales, "won", Some(&ann), 200, "EUR"),
        deal_of(&sales, "new", Some(&bob), 50, "EUR"),
        deal_of(&sales, "new", None, 10, "USD"),
        deal_of(&other, "new", Some(&ann), 7, "EUR"),
        deleted,
    ];
    let mut tx = store.begin_write().await.unwrap();
    for p in [&sales, &other] {
        tx.insert_pipeline(&t, p).await.unwrap();
    }
    for d in &deals {
        tx.insert_deal(&t, d).await.unwrap();
    }
    tx.commit().await.unwrap();
    let total = |stage: &str, currency: &str, deals: u64, value_cents: i64| StageTotal {
        stage: stage.into(),
        currency: Some(currency.into()),
        deals,
        value_cents,
    };
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.stage_totals(&t, &sales.id, None).await.unwrap(),
        vec![
            total("new", "EUR", 2, 150),
            total("new", "USD", 1, 10),
            total("won", "EUR", 1, 200),
        ]
    );
    assert_eq!(
        tx.stage_totals(&t, &sales.id, Some(&ann)).await.unwrap(),
        vec![total("new", "EUR", 1, 100), total("won", "EUR", 1, 200)]
    );
    assert_eq!(
        tx.stage_totals(&t, &sales.id, Some(&bob)).await.unwrap(),
        vec![total("new", "EUR", 1, 50)]
    );
    assert!(tx
        .stage_totals(&t, &sales.id, Some(&UserId::from_uuid(uuid())))
        .await
        .unwrap()
        .is_empty());
}

/// An owner named by a contact's insert is a user of the tenant's workspace (of either mode):
/// a missing one, or one of another workspace, is a missing reference, reported in its place
/// among the others and before a taken email.
pub async fn an_owner_reference_names_a_user_of_the_tenants_workspace(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (other, _) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let [ann] = <[User; 1]>::try_from(users(&store, &ws.id, 1).await).unwrap();
    let [zed] = <[User; 1]>::try_from(users(&store, &other.id, 1).await).unwrap();
    let missing = UserId::from_uuid(uuid());
    let co = company("Acme", None);
    let held = contact(Some("held@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_contact(&t, &held, &[]).await.unwrap();
    tx.commit().await.unwrap();
    let company_ref = Reference::record(ObjectKind::Company, co.id.as_str());

    let mut tx = store.begin_write().await.unwrap();
    let a = owned(contact(Some("a@b.co")), &ann.id);
    for (refs, index) in [
        (vec![owner_ref(missing.as_str())], 0),
        (vec![company_ref, owner_ref(missing.as_str())], 1),
        (vec![owner_ref(zed.id.as_str())], 0),
        (vec![owner_ref(co.id.as_str())], 0),
    ] {
        let err = tx.insert_contact(&t, &a, &refs).await;
        assert!(
            matches!(err, Err(StoreError::MissingReference(i)) if i == index),
            "{refs:?}: {err:?}"
        );
    }
    let taken = owned(contact(Some("held@b.co")), &missing);
    assert!(matches!(
        tx.insert_contact(&t, &taken, &[owner_ref(missing.as_str())])
            .await,
        Err(StoreError::MissingReference(0))
    ));
    // The transaction is still usable, and an existing owner lets the insert through, in
    // either mode.
    tx.insert_contact(&t, &a, &[company_ref, owner_ref(ann.id.as_str())])
        .await
        .unwrap();
    let in_live = owned(contact(Some("a@b.co")), &ann.id);
    tx.insert_contact(&live, &in_live, &[owner_ref(ann.id.as_str())])
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let b = owned(contact(Some("b@b.co")), &missing);
    let err = store
        .insert_contact_alone(
            &t,
            &b,
            &[company_ref, owner_ref(missing.as_str())],
            &created(&b),
            &sample_change(ObjectKind::Contact, b.id.as_str()),
        )
        .await;
    assert!(
        matches!(err, Err(StoreError::MissingReference(1))),
        "{err:?}"
    );
    let b = owned(contact(Some("b@b.co")), &ann.id);
    store
        .insert_contact_alone(
            &t,
            &b,
            &[company_ref, owner_ref(ann.id.as_str())],
            &created(&b),
            &sample_change(ObjectKind::Contact, b.id.as_str()),
        )
        .await
        .unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &a.id).await.unwrap(), Some(a));
    assert_eq!(
        tx.get_contact(&live, &in_live.id).await.unwrap(),
        Some(in_live)
    );
    assert_eq!(tx.get_contact(&t, &b.id).await.unwrap(), Some(b));
    assert_eq!(
        tx.list_contacts(&t, &ContactFilter::default(), &all())
            .await
            .unwrap()
            .len(),
        3
    );
}

pub async fn owner_exists_finds_the_users_of_the_tenants_workspace_alone(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (other, _) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let [ann] = <[User; 1]>::try_from(users(&store, &ws.id, 1).await).unwrap();
    let [zed] = <[User; 1]>::try_from(users(&store, &other.id, 1).await).unwrap();
    let c = contact(None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();
    let asked = [
        (&t, ann.id.as_str(), true),
        (&live, ann.id.as_str(), true),
        (&t, zed.id.as_str(), false),
        (&t, c.id.as_str(), false),
        (&t, "usr_nope", false),
    ];
    let mut tx = store.begin_read().await.unwrap();
    for (tenant, id, found) in asked {
        assert_eq!(tx.owner_exists(tenant, id).await.unwrap(), found, "{id}");
    }
    drop(tx);
    let mut tx = store.begin_write().await.unwrap();
    for (tenant, id, found) in asked {
        assert_eq!(tx.owner_exists(tenant, id).await.unwrap(), found, "{id}");
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.delete_user(&ws.id, &ann.id).await.unwrap());
    assert!(!tx.owner_exists(&t, ann.id.as_str()).await.unwrap());
    tx.commit().await.unwrap();
}

/// `clear_owner`: every contact, company and deal of the tenant the user owns, soft-deleted
/// ones and merged tombstones included, loses its owner with a new version; no other record
/// changes, not those of another owner nor the user's records in the other mode.
pub async fn clearing_an_owner_frees_that_users_records_in_the_tenant_alone(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let live = tenant(&ws, Mode::Live);
    let [ann, bob] = <[User; 2]>::try_from(users(&store, &ws.id, 2).await).unwrap();
    let merged_at = Timestamp::from_millis(1_700_000_005_000);
    let a = owned(contact(Some("a@b.co")), &ann.id);
    let mut gone = owned(contact(None), &ann.id);
    gone.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let mut tomb = owned(contact(Some("tomb@b.co")), &ann.id);
    let bobs = owned(contact(None), &bob.id);
    let unowned = contact(None);
    let mut x = company("Acme", None);
    x.owner_id = Some(ann.id.clone());
    let y = company("Other", None);
    let sales = pipeline("sales", &["new"]);
    let mut p = deal("Order", &sales, "new");
    p.owner_id = Some(ann.id.clone());
    let mut lost = deal("Lost", &sales, "new");
    lost.owner_id = Some(ann.id.clone());
    lost.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let mut q = deal("Bob's", &sales, "new");
    q.owner_id = Some(bob.id.clone());
    let in_live = owned(contact(None), &ann.id);
    let mut live_deal = deal("Live", &sales, "new");
    live_deal.owner_id = Some(ann.id.clone());

    let mut tx = store.begin_write().await.unwrap();
    for c in [&a, &gone, &tomb, &bobs, &unowned] {
        tx.insert_contact(&t, c, &[]).await.unwrap();
    }
    for c in [&x, &y] {
        tx.insert_company(&t, c).await.unwrap();
    }
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_pipeline(&live, &sales).await.unwrap();
    for d in [&p, &lost, &q] {
        tx.insert_deal(&t, d).await.unwrap();
    }
    tx.insert_contact(&live, &in_live, &[]).await.unwrap();
    tx.insert_deal(&live, &live_deal).await.unwrap();
    tx.tombstone(
        &t,
        ObjectKind::Contact,
        &[tomb.id.as_str()],
        a.id.as_str(),
        merged_at,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    tomb.merged_into = Some(a.id.clone());
    tomb.deleted_at = Some(merged_at);
    tomb.updated_at = merged_at;
    tomb.version = 2;

    let now = Timestamp::from_millis(1_700_000_009_000);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.delete_user(&ws.id, &ann.id).await.unwrap());
    let mut cleared = tx.clear_owner(&t, &ann.id, now).await.unwrap();
    assert!(tx.clear_owner(&t, &ann.id, now).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    let key = |r: &ClearedReference| (r.object.as_str(), r.id.clone());
    cleared.sort_by_key(key);
    let entry = |object: ObjectKind, id: &str, version: i64| ClearedReference {
        object,
        id: id.to_owned(),
        field: "owner_id".into(),
        version,
    };
    let mut expected = vec![
        entry(ObjectKind::Contact, a.id.as_str(), 2),
        entry(ObjectKind::Contact, gone.id.as_str(), 2),
        entry(ObjectKind::Contact, tomb.id.as_str(), 3),
        entry(ObjectKind::Company, x.id.as_str(), 2),
        entry(ObjectKind::Deal, p.id.as_str(), 2),
        entry(ObjectKind::Deal, lost.id.as_str(), 2),
    ];
    expected.sort_by_key(key);
    assert_eq!(cleared, expected);

    let freed = |c: &Contact| Contact {
        owner_id: None,
        updated_at: now,
        version: c.version + 1,
        ..c.clone()
    };
    let mut tx = store.begin_read().await.unwrap();
    for (before, after) in [
        (&a, freed(&a)),
        (&gone, freed(&gone)),
        (&tomb, freed(&tomb)),
        (&bobs, bobs.clone()),
        (&unowned, unowned.clone()),
    ] {
        assert_eq!(tx.get_contact(&t, &before.id).await.unwrap(), Some(after));
    }
    assert_eq!(
        tx.get_company(&t, &x.id).await.unwrap(),
        Some(crm_domain::Company {
            owner_id: None,
            updated_at: now,
            version: 2,
            ..x.clone()
        })
    );
    assert_eq!(tx.get_company(&t, &y.id).await.unwrap(), Some(y));
    for d in [&p, &lost] {
        assert_eq!(
            tx.get_deal(&t, &d.id).await.unwrap(),
            Some(crm_domain::Deal {
                owner_id: None,
                updated_at: now,
                version: 2,
                ..d.clone()
            })
        );
    }
    assert_eq!(tx.get_deal(&t, &q.id).await.unwrap(), Some(q));
    assert_eq!(
        tx.get_contact(&live, &in_live.id).await.unwrap(),
        Some(in_live.clone()),
        "the other mode's records are cleared by a call of their own"
    );
    assert_eq!(
        tx.get_deal(&live, &live_deal.id).await.unwrap(),
        Some(live_deal.clone())
    );
    drop(tx);

    let mut tx = store.begin_write().await.unwrap();
    let mut cleared = tx.clear_owner(&live, &ann.id, now).await.unwrap();
    tx.commit().await.unwrap();
    cleared.sort_by_key(key);
    let mut expected = vec![
        entry(ObjectKind::Contact, in_live.id.as_str(), 2),
        entry(ObjectKind::Deal, live_deal.id.as_str(), 2),
    ];
    expected.sort_by_key(key);
    assert_eq!(cleared, expected);
}
