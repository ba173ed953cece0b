//! The cases. Each takes a fresh store and panics on a broken contract.

use std::sync::Arc;

use crm_app::{
    idempotency::{IdemRecord, StoredReply},
    ports::{
        ActivityFilter, CompanyFilter, ContactFilter, DealFilter, FieldFilter, KeyUse, PlanCounts,
        Reference, Slice, UsageLock,
    },
    Store, StoreError,
};
use crm_domain::{
    CompanyId, Contact, ContactId, DataType, Email, Event, EventId, EventType, FieldDef, Mode,
    ObjectKind, ObjectType, Plan, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn all() -> Slice {
    Slice {
        before: None,
        limit: 1000,
    }
}

/// A workspace and a test tenant in it, committed.
async fn setup(store: &Arc<dyn Store>) -> (crm_app::auth::Workspace, crm_domain::Tenant) {
    let ws = workspace();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    let t = tenant(&ws, Mode::Test);
    (ws, t)
}

pub async fn workspace_and_keys_round_trip(store: Arc<dyn Store>) {
    let mut tx = store.begin_read().await.unwrap();
    assert!(!tx.has_workspaces().await.unwrap());
    drop(tx);
    let (ws, t) = setup(&store).await;
    let key = api_key(&ws, Mode::Test, "abc123");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_api_key(&key).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.has_workspaces().await.unwrap());
    assert_eq!(tx.get_workspace(&ws.id).await.unwrap(), Some(ws.clone()));
    let (found, found_ws) = tx
        .find_api_key("abc123")
        .await
        .unwrap()
        .expect("key by hash");
    assert_eq!(found, key);
    assert_eq!(found_ws, ws);
    assert!(tx.find_api_key("other").await.unwrap().is_none());
    assert_eq!(
        tx.get_api_key(&t, &key.id).await.unwrap(),
        Some(key.clone())
    );
    assert!(tx
        .get_api_key(&tenant(&ws, Mode::Live), &key.id)
        .await
        .unwrap()
        .is_none());
}

pub async fn contact_round_trips_every_field(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("ada@example.com"));
    c.phone = Some("+44 20 7946 0000".into());
    c.linkedin_url = Some("https://linkedin.com/in/ada".into());
    c.company_id = Some(CompanyId::from_uuid(uuid()));
    c.contact_type = Some("customer".into());
    c.custom_fields = json!({"score": 9.5, "tags": ["a", "b"], "vip": true, "nested": {"é": "ü"}})
        .as_object()
        .unwrap()
        .clone();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap(), Some(c.clone()));
    assert_eq!(
        tx.get_contact_by_email(&t, c.email.as_ref().unwrap())
            .await
            .unwrap(),
        Some(c)
    );
}

pub async fn duplicate_email_is_reported_and_the_transaction_stays_usable(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &contact(Some("a@b.co")), &[])
        .await
        .unwrap();
    assert!(matches!(
        tx.insert_contact(&t, &contact(Some("a@b.co")), &[]).await,
        Err(StoreError::Duplicate)
    ));
    tx.insert_contact(&t, &contact(Some("c@d.co")), &[])
        .await
        .unwrap();
    tx.insert_contact(&t, &contact(None), &[]).await.unwrap();
    tx.insert_contact(&t, &contact(None), &[]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_contacts(&t, &ContactFilter::default(), &all())
            .await
            .unwrap()
            .len(),
        4
    );
}

pub async fn insert_checks_references_first_and_leaves_the_transaction_usable(
    store: Arc<dyn Store>,
) {
    let (ws, t) = setup(&store).await;
    let co = company("Acme", None);
    let mut deleted = company("Gone", None);
    deleted.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_company(&t, &deleted).await.unwrap();
    let held = contact(Some("held@b.co"));
    tx.insert_contact(&t, &held, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let missing = CompanyId::from_uuid(uuid());
    let elsewhere = company("Elsewhere", None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&tenant(&ws, Mode::Live), &elsewhere)
        .await
        .unwrap();
    fn company_ref(id: &CompanyId) -> Reference<'_> {
        Reference {
            object: ObjectKind::Company,
            id: id.as_str(),
        }
    }
    // The second of two references is missing: its index is reported, nothing is written.
    let a = contact(Some("a@b.co"));
    let refs = [company_ref(&co.id), company_ref(&missing)];
    assert!(matches!(
        tx.insert_contact(&t, &a, &refs).await,
        Err(StoreError::MissingReference(1))
    ));
    // A record of another tenant does not exist for this one.
    assert!(matches!(
        tx.insert_contact(&t, &a, &[company_ref(&elsewhere.id)])
            .await,
        Err(StoreError::MissingReference(0))
    ));
    // A missing reference is reported before a taken email.
    let taken = contact(Some("held@b.co"));
    assert!(matches!(
        tx.insert_contact(&t, &taken, &[company_ref(&missing)])
            .await,
        Err(StoreError::MissingReference(0))
    ));
    assert!(matches!(
        tx.insert_contact(&t, &taken, &[company_ref(&co.id)]).await,
        Err(StoreError::Duplicate)
    ));
    // Existing references, a soft-deleted one included, let the insert through; the transaction
    // is still usable after the refusals.
    tx.insert_contact(&t, &a, &[company_ref(&co.id), company_ref(&deleted.id)])
        .await
        .unwrap();
    let person = Reference {
        object: ObjectKind::Contact,
        id: held.id.as_str(),
    };
    tx.insert_contact(&t, &contact(None), &[person])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &a.id).await.unwrap(), Some(a));
    assert_eq!(
        tx.list_contacts(&t, &ContactFilter::default(), &all())
            .await
            .unwrap()
            .len(),
        3
    );
}

