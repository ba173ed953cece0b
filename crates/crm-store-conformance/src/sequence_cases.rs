//! Conformance cases of sequences and their enrollments.

use std::sync::Arc;

use crm_app::{ports::Slice, Store, StoreError};
use crm_domain::{
    automation::ConditionOp,
    condition::Condition,
    sequence::{
        Enrollment, EnrollmentState, ExitReason, Sequence, SequenceDef, SourceObject, Step,
        Trigger, WaitUnit,
    },
    ContactId, EnrollmentId, EventType, Mode, SequenceId, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn all() -> Slice {
    Slice {
        before: None,
        limit: 1000,
    }
}

pub fn sequence(trigger: Option<EventType>, enabled: bool) -> Sequence {
    let step = |wait, subject: &str| Step {
        wait_unit: WaitUnit::Seconds,
        wait,
        subject: Some(subject.into()),
        body: Some("<p>Hi {{first_name}}</p>".into()),
        text: None,
        template_id: None,
    };
    Sequence {
        id: SequenceId::from_uuid(uuid()),
        def: SequenceDef {
            name: "Onboarding".into(),
            trigger: trigger.map(|event| Trigger {
                event,
                filter: vec![Condition::new("type", ConditionOp::Eq, Some(json!("lead")))],
            }),
            exit_when: vec![Condition::new(
                "type",
                ConditionOp::In,
                Some(json!(["customer", "churned"])),
            )],
            steps: vec![step(0, "Welcome"), step(60, "Tips")],
        },
        enabled,
        enroll_existing: false,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        updated_at: Timestamp::from_millis(1_700_000_000_000),
        version: 1,
    }
}

fn enrollment(s: &Sequence, contact: &ContactId, now: Timestamp) -> Enrollment {
    Enrollment::start(
        EnrollmentId::from_uuid(uuid()),
        s,
        contact.clone(),
        SourceObject::Contact,
        contact.to_string(),
        now,
    )
}

pub async fn sequences_round_trip_update_count_and_delete(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let live = tenant(&ws, Mode::Live);
    let a = sequence(Some(EventType::ContactCreated), true);
    let b = sequence(None, false);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_sequence(&t, &a).await.unwrap();
    tx.insert_sequence(&t, &b).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(tx.get_sequence(&t, &a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        tx.get_sequence(&live, &a.id).await.unwrap(),
        None,
        "modes are tenants"
    );
    let listed = tx.list_sequences(&t, &all()).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        [b.id.clone(), a.id.clone()],
        "newest first"
    );
    let mut got = tx
        .get_sequences(
            &t,
            &[a.id.clone(), b.id.clone(), SequenceId::from_uuid(uuid())],
        )
        .await
        .unwrap();
    got.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(got, [a.clone(), b.clone()]);
    assert_eq!(
        tx.count_sequences(&t).await.unwrap(),
        2,
        "disabled sequences count too"
    );
    assert_eq!(tx.count_sequences(&live).await.unwrap(), 0);
    assert_eq!(tx.count_plan_objects(&t).await.unwrap().sequences, 2);

    let mut changed = a.clone();
    changed.enabled = false;
    changed.def.trigger = None;
    changed.version = 2;
    tx.update_sequence(&t, &changed).await.unwrap();
    assert!(
        matches!(
            tx.update_sequence(&t, &changed).await,
            Err(StoreError::Stale)
        ),
        "version checked"
    );
    assert_eq!(tx.get_sequence(&t, &a.id).await.unwrap(), Some(changed));
    assert!(tx.delete_sequence(&t, &a.id).await.unwrap());
    assert!(!tx.delete_sequence(&t, &a.id).await.unwrap());
    assert_eq!(tx.count_sequences(&t).await.unwrap(), 1);
    tx.commit().await.unwrap();
}

pub async fn triggered_sequences_are_the_enabled_ones_for_the_events_oldest_first(
    store: Arc<dyn Store>,
) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let first = sequence(Some(EventType::ContactCreated), true);
    let off = sequence(Some(EventType::ContactCreated), false);
    let deal = sequence(Some(EventType::DealStageChanged), true);
    let manual = sequence(None, true);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    for s in [&first, &off, &deal, &manual] {
        tx.insert_sequence(&t, s).await.unwrap();
    }
    let got = tx
        .triggered_sequences(
            &t,
            &[EventType::ContactCreated, EventType::DealStageChanged],
        )
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        [first.id.clone(), deal.id.clone()]
    );
    assert!(tx
        .triggered_sequences(&t, &[EventType::DealUpdated])
        .await
        .unwrap()
        .is_empty());
    assert!(tx
        .triggered_sequences(&tenant(&ws, Mode::Live), &[EventType::ContactCreated])
        .await
        .unwrap()
        .is_empty());
}

