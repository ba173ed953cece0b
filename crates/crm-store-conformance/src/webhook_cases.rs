//! Conformance cases of the webhook port: subscriptions per tenant, fan-out of events into
//! deliveries (idempotent), claims under a lease (never two holders; an expired lease is claimed
//! again), recording attempts only under the claim, and requeueing dead letters.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use crm_app::{
    ports::{AttemptOutcome, DeliveryAttempt, NewDelivery, Slice},
    Store, StoreError,
};
use crm_domain::{
    ids::DeliveryId, DeliveryStatus, Event, EventId, EventType, Mode, Subscription, Tenant,
    Timestamp, Webhook, WebhookId,
};
use serde_json::json;

use crate::fixtures::*;

const T0: i64 = 1_700_000_000_000;

fn all() -> Slice {
    Slice {
        before: None,
        limit: 1000,
    }
}

async fn setup(store: &Arc<dyn Store>) -> (Tenant, Tenant) {
    let ws = workspace();
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.commit().await.unwrap();
    (tenant(&ws, Mode::Test), tenant(&ws, Mode::Live))
}

pub fn webhook(mode: Mode, events: Subscription, created_at_ms: i64) -> Webhook {
    Webhook {
        id: WebhookId::from_uuid(uuid()),
        mode,
        url: "http://127.0.0.1:9/hook".into(),
        events,
        description: Some("orders".into()),
        enabled: true,
        secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        created_at: Timestamp::from_millis(created_at_ms),
        updated_at: Timestamp::from_millis(created_at_ms),
        version: 1,
    }
}

pub(crate) fn event(t: EventType, mode: Mode, at_ms: i64) -> Event {
    Event {
        merged_ids: None,
        id: EventId::from_uuid(uuid()),
        event_type: t,
        mode,
        created_at: Timestamp::from_millis(at_ms),
        data: json!({"id": "con_x"}),
        changed_fields: None,
        previous_stage: None,
    }
}

pub(crate) async fn insert_webhooks(store: &Arc<dyn Store>, hooks: &[(&Tenant, &Webhook)]) {
    let mut tx = store.begin_write().await.unwrap();
    for (t, w) in hooks {
        tx.insert_webhook(t, w).await.unwrap();
    }
    tx.commit().await.unwrap();
}

