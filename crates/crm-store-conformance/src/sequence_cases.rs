//! Conformance cases of sequences and their enrollments.

use std::sync::Arc;

use crm_app::{ports::Slice, Store, StoreError};
use crm_domain::{
    automation::ConditionOp,
    condition::Condition,
    sequence::{Enrollment, EnrollmentState, ExitReason, Sequence, SequenceDef, SourceObject, Step, Trigger, WaitUnit},
    ContactId, EnrollmentId, EventType, Mode, SequenceId, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn all() -> Slice {
    Slice { before: None, limit: 1000 }
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
            exit_when: vec![Condition::new("type", ConditionOp::In, Some(json!(["customer", "churned"])))],
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
    assert_eq!(tx.get_sequence(&live, &a.id).await.unwrap(), None, "modes are tenants");
    let listed = tx.list_sequences(&t, &all()).await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
        [b.id.clone(), a.id.clone()],
        "newest first"
    );
    let mut got = tx
        .get_sequences(&t, &[a.id.clone(), b.id.clone(), SequenceId::from_uuid(uuid())])
        .await
        .unwrap();
    got.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(got, [a.clone(), b.clone()]);
    assert_eq!(tx.count_sequences(&t).await.unwrap(), 2, "disabled sequences count too");
    assert_eq!(tx.count_sequences(&live).await.unwrap(), 0);
    assert_eq!(tx.count_plan_objects(&t).await.unwrap().sequences, 2);

    let mut changed = a.clone();
    changed.enabled = false;
    changed.def.trigger = None;
    changed.version = 2;
    tx.update_sequence(&t, &changed).await.unwrap();
    assert!(
        matches!(tx.update_sequence(&t, &changed).await, Err(StoreError::Stale)),
        "version checked"
    );
    assert_eq!(tx.get_sequence(&t, &a.id).await.unwrap(), Some(changed));
    assert!(tx.delete_sequence(&t, &a.id).await.unwrap());
    assert!(!tx.delete_sequence(&t, &a.id).await.unwrap());
    assert_eq!(tx.count_sequences(&t).await.unwrap(), 1);
    tx.commit().await.unwrap();
}

pub async fn triggered_sequences_are_the_enabled_ones_for_the_events_oldest_first(store: Arc<dyn Store>) {
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
        .triggered_sequences(&t, &[EventType::ContactCreated, EventType::DealStageChanged])
        .await
        .unwrap();
    assert_eq!(got.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), [first.id.clone(), deal.id.clone()]);
    assert!(tx.triggered_sequences(&t, &[EventType::DealUpdated]).await.unwrap().is_empty());
    assert!(tx
        .triggered_sequences(&tenant(&ws, Mode::Live), &[EventType::ContactCreated])
        .await
        .unwrap()
        .is_empty());
}