/// `Store::insert_contact_alone` (a create nothing reacts to): the contact, its event and the
/// event's queue row, all or nothing, with `insert_contact`'s errors in its order.
pub async fn a_contact_inserted_alone_comes_with_its_queued_event_or_not_at_all(
    store: Arc<dyn Store>,
) {
    let (ws, t) = setup(&store).await;
    let co = company("Acme", None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.commit().await.unwrap();
    let missing = CompanyId::from_uuid(uuid());
    let (co_id, missing) = (co.id.as_str(), missing.as_str());
    fn refs<'a>(ids: &[&'a str]) -> Vec<Reference<'a>> {
        ids.iter()
            .map(|id| Reference {
                object: ObjectKind::Company,
                id,
            })
            .collect()
    }
    let created = |c: &crm_domain::Contact| Event {
        data: c.snapshot(),
        ..sample_event(EventType::ContactCreated, Mode::Test)
    };

    let a = contact(Some("a@b.co"));
    let a_event = created(&a);
    store
        .insert_contact_alone(&t, &a, &refs(&[co_id]), &a_event)
        .await
        .unwrap();
    // Refused: the second reference missing (reported before the taken email), then the email.
    let taken = contact(Some("a@b.co"));
    let refused = created(&taken);
    let err = store
        .insert_contact_alone(&t, &taken, &refs(&[co_id, missing]), &refused)
        .await;
    assert!(
        matches!(err, Err(StoreError::MissingReference(1))),
        "{err:?}"
    );
    let err = store
        .insert_contact_alone(&t, &taken, &refs(&[co_id]), &refused)
        .await;
    assert!(matches!(err, Err(StoreError::Duplicate)), "{err:?}");
    // The same email in another tenant is free.
    let live = tenant(&ws, Mode::Live);
    let elsewhere = Event {
        mode: Mode::Live,
        ..created(&taken)
    };
    store
        .insert_contact_alone(&live, &taken, &[], &elsewhere)
        .await
        .unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        tx.list_contacts(&t, &ContactFilter::default(), &all())
            .await
            .unwrap(),
        vec![a.clone()]
    );
    assert_eq!(
        tx.list_events(&t, None, &all()).await.unwrap(),
        vec![a_event.clone()]
    );
    assert_eq!(
        tx.list_events(&live, None, &all()).await.unwrap(),
        vec![elsewhere.clone()]
    );
    drop(tx);
    // Each written event is queued for fan-out once; the refused one is not.
    let mut tx = store.begin_write().await.unwrap();
    let mut queued: Vec<(String, &str)> = tx
        .take_events_to_dispatch(1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant.workspace_id == t.workspace_id)
        .map(|r| (r.event_id.to_string(), r.event_type.as_str()))
        .collect();
    tx.commit().await.unwrap();
    queued.sort();
    let mut expected = vec![
        (a_event.id.to_string(), "contact.created"),
        (elsewhere.id.to_string(), "contact.created"),
    ];
    expected.sort();
    assert_eq!(queued, expected);
}