pub async fn enrollments_are_unique_per_sequence_and_contact_and_end_by_source_or_sequence(
    store: Arc<dyn Store>,
) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let s = sequence(Some(EventType::ContactCreated), true);
    let other = sequence(Some(EventType::ContactCreated), true);
    let (c1, c2, c3) = (
        contact(Some("a@x.io")),
        contact(Some("b@x.io")),
        contact(Some("c@x.io")),
    );
    let now = Timestamp::from_millis(1_700_000_100_000);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_sequence(&t, &s).await.unwrap();
    tx.insert_sequence(&t, &other).await.unwrap();
    for c in [&c1, &c2, &c3] {
        tx.insert_contact(&t, c, &[]).await.unwrap();
    }
    let e1 = enrollment(&s, &c1.id, now);
    let e2 = enrollment(&s, &c2.id, now);
    let e1_again = enrollment(&s, &c1.id, now);
    let o1 = enrollment(&other, &c1.id, now);
    let inserted = tx
        .insert_enrollments(&t, &[e1.clone(), e2.clone(), e1_again.clone(), o1.clone()])
        .await
        .unwrap();
    assert_eq!(
        inserted,
        [e1.id.clone(), e2.id.clone(), o1.id.clone()],
        "a repeat in the batch is skipped"
    );
    assert!(
        tx.insert_enrollments(&t, &[enrollment(&s, &c1.id, now)])
            .await
            .unwrap()
            .is_empty(),
        "once per sequence and contact"
    );
    assert_eq!(
        tx.get_enrollment(&t, &s.id, &e1.id).await.unwrap(),
        Some(e1.clone())
    );
    assert_eq!(
        tx.get_enrollment(&t, &other.id, &e1.id).await.unwrap(),
        None,
        "enrollments belong to their sequence"
    );
    let listed = tx.list_enrollments(&t, &s.id, &all()).await.unwrap();
    assert_eq!(
        listed.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        [e2.id.clone(), e1.id.clone()]
    );
    let mut enrolled = tx
        .enrolled_contacts(&t, &s.id, &[c1.id.clone(), c3.id.clone()])
        .await
        .unwrap();
    enrolled.sort();
    assert_eq!(enrolled, std::slice::from_ref(&c1.id));

    let by_source = tx
        .active_enrollments_by_source(&t, &[c1.id.to_string(), c3.id.to_string()])
        .await
        .unwrap();
    assert_eq!(
        by_source.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
        [e1.id.clone(), o1.id.clone()]
    );
    let mut ended = by_source[0].clone();
    assert!(ended.exit(ExitReason::SourceDeleted, now));
    tx.update_enrollments(&t, &[ended.clone()]).await.unwrap();
    assert_eq!(
        tx.get_enrollment(&t, &s.id, &e1.id).await.unwrap(),
        Some(ended)
    );
    let by_source = tx
        .active_enrollments_by_source(&t, &[c1.id.to_string()])
        .await
        .unwrap();
    assert_eq!(
        by_source.iter().map(|e| &e.id).collect::<Vec<_>>(),
        [&o1.id],
        "ended enrollments are not active"
    );

    assert_eq!(
        tx.end_sequence_enrollments(&t, &s.id, ExitReason::SequenceDisabled, now)
            .await
            .unwrap(),
        1,
        "only e2 was still active"
    );
    let e2_now = tx.get_enrollment(&t, &s.id, &e2.id).await.unwrap().unwrap();
    assert_eq!(
        (e2_now.state, e2_now.exit_reason, e2_now.next_send_at),
        (
            EnrollmentState::Exited,
            Some(ExitReason::SequenceDisabled),
            None
        )
    );
    let e1_now = tx.get_enrollment(&t, &s.id, &e1.id).await.unwrap().unwrap();
    assert_eq!(
        e1_now.exit_reason,
        Some(ExitReason::SourceDeleted),
        "an ended enrollment keeps its reason"
    );
    assert!(tx
        .active_enrollments_by_source(&tenant(&ws, Mode::Live), &[c1.id.to_string()])
        .await
        .unwrap()
        .is_empty());

    let mut found = tx
        .contacts_by_ids(
            &t,
            &[c1.id.clone(), c3.id.clone(), ContactId::from_uuid(uuid())],
        )
        .await
        .unwrap();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(found, [c1.clone(), c3.clone()]);
    assert!(tx
        .contacts_by_ids(&tenant(&ws, Mode::Live), std::slice::from_ref(&c1.id))
        .await
        .unwrap()
        .is_empty());
    tx.commit().await.unwrap();
}

