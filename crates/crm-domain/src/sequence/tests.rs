use super::*;
use proptest::prelude::*;
use serde_json::json;
use uuid::Uuid;

fn ctx_parts() -> (Registry, Registry, Vec<String>) {
    (
        Registry::default(),
        Registry::default(),
        vec!["won".to_owned(), "qualified".to_owned()],
    )
}

fn parse(v: Value) -> Result<SequenceDef, ValidationError> {
    let (c, d, s) = ctx_parts();
    let ctx = RuleContext {
        contact_registry: &c,
        deal_registry: &d,
        stage_keys: &s,
    };
    let draft = SequenceDraft {
        name: v.get("name").and_then(Value::as_str).map(str::to_owned),
        channel: v.get("channel").and_then(Value::as_str).map(str::to_owned),
        trigger: v.get("trigger").cloned(),
        exit_when: v.get("exit_when").cloned(),
        steps: v.get("steps").cloned(),
    };
    SequenceDef::parse(draft, &ctx)
}

fn field_of(e: ValidationError) -> String {
    match e {
        ValidationError::Invalid { field, .. }
        | ValidationError::UnknownField { field, .. }
        | ValidationError::UnknownValue { field, .. } => field,
        other => panic!("unexpected {other:?}"),
    }
}

fn days(waits: &[i64]) -> Value {
    Value::Array(
        waits
            .iter()
            .map(|w| json!({"wait_days": w, "subject": "S{{first_name}}", "body": "<p>Hi</p>"}))
            .collect(),
    )
}

fn seq(def: SequenceDef) -> Sequence {
    let t = Timestamp::from_millis(0);
    Sequence {
        id: SequenceId::from_uuid(Uuid::from_u128(1)),
        def,
        enabled: true,
        enroll_existing: false,
        created_at: t,
        updated_at: t,
        version: 1,
    }
}

#[test]
fn parses_a_full_definition_and_reads_it_back() {
    let def = parse(json!({
        "name": " Onboarding ", "channel": "email",
        "trigger": {"event": "contact.created", "filter": [{"field": "type", "op": "eq", "value": "lead"}]},
        "exit_when": [{"field": "type", "op": "in", "value": ["customer", "churned"]}],
        "steps": [{"wait_seconds": 0, "subject": "a", "body": "b"}, {"wait_hours": 2, "template_id": "tpl_x"}],
    }))
    .unwrap();
    assert_eq!(def.name, "Onboarding");
    assert_eq!(def.steps[1].wait_seconds(), 7200);
    assert_eq!(def.source_object(), SourceObject::Contact);
    assert_eq!(def.steps[1].wait_unit, WaitUnit::Hours);
    assert_eq!(def.exit_when.len(), 1);
    assert_eq!(def.template_ids(), ["tpl_x"]);
}

#[test]
fn step_texts_have_lengths_named_by_position() {
    let long_body = "b".repeat(crate::text::MAX_BODY + 1);
    let long_subject = "s".repeat(crate::text::MAX_LINE + 1);
    let step =
        |subject: &str, body: &str| json!({"wait_days": 1, "subject": subject, "body": body});
    for (steps, field) in [
        (
            json!([step("a", "b"), step("a", "b"), step("a", &long_body)]),
            "steps[2].body",
        ),
        (json!([step(&long_subject, "b")]), "steps[0].subject"),
    ] {
        match parse(json!({"name": "n", "steps": steps})).unwrap_err() {
            ValidationError::Invalid { field: f, .. } => assert_eq!(f, field),
            other => panic!("{other:?}"),
        }
    }
    let max_body = "b".repeat(crate::text::MAX_BODY);
    assert!(parse(json!({"name": "n", "steps": [step("a", &max_body)]})).is_ok());
}

#[test]
fn refuses_bad_definitions_naming_the_field() {
    let cases = [
        (json!({"steps": days(&[0])}), "name"),
        (
            json!({"name": "x", "channel": "sms", "steps": days(&[0])}),
            "channel",
        ),
        (json!({"name": "x"}), "steps"),
        (json!({"name": "x", "steps": []}), "steps"),
        (
            json!({"name": "x", "trigger": {"event": "company.created"}, "steps": days(&[0])}),
            "trigger.event",
        ),
        (
            json!({"name": "x", "trigger": {"event": "contact.created", "when": 1}, "steps": days(&[0])}),
            "trigger.when",
        ),
        (
            json!({"name": "x", "trigger": {"event": "contact.created", "filter": [{"field": "nope", "op": "eq", "value": 1}]}, "steps": days(&[0])}),
            "trigger.filter[0].field",
        ),
        (
            json!({"name": "x", "exit_when": [{"field": "type", "op": "between", "value": 1}], "steps": days(&[0])}),
            "exit_when[0].op",
        ),
        (
            json!({"name": "x", "exit_when": [{"field": "stage", "op": "eq", "value": "won"}], "steps": days(&[0])}),
            "exit_when[0].field",
        ),
        (
            json!({"name": "x", "steps": [{"subject": "a", "body": "b"}]}),
            "steps[0]",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": 1, "wait_hours": 1, "subject": "a", "body": "b"}]}),
            "steps[0]",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": -1, "subject": "a", "body": "b"}]}),
            "steps[0].wait_days",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": 1.5, "subject": "a", "body": "b"}]}),
            "steps[0].wait_days",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": 400, "subject": "a", "body": "b"}]}),
            "steps[0].wait_days",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": 1, "body": "b"}]}),
            "steps[0].subject",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": 1, "subject": "a"}]}),
            "steps[0].body",
        ),
        (
            json!({"name": "x", "steps": [{"wait_days": 1, "subject": "a", "body": "b", "delay": 1}]}),
            "steps[0].delay",
        ),
    ];
    for (input, field) in cases {
        let err = parse(input.clone()).expect_err(&input.to_string());
        assert_eq!(field_of(err), field, "{input}");
    }
}