/// `insert_contacts` (grouped creates): in one call, each contact is inserted or skipped as
/// `insert_contact` would decide with its company as its only reference; the ids of those
/// inserted come back, and the transaction stays usable.
pub async fn contacts_inserted_together_skip_taken_emails_and_missing_companies(
    store: Arc<dyn Store>,
) {
    let (ws, t) = setup(&store).await;
    let co = company("Acme", None);
    let mut gone = company("Gone", None);
    gone.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    let elsewhere = company("Elsewhere", None);
    let held = contact(Some("held@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_company(&t, &gone).await.unwrap();
    tx.insert_company(&tenant(&ws, Mode::Live), &elsewhere)
        .await
        .unwrap();
    tx.insert_contact(&t, &held, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let with_company = |email: &str, company: &CompanyId| {
        let mut c = contact(Some(email));
        c.company_id = Some(company.clone());
        c
    };
    let mut full = with_company("full@b.co", &co.id);
    full.phone = Some("+44 20 7946 0000".into());
    full.linkedin_url = Some("https://linkedin.com/in/full".into());
    full.contact_type = Some("customer".into());
    full.custom_fields = json!({"score": 9.5, "tags": ["a", "b"], "nested": {"é": "ü"}})
        .as_object()
        .unwrap()
        .clone();
    let cases = [
        (full, true),
        (contact(None), true),
        (contact(Some("held@b.co")), false), // taken by a stored contact
        (with_company("twice@b.co", &co.id), true),
        (contact(Some("twice@b.co")), false), // taken by an earlier one of the call
        (
            with_company("nowhere@b.co", &CompanyId::from_uuid(uuid())),
            false,
        ), // no such company
        (with_company("other@b.co", &elsewhere.id), false), // another tenant's company
        (with_company("gone@b.co", &gone.id), true), // soft-deleted companies exist
        (contact(None), true),
    ];
    let contacts: Vec<_> = cases.iter().map(|(c, _)| c).collect();
    let mut tx = store.begin_write().await.unwrap();
    let mut inserted = tx.insert_contacts(&t, &contacts).await.unwrap();
    inserted.sort();
    let mut expected: Vec<_> = cases
        .iter()
        .filter(|(_, ok)| *ok)
        .map(|(c, _)| c.id.clone())
        .collect();
    expected.sort();
    assert_eq!(inserted, expected);
    // Still usable: a skipped contact goes in once its email is free.
    tx.insert_contact(&t, &contact(Some("nowhere@b.co")), &[])
        .await
        .unwrap();
    assert!(tx.insert_contacts(&t, &[]).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    for (c, ok) in &cases {
        assert_eq!(
            tx.get_contact(&t, &c.id).await.unwrap().as_ref(),
            ok.then_some(c),
            "{:?}",
            c.email
        );
    }
    assert_eq!(
        tx.list_contacts(&t, &ContactFilter::default(), &all())
            .await
            .unwrap()
            .len(),
        1 + expected.len() + 1
    );
    assert_eq!(
        tx.list_contacts(
            &t,
            &ContactFilter {
                company_id: Some(co.id.clone()),
                ..ContactFilter::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        2
    );
}

pub async fn email_is_unique_per_tenant_only(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &contact(Some("a@b.co")), &[])
        .await
        .unwrap();
    tx.insert_contact(&tenant(&ws, Mode::Live), &contact(Some("a@b.co")), &[])
        .await
        .unwrap();
    tx.insert_contact(&tenant(&ws2, Mode::Test), &contact(Some("a@b.co")), &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

pub async fn update_checks_the_version(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("a@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    c.first_name = Some("Grace".into());
    c.version = 2;
    c.updated_at = Timestamp::from_millis(1_700_000_009_000);
    c.deleted_at = Some(Timestamp::from_millis(1_700_000_009_000));
    tx.update_contact(&t, &c).await.unwrap();
    // Writing "version 2" again expects the row at version 1, which it no longer is.
    assert!(matches!(
        tx.update_contact(&t, &c).await,
        Err(StoreError::Stale)
    ));
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap(), Some(c));
}

pub async fn update_to_a_taken_email_is_a_duplicate(store: Arc<dyn Store>) {
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
    // The transaction stays usable: the caller reads the holder of the email, then goes on.
    assert_eq!(
        tx.get_contact_by_email(&t, &Email::parse("a@b.co").unwrap())
            .await
            .unwrap()
            .map(|c| c.id),
        Some(a.id.clone())
    );
    tx.insert_contact(&t, &contact(Some("c@b.co")), &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

pub async fn contacts_list_newest_first_in_slices(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..7 {
        let c = contact(Some(&format!("p{i}@example.com")));
        ids.push(c.id.clone());
        tx.insert_contact(&t, &c, &[]).await.unwrap();
    }
    tx.commit().await.unwrap();
    ids.reverse();
    let mut tx = store.begin_read().await.unwrap();
    let first = tx
        .list_contacts(
            &t,
            &ContactFilter::default(),
            &Slice {
                before: None,
                limit: 3,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        ids[..3]
    );
    let next = Slice {
        before: Some(first[2].id.to_string()),
        limit: 10,
    };
    let rest = tx
        .list_contacts(&t, &ContactFilter::default(), &next)
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        ids[3..]
    );
}

pub async fn contact_filters_match(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let company = CompanyId::from_uuid(uuid());
    let mut a = contact(Some("grace@navy.mil"));
    a.first_name = Some("Grace".into());
    a.last_name = Some("Hopper".into());
    a.company_id = Some(company.clone());
    a.contact_type = Some("admiral".into());
    let mut b = contact(Some("alan@example.org"));
    b.first_name = Some("Alan".into());
    b.last_name = Some("Turing".into());
    b.phone = Some("+1 555 0100".into());
    // Letters beyond ASCII in either case: a search folds them as it folds ASCII ones.
    let mut c = contact(None);
    c.first_name = Some("ÉMILE".into());
    c.last_name = Some("Zola-Müller".into());
    // The KELVIN SIGN, which case folding takes to an ASCII "k".
    let mut d = contact(None);
    d.last_name = Some("\u{212A}elvin".into());
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a, &[]).await.unwrap();
    tx.insert_contact(&t, &b, &[]).await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_contact(&t, &d, &[]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let find = |f: ContactFilter| f;
    for (filter, expected) in [
        (
            find(ContactFilter {
                q: Some("HOPP".into()),
                ..Default::default()
            }),
            vec![a.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("grace hop".into()),
                ..Default::default()
            }),
            vec![a.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("example.org".into()),
                ..Default::default()
            }),
            vec![b.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("555".into()),
                ..Default::default()
            }),
            vec![b.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("émile".into()),
                ..Default::default()
            }),
            vec![c.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("MÜLLER".into()),
                ..Default::default()
            }),
            vec![c.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("ZOLA".into()),
                ..Default::default()
            }),
            vec![c.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("kelvin".into()),
                ..Default::default()
            }),
            vec![d.id.clone()],
        ),
        (
            find(ContactFilter {
                email: Some(Email::parse("alan@example.org").unwrap()),
                ..Default::default()
            }),
            vec![b.id.clone()],
        ),
        (
            find(ContactFilter {
                company_id: Some(company.clone()),
                ..Default::default()
            }),
            vec![a.id.clone()],
        ),
        (
            find(ContactFilter {
                contact_type: Some("admiral".into()),
                ..Default::default()
            }),
            vec![a.id.clone()],
        ),
        (
            find(ContactFilter {
                q: Some("nobody".into()),
                ..Default::default()
            }),
            vec![],
        ),
    ] {
        let got: Vec<_> = tx
            .list_contacts(&t, &filter, &all())
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(got, expected, "filter {filter:?}");
    }
}

pub async fn custom_field_filters_match_newest_first_and_follow_writes(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let cf = |v: serde_json::Value| v.as_object().unwrap().clone();
    let long = "n".repeat(250);
    // Shares the first 200 characters with `long`: only the re-check tells them apart.
    let long_twin = format!("{}m", "n".repeat(249));
    let mut a = contact(None);
    a.contact_type = Some("admiral".into());
    a.custom_fields = cf(
        json!({"tier": "gold", "score": 5, "vip": true, "tags": ["x", "y", "x"], "note": long, "since": "2020-01-02"}),
    );
    let mut b = contact(None);
    b.custom_fields = cf(json!({"tier": "gold", "score": 5.0, "vip": false, "tags": ["y"]}));
    let mut c = contact(None);
    c.custom_fields = cf(json!({"tier": "silver", "score": 6, "note": "5"}));
    let mut d = contact(None);
    d.custom_fields = cf(json!({"tier": "gold", "note": long_twin}));
    let mut other = contact(None);
    other.custom_fields = cf(json!({"tier": "gold"}));
    let mut tx = store.begin_write().await.unwrap();
    for x in [&a, &b, &c, &d] {
        tx.insert_contact(&t, x, &[]).await.unwrap();
    }
    tx.insert_contact(&tenant(&ws, Mode::Live), &other, &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let by = |pairs: &[(&str, serde_json::Value)]| ContactFilter {
        custom_fields: pairs
            .iter()
            .map(|(k, v)| FieldFilter {
                key: (*k).into(),
                value: v.clone(),
            })
            .collect(),
        ..Default::default()
    };
    let ids = |cs: &[&crm_domain::Contact]| cs.iter().map(|c| c.id.clone()).collect::<Vec<_>>();
    let mut tx = store.begin_read().await.unwrap();
    for (filter, expected) in [
        (by(&[("tier", json!("gold"))]), ids(&[&d, &b, &a])),
        (by(&[("tier", json!("silver"))]), ids(&[&c])),
        (by(&[("tier", json!("gol"))]), vec![]),
        (by(&[("score", json!(5))]), ids(&[&b, &a])),
        (by(&[("score", json!(5.0))]), ids(&[&b, &a])),
        (by(&[("note", json!("5"))]), ids(&[&c])),
        (by(&[("score", json!("5"))]), vec![]),
        (by(&[("vip", json!(true))]), ids(&[&a])),
        (by(&[("vip", json!(false))]), ids(&[&b])),
        (by(&[("tags", json!("y"))]), ids(&[&b, &a])),
        (by(&[("tags", json!("x"))]), ids(&[&a])),
        (by(&[("since", json!("2020-01-02"))]), ids(&[&a])),
        (by(&[("note", json!(long.clone()))]), ids(&[&a])),
        (by(&[("note", json!(long_twin.clone()))]), ids(&[&d])),
        (
            by(&[("tags", json!("x")), ("tier", json!("gold"))]),
            ids(&[&a]),
        ),
        (
            by(&[
                ("score", json!(5)),
                ("tier", json!("gold")),
                ("vip", json!(false)),
            ]),
            ids(&[&b]),
        ),
        (
            by(&[("tags", json!("x")), ("tier", json!("silver"))]),
            vec![],
        ),
        (
            ContactFilter {
                contact_type: Some("admiral".into()),
                ..by(&[("tier", json!("gold"))])
            },
            ids(&[&a]),
        ),
        (
            ContactFilter {
                q: Some("lovelace".into()),
                ..by(&[("tier", json!("gold"))])
            },
            ids(&[&d, &b, &a]),
        ),
    ] {
        let got: Vec<_> = tx
            .list_contacts(&t, &filter, &all())
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(got, expected, "filter {filter:?}");
    }
    // Slices of the filtered list, newest first.
    let gold = by(&[("tier", json!("gold"))]);
    let first = tx
        .list_contacts(
            &t,
            &gold,
            &Slice {
                before: None,
                limit: 2,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        first.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        ids(&[&d, &b])
    );
    let rest = tx
        .list_contacts(
            &t,
            &gold,
            &Slice {
                before: Some(b.id.to_string()),
                limit: 2,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        rest.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        ids(&[&a])
    );
    drop(tx);

    // Writes move records in and out of the filter in their own transaction.
    let mut tx = store.begin_write().await.unwrap();
    let mut b2 = b.clone();
    b2.custom_fields = cf(json!({"tier": "silver", "tags": ["y"]}));
    b2.version += 1;
    tx.update_contact(&t, &b2).await.unwrap();
    let mut a2 = a.clone();
    a2.first_name = Some("Augusta".into());
    a2.version += 1;
    tx.update_contact(&t, &a2).await.unwrap();
    let mut d2 = d.clone();
    d2.deleted_at = Some(Timestamp::from_millis(1_700_000_001_000));
    d2.version += 1;
    tx.update_contact(&t, &d2).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for (filter, expected) in [
        (by(&[("tier", json!("gold"))]), ids(&[&a])),
        (
            ContactFilter {
                include_deleted: true,
                ..by(&[("tier", json!("gold"))])
            },
            ids(&[&d, &a]),
        ),
        (by(&[("tier", json!("silver"))]), ids(&[&c, &b])),
        (by(&[("score", json!(5))]), ids(&[&a])),
        (by(&[("tags", json!("y"))]), ids(&[&b, &a])),
    ] {
        let got: Vec<_> = tx
            .list_contacts(&t, &filter, &all())
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(got, expected, "after the writes, filter {filter:?}");
    }
}

pub async fn like_wildcards_in_q_are_literal(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut a = contact(None);
    a.first_name = Some("100%_sure".into());
    let mut b = contact(None);
    b.first_name = Some("1000 sure".into());
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a, &[]).await.unwrap();
    tx.insert_contact(&t, &b, &[]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for q in ["0%_", "%", "_sure"] {
        let got = tx
            .list_contacts(
                &t,
                &ContactFilter {
                    q: Some(q.into()),
                    ..Default::default()
                },
                &all(),
            )
            .await
            .unwrap();
        assert_eq!(got.len(), 1, "q={q}");
        assert_eq!(got[0].id, a.id);
    }
}

pub async fn soft_deleted_contacts_are_listed_only_on_request(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("gone@example.com"));
    c.deleted_at = Some(Timestamp::from_millis(1_700_000_000_999));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .list_contacts(&t, &ContactFilter::default(), &all())
        .await
        .unwrap()
        .is_empty());
    let with_deleted = ContactFilter {
        include_deleted: true,
        ..Default::default()
    };
    assert_eq!(
        tx.list_contacts(&t, &with_deleted, &all()).await.unwrap(),
        vec![c]
    );
}

pub async fn company_round_trip_update_and_filters(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut acme = company("Acme Rockets", Some("acme.io"));
    acme.custom_fields = json!({"size": 10}).as_object().unwrap().clone();
    let other = company("Initech", Some("initech.com"));
    let twin = company("Acme Twin", Some("acme.io"));
    let mut tx = store.begin_write().await.unwrap();
    for c in [&acme, &other, &twin] {
        tx.insert_company(&t, c).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    acme.name = "Acme Rocket Co".into();
    acme.version = 2;
    tx.update_company(&t, &acme).await.unwrap();
    assert!(matches!(
        tx.update_company(&t, &acme).await,
        Err(StoreError::Stale)
    ));
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_company(&t, &acme.id).await.unwrap(),
        Some(acme.clone())
    );
    let by_domain = CompanyFilter {
        domain: Some("ACME.io".into()),
        ..Default::default()
    };
    let got: Vec<_> = tx
        .list_companies(&t, &by_domain, &all())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(got, vec![twin.id.clone(), acme.id.clone()]);
    let by_q = CompanyFilter {
        q: Some("rocket".into()),
        ..Default::default()
    };
    let got: Vec<_> = tx
        .list_companies(&t, &by_q, &all())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(got, vec![acme.id.clone()]);
}

pub async fn tenants_never_see_each_other(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    let co = company("Acme", None);
    let event = sample_event(EventType::ContactCreated, Mode::Test);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_event(&t, &event).await.unwrap();
    tx.insert_enum_value(&t, "contact.type", "vip", None, Timestamp::from_millis(0))
        .await
        .unwrap();
    tx.insert_idempotency(&t, &idem("k1")).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for other in [
        tenant(&ws, Mode::Live),
        tenant(&ws2, Mode::Test),
        tenant(&ws2, Mode::Live),
    ] {
        assert!(tx.get_contact(&other, &c.id).await.unwrap().is_none());
        assert!(tx
            .get_contact_by_email(&other, c.email.as_ref().unwrap())
            .await
            .unwrap()
            .is_none());
        assert!(tx.get_company(&other, &co.id).await.unwrap().is_none());
        let everything = ContactFilter {
            include_deleted: true,
            ..Default::default()
        };
        assert!(tx
            .list_contacts(&other, &everything, &all())
            .await
            .unwrap()
            .is_empty());
        assert!(tx
            .list_companies(
                &other,
                &CompanyFilter {
                    include_deleted: true,
                    ..Default::default()
                },
                &all()
            )
            .await
            .unwrap()
            .is_empty());
        assert!(!tx
            .record_exists(&other, ObjectKind::Contact, c.id.as_str())
            .await
            .unwrap());
        assert!(!tx
            .record_exists(&other, ObjectKind::Company, co.id.as_str())
            .await
            .unwrap());
        assert!(tx
            .list_events(&other, None, &all())
            .await
            .unwrap()
            .is_empty());
        assert!(tx
            .load_registry(&other, ObjectKind::Contact)
            .await
            .unwrap()
            .enums
            .is_empty());
        assert!(tx.get_idempotency(&other, "k1").await.unwrap().is_none());
    }
}

pub async fn registry_groups_and_values_are_idempotent_and_ordered(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(5);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.insert_enum_group(&t, "contact.type", now).await.unwrap());
    assert!(!tx.insert_enum_group(&t, "contact.type", now).await.unwrap());
    for v in ["zeta", "alpha", "mid"] {
        assert!(tx
            .insert_enum_value(&t, "deal.source", v, Some("Label"), now)
            .await
            .unwrap());
    }
    assert!(!tx
        .insert_enum_value(&t, "deal.source", "alpha", None, now)
        .await
        .unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let r = tx.load_registry(&t, ObjectKind::Contact).await.unwrap();
    assert!(r.enums["contact.type"].is_empty());
    let values: Vec<_> = r.enums["deal.source"]
        .iter()
        .map(|v| v.value.as_str())
        .collect();
    assert_eq!(
        values,
        ["zeta", "alpha", "mid"],
        "values keep registration order"
    );
    assert_eq!(r.enums["deal.source"][0].label.as_deref(), Some("Label"));
}

fn field(object: ObjectKind, key: &str, data_type: DataType) -> FieldDef {
    FieldDef::new(
        object,
        key,
        Some(format!("Label {key}")),
        data_type,
        None,
        false,
    )
    .expect("valid field")
}

pub async fn custom_fields_register_once_in_order_per_object(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let zeta = field(ObjectKind::Contact, "zeta", DataType::Number);
    let mut tier = field(ObjectKind::Contact, "tier", DataType::Select);
    tier.required = true;
    let alpha = FieldDef {
        label: None,
        ..field(ObjectKind::Contact, "alpha", DataType::Multiselect)
    };
    let industry = field(ObjectKind::Company, "industry", DataType::Text);
    let mut tx = store.begin_write().await.unwrap();
    for f in [&zeta, &tier, &industry, &alpha] {
        assert!(
            tx.insert_field(&t, f, now).await.unwrap(),
            "{} is new",
            f.key
        );
    }
    // Re-registering a key changes nothing, whatever the new definition says.
    let retyped = FieldDef {
        label: Some("Other".into()),
        required: true,
        ..field(ObjectKind::Contact, "zeta", DataType::Text)
    };
    assert!(!tx.insert_field(&t, &retyped, now).await.unwrap());
    // The same key on another object is another field.
    let company_zeta = field(ObjectKind::Company, "zeta", DataType::Boolean);
    assert!(tx.insert_field(&t, &company_zeta, now).await.unwrap());
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let contact = tx.load_registry(&t, ObjectKind::Contact).await.unwrap();
    assert_eq!(
        contact.fields,
        vec![zeta.clone(), tier.clone(), alpha.clone()],
        "every attribute round-trips, in registration order"
    );
    let company = tx.load_registry(&t, ObjectKind::Company).await.unwrap();
    assert_eq!(company.fields, vec![industry.clone(), company_zeta.clone()]);
    assert!(tx
        .load_registry(&t, ObjectKind::Deal)
        .await
        .unwrap()
        .fields
        .is_empty());
    let all = tx.list_fields(&t).await.unwrap();
    let of = |o: ObjectKind| {
        all.iter()
            .filter(|f| f.object == o)
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(all.len(), 5);
    assert_eq!(of(ObjectKind::Contact), vec![zeta, tier, alpha]);
    assert_eq!(of(ObjectKind::Company), vec![industry, company_zeta]);
}

pub async fn object_types_register_once_in_order(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let partner = ObjectType {
        key: "partner".into(),
        label: Some("Partner".into()),
    };
    let asset = ObjectType {
        key: "asset".into(),
        label: None,
    };
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.list_object_types(&t).await.unwrap().is_empty());
    assert!(tx.insert_object_type(&t, &partner, now).await.unwrap());
    assert!(tx.insert_object_type(&t, &asset, now).await.unwrap());
    let relabelled = ObjectType {
        key: "partner".into(),
        label: Some("Reseller".into()),
    };
    assert!(!tx.insert_object_type(&t, &relabelled, now).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_object_types(&t).await.unwrap(),
        vec![partner, asset]
    );
}

/// Two transactions registering at once: the one that commits second comes second, even though
/// it started before the first committed (the position must not be read from a stale snapshot).
pub async fn concurrent_registrations_keep_registration_order(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let mut first = store.begin_write().await.unwrap();
    assert!(first
        .insert_field(&t, &field(ObjectKind::Deal, "zeta", DataType::Text), now)
        .await
        .unwrap());
    assert!(first
        .insert_object_type(
            &t,
            &ObjectType {
                key: "zeta".into(),
                label: None
            },
            now
        )
        .await
        .unwrap());
    let second = {
        let (store, t) = (store.clone(), t.clone());
        tokio::spawn(async move {
            let mut tx = store.begin_write().await.unwrap();
            assert!(tx
                .insert_field(&t, &field(ObjectKind::Deal, "alpha", DataType::Text), now)
                .await
                .unwrap());
            assert!(tx
                .insert_object_type(
                    &t,
                    &ObjectType {
                        key: "alpha".into(),
                        label: None
                    },
                    now
                )
                .await
                .unwrap());
            tx.commit().await.unwrap();
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    first.commit().await.unwrap();
    second.await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let keys: Vec<_> = tx
        .load_registry(&t, ObjectKind::Deal)
        .await
        .unwrap()
        .fields
        .into_iter()
        .map(|f| f.key)
        .collect();
    assert_eq!(keys, ["zeta", "alpha"]);
    let types: Vec<_> = tx
        .list_object_types(&t)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.key)
        .collect();
    assert_eq!(types, ["zeta", "alpha"]);
}

pub async fn registry_fields_and_types_stay_in_their_tenant(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let now = Timestamp::from_millis(9);
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx
        .insert_field(&t, &field(ObjectKind::Contact, "tier", DataType::Text), now)
        .await
        .unwrap());
    assert!(tx
        .insert_object_type(
            &t,
            &ObjectType {
                key: "partner".into(),
                label: None
            },
            now
        )
        .await
        .unwrap());
    // The same keys are free in every other tenant.
    let live = tenant(&ws, Mode::Live);
    assert!(tx
        .insert_field(
            &live,
            &field(ObjectKind::Contact, "tier", DataType::Number),
            now
        )
        .await
        .unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_fields(&live).await.unwrap()[0].data_type,
        DataType::Number
    );
    assert!(tx.list_object_types(&live).await.unwrap().is_empty());
    for other in [tenant(&ws2, Mode::Test), tenant(&ws2, Mode::Live)] {
        assert!(tx.list_fields(&other).await.unwrap().is_empty());
        assert!(tx
            .load_registry(&other, ObjectKind::Contact)
            .await
            .unwrap()
            .fields
            .is_empty());
        assert!(tx.list_object_types(&other).await.unwrap().is_empty());
    }
}

fn sample_event(event_type: EventType, mode: Mode) -> Event {
    Event {
        id: EventId::from_uuid(uuid()),
        event_type,
        mode,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        data: json!({"id": "con_x", "object": "contact"}),
        changed_fields: (event_type == EventType::ContactUpdated).then(|| vec!["email".to_owned()]),
        previous_stage: None,
    }
}

pub async fn events_are_listed_newest_first_by_type(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let events: Vec<_> = [
        EventType::ContactCreated,
        EventType::ContactUpdated,
        EventType::ContactCreated,
    ]
    .into_iter()
    .map(|ty| sample_event(ty, Mode::Test))
    .collect();
    let mut tx = store.begin_write().await.unwrap();
    for e in &events {
        tx.insert_event(&t, e).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let every = tx.list_events(&t, None, &all()).await.unwrap();
    assert_eq!(every, events.iter().rev().cloned().collect::<Vec<_>>());
    let created = tx
        .list_events(&t, Some("contact.created"), &all())
        .await
        .unwrap();
    assert_eq!(created, vec![events[2].clone(), events[0].clone()]);
}

/// `insert_events` (grouped creates) writes what `insert_event` one by one would, and queues each
/// event for dispatch with its type and time.
pub async fn events_inserted_together_read_back_as_one_by_one(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    // Inserted newest first, so that the queue's order (oldest first) is not the insert's.
    let events: Vec<_> = [
        EventType::ContactCreated,
        EventType::ContactUpdated,
        EventType::DealCreated,
    ]
    .into_iter()
    .enumerate()
    .map(|(i, ty)| Event {
        created_at: Timestamp::from_millis(1_700_000_000_010 - i as i64),
        ..sample_event(ty, Mode::Test)
    })
    .collect();
    let live = Event {
        created_at: Timestamp::from_millis(1_700_000_000_020),
        ..sample_event(EventType::ContactCreated, Mode::Live)
    };
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_events(&t, &events).await.unwrap();
    tx.insert_events(&t, &[]).await.unwrap();
    tx.insert_events(&tenant(&ws, Mode::Live), std::slice::from_ref(&live))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_events(&t, None, &all()).await.unwrap(),
        events.iter().rev().cloned().collect::<Vec<_>>()
    );
    assert_eq!(
        tx.list_events(&t, Some("contact.updated"), &all())
            .await
            .unwrap(),
        vec![events[1].clone()]
    );
    assert_eq!(
        tx.list_events(&tenant(&ws, Mode::Live), None, &all())
            .await
            .unwrap(),
        vec![live.clone()]
    );
    drop(tx);
    // Each is queued for dispatch once, with its type, oldest first.
    let mut tx = store.begin_write().await.unwrap();
    let queued: Vec<(&str, String, EventType)> = tx
        .take_events_to_dispatch(1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant.workspace_id == t.workspace_id)
        .map(|r| (r.tenant.mode.as_str(), r.event_id.to_string(), r.event_type))
        .collect();
    tx.commit().await.unwrap();
    let expected: Vec<(&str, String, EventType)> = events
        .iter()
        .rev()
        .map(|e| ("test", e.id.to_string(), e.event_type))
        .chain([("live", live.id.to_string(), live.event_type)])
        .collect();
    assert_eq!(queued, expected);

    // More than a store's chunk of rows per statement (SQLite: 1,000), all queued.
    let many: Vec<Event> = (0..1_201)
        .map(|_| sample_event(EventType::ContactCreated, Mode::Test))
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_events(&t, &many).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let queued: std::collections::HashSet<String> = tx
        .take_events_to_dispatch(5_000)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.tenant.workspace_id == t.workspace_id)
        .map(|r| r.event_id.to_string())
        .collect();
    tx.commit().await.unwrap();
    // The first four were taken but not marked dispatched: taken again.
    let first_four = expected.iter().map(|(_, id, _)| id.clone());
    assert_eq!(
        queued,
        many.iter()
            .map(|e| e.id.to_string())
            .chain(first_four)
            .collect()
    );
}

fn idem(key: &str) -> IdemRecord {
    IdemRecord {
        key: key.into(),
        fingerprint: "fp".into(),
        reply: None,
        created_at: Timestamp::from_millis(10),
        locked_until: Timestamp::from_millis(20),
        owner_alive: true,
    }
}

pub async fn idempotency_records_round_trip(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
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

pub async fn a_dropped_write_transaction_rolls_back(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    {
        let mut tx = store.begin_write().await.unwrap();
        tx.insert_contact(&t, &c, &[]).await.unwrap();
        tx.insert_event(&t, &sample_event(EventType::ContactCreated, Mode::Test))
            .await
            .unwrap();
    }
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.get_contact(&t, &c.id).await.unwrap().is_none());
    assert!(tx.list_events(&t, None, &all()).await.unwrap().is_empty());
    drop(tx);
    // The writer is free again.
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn record_exists_sees_soft_deleted_records(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(None);
    c.deleted_at = Some(Timestamp::from_millis(1));
    let co = company("Acme", None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c, &[]).await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .record_exists(&t, ObjectKind::Contact, c.id.as_str())
        .await
        .unwrap());
    assert!(tx
        .record_exists(&t, ObjectKind::Company, co.id.as_str())
        .await
        .unwrap());
    assert!(!tx
        .record_exists(&t, ObjectKind::Company, c.id.as_str())
        .await
        .unwrap());
}

pub async fn pipelines_round_trip_by_id_and_key_with_unique_keys(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let mut sales = pipeline("sales", &["new", "won"]);
    sales.is_default = true;
    let other = pipeline("hiring", &["applied"]);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_pipeline(&t, &other).await.unwrap();
    assert!(matches!(
        tx.insert_pipeline(&t, &pipeline("sales", &["x"])).await,
        Err(StoreError::Duplicate)
    ));
    // The transaction survives the duplicate, and the same key is free in the other mode.
    tx.insert_pipeline(&tenant(&ws, Mode::Live), &pipeline("sales", &["x"]))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.get_pipeline(&t, &sales.id, crm_app::ports::RowLock::Update)
            .await
            .unwrap(),
        Some(sales.clone())
    );
    assert_eq!(
        tx.get_pipeline_by_key(&t, "hiring", crm_app::ports::RowLock::Update)
            .await
            .unwrap(),
        Some(other.clone())
    );
    assert_eq!(tx.default_pipeline(&t).await.unwrap(), Some(sales.clone()));
    assert_eq!(
        tx.list_pipelines(&t).await.unwrap(),
        vec![sales, other],
        "oldest first"
    );
}

pub async fn pipeline_updates_check_the_version_and_default_moves(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut a = pipeline("a", &["one"]);
    a.is_default = true;
    let mut b = pipeline("b", &["one"]);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &a).await.unwrap();
    tx.insert_pipeline(&t, &b).await.unwrap();
    b.set_default(true);
    b.add_stage(
        crm_domain::StageDraft {
            key: "two".into(),
            ..Default::default()
        },
        None,
        crm_domain::StageId::from_uuid(uuid()),
    )
    .unwrap();
    b.touch(Timestamp::from_millis(1_800_000_000_000));
    tx.update_pipeline(&t, &b).await.unwrap();
    assert!(matches!(
        tx.update_pipeline(&t, &b).await,
        Err(StoreError::Stale)
    ));
    tx.clear_default_pipeline(&t, &b.id, Timestamp::from_millis(1_800_000_000_001))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.default_pipeline(&t).await.unwrap().map(|p| p.id),
        Some(b.id.clone())
    );
    let a_now = tx
        .get_pipeline(&t, &a.id, crm_app::ports::RowLock::Update)
        .await
        .unwrap()
        .unwrap();
    assert!(!a_now.is_default);
    assert_eq!(a_now.version, 2);
    assert_eq!(
        tx.get_pipeline(&t, &b.id, crm_app::ports::RowLock::Update)
            .await
            .unwrap()
            .unwrap()
            .stage_keys(),
        ["one", "two"]
    );
    drop(tx);
    let mut tx = store.begin_write().await.unwrap();
    tx.delete_pipeline(&t, &a.id).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .get_pipeline(&t, &a.id, crm_app::ports::RowLock::Update)
        .await
        .unwrap()
        .is_none());
}

