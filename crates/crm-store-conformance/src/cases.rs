//! The cases. Each takes a fresh store and panics on a broken contract.

use std::sync::Arc;

use crm_app::{
    idempotency::{IdemRecord, StoredReply},
    ports::{CompanyFilter, ContactFilter, KeyUse, PlanCounts, Slice, UsageLock},
    Store, StoreError,
};
use crm_domain::{
    CompanyId, Email, Event, EventId, EventType, Mode, ObjectKind, Plan, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn all() -> Slice {
    Slice { before: None, limit: 1000 }
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
    let (found, found_ws) = tx.find_api_key("abc123").await.unwrap().expect("key by hash");
    assert_eq!(found, key);
    assert_eq!(found_ws, ws);
    assert!(tx.find_api_key("other").await.unwrap().is_none());
    assert_eq!(tx.get_api_key(&t, &key.id).await.unwrap(), Some(key.clone()));
    assert!(tx.get_api_key(&tenant(&ws, Mode::Live), &key.id).await.unwrap().is_none());
}

pub async fn contact_round_trips_every_field(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("ada@example.com"));
    c.phone = Some("+44 20 7946 0000".into());
    c.linkedin_url = Some("https://linkedin.com/in/ada".into());
    c.company_id = Some(CompanyId::from_uuid(uuid()));
    c.contact_type = Some("customer".into());
    c.custom_fields = json!({"score": 9.5, "tags": ["a", "b"], "vip": true, "nested": {"é": "ü"}}).as_object().unwrap().clone();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap(), Some(c.clone()));
    assert_eq!(tx.get_contact_by_email(&t, c.email.as_ref().unwrap()).await.unwrap(), Some(c));
}

pub async fn duplicate_email_is_reported_and_the_transaction_stays_usable(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &contact(Some("a@b.co"))).await.unwrap();
    assert!(matches!(tx.insert_contact(&t, &contact(Some("a@b.co"))).await, Err(StoreError::Duplicate)));
    tx.insert_contact(&t, &contact(Some("c@d.co"))).await.unwrap();
    tx.insert_contact(&t, &contact(None)).await.unwrap();
    tx.insert_contact(&t, &contact(None)).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.list_contacts(&t, &ContactFilter::default(), &all()).await.unwrap().len(), 4);
}

pub async fn email_is_unique_per_tenant_only(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &contact(Some("a@b.co"))).await.unwrap();
    tx.insert_contact(&tenant(&ws, Mode::Live), &contact(Some("a@b.co"))).await.unwrap();
    tx.insert_contact(&tenant(&ws2, Mode::Test), &contact(Some("a@b.co"))).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn update_checks_the_version(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("a@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    c.first_name = Some("Grace".into());
    c.version = 2;
    c.updated_at = Timestamp::from_millis(1_700_000_009_000);
    c.deleted_at = Some(Timestamp::from_millis(1_700_000_009_000));
    tx.update_contact(&t, &c).await.unwrap();
    // Writing "version 2" again expects the row at version 1, which it no longer is.
    assert!(matches!(tx.update_contact(&t, &c).await, Err(StoreError::Stale)));
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_contact(&t, &c.id).await.unwrap(), Some(c));
}