pub(crate) async fn insert_events(store: &Arc<dyn Store>, t: &Tenant, events: &[Event]) {
    let mut tx = store.begin_write().await.unwrap();
    for e in events {
        tx.insert_event(t, e).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// Runs one fan-out batch as the app does; returns the (event, webhook) pairs it created.
pub(crate) async fn fan_out(store: &Arc<dyn Store>, limit: u32) -> Vec<(String, String)> {
    let mut tx = store.begin_write().await.unwrap();
    let rows = tx.take_events_to_dispatch(limit).await.unwrap();
    let mut events = Vec::new();
    let mut deliveries = Vec::new();
    for r in rows {
        if !events.contains(&(r.tenant.clone(), r.event_id.clone())) {
            events.push((r.tenant.clone(), r.event_id.clone()));
        }
        if let Some((wid, sub)) = r.webhook {
            if sub.matches(r.event_type) {
                deliveries.push(NewDelivery {
                    tenant: r.tenant,
                    id: DeliveryId::from_uuid(uuid()),
                    webhook_id: wid,
                    event_id: r.event_id,
                    event_type: r.event_type,
                    created_at: Timestamp::from_millis(T0),
                });
            }
        }
    }
    let pairs = deliveries
        .iter()
        .map(|d| (d.event_id.to_string(), d.webhook_id.to_string()))
        .collect();
    assert_eq!(
        tx.insert_deliveries(&deliveries).await.unwrap(),
        deliveries.len() as u64
    );
    // The same pairs again: the unique (event, webhook) key skips every one.
    let again: Vec<NewDelivery> = deliveries
        .iter()
        .map(|d| NewDelivery {
            id: DeliveryId::from_uuid(uuid()),
            ..d.clone()
        })
        .collect();
    assert_eq!(tx.insert_deliveries(&again).await.unwrap(), 0);
    tx.mark_events_dispatched(&events).await.unwrap();
    tx.commit().await.unwrap();
    pairs
}

fn outcome(
    t: &Tenant,
    claimed: &crm_app::ports::ClaimedDelivery,
    status: DeliveryStatus,
    at_ms: i64,
    next: Option<i64>,
) -> AttemptOutcome {
    AttemptOutcome {
        tenant: t.clone(),
        delivery_id: claimed.id.clone(),
        claim_token: claimed.claim_token.clone(),
        status,
        next_attempt_at: next.map(Timestamp::from_millis),
        attempt: DeliveryAttempt {
            seq: crm_domain::encode_uuid(uuid()),
            webhook_id: claimed.webhook_id.clone(),
            delivery_id: claimed.id.clone(),
            event_id: claimed.event_id.clone(),
            event_type: claimed.event_type,
            attempt: claimed.attempts + 1,
            status,
            response_status: Some(500),
            error: Some("the endpoint answered 500".into()),
            duration_ms: 12,
            next_attempt_at: next.map(Timestamp::from_millis),
            created_at: Timestamp::from_millis(at_ms),
        },
    }
}

pub(crate) async fn claim(
    store: &Arc<dyn Store>,
    now: i64,
    lease_until: i64,
    token: &str,
    limit: u32,
) -> Vec<crm_app::ports::ClaimedDelivery> {
    let mut tx = store.begin_write().await.unwrap();
    let c = tx
        .claim_deliveries(
            Timestamp::from_millis(now),
            Timestamp::from_millis(lease_until),
            token,
            limit,
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    c
}

pub async fn webhooks_round_trip_and_stay_in_their_tenant(store: Arc<dyn Store>) {
    let (test, live) = setup(&store).await;
    let a = webhook(Mode::Test, Subscription::All, T0);
    let b = webhook(
        Mode::Test,
        Subscription::Only(vec![EventType::DealCreated, EventType::ContactUpdated]),
        T0 + 1,
    );
    insert_webhooks(&store, &[(&test, &a), (&test, &b)]).await;
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_webhook(&test, &a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        tx.list_webhooks(&test, &all()).await.unwrap(),
        vec![b.clone(), a.clone()]
    );
    assert_eq!(tx.get_webhook(&live, &a.id).await.unwrap(), None);
    assert!(tx.list_webhooks(&live, &all()).await.unwrap().is_empty());
    drop(tx);

    let mut changed = b.clone();
    changed.url = "https://example.com/new".into();
    changed.enabled = false;
    changed.description = None;
    changed.version = 2;
    let mut tx = store.begin_write().await.unwrap();
    tx.update_webhook(&test, &changed).await.unwrap();
    assert!(matches!(
        tx.update_webhook(&test, &changed).await,
        Err(StoreError::Stale)
    ));
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.get_webhook(&test, &b.id).await.unwrap(), Some(changed));
    assert!(!tx.delete_webhook(&live, &a.id).await.unwrap());
    assert!(tx.delete_webhook(&test, &a.id).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_webhook(&test, &a.id).await.unwrap(), None);
}

pub async fn fan_out_makes_one_delivery_per_matching_webhook_of_the_tenant(store: Arc<dyn Store>) {
    let (test, live) = setup(&store).await;
    let (other_test, _) = setup(&store).await;
    let all_hook = webhook(Mode::Test, Subscription::All, T0);
    let deals_only = webhook(
        Mode::Test,
        Subscription::Only(vec![EventType::DealCreated]),
        T0,
    );
    let mut disabled = webhook(Mode::Test, Subscription::All, T0);
    disabled.enabled = false;
    let later = webhook(Mode::Test, Subscription::All, T0 + 60_000);
    let live_hook = webhook(Mode::Live, Subscription::All, T0);
    let other_hook = webhook(Mode::Test, Subscription::All, T0);
    insert_webhooks(
        &store,
        &[
            (&test, &all_hook),
            (&test, &deals_only),
            (&test, &disabled),
            (&test, &later),
            (&live, &live_hook),
            (&other_test, &other_hook),
        ],
    )
    .await;

    let contact_created = event(EventType::ContactCreated, Mode::Test, T0 + 10);
    let deal_created = event(EventType::DealCreated, Mode::Test, T0 + 20);
    let live_event = event(EventType::ContactCreated, Mode::Live, T0 + 30);
    insert_events(
        &store,
        &test,
        &[contact_created.clone(), deal_created.clone()],
    )
    .await;
    insert_events(&store, &live, std::slice::from_ref(&live_event)).await;

    let pairs: BTreeSet<(String, String)> = fan_out(&store, 100).await.into_iter().collect();
    let expected: BTreeSet<(String, String)> = [
        (&contact_created, &all_hook),
        (&deal_created, &all_hook),
        (&deal_created, &deals_only),
        (&live_event, &live_hook),
    ]
    .into_iter()
    .map(|(e, w)| (e.id.to_string(), w.id.to_string()))
    .collect();
    assert_eq!(pairs, expected);
    // Dispatched events are not taken again.
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.take_events_to_dispatch(100).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    // Events without any webhook are still taken once (and marked), in batches.
    let lone: Vec<Event> = (0..5)
        .map(|i| event(EventType::ContactUpdated, Mode::Test, T0 + 100 + i))
        .collect();
    insert_events(&store, &other_test, &lone).await;
    let mut tx = store.begin_write().await.unwrap();
    let rows = tx.take_events_to_dispatch(3).await.unwrap();
    let taken: BTreeSet<String> = rows.iter().map(|r| r.event_id.to_string()).collect();
    assert_eq!(taken.len(), 3);
    // Released at once (a dropped transaction's rollback may reach Postgres only later, and its
    // locks would make the next batch skip these events).
    tx.commit().await.unwrap();
    assert_eq!(fan_out(&store, 3).await.len(), 3);
    assert_eq!(fan_out(&store, 3).await.len(), 2);
    assert!(fan_out(&store, 3).await.is_empty());
}

pub async fn claims_hold_a_lease_and_record_only_under_it(store: Arc<dyn Store>) {
    let (test, live) = setup(&store).await;
    let hook = webhook(Mode::Test, Subscription::All, T0);
    insert_webhooks(&store, &[(&test, &hook)]).await;
    let e = event(EventType::ContactCreated, Mode::Test, T0 + 1);
    insert_events(&store, &test, std::slice::from_ref(&e)).await;
    assert_eq!(fan_out(&store, 10).await.len(), 1);

    // Not due before its time; claimed when due, with the event's stored body.
    assert!(claim(&store, T0 - 1, T0 + 1000, "early", 10)
        .await
        .is_empty());
    let first = claim(&store, T0, T0 + 1000, "one", 10).await;
    assert_eq!(first.len(), 1);
    let c = &first[0];
    assert_eq!(
        (c.attempts, &c.url, &c.secret, &c.event_id, c.event_type),
        (0, &hook.url, &hook.secret, &e.id, e.event_type)
    );
    let body: serde_json::Value = serde_json::from_str(&c.body).unwrap();
    assert_eq!(
        (&body["id"], &body["type"], &body["data"]),
        (
            &serde_json::json!(e.id.as_str()),
            &serde_json::json!(e.event_type.as_str()),
            &e.data
        )
    );
    assert_eq!(c.tenant, test);
    // Held: nobody else gets it until the lease ends.
    assert!(claim(&store, T0 + 999, T0 + 2000, "two", 10)
        .await
        .is_empty());
    // The lease expired (the holder died): claimed again, under a new token.
    let second = claim(&store, T0 + 1000, T0 + 3000, "three", 10).await;
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].id, c.id);

    // The first holder's late outcome is refused; the current holder's is recorded.
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.record_attempts(&[outcome(
            &test,
            c,
            DeliveryStatus::Succeeded,
            T0 + 1500,
            None
        )])
        .await
        .unwrap(),
        0
    );
    let retry = outcome(
        &test,
        &second[0],
        DeliveryStatus::Retrying,
        T0 + 1500,
        Some(T0 + 5000),
    );
    assert_eq!(
        tx.record_attempts(std::slice::from_ref(&retry))
            .await
            .unwrap(),
        1
    );
    // Once recorded, the claim is spent.
    assert_eq!(
        tx.record_attempts(std::slice::from_ref(&retry))
            .await
            .unwrap(),
        0
    );
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let d = tx
        .get_delivery(&test, &hook.id, &c.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (d.status, d.attempts, d.next_attempt_at),
        (
            DeliveryStatus::Retrying,
            1,
            Timestamp::from_millis(T0 + 5000)
        )
    );
    assert!(tx
        .get_delivery(&live, &hook.id, &c.id)
        .await
        .unwrap()
        .is_none());
    let log = tx
        .list_delivery_attempts(&test, &hook.id, &all())
        .await
        .unwrap();
    assert_eq!(log.len(), 1);
    assert_eq!(
        (
            log[0].attempt,
            log[0].status,
            log[0].response_status,
            log[0].duration_ms
        ),
        (1, DeliveryStatus::Retrying, Some(500), 12)
    );
    assert_eq!(
        (&log[0].event_id, log[0].event_type, &log[0].delivery_id),
        (&e.id, e.event_type, &c.id)
    );
    assert!(tx
        .list_delivery_attempts(&live, &hook.id, &all())
        .await
        .unwrap()
        .is_empty());
    drop(tx);

    // Due again at its next attempt; dead-lettered after the last; only then requeued.
    assert!(claim(&store, T0 + 4999, T0 + 9000, "four", 10)
        .await
        .is_empty());
    let third = claim(&store, T0 + 5000, T0 + 9000, "five", 10).await;
    assert_eq!(third[0].attempts, 1);
    let mut tx = store.begin_write().await.unwrap();
    assert!(!tx
        .requeue_dead_delivery(&test, &hook.id, &c.id, Timestamp::from_millis(T0 + 5001))
        .await
        .unwrap());
    tx.record_attempts(&[outcome(
        &test,
        &third[0],
        DeliveryStatus::DeadLettered,
        T0 + 5002,
        None,
    )])
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert!(claim(&store, T0 + 100_000, T0 + 200_000, "six", 10)
        .await
        .is_empty());
    let mut tx = store.begin_write().await.unwrap();
    assert!(!tx
        .requeue_dead_delivery(&live, &hook.id, &c.id, Timestamp::from_millis(T0 + 6000))
        .await
        .unwrap());
    assert!(tx
        .requeue_dead_delivery(&test, &hook.id, &c.id, Timestamp::from_millis(T0 + 6000))
        .await
        .unwrap());
    assert!(!tx
        .requeue_dead_delivery(&test, &hook.id, &c.id, Timestamp::from_millis(T0 + 6000))
        .await
        .unwrap());
    tx.commit().await.unwrap();
    let again = claim(&store, T0 + 6000, T0 + 7000, "seven", 10).await;
    assert_eq!((again.len(), again[0].attempts), (1, 2));
    let mut tx = store.begin_read().await.unwrap();
    let log = tx
        .list_delivery_attempts(
            &test,
            &hook.id,
            &Slice {
                before: None,
                limit: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(log[0].attempt, 2, "newest first");
    let older = tx
        .list_delivery_attempts(
            &test,
            &hook.id,
            &Slice {
                before: Some(log[0].seq.clone()),
                limit: 10,
            },
        )
        .await
        .unwrap();
    assert_eq!(older.iter().map(|a| a.attempt).collect::<Vec<_>>(), vec![1]);
    drop(tx);

    // A disabled webhook's deliveries wait; deleting the webhook removes them with their log.
    let mut disabled = hook.clone();
    disabled.enabled = false;
    disabled.version = 2;
    let mut tx = store.begin_write().await.unwrap();
    tx.update_webhook(&test, &disabled).await.unwrap();
    tx.commit().await.unwrap();
    assert!(claim(&store, T0 + 100_000, T0 + 200_000, "eight", 10)
        .await
        .is_empty());
    let mut tx = store.begin_write().await.unwrap();
    assert!(tx.delete_webhook(&test, &hook.id).await.unwrap());
    assert!(tx
        .get_delivery(&test, &hook.id, &c.id)
        .await
        .unwrap()
        .is_none());
    assert!(tx
        .list_delivery_attempts(&test, &hook.id, &all())
        .await
        .unwrap()
        .is_empty());
    tx.commit().await.unwrap();
}

/// The recorder's batches: one call records every outcome still held, across tenants and past
/// a store's statement size (SQLite writes 500 per statement), and only those: not a stale
/// claim's (even beside the current holder's for the same delivery), nor one naming another
/// webhook. Each delivery gets its holder's own attempt, logged with its own event.
pub async fn a_batch_of_outcomes_records_exactly_the_ones_still_held(store: Arc<dyn Store>) {
    let (test, live) = setup(&store).await;
    let (hook_t, hook_l) = (
        webhook(Mode::Test, Subscription::All, T0),
        webhook(Mode::Live, Subscription::All, T0),
    );
    insert_webhooks(&store, &[(&test, &hook_t), (&live, &hook_l)]).await;
    let test_events: Vec<Event> = (0..600)
        .map(|i| event(EventType::ContactCreated, Mode::Test, T0 + i))
        .collect();
    let live_events: Vec<Event> = (0..5)
        .map(|i| event(EventType::DealCreated, Mode::Live, T0 + i))
        .collect();
    insert_events(&store, &test, &test_events).await;
    insert_events(&store, &live, &live_events).await;
    assert_eq!(fan_out(&store, 1000).await.len(), 605);
    let first = claim(&store, T0, T0 + 1000, "first", 1000).await;
    assert_eq!(first.len(), 605);
    // Three leases expire and are taken again: their first holder's outcomes are stale.
    let retaken = claim(&store, T0 + 1000, T0 + 2000, "second", 3).await;
    assert_eq!(retaken.len(), 3);
    let stale: BTreeSet<String> = retaken.iter().map(|c| c.id.to_string()).collect();

    let mut outcomes: Vec<AttemptOutcome> = first
        .iter()
        .map(|c| outcome(&c.tenant, c, DeliveryStatus::Succeeded, T0 + 1500, None))
        .collect();
    // The current holders' outcomes come in the same batch, right after the stale ones (in one
    // statement's reach): each delivery gets its current outcome's attempt, not the stale one's.
    for c in &retaken {
        let mut current = outcome(
            &c.tenant,
            c,
            DeliveryStatus::Retrying,
            T0 + 1600,
            Some(T0 + 9000),
        );
        current.attempt.duration_ms = 99;
        let at = outcomes.iter().position(|o| o.delivery_id == c.id).unwrap();
        outcomes.insert(at + 1, current);
    }
    // An outcome naming another webhook than its delivery's is not recorded either.
    let mismatched = outcomes
        .iter()
        .position(|o| o.tenant == test && !stale.contains(o.delivery_id.as_str()))
        .unwrap();
    outcomes[mismatched].attempt.webhook_id = hook_l.id.clone();
    let seq_of: std::collections::HashMap<(String, String), String> = outcomes
        .iter()
        .filter(|o| o.claim_token == "second" || !stale.contains(o.delivery_id.as_str()))
        .map(|o| {
            (
                (o.delivery_id.to_string(), o.claim_token.clone()),
                o.attempt.seq.clone(),
            )
        })
        .collect();
    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.record_attempts(&outcomes).await.unwrap(), 604);
    assert_eq!(
        tx.record_attempts(&outcomes).await.unwrap(),
        0,
        "a recorded claim is spent"
    );
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    let mut logged = Vec::new();
    for (t, hook) in [(&test, &hook_t), (&live, &hook_l)] {
        let log = tx
            .list_delivery_attempts(t, &hook.id, &all())
            .await
            .unwrap();
        for a in &log {
            let d = tx
                .get_delivery(t, &hook.id, &a.delivery_id)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(
                (&a.event_id, a.event_type),
                (&d.event_id, d.event_type),
                "an attempt logged with its delivery's own event"
            );
            let retried = stale.contains(a.delivery_id.as_str());
            let token = if retried { "second" } else { "first" };
            assert_eq!(
                Some(&a.seq),
                seq_of.get(&(a.delivery_id.to_string(), token.to_owned())),
                "the holder's own attempt"
            );
            let expected = if retried {
                (DeliveryStatus::Retrying, 99)
            } else {
                (DeliveryStatus::Succeeded, 12)
            };
            assert_eq!(
                (a.attempt, a.status, a.duration_ms),
                (1, expected.0, expected.1)
            );
            assert_eq!((d.status, d.attempts), (expected.0, 1));
        }
        logged.extend(log.into_iter().map(|a| a.delivery_id.to_string()));
    }
    assert_eq!(logged.len(), 604);
    let unique: BTreeSet<&String> = logged.iter().collect();
    assert_eq!(unique.len(), 604, "one attempt per delivery");
    assert!(!logged.contains(&outcomes[mismatched].delivery_id.to_string()));
    let d = tx
        .get_delivery(&test, &hook_t.id, &outcomes[mismatched].delivery_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (d.status, d.attempts),
        (DeliveryStatus::Pending, 0),
        "still with its holder"
    );
}