pub async fn deals_round_trip_and_filter(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let sales = pipeline("sales", &["new", "won"]);
    let hiring = pipeline("hiring", &["new"]);
    let mut big = deal("Big Rocket Order", &sales, "new");
    big.custom_fields = json!({"source": "web"}).as_object().unwrap().clone();
    big.company_id = Some(CompanyId::from_uuid(uuid()));
    big.primary_contact_id = Some(crm_domain::ContactId::from_uuid(uuid()));
    let won = deal("Small order", &sales, "won");
    let hire = deal("Hire a rocket engineer", &hiring, "new");
    let mut tx = store.begin_write().await.unwrap();
    for p in [&sales, &hiring] {
        tx.insert_pipeline(&t, p).await.unwrap();
    }
    for d in [&big, &won, &hire] {
        tx.insert_deal(&t, d).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_deal(&t, &big.id).await.unwrap(), Some(big.clone()));
    let ids = |v: Vec<crm_domain::Deal>| v.into_iter().map(|d| d.id).collect::<Vec<_>>();
    let f = |f: DealFilter| f;
    assert_eq!(
        ids(tx
            .list_deals(&t, &DealFilter::default(), &all())
            .await
            .unwrap()),
        vec![hire.id.clone(), won.id.clone(), big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    stage: Some("new".into()),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![hire.id.clone(), big.id.clone()],
        "stage keys repeat across pipelines"
    );
    let sales_new = DealFilter {
        pipeline_id: Some(sales.id.clone()),
        stage: Some("new".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(tx.list_deals(&t, &sales_new, &all()).await.unwrap()),
        vec![big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    q: Some("ROCKET".into()),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![hire.id.clone(), big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    company_id: big.company_id.clone(),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![big.id.clone()]
    );
    assert_eq!(
        ids(tx
            .list_deals(
                &t,
                &f(DealFilter {
                    primary_contact_id: big.primary_contact_id.clone(),
                    ..Default::default()
                }),
                &all()
            )
            .await
            .unwrap()),
        vec![big.id.clone()]
    );
    assert_eq!(tx.count_deals(&t, &sales.id, None).await.unwrap(), 2);
    assert_eq!(tx.count_deals(&t, &sales.id, Some("won")).await.unwrap(), 1);
    assert!(tx
        .record_exists(&t, ObjectKind::Deal, big.id.as_str())
        .await
        .unwrap());
}

pub async fn deal_updates_check_the_version_and_stage_moves_keep_types(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut sales = pipeline("sales", &["new", "won"]);
    let mut d = deal("Order", &sales, "new");
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_pipeline(&t, &sales).await.unwrap();
    tx.insert_deal(&t, &d).await.unwrap();
    d.title = "Order 2".into();
    d.version = 2;
    d.deleted_at = Some(Timestamp::from_millis(1_800_000_000_000));
    tx.update_deal(&t, &d).await.unwrap();
    assert!(matches!(
        tx.update_deal(&t, &d).await,
        Err(StoreError::Stale)
    ));
    assert_eq!(
        tx.move_deals(
            &t,
            &sales.id,
            "new",
            "won",
            crm_domain::StageType::Open,
            Timestamp::from_millis(1_800_000_000_001)
        )
        .await
        .unwrap(),
        1
    );
    sales
        .update_stage("won", None, Some("won".into()), None)
        .unwrap();
    tx.set_deals_stage_type(&t, &sales.id, "won", crm_domain::StageType::Won)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let got = tx.get_deal(&t, &d.id).await.unwrap().unwrap();
    assert_eq!(
        (got.stage.as_str(), got.stage_type, got.version),
        ("won", crm_domain::StageType::Won, 3)
    );
    assert!(
        tx.list_deals(&t, &DealFilter::default(), &all())
            .await
            .unwrap()
            .is_empty(),
        "soft-deleted"
    );
    assert_eq!(
        tx.list_deals(
            &t,
            &DealFilter {
                include_deleted: true,
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
}

pub async fn activities_list_newest_first_by_occurrence(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let contact_id = crm_domain::ContactId::from_uuid(uuid());
    let mut old = activity(1_000);
    old.contact_id = Some(contact_id.clone());
    let mut recent = activity(3_000);
    recent.activity_type = "call".into();
    let mut same_time = activity(3_000);
    same_time.contact_id = Some(contact_id.clone());
    let mut tx = store.begin_write().await.unwrap();
    for a in [&old, &recent, &same_time] {
        tx.insert_activity(&t, a).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let ids = |v: Vec<crm_domain::Activity>| v.into_iter().map(|a| a.id).collect::<Vec<_>>();
    let every = tx
        .list_activities(&t, &ActivityFilter::default(), &all())
        .await
        .unwrap();
    assert_eq!(
        ids(every),
        vec![same_time.id.clone(), recent.id.clone(), old.id.clone()]
    );
    let page2 = Slice {
        before: Some(format!("3000:{}", same_time.id)),
        limit: 10,
    };
    assert_eq!(
        ids(tx
            .list_activities(&t, &ActivityFilter::default(), &page2)
            .await
            .unwrap()),
        vec![recent.id.clone(), old.id.clone()]
    );
    let by_contact = ActivityFilter {
        contact_id: Some(contact_id),
        ..Default::default()
    };
    assert_eq!(
        ids(tx.list_activities(&t, &by_contact, &all()).await.unwrap()),
        vec![same_time.id.clone(), old.id.clone()]
    );
    let calls = ActivityFilter {
        activity_type: Some("call".into()),
        ..Default::default()
    };
    assert_eq!(
        ids(tx.list_activities(&t, &calls, &all()).await.unwrap()),
        vec![recent.id.clone()]
    );
    assert_eq!(
        tx.get_activity(&t, &old.id).await.unwrap(),
        Some(old.clone())
    );
    drop(tx);
    let mut tx = store.begin_write().await.unwrap();
    let mut changed = old.clone();
    changed.body = Some("edited".into());
    changed.version = 2;
    tx.update_activity(&t, &changed).await.unwrap();
    assert!(matches!(
        tx.update_activity(&t, &changed).await,
        Err(StoreError::Stale)
    ));
    tx.delete_activity(&t, &recent.id).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_activity(&t, &old.id).await.unwrap(), Some(changed));
    assert!(tx.get_activity(&t, &recent.id).await.unwrap().is_none());
    assert!(!tx
        .record_exists(&t, ObjectKind::Activity, recent.id.as_str())
        .await
        .unwrap());
}

pub async fn substring_search_matches_short_and_long_needles(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut ada = contact(Some("ada@analytical.engine"));
    ada.phone = Some("+44 20 7946 0000".into());
    let mut grace = contact(Some("grace@navy.mil"));
    grace.first_name = Some("Grace".into());
    grace.last_name = Some("Hopper".into());
    let acme = company("Acme Rockets", Some("acme.io"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &ada, &[]).await.unwrap();
    tx.insert_contact(&t, &grace, &[]).await.unwrap();
    tx.insert_company(&t, &acme).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for (q, expected) in [
        ("lovelace", vec![ada.id.clone()]),
        ("ANALYTICAL", vec![ada.id.clone()]),
        ("7946", vec![ada.id.clone()]),
        ("ho", vec![grace.id.clone()]),
        ("e", vec![grace.id.clone(), ada.id.clone()]),
        ("\"quoted\"", vec![]),
    ] {
        let got: Vec<_> = tx
            .list_contacts(
                &t,
                &ContactFilter {
                    q: Some(q.into()),
                    ..Default::default()
                },
                &all(),
            )
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(got, expected, "q={q}");
    }
    drop(tx);
    // The index follows updates.
    let mut tx = store.begin_write().await.unwrap();
    grace.last_name = Some("Brewster".into());
    grace.version = 2;
    tx.update_contact(&t, &grace).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx
        .list_contacts(
            &t,
            &ContactFilter {
                q: Some("hopper".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        tx.list_contacts(
            &t,
            &ContactFilter {
                q: Some("brewster".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
    assert_eq!(
        tx.list_companies(
            &t,
            &CompanyFilter {
                q: Some("rocket".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
    assert_eq!(
        tx.list_companies(
            &t,
            &CompanyFilter {
                q: Some("io".into()),
                ..Default::default()
            },
            &all()
        )
        .await
        .unwrap()
        .len(),
        1
    );
}

/// A search whose matches lie beyond the tenant's newest thousand rows, where the Postgres store
/// turns from walking the newest rows to the trigram index: every match comes back once, newest
/// first, across pages.
pub async fn a_search_finds_matches_among_old_rows_newest_first_across_pages(
    store: Arc<dyn Store>,
) {
    let (_, t) = setup(&store).await;
    // First, so older than all the rows below (ids are time-ordered), 5,001 rows of an old
    // import: a needle common among old rows but absent from the newest, with more matches than
    // a search's capped trigram read takes.
    let legacy: Vec<Contact> = (0..5_001)
        .map(|i| {
            let mut c = contact(None);
            c.first_name = Some(format!("Imported {i}"));
            c.last_name = Some("Legacy".into());
            c
        })
        .collect();
    let rows: Vec<Contact> = (0..1_100)
        .map(|i| {
            let mut c = contact(None);
            c.first_name = Some(format!("Filler {i}"));
            c.last_name = Some(if [10, 20, 50, 99, 100, 1_090].contains(&i) {
                "Needleman".into()
            } else {
                "Row".into()
            });
            if i == 20 {
                c.deleted_at = Some(c.updated_at);
            }
            c
        })
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    for chunk in legacy.chunks(500).chain(rows.chunks(500)) {
        let refs: Vec<&Contact> = chunk.iter().collect();
        assert_eq!(
            tx.insert_contacts(&t, &refs).await.unwrap().len(),
            chunk.len()
        );
    }
    tx.commit().await.unwrap();
    let id = |i: usize| rows[i].id.clone();
    let needle = ContactFilter {
        q: Some("needle".into()),
        ..Default::default()
    };
    let mut tx = store.begin_read().await.unwrap();
    let mut find =
        async |filter: &ContactFilter, before: Option<usize>, limit: u32| -> Vec<ContactId> {
            let slice = Slice {
                before: before.map(|i| id(i).to_string()),
                limit,
            };
            tx.list_contacts(&t, filter, &slice)
                .await
                .unwrap()
                .into_iter()
                .map(|c| c.id)
                .collect()
        };
    // The newest thousand rows are 100 to 1,099; 99 is the newest row older than them.
    assert_eq!(
        find(&needle, None, 10).await,
        vec![id(1_090), id(100), id(99), id(50), id(10)]
    );
    assert_eq!(find(&needle, None, 2).await, vec![id(1_090), id(100)]);
    assert_eq!(
        find(&needle, None, 3).await,
        vec![id(1_090), id(100), id(99)]
    );
    assert_eq!(
        find(&needle, Some(1_090), 10).await,
        vec![id(100), id(99), id(50), id(10)]
    );
    assert_eq!(find(&needle, Some(100), 1).await, vec![id(99)]);
    assert_eq!(find(&needle, Some(50), 10).await, vec![id(10)]);
    assert_eq!(find(&needle, Some(10), 10).await, vec![]);
    let with_deleted = ContactFilter {
        include_deleted: true,
        ..needle.clone()
    };
    assert_eq!(
        find(&with_deleted, None, 10).await,
        vec![id(1_090), id(100), id(99), id(50), id(20), id(10)]
    );
    let common = ContactFilter {
        q: Some("row".into()),
        ..Default::default()
    };
    assert_eq!(
        find(&common, None, 3).await,
        vec![id(1_099), id(1_098), id(1_097)]
    );
    let old_import = ContactFilter {
        q: Some("legacy".into()),
        ..Default::default()
    };
    let newest_legacy: Vec<ContactId> = legacy.iter().rev().take(3).map(|c| c.id.clone()).collect();
    assert_eq!(find(&old_import, None, 3).await, newest_legacy);
    drop(tx);

    // A tenant with fewer rows than a search's window, beside this large one: its search sees
    // only its own rows, and the large tenant's none of them.
    let (_, small) = setup(&store).await;
    let own: Vec<Contact> = ["Needleman", "Row", "Needleman"]
        .into_iter()
        .map(|last| {
            let mut c = contact(None);
            c.last_name = Some(last.into());
            c
        })
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.insert_contacts(&small, &own.iter().collect::<Vec<_>>())
            .await
            .unwrap()
            .len(),
        3
    );
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let found = |contacts: Vec<Contact>| contacts.into_iter().map(|c| c.id).collect::<Vec<_>>();
    let page = |limit| Slice {
        before: None,
        limit,
    };
    assert_eq!(
        found(tx.list_contacts(&small, &needle, &page(10)).await.unwrap()),
        vec![own[2].id.clone(), own[0].id.clone()]
    );
    assert_eq!(
        found(
            tx.list_contacts(&small, &old_import, &page(10))
                .await
                .unwrap()
        ),
        vec![]
    );
    assert_eq!(
        found(tx.list_contacts(&t, &needle, &page(10)).await.unwrap()),
        vec![id(1_090), id(100), id(99), id(50), id(10)]
    );
}

pub async fn savepoints_undo_part_of_a_transaction(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let kept = contact(Some("kept@example.com"));
    let undone = contact(Some("undone@example.com"));
    let mut tx = store.begin_write().await.unwrap();
    tx.savepoint("op").await.unwrap();
    tx.insert_contact(&t, &kept, &[]).await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    tx.savepoint("op").await.unwrap();
    tx.insert_contact(&t, &undone, &[]).await.unwrap();
    tx.rollback_to_savepoint("op").await.unwrap();
    tx.release_savepoint("op").await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.get_contact(&t, &kept.id).await.unwrap().is_some());
    assert!(tx.get_contact(&t, &undone.id).await.unwrap().is_none());
}

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

pub use crate::automation_cases::*;
pub use crate::config_cases::config_changes_reach_this_process_at_commit;
pub use crate::email_cases::*;
pub use crate::idempotency_cases::a_claim_of_this_process_is_alive;
pub use crate::secret_cases::{
    a_webhook_whose_secret_does_not_open_holds_up_no_other_delivery,
    secrets_are_stored_sealed_and_read_back_plain,
    the_first_start_seals_plaintext_then_checks_and_rotation_reseals,
};
pub use crate::sequence_cases::*;
pub use crate::webhook_cases::*;