pub async fn due_enrollments_are_locked_earliest_first_advanced_once_and_held_back(
    store: Arc<dyn Store>,
) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let s = sequence(None, true);
    let now = Timestamp::from_millis(4_000_000_000_000);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_sequence(&t, &s).await.unwrap();
    let mut due = Vec::new();
    // Due at 5,000, 4,000, … 1,000: inserted latest first, so the order comes from the due time.
    for i in 0..5 {
        let c = contact(Some(&format!("due{i}@x.io")));
        tx.insert_contact(&t, &c, &[]).await.unwrap();
        due.push(enrollment(
            &s,
            &c.id,
            Timestamp::from_millis(5_000 - 1_000 * i),
        ));
    }
    let later = contact(Some("later@x.io"));
    tx.insert_contact(&t, &later, &[]).await.unwrap();
    let not_due = enrollment(&s, &later.id, Timestamp::from_millis(now.millis() + 1_000));
    let mut inserted = due.clone();
    inserted.push(not_due.clone());
    tx.insert_enrollments(&t, &inserted).await.unwrap();
    tx.commit().await.unwrap();
    let ids = |claimed: &[crm_app::ports::ClaimedEnrollment]| {
        claimed
            .iter()
            .map(|c| c.enrollment.id.clone())
            .collect::<Vec<_>>()
    };
    let mut earliest_first: Vec<EnrollmentId> = due.iter().rev().map(|e| e.id.clone()).collect();

    let mut tx = store.begin_write().await.unwrap();
    let first = tx.lock_due_enrollments(now, 3).await.unwrap();
    assert_eq!(
        ids(&first),
        earliest_first[..3],
        "at most the limit, earliest due first"
    );
    assert!(first.iter().all(|c| c.tenant == t));
    assert_eq!(first[0].enrollment, due[4], "the whole enrollment");
    // Ended by a commit, not a drop: a dropped Postgres transaction rolls back from a spawned task,
    // and until it has, `SKIP LOCKED` would pass over the rows it still holds.
    tx.commit().await.unwrap();

    // Only from the step it was locked at, and once.
    let mut tx = store.begin_write().await.unwrap();
    let locked = tx.lock_due_enrollments(now, 100).await.unwrap();
    assert_eq!(
        ids(&locked),
        earliest_first,
        "nothing was written to lock them; the rows not yet due stay"
    );
    let mut moved = due[4].clone();
    moved.step_sent(&s.def.steps, now);
    assert!(
        tx.advance_claimed_enrollments(&t, &[(moved.clone(), 1)])
            .await
            .unwrap()
            .is_empty(),
        "not at that step"
    );
    assert_eq!(
        tx.advance_claimed_enrollments(&t, &[(moved.clone(), 0)])
            .await
            .unwrap(),
        [moved.id.clone()]
    );
    assert!(
        tx.advance_claimed_enrollments(&t, &[(moved.clone(), 0)])
            .await
            .unwrap()
            .is_empty(),
        "advanced once"
    );
    assert_eq!(
        tx.get_enrollment(&t, &s.id, &moved.id).await.unwrap(),
        Some(moved.clone())
    );
    // An exited enrollment is not advanced.
    let mut exited = due[3].clone();
    exited.exit(ExitReason::ExitCondition, now);
    tx.update_enrollments(&t, &[exited.clone()]).await.unwrap();
    let mut late = due[3].clone();
    late.step_sent(&s.def.steps, now);
    assert!(tx
        .advance_claimed_enrollments(&t, &[(late, 0)])
        .await
        .unwrap()
        .is_empty());
    // Held back: not locked again until the hold ends, whoever asks.
    let hold = Timestamp::from_millis(now.millis() + 30_000);
    tx.hold_back_enrollments(&t, &[due[2].id.clone()], "a", hold)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    // `moved`'s second step was due 60 s after its first: long before `now`.
    assert!(moved.next_send_at.unwrap() < now);
    earliest_first.retain(|id| *id != exited.id && *id != due[2].id && *id != moved.id);
    let mut tx = store.begin_write().await.unwrap();
    let mut got = ids(&tx.lock_due_enrollments(now, 100).await.unwrap());
    tx.commit().await.unwrap();
    let mut expected = earliest_first.clone();
    expected.push(moved.id.clone());
    got.sort();
    expected.sort();
    assert_eq!(
        got, expected,
        "neither the exited nor the held-back enrollment"
    );

    let after = Timestamp::from_millis(hold.millis() + 1);
    let mut tx = store.begin_write().await.unwrap();
    let mut got = ids(&tx.lock_due_enrollments(after, 100).await.unwrap());
    got.sort();
    expected.extend([due[2].id.clone(), not_due.id.clone()]);
    expected.sort();
    assert_eq!(
        got, expected,
        "the hold is over, and the later enrollment is due"
    );
    // Writing the state ends a hold.
    tx.hold_back_enrollments(
        &t,
        std::slice::from_ref(&not_due.id),
        "b",
        Timestamp::from_millis(after.millis() + 60_000),
    )
    .await
    .unwrap();
    tx.update_enrollments(&t, std::slice::from_ref(&not_due))
        .await
        .unwrap();
    assert!(ids(&tx.lock_due_enrollments(after, 100).await.unwrap()).contains(&not_due.id));
    tx.commit().await.unwrap();
}