pub async fn enrollments_are_unique_per_sequence_and_contact_and_end_by_source_or_sequence(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let s = sequence(Some(EventType::ContactCreated), true);
    let other = sequence(Some(EventType::ContactCreated), true);
    let (c1, c2, c3) = (contact(Some("a@x.io")), contact(Some("b@x.io")), contact(Some("c@x.io")));
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
        tx.insert_enrollments(&t, &[enrollment(&s, &c1.id, now)]).await.unwrap().is_empty(),
        "once per sequence and contact"
    );
    assert_eq!(tx.get_enrollment(&t, &s.id, &e1.id).await.unwrap(), Some(e1.clone()));
    assert_eq!(
        tx.get_enrollment(&t, &other.id, &e1.id).await.unwrap(),
        None,
        "enrollments belong to their sequence"
    );
    let listed = tx.list_enrollments(&t, &s.id, &all()).await.unwrap();
    assert_eq!(listed.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), [e2.id.clone(), e1.id.clone()]);
    let mut enrolled = tx.enrolled_contacts(&t, &s.id, &[c1.id.clone(), c3.id.clone()]).await.unwrap();
    enrolled.sort();
    assert_eq!(enrolled, std::slice::from_ref(&c1.id));

    let by_source = tx
        .active_enrollments_by_source(&t, &[c1.id.to_string(), c3.id.to_string()])
        .await
        .unwrap();
    assert_eq!(by_source.iter().map(|e| e.id.clone()).collect::<Vec<_>>(), [e1.id.clone(), o1.id.clone()]);
    let mut ended = by_source[0].clone();
    assert!(ended.exit(ExitReason::SourceDeleted, now));
    tx.update_enrollments(&t, &[ended.clone()]).await.unwrap();
    assert_eq!(tx.get_enrollment(&t, &s.id, &e1.id).await.unwrap(), Some(ended));
    let by_source = tx.active_enrollments_by_source(&t, &[c1.id.to_string()]).await.unwrap();
    assert_eq!(
        by_source.iter().map(|e| &e.id).collect::<Vec<_>>(),
        [&o1.id],
        "ended enrollments are not active"
    );

    assert_eq!(
        tx.end_sequence_enrollments(&t, &s.id, ExitReason::SequenceDisabled, now).await.unwrap(),
        1,
        "only e2 was still active"
    );
    let e2_now = tx.get_enrollment(&t, &s.id, &e2.id).await.unwrap().unwrap();
    assert_eq!(
        (e2_now.state, e2_now.exit_reason, e2_now.next_send_at),
        (EnrollmentState::Exited, Some(ExitReason::SequenceDisabled), None)
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
        .contacts_by_ids(&t, &[c1.id.clone(), c3.id.clone(), ContactId::from_uuid(uuid())])
        .await
        .unwrap();
    found.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(found, [c1.clone(), c3.clone()]);
    assert!(tx.contacts_by_ids(&tenant(&ws, Mode::Live), std::slice::from_ref(&c1.id)).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}

pub async fn due_enrollments_are_claimed_once_under_a_lease_and_advanced_only_by_their_holder(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let s = sequence(None, true);
    let now = Timestamp::from_millis(4_000_000_000_000);
    let past = Timestamp::from_millis(1_000);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_sequence(&t, &s).await.unwrap();
    let mut due = Vec::new();
    for i in 0..5 {
        let c = contact(Some(&format!("due{i}@x.io")));
        tx.insert_contact(&t, &c, &[]).await.unwrap();
        due.push(enrollment(&s, &c.id, past));
    }
    let later = contact(Some("later@x.io"));
    tx.insert_contact(&t, &later, &[]).await.unwrap();
    let not_due = enrollment(&s, &later.id, Timestamp::from_millis(now.millis() + 1_000));
    let mut inserted = due.clone();
    inserted.push(not_due.clone());
    tx.insert_enrollments(&t, &inserted).await.unwrap();
    tx.commit().await.unwrap();

    let lease = Timestamp::from_millis(now.millis() + 30_000);
    let mut tx = store.begin_write().await.unwrap();
    let first = tx.claim_due_enrollments(now, "a", lease, 3).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(first.len(), 3, "at most the limit");
    assert!(first.iter().all(|c| c.tenant == t));
    let mut tx = store.begin_write().await.unwrap();
    let second = tx.claim_due_enrollments(now, "b", lease, 100).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(second.len(), 2, "leased rows and rows not yet due are not claimed again");
    let mut claimed: Vec<EnrollmentId> = first.iter().chain(&second).map(|c| c.enrollment.id.clone()).collect();
    claimed.sort();
    let mut expected: Vec<EnrollmentId> = due.iter().map(|e| e.id.clone()).collect();
    expected.sort();
    assert_eq!(claimed, expected);

    // Only the holder advances, and only from the step it claimed.
    let mut tx = store.begin_write().await.unwrap();
    let mut moved = first[0].enrollment.clone();
    moved.step_sent(&s.def.steps, now);
    assert!(
        tx.advance_claimed_enrollments(&t, "b", &[(moved.clone(), 0)]).await.unwrap().is_empty(),
        "not b's lease"
    );
    assert!(
        tx.advance_claimed_enrollments(&t, "a", &[(moved.clone(), 1)]).await.unwrap().is_empty(),
        "not at that step"
    );
    assert_eq!(
        tx.advance_claimed_enrollments(&t, "a", &[(moved.clone(), 0)]).await.unwrap(),
        [moved.id.clone()]
    );
    assert!(
        tx.advance_claimed_enrollments(&t, "a", &[(moved.clone(), 0)]).await.unwrap().is_empty(),
        "the lease is gone once advanced"
    );
    assert_eq!(tx.get_enrollment(&t, &s.id, &moved.id).await.unwrap(), Some(moved.clone()));
    // An exited enrollment is not advanced, even by its holder.
    let mut exited = first[1].enrollment.clone();
    exited.exit(ExitReason::ExitCondition, now);
    tx.update_enrollments(&t, &[exited.clone()]).await.unwrap();
    let mut late = first[1].enrollment.clone();
    late.step_sent(&s.def.steps, now);
    assert!(tx.advance_claimed_enrollments(&t, "a", &[(late, 0)]).await.unwrap().is_empty());
    tx.commit().await.unwrap();

    // Expired leases are claimed again, and `moved`'s next step (60 s after its first) is due too.
    let after = Timestamp::from_millis(lease.millis() + 1);
    let mut tx = store.begin_write().await.unwrap();
    let again = tx
        .claim_due_enrollments(after, "c", Timestamp::from_millis(after.millis() + 30_000), 100)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut again_ids: Vec<EnrollmentId> = again.iter().map(|c| c.enrollment.id.clone()).collect();
    again_ids.sort();
    let mut expected: Vec<EnrollmentId> = due
        .iter()
        .map(|e| e.id.clone())
        .filter(|id| *id != exited.id)
        .chain([not_due.id.clone()])
        .collect();
    expected.sort();
    assert_eq!(again_ids, expected);
}