pub async fn update_to_a_taken_email_is_a_duplicate(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let a = contact(Some("a@b.co"));
    let mut b = contact(Some("b@b.co"));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a).await.unwrap();
    tx.insert_contact(&t, &b).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    b.email = Some(Email::parse("a@b.co").unwrap());
    b.version = 2;
    assert!(matches!(tx.update_contact(&t, &b).await, Err(StoreError::Duplicate)));
    // The transaction stays usable: the caller reads the holder of the email, then goes on.
    assert_eq!(tx.get_contact_by_email(&t, &Email::parse("a@b.co").unwrap()).await.unwrap().map(|c| c.id), Some(a.id.clone()));
    tx.insert_contact(&t, &contact(Some("c@b.co"))).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn contacts_list_newest_first_in_slices(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    let mut ids = Vec::new();
    for i in 0..7 {
        let c = contact(Some(&format!("p{i}@example.com")));
        ids.push(c.id.clone());
        tx.insert_contact(&t, &c).await.unwrap();
    }
    tx.commit().await.unwrap();
    ids.reverse();
    let mut tx = store.begin_read().await.unwrap();
    let first = tx.list_contacts(&t, &ContactFilter::default(), &Slice { before: None, limit: 3 }).await.unwrap();
    assert_eq!(first.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), ids[..3]);
    let next = Slice { before: Some(first[2].id.to_string()), limit: 10 };
    let rest = tx.list_contacts(&t, &ContactFilter::default(), &next).await.unwrap();
    assert_eq!(rest.iter().map(|c| c.id.clone()).collect::<Vec<_>>(), ids[3..]);
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
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a).await.unwrap();
    tx.insert_contact(&t, &b).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let find = |f: ContactFilter| f;
    for (filter, expected) in [
        (find(ContactFilter { q: Some("HOPP".into()), ..Default::default() }), vec![a.id.clone()]),
        (find(ContactFilter { q: Some("grace hop".into()), ..Default::default() }), vec![a.id.clone()]),
        (find(ContactFilter { q: Some("example.org".into()), ..Default::default() }), vec![b.id.clone()]),
        (find(ContactFilter { q: Some("555".into()), ..Default::default() }), vec![b.id.clone()]),
        (find(ContactFilter { email: Some(Email::parse("alan@example.org").unwrap()), ..Default::default() }), vec![b.id.clone()]),
        (find(ContactFilter { company_id: Some(company.clone()), ..Default::default() }), vec![a.id.clone()]),
        (find(ContactFilter { contact_type: Some("admiral".into()), ..Default::default() }), vec![a.id.clone()]),
        (find(ContactFilter { q: Some("nobody".into()), ..Default::default() }), vec![]),
    ] {
        let got: Vec<_> = tx.list_contacts(&t, &filter, &all()).await.unwrap().into_iter().map(|c| c.id).collect();
        assert_eq!(got, expected, "filter {filter:?}");
    }
}

pub async fn like_wildcards_in_q_are_literal(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut a = contact(None);
    a.first_name = Some("100%_sure".into());
    let mut b = contact(None);
    b.first_name = Some("1000 sure".into());
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &a).await.unwrap();
    tx.insert_contact(&t, &b).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for q in ["0%_", "%", "_sure"] {
        let got = tx.list_contacts(&t, &ContactFilter { q: Some(q.into()), ..Default::default() }, &all()).await.unwrap();
        assert_eq!(got.len(), 1, "q={q}");
        assert_eq!(got[0].id, a.id);
    }
}

pub async fn soft_deleted_contacts_are_listed_only_on_request(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(Some("gone@example.com"));
    c.deleted_at = Some(Timestamp::from_millis(1_700_000_000_999));
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.list_contacts(&t, &ContactFilter::default(), &all()).await.unwrap().is_empty());
    let with_deleted = ContactFilter { include_deleted: true, ..Default::default() };
    assert_eq!(tx.list_contacts(&t, &with_deleted, &all()).await.unwrap(), vec![c]);
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
    assert!(matches!(tx.update_company(&t, &acme).await, Err(StoreError::Stale)));
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_company(&t, &acme.id).await.unwrap(), Some(acme.clone()));
    let by_domain = CompanyFilter { domain: Some("ACME.io".into()), ..Default::default() };
    let got: Vec<_> = tx.list_companies(&t, &by_domain, &all()).await.unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(got, vec![twin.id.clone(), acme.id.clone()]);
    let by_q = CompanyFilter { q: Some("rocket".into()), ..Default::default() };
    let got: Vec<_> = tx.list_companies(&t, &by_q, &all()).await.unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(got, vec![acme.id.clone()]);
}