#[test]
fn deal_triggers_read_deal_fields_and_send_to_the_primary_contact() {
    let def = parse(json!({
        "name": "x", "trigger": {"event": "deal.stage_changed", "filter": [{"field": "stage", "op": "eq", "value": "qualified"}]},
        "exit_when": [{"field": "stage", "op": "in", "value": ["won", "lost"]}], "steps": days(&[0]),
    }))
    .unwrap();
    assert_eq!(def.source_object(), SourceObject::Deal);
    let contact = ContactId::from_uuid(Uuid::from_u128(7));
    let deal =
        json!({"id": "deal_1", "stage": "qualified", "primary_contact_id": contact.as_str()});
    assert_eq!(recipient(SourceObject::Deal, &deal), Some(contact));
    assert_eq!(
        recipient(
            SourceObject::Deal,
            &json!({"id": "deal_1", "primary_contact_id": null})
        ),
        None
    );
    let s = seq(def);
    assert!(s.enrolls(EventType::DealStageChanged, &deal));
    assert!(!s.enrolls(EventType::DealUpdated, &deal), "another event");
    assert!(
        !s.enrolls(EventType::DealStageChanged, &json!({"stage": "won"})),
        "filter"
    );
    assert!(s.def.exit_matches(&json!({"stage": "lost"})));
    assert!(!s.def.exit_matches(&json!({"stage": "qualified"})));
}

#[test]
fn an_empty_exit_list_never_exits_and_a_record_already_exiting_does_not_enroll() {
    let def =
        parse(json!({"name": "x", "trigger": {"event": "contact.created"}, "steps": days(&[0])}))
            .unwrap();
    assert!(!def.exit_matches(&json!({})));
    let def = parse(json!({"name": "x", "trigger": {"event": "contact.created"}, "exit_when": [{"field": "type", "op": "eq", "value": "customer"}], "steps": days(&[0])})).unwrap();
    let s = seq(def);
    assert!(s.enrolls(EventType::ContactCreated, &json!({"type": "lead"})));
    assert!(!s.enrolls(EventType::ContactCreated, &json!({"type": "customer"})));
    let mut disabled = s.clone();
    disabled.enabled = false;
    assert!(!disabled.enrolls(EventType::ContactCreated, &json!({"type": "lead"})));
}

#[test]
fn waits_are_relative_so_0_3_4_7_days_send_on_days_0_3_7_14() {
    let def = parse(json!({"name": "x", "steps": days(&[0, 3, 4, 7])})).unwrap();
    let offsets: Vec<i64> = def
        .schedule()
        .iter()
        .map(|s| s.send_offset_seconds / 86_400)
        .collect();
    assert_eq!(offsets, [0, 3, 7, 14]);
    let doc = preview(&def, &[], 900, &[]);
    assert_eq!(
        doc.schedule[2],
        PreviewStep {
            at: ScheduledStep {
                step: 3,
                wait_seconds: 4 * 86_400,
                send_offset_seconds: 7 * 86_400
            },
            subject: Some("S{{first_name}}".into())
        }
    );
    assert_eq!(doc.would_enroll_now, 500, "capped");
    let doc = preview(
        &def,
        &[None, Some("From template".into())],
        3,
        &["w".into()],
    );
    assert_eq!(doc.schedule[1].subject.as_deref(), Some("From template"));
    assert_eq!(doc.warnings, ["w"]);
}

#[test]
fn warnings_name_tags_no_field_provides() {
    let w = merge_warnings(
        &[
            "Hi {{first_name}} of {{company.name}}",
            "{{favourite_color}}",
        ],
        &Registry::default(),
        &Registry::default(),
    );
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("{{favourite_color}}"), "{w:?}");
}

