//! Conformance cases of the contact port: round trips, uniqueness of e-mail addresses,
//! reference checks, grouped inserts, versions, slices and filters.

use std::sync::Arc;

use crm_app::{
    ports::{ContactFilter, FieldFilter, Reference, Slice},
    Store, StoreError,
};
use crm_domain::{CompanyId, Email, Event, EventType, Mode, ObjectKind, Timestamp};
use serde_json::json;

use crate::fixtures::*;

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
        Reference::record(ObjectKind::Company, id.as_str())
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
    let person = Reference::record(ObjectKind::Contact, held.id.as_str());
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
            .map(|id| Reference::record(ObjectKind::Company, id))
            .collect()
    }
    let created = |c: &crm_domain::Contact| Event {
        merged_ids: None,
        data: serde_json::json!({"id": c.id.as_str(), "object": "contact"}),
        ..sample_event(EventType::ContactCreated, Mode::Test)
    };
    let entry = |c: &crm_domain::Contact| sample_change(ObjectKind::Contact, c.id.as_str());

    let a = contact(Some("a@b.co"));
    let a_event = created(&a);
    store
        .insert_contact_alone(&t, &a, &refs(&[co_id]), &a_event, &entry(&a))
        .await
        .unwrap();
    // Refused: the second reference missing (reported before the taken email), then the email.
    let taken = contact(Some("a@b.co"));
    let refused = created(&taken);
    let err = store
        .insert_contact_alone(
            &t,
            &taken,
            &refs(&[co_id, missing]),
            &refused,
            &entry(&taken),
        )
        .await;
    assert!(
        matches!(err, Err(StoreError::MissingReference(1))),
        "{err:?}"
    );
    let err = store
        .insert_contact_alone(&t, &taken, &refs(&[co_id]), &refused, &entry(&taken))
        .await;
    assert!(matches!(err, Err(StoreError::Duplicate)), "{err:?}");
    // The same email in another tenant is free.
    let live = tenant(&ws, Mode::Live);
    let elsewhere = Event {
        merged_ids: None,
        mode: Mode::Live,
        ..created(&taken)
    };
    let live_entry = entry(&taken);
    store
        .insert_contact_alone(&live, &taken, &[], &elsewhere, &live_entry)
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
    // The history entry rides with the contact: one for `a`, none for the refused ones.
    let a_history = tx.list_changes(&t, a.id.as_str(), &all()).await.unwrap();
    assert_eq!(a_history.len(), 1);
    assert_eq!(a_history[0].record_id, a.id.as_str());
    assert_eq!(
        tx.list_changes(&t, taken.id.as_str(), &all())
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        tx.list_changes(&live, taken.id.as_str(), &all())
            .await
            .unwrap(),
        vec![live_entry]
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