pub async fn tenants_never_see_each_other(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (ws2, _) = setup(&store).await;
    let c = contact(Some("a@b.co"));
    let co = company("Acme", None);
    let event = sample_event(EventType::ContactCreated, Mode::Test);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.insert_event(&t, &event).await.unwrap();
    tx.insert_enum_value(&t, "contact.type", "vip", None, Timestamp::from_millis(0)).await.unwrap();
    tx.insert_idempotency(&t, &idem("k1")).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    for other in [tenant(&ws, Mode::Live), tenant(&ws2, Mode::Test), tenant(&ws2, Mode::Live)] {
        assert!(tx.get_contact(&other, &c.id).await.unwrap().is_none());
        assert!(tx.get_contact_by_email(&other, c.email.as_ref().unwrap()).await.unwrap().is_none());
        assert!(tx.get_company(&other, &co.id).await.unwrap().is_none());
        let everything = ContactFilter { include_deleted: true, ..Default::default() };
        assert!(tx.list_contacts(&other, &everything, &all()).await.unwrap().is_empty());
        assert!(tx.list_companies(&other, &CompanyFilter { include_deleted: true, ..Default::default() }, &all()).await.unwrap().is_empty());
        assert!(!tx.record_exists(&other, ObjectKind::Contact, c.id.as_str()).await.unwrap());
        assert!(!tx.record_exists(&other, ObjectKind::Company, co.id.as_str()).await.unwrap());
        assert!(tx.list_events(&other, None, &all()).await.unwrap().is_empty());
        assert!(tx.load_registry(&other, ObjectKind::Contact).await.unwrap().enums.is_empty());
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
        assert!(tx.insert_enum_value(&t, "deal.source", v, Some("Label"), now).await.unwrap());
    }
    assert!(!tx.insert_enum_value(&t, "deal.source", "alpha", None, now).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    let r = tx.load_registry(&t, ObjectKind::Contact).await.unwrap();
    assert!(r.enums["contact.type"].is_empty());
    let values: Vec<_> = r.enums["deal.source"].iter().map(|v| v.value.as_str()).collect();
    assert_eq!(values, ["zeta", "alpha", "mid"], "values keep registration order");
    assert_eq!(r.enums["deal.source"][0].label.as_deref(), Some("Label"));
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
    let events: Vec<_> = [EventType::ContactCreated, EventType::ContactUpdated, EventType::ContactCreated]
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
    let created = tx.list_events(&t, Some("contact.created"), &all()).await.unwrap();
    assert_eq!(created, vec![events[2].clone(), events[0].clone()]);
}

fn idem(key: &str) -> IdemRecord {
    IdemRecord {
        key: key.into(),
        fingerprint: "fp".into(),
        reply: None,
        created_at: Timestamp::from_millis(10),
        locked_until: Timestamp::from_millis(20),
    }
}

pub async fn idempotency_records_round_trip(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.insert_idempotency(&t, &idem("k")).await.unwrap());
    assert!(!tx.insert_idempotency(&t, &idem("k")).await.unwrap());
    let reply = StoredReply { status: 201, body: br#"{"id":"con_1"}"#.to_vec() };
    tx.finish_idempotency(&t, "k", &reply).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let got = tx.get_idempotency(&t, "k").await.unwrap().unwrap();
    assert_eq!(got, IdemRecord { reply: Some(reply), ..idem("k") });
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
        tx.insert_contact(&t, &c).await.unwrap();
        tx.insert_event(&t, &sample_event(EventType::ContactCreated, Mode::Test)).await.unwrap();
    }
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.get_contact(&t, &c.id).await.unwrap().is_none());
    assert!(tx.list_events(&t, None, &all()).await.unwrap().is_empty());
    drop(tx);
    // The writer is free again.
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    tx.commit().await.unwrap();
}