#[test]
fn enrollment_walks_the_schedule_then_completes() {
    let s = seq(parse(json!({"name": "x", "steps": days(&[1, 2])})).unwrap());
    let t0 = Timestamp::from_millis(1_000);
    let mut e = Enrollment::start(
        EnrollmentId::from_uuid(Uuid::from_u128(2)),
        &s,
        ContactId::from_uuid(Uuid::from_u128(3)),
        SourceObject::Contact,
        "con_x".into(),
        t0,
    );
    assert_eq!(e.next_send_at, Some(t0.plus_millis(86_400_000)));
    // Sent late: the next step still counts from the scheduled time.
    assert!(e.step_sent(&s.def.steps, t0.plus_millis(90_000_000)));
    assert_eq!(e.next_send_at, Some(t0.plus_millis(3 * 86_400_000)));
    assert!(e.step_sent(&s.def.steps, t0.plus_millis(3 * 86_400_000)));
    assert_eq!(e.state, EnrollmentState::Completed);
    assert_eq!(e.next_send_at, None);
    assert!(!e.step_sent(&s.def.steps, t0), "nothing after completion");
    assert!(!e.exit(ExitReason::Unenrolled, t0), "completed is final");
}

#[test]
fn exit_is_final_and_records_the_reason() {
    let s = seq(parse(json!({"name": "x", "steps": days(&[0])})).unwrap());
    let t0 = Timestamp::from_millis(5);
    let mut e = Enrollment::start(
        EnrollmentId::from_uuid(Uuid::from_u128(2)),
        &s,
        ContactId::from_uuid(Uuid::from_u128(3)),
        SourceObject::Contact,
        "con_x".into(),
        t0,
    );
    assert!(e.exit(ExitReason::SourceDeleted, t0));
    assert_eq!(
        (e.state, e.exit_reason, e.next_send_at, e.ended_at),
        (
            EnrollmentState::Exited,
            Some(ExitReason::SourceDeleted),
            None,
            Some(t0)
        )
    );
    assert!(!e.exit(ExitReason::Unenrolled, t0));
    assert!(!e.step_sent(&s.def.steps, t0));
    assert_eq!(
        e.exit_reason.map(ExitReason::as_str),
        Some("source_deleted")
    );
    for r in ExitReason::ALL {
        assert_eq!(ExitReason::parse(r.as_str()), Some(r));
    }
}

proptest! {
    #[test]
    fn offsets_are_the_running_sum_of_waits(waits in proptest::collection::vec(0i64..1_000_000, 1..20)) {
        let s = schedule(&waits);
        prop_assert_eq!(s.len(), waits.len());
        let mut sum = 0;
        for (i, line) in s.iter().enumerate() {
            sum += waits[i];
            prop_assert_eq!(line.step, i + 1);
            prop_assert_eq!(line.send_offset_seconds, sum);
            if i > 0 { prop_assert!(line.send_offset_seconds >= s[i - 1].send_offset_seconds); }
        }
    }

    #[test]
    fn sending_on_time_hits_every_scheduled_offset(waits in proptest::collection::vec(0i64..100_000, 1..10), start in 0i64..1_000_000_000) {
        let steps = Value::Array(waits.iter().map(|w| json!({"wait_seconds": w, "subject": "s", "body": "b"})).collect());
        let s = seq(parse(json!({"name": "x", "steps": steps})).unwrap());
        let t0 = Timestamp::from_millis(start);
        let mut e = Enrollment::start(EnrollmentId::from_uuid(Uuid::from_u128(2)), &s, ContactId::from_uuid(Uuid::from_u128(3)), SourceObject::Contact, "c".into(), t0);
        for line in s.def.schedule() {
            let due = e.next_send_at.expect("active enrollments have a due step");
            prop_assert_eq!(due, t0.plus_millis(line.send_offset_seconds * 1000));
            prop_assert!(e.step_sent(&s.def.steps, due));
        }
        prop_assert_eq!(e.state, EnrollmentState::Completed);
        prop_assert_eq!(e.steps_sent as usize, waits.len());
    }

    #[test]
    fn an_ended_enrollment_never_changes(reason in 0usize..5, sends in 0usize..3) {
        let s = seq(parse(json!({"name": "x", "steps": days(&[0, 1, 2])})).unwrap());
        let t0 = Timestamp::from_millis(0);
        let mut e = Enrollment::start(EnrollmentId::from_uuid(Uuid::from_u128(2)), &s, ContactId::from_uuid(Uuid::from_u128(3)), SourceObject::Contact, "c".into(), t0);
        for _ in 0..sends { e.step_sent(&s.def.steps, t0); }
        prop_assert!(e.exit(ExitReason::ALL[reason], t0));
        let frozen = e.clone();
        prop_assert!(!e.step_sent(&s.def.steps, t0));
        prop_assert!(!e.exit(ExitReason::Unenrolled, t0));
        prop_assert_eq!(e, frozen);
    }
}