/// Two claimers at once (two processes on Postgres: `SKIP LOCKED`; SQLite serialises them) never
/// hold the same delivery, and together take every due one; likewise two dispatchers.
pub async fn concurrent_claims_and_fan_outs_never_overlap(store: Arc<dyn Store>) {
    let (test, _) = setup(&store).await;
    let hook = webhook(Mode::Test, Subscription::All, T0);
    insert_webhooks(&store, &[(&test, &hook)]).await;
    let events: Vec<Event> = (0..40)
        .map(|i| event(EventType::ContactCreated, Mode::Test, T0 + i))
        .collect();
    insert_events(&store, &test, &events).await;

    let dispatcher = |store: Arc<dyn Store>, delay_ms: u64| async move {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        let mut tx = store.begin_write().await.unwrap();
        let rows = tx.take_events_to_dispatch(25).await.unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        let ids: Vec<EventId> = rows.iter().map(|r| r.event_id.clone()).collect();
        let deliveries: Vec<NewDelivery> = rows
            .into_iter()
            .map(|r| NewDelivery {
                tenant: r.tenant,
                id: DeliveryId::from_uuid(uuid()),
                webhook_id: r.webhook.unwrap().0,
                event_id: r.event_id,
                event_type: r.event_type,
                created_at: Timestamp::from_millis(T0),
            })
            .collect();
        tx.insert_deliveries(&deliveries).await.unwrap();
        let marks: Vec<(Tenant, EventId)> = deliveries
            .iter()
            .map(|d| (d.tenant.clone(), d.event_id.clone()))
            .collect();
        tx.mark_events_dispatched(&marks).await.unwrap();
        tx.commit().await.unwrap();
        ids
    };
    let (a, b) = tokio::join!(
        tokio::spawn(dispatcher(store.clone(), 0)),
        tokio::spawn(dispatcher(store.clone(), 40))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    let a_set: BTreeSet<_> = a.iter().map(|e| e.to_string()).collect();
    let b_set: BTreeSet<_> = b.iter().map(|e| e.to_string()).collect();
    assert!(
        a_set.is_disjoint(&b_set),
        "two dispatchers took the same event"
    );
    assert_eq!(a_set.len() + b_set.len(), 40);

    let claimer = |store: Arc<dyn Store>, token: &'static str, delay_ms: u64| async move {
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        let mut tx = store.begin_write().await.unwrap();
        let c = tx
            .claim_deliveries(
                Timestamp::from_millis(T0 + 10),
                Timestamp::from_millis(T0 + 60_000),
                token,
                25,
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(150)).await;
        tx.commit().await.unwrap();
        c.into_iter()
            .map(|d| d.id.to_string())
            .collect::<BTreeSet<_>>()
    };
    let (a, b) = tokio::join!(
        tokio::spawn(claimer(store.clone(), "a", 0)),
        tokio::spawn(claimer(store.clone(), "b", 40))
    );
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.is_disjoint(&b), "two claimers hold the same delivery");
    assert_eq!((a.len() + b.len(), a.len().max(b.len())), (40, 25));
}