pub async fn record_exists_sees_soft_deleted_records(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let mut c = contact(None);
    c.deleted_at = Some(Timestamp::from_millis(1));
    let co = company("Acme", None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_contact(&t, &c).await.unwrap();
    tx.insert_company(&t, &co).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert!(tx.record_exists(&t, ObjectKind::Contact, c.id.as_str()).await.unwrap());
    assert!(tx.record_exists(&t, ObjectKind::Company, co.id.as_str()).await.unwrap());
    assert!(!tx.record_exists(&t, ObjectKind::Company, c.id.as_str()).await.unwrap());
}

pub async fn keys_are_listed_per_tenant_newest_first_and_their_state_updates(store: Arc<dyn Store>) {
    let (ws, t) = setup(&store).await;
    let (a, b, live) = (api_key(&ws, Mode::Test, "h-a"), api_key(&ws, Mode::Test, "h-b"), api_key(&ws, Mode::Live, "h-live"));
    let mut tx = store.begin_write().await.unwrap();
    for k in [&a, &b, &live] {
        tx.insert_api_key(k).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let listed: Vec<_> = tx.list_api_keys(&t, &all()).await.unwrap().into_iter().map(|k| k.id).collect();
    assert_eq!(listed, vec![b.id.clone(), a.id.clone()], "newest first, test mode only");
    let after_b = Slice { before: Some(b.id.to_string()), limit: 10 };
    assert_eq!(tx.list_api_keys(&t, &after_b).await.unwrap().len(), 1);
    drop(tx);

    let mut revoked = a.clone();
    revoked.revoked_at = Some(Timestamp::from_millis(1_700_000_100_000));
    revoked.expires_at = None;
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.update_api_key_state(&revoked).await.unwrap());
    let mut elsewhere = revoked.clone();
    elsewhere.mode = Mode::Live;
    assert!(!tx.update_api_key_state(&elsewhere).await.unwrap(), "a key is found in its own tenant only");
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
    let touch = |ms| KeyUse { tenant: t.clone(), id: key.id.clone(), at: Timestamp::from_millis(ms) };
    let missing = KeyUse { tenant: t.clone(), id: api_key(&ws, Mode::Test, "x").id, at: Timestamp::from_millis(5) };
    for batch in [vec![touch(2_000), missing], vec![touch(1_000)]] {
        let mut tx = store.begin_write().await.unwrap();
        tx.touch_api_keys(&batch).await.unwrap();
        tx.commit().await.unwrap();
    }
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_api_key(&t, &key.id).await.unwrap().unwrap().last_used_at, Some(Timestamp::from_millis(2_000)));
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
    assert_eq!(tx.get_usage(&tenant(&workspace(), Mode::Test), p1).await.unwrap(), 0);
    assert_eq!(tx.count_plan_objects(&t).await.unwrap(), PlanCounts::default());
}

pub async fn leases_reserve_until_they_expire(store: Arc<dyn Store>) {
    let (_, t) = setup(&store).await;
    let p = Timestamp::from_millis(1_000);
    let now = Timestamp::from_millis(10_000);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.lock_usage(&t, p, "a", now).await.unwrap(), UsageLock::default(), "created at 0");
    tx.record_usage(&t, p, 0, "a", 10, Timestamp::from_millis(20_000)).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    tx.lock_usage(&t, p, "b", now).await.unwrap();
    tx.record_usage(&t, p, 2, "b", 5, Timestamp::from_millis(15_000)).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    let seen_by_a = tx.lock_usage(&t, p, "a", now).await.unwrap();
    assert_eq!(seen_by_a, UsageLock { used: 2, others_reserved: 5, own_reserved: 10 });
    // a moves 4 of its reservation to used and keeps 6.
    tx.record_usage(&t, p, 4, "a", 6, Timestamp::from_millis(20_000)).await.unwrap();
    tx.commit().await.unwrap();

    // Once b's lease has expired, its reservation is free again (and its row is gone).
    let later = Timestamp::from_millis(16_000);
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.lock_usage(&t, p, "a", later).await.unwrap(), UsageLock { used: 6, others_reserved: 0, own_reserved: 6 });
    tx.record_usage(&t, p, 0, "a", 0, later).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.lock_usage(&t, p, "b", later).await.unwrap(), UsageLock { used: 6, others_reserved: 0, own_reserved: 0 }, "a's reservation dropped b's expired lease");
}