/// Rounds running side by side (each its own transaction, as two scheduler workers or two
/// processes are) never get the same enrollment: each step is claimed, and so sent, once.
pub async fn concurrent_rounds_never_lock_the_same_enrollment(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let mut s = sequence(None, true);
    s.def.steps.truncate(1);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_sequence(&t, &s).await.unwrap();
    let mut enrollments = Vec::new();
    for i in 0..40 {
        let c = contact(Some(&format!("round{i}@x.io")));
        tx.insert_contact(&t, &c, &[]).await.unwrap();
        enrollments.push(enrollment(&s, &c.id, Timestamp::from_millis(1_000 + i)));
    }
    tx.insert_enrollments(&t, &enrollments).await.unwrap();
    tx.commit().await.unwrap();
    let now = Timestamp::from_millis(4_000_000_000_000);
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let (store, s, t) = (store.clone(), s.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let (mut locked_ids, mut advanced) = (Vec::new(), 0);
            loop {
                let mut tx = store.begin_write().await.unwrap();
                let locked = tx.lock_due_enrollments(now, 3).await.unwrap();
                if locked.is_empty() {
                    return (locked_ids, advanced);
                }
                locked_ids.extend(locked.iter().map(|c| c.enrollment.id.clone()));
                // Hold the locks across a yield, as a round does while it works.
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                let updates: Vec<(Enrollment, u32)> = locked
                    .into_iter()
                    .map(|c| {
                        let mut e = c.enrollment;
                        e.step_sent(&s.def.steps, now);
                        (e, 0)
                    })
                    .collect();
                advanced += tx
                    .advance_claimed_enrollments(&t, &updates)
                    .await
                    .unwrap()
                    .len();
                tx.commit().await.unwrap();
            }
        }));
    }
    let (mut all_ids, mut advanced) = (Vec::new(), 0);
    for task in tasks {
        let (ids, n) = task.await.unwrap();
        all_ids.extend(ids);
        advanced += n;
    }
    let n = all_ids.len();
    all_ids.sort();
    all_ids.dedup();
    assert_eq!(
        (n, all_ids.len(), advanced),
        (40, 40, 40),
        "every enrollment locked and advanced exactly once"
    );
}
