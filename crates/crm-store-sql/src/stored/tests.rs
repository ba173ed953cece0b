//! Every encoding reads back to the value it was made from.

use crm_domain::{
    automation::{ActionType, ConditionOp},
    condition::Condition,
    history::{Actor, ActorType, Author, Change, ChangeAction, Channel, FieldChange, Via},
    mail::EmailSource,
    rule::{Action, ActionOutcome, AutomationDef, EmailAction},
    sequence::{SequenceDef, Step, Trigger, WaitUnit},
    AutomationId, ChangeId, Event, EventId, EventType, Mode, ObjectKind, Stage, StageId, StageType,
    Timestamp,
};
use serde_json::{json, Value};

use super::{event, history, mail, rule, sequence, stage};

fn conditions() -> Vec<Condition> {
    vec![
        Condition::new("stage", ConditionOp::Eq, Some(json!("won"))),
        Condition::new("previous_stage", ConditionOp::Exists, None),
        Condition::new(
            "custom_fields.source",
            ConditionOp::In,
            Some(json!(["web"])),
        ),
    ]
}

fn parsed(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn a_rule_reads_back_from_its_columns() {
    let def = AutomationDef {
        name: "r".into(),
        trigger_event: EventType::DealStageChanged,
        conditions: conditions(),
        actions: vec![
            Action::MoveDealStage {
                stage: "lead".into(),
            },
            Action::SetField {
                field: "source".into(),
                value: json!("{{title}}"),
            },
            Action::CreateActivity {
                activity_type: "note".into(),
                body: "won {{title}}".into(),
            },
            Action::SendEmail(EmailAction {
                template_id: Some("tpl_x".into()),
                ..EmailAction::default()
            }),
        ],
    };
    let back = rule::automation_def(
        def.name.clone(),
        def.trigger_event.as_str(),
        &rule::conditions_json(&def.conditions),
        &rule::actions_json(&def.actions),
    );
    assert_eq!(back, Some(def));
}

#[test]
fn run_outcomes_read_back() {
    let outcomes = vec![
        ActionOutcome {
            action_type: ActionType::CreateActivity,
            result: Ok(json!({"activity_id": "act_x"})),
        },
        ActionOutcome {
            action_type: ActionType::SendEmail,
            result: Err(("no_recipient".into(), "x".into())),
        },
    ];
    let text = rule::outcomes_json(&outcomes);
    assert_eq!(rule::outcomes_from_json(&parsed(&text)), Some(outcomes));
}

#[test]
fn a_sequence_reads_back_from_its_columns() {
    let step = |wait_unit, wait| Step {
        wait_unit,
        wait,
        subject: Some("s".into()),
        body: Some("<p>b</p>".into()),
        text: None,
        template_id: None,
    };
    let mut def = SequenceDef {
        name: "drip".into(),
        trigger: Some(Trigger {
            event: EventType::ContactCreated,
            filter: conditions(),
        }),
        exit_when: vec![Condition::new(
            "type",
            ConditionOp::In,
            Some(json!(["customer"])),
        )],
        steps: vec![
            step(WaitUnit::Days, 0),
            step(WaitUnit::Hours, 2),
            Step {
                template_id: Some("tpl_x".into()),
                ..step(WaitUnit::Seconds, 30)
            },
        ],
    };
    for _ in 0..2 {
        let back = sequence::sequence_def(
            def.name.clone(),
            &parsed(&sequence::trigger_json(def.trigger.as_ref())),
            &parsed(&sequence::exit_when_json(&def)),
            &parsed(&sequence::steps_json(&def)),
        );
        assert_eq!(back.as_ref(), Some(&def));
        def.trigger = None;
    }
}

#[test]
fn stages_email_sources_and_events_read_back() {
    let stages = vec![
        Stage {
            id: StageId::from_trusted("stg_01arz3ndektsv4rrffq69g5fav".into()),
            key: "new".into(),
            label: "New".into(),
            stage_type: StageType::Open,
            ordinal: 0,
        },
        Stage {
            id: StageId::from_trusted("stg_01arz3ndektsv4rrffq69g5faw".into()),
            key: "won".into(),
            label: "Won".into(),
            stage_type: StageType::Won,
            ordinal: 1,
        },
    ];
    assert_eq!(
        stage::stages_from_json(&stage::stages_json(&stages)).unwrap(),
        stages
    );
    for s in [
        EmailSource::Automation {
            automation_id: AutomationId::from_trusted("aut_01arz3ndektsv4rrffq69g5fav".into()),
        },
        EmailSource::Sequence {
            sequence_id: "seq_x".into(),
            step: 2,
        },
    ] {
        assert_eq!(
            mail::source_from_json(&parsed(&mail::source_json(&s))),
            Some(s)
        );
    }
    for (changed_fields, previous_stage) in [
        (Some(vec!["stage".to_owned()]), Some(None)),
        (None, Some(Some("new".to_owned()))),
        (None, None),
    ] {
        let e = Event {
            merged_ids: None,
            id: EventId::from_trusted("evt_01arz3ndektsv4rrffq69g5fav".into()),
            event_type: EventType::DealStageChanged,
            mode: Mode::Live,
            created_at: Timestamp::from_millis(1_700_000_000_000),
            data: json!({"id": "deal_x"}),
            changed_fields,
            previous_stage,
        };
        let body = parsed(&event::event_json(&e));
        assert_eq!(body["object"], "deal");
        assert_eq!(event::event_from_json(&body), Some(e));
    }
}

#[test]
fn an_entry_survives_its_stored_form() {
    let change = Change {
        id: ChangeId::from_trusted("chg_01arz3ndektsv4rrffq69g5fav".into()),
        object: ObjectKind::Deal,
        record_id: "deal_x".into(),
        at: Timestamp::from_millis(1234),
        action: ChangeAction::Merged,
        author: Author {
            actor: Actor {
                kind: ActorType::Automation,
                id: Some("aut_1".into()),
                name: Some("Tag".into()),
            },
            channel: Channel::Mcp,
            via: Via::Automation,
            request_id: Some("req_1".into()),
        },
        changes: vec![FieldChange {
            field: "title".into(),
            from: json!("a"),
            to: json!("b"),
        }],
        merged_ids: Some(vec!["deal_y".into()]),
        erased: false,
    };
    let back = history::change_from_json(
        change.id.clone(),
        change.object,
        change.record_id.clone(),
        &history::change_json(&change),
    );
    assert_eq!(back, Some(change));
}
