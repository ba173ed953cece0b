use super::*;
use crate::registry::{DataType, EnumValue, FieldDef, ObjectKind};
use serde_json::json;

fn registries() -> (Registry, Registry) {
    let mut contact = Registry::default();
    contact.fields.push(
        FieldDef::new(
            ObjectKind::Contact,
            "score",
            None,
            DataType::Number,
            None,
            false,
        )
        .unwrap(),
    );
    contact.enums.insert(
        ACTIVITY_TYPE_GROUP.into(),
        ["note", "call", "email", "task"]
            .iter()
            .map(|v| EnumValue {
                value: (*v).into(),
                label: None,
            })
            .collect(),
    );
    let mut deal = contact.clone();
    deal.fields = vec![FieldDef::new(
        ObjectKind::Deal,
        "source",
        None,
        DataType::Text,
        None,
        false,
    )
    .unwrap()];
    (contact, deal)
}

fn parse(v: Value) -> Result<AutomationDef, ValidationError> {
    let (c, d) = registries();
    let stages = vec!["lead".to_owned(), "won".to_owned()];
    let ctx = RuleContext {
        contact_registry: &c,
        deal_registry: &d,
        stage_keys: &stages,
    };
    let draft = AutomationDraft {
        name: v.get("name").and_then(Value::as_str).map(String::from),
        trigger_event: v
            .get("trigger_event")
            .and_then(Value::as_str)
            .map(String::from),
        conditions: v.get("conditions").cloned(),
        actions: v.get("actions").cloned(),
    };
    AutomationDef::parse(draft, &ctx)
}

fn rule(
    trigger: &str,
    conditions: Value,
    actions: Value,
) -> Result<AutomationDef, ValidationError> {
    parse(
        json!({"name": "r", "trigger_event": trigger, "conditions": conditions, "actions": actions}),
    )
}

#[test]
fn a_valid_rule_keeps_every_condition_and_action() {
    let def = rule(
        "deal.stage_changed",
        json!([{"field": "stage", "op": "eq", "value": "won"}, {"field": "previous_stage", "op": "exists"}, {"field": "custom_fields.source", "op": "in", "value": ["web"]}]),
        json!([{"type": "move_deal_stage", "stage": "lead"}, {"type": "set_field", "field": "source", "value": "{{title}}"},
               {"type": "create_activity", "activity_type": "note", "body": "won {{title}}"},
               {"type": "send_email", "template_id": "tpl_x"}]),
    )
    .unwrap();
    assert_eq!(def.conditions.len(), 3);
    assert_eq!(
        def.conditions[1],
        Condition::new("previous_stage", ConditionOp::Exists, None)
    );
    assert_eq!(def.actions.len(), 4);
    assert_eq!(
        def.actions[0],
        Action::MoveDealStage {
            stage: "lead".into()
        }
    );
    assert!(def.sends_email());
    assert_eq!(def.template_ids(), ["tpl_x"]);
}

#[test]
fn unknown_trigger_and_action_types_list_the_valid_ones() {
    let err = rule(
        "company.created",
        json!([]),
        json!([{"type": "set_field", "field": "title", "value": "x"}]),
    )
    .unwrap_err();
    assert!(
        matches!(err, ValidationError::UnknownValue { ref field, ref valid_options, .. } if field == "trigger_event" && valid_options.len() == 5)
    );
    let err = rule("contact.created", json!([]), json!([{"type": "webhook"}])).unwrap_err();
    assert!(
        matches!(err, ValidationError::UnknownValue { ref field, ref valid_options, .. } if field == "actions[0].type" && valid_options.len() == 4)
    );
    let err = rule(
        "contact.created",
        json!([{"field": "email", "op": "like", "value": "x"}]),
        json!([{"type": "set_field", "field": "phone", "value": "1"}]),
    )
    .unwrap_err();
    assert!(
        matches!(err, ValidationError::UnknownValue { ref field, ref valid_options, .. } if field == "conditions[0].op" && valid_options.len() == 11)
    );
}

#[test]
fn deal_only_actions_are_refused_on_contact_triggers() {
    let err = rule(
        "contact.updated",
        json!([]),
        json!([{"type": "move_deal_stage", "stage": "won"}]),
    )
    .unwrap_err();
    let ValidationError::UnknownValue {
        field,
        valid_options,
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert_eq!(field, "actions[0].type");
    assert!(!valid_options.contains(&"move_deal_stage".to_owned()));
}

#[test]
fn stages_and_fields_must_exist() {
    let err = rule(
        "deal.created",
        json!([]),
        json!([{"type": "move_deal_stage", "stage": "closed"}]),
    )
    .unwrap_err();
    assert_eq!(
        err,
        ValidationError::UnknownValue {
            field: "actions[0].stage".into(),
            value: "closed".into(),
            valid_options: vec!["lead".into(), "won".into()]
        }
    );
    let err = rule(
        "contact.created",
        json!([]),
        json!([{"type": "set_field", "field": "scor", "value": 1}]),
    )
    .unwrap_err();
    let ValidationError::UnknownField {
        field,
        suggestion,
        valid_options,
    } = err
    else {
        panic!()
    };
    assert_eq!(
        (field.as_str(), suggestion.as_deref()),
        ("actions[0].field", Some("did you mean `score`?"))
    );
    assert!(valid_options.contains(&"score".into()));
    let err = rule(
        "contact.created",
        json!([]),
        json!([{"type": "set_field", "field": "score", "value": "high"}]),
    )
    .unwrap_err();
    assert!(
        matches!(err, ValidationError::Invalid { ref field, .. } if field == "actions[0].value"),
        "{err:?}"
    );
    assert!(rule(
        "contact.created",
        json!([]),
        json!([{"type": "set_field", "field": "custom_fields.score", "value": 3}])
    )
    .is_ok());
    let err = rule(
        "contact.created",
        json!([{"field": "nope", "op": "exists"}]),
        json!([{"type": "set_field", "field": "phone", "value": "1"}]),
    )
    .unwrap_err();
    assert!(
        matches!(err, ValidationError::UnknownField { ref field, .. } if field == "conditions[0].field")
    );
    let err = rule(
        "deal.updated",
        json!([{"field": "previous_stage", "op": "exists"}]),
        json!([{"type": "set_field", "field": "title", "value": "1"}]),
    )
    .unwrap_err();
    assert!(
        matches!(err, ValidationError::UnknownField { .. }),
        "previous_stage only on deal.stage_changed"
    );
    let err = rule(
        "contact.created",
        json!([]),
        json!([{"type": "create_activity", "activity_type": "meeting", "body": "x"}]),
    )
    .unwrap_err();
    assert!(
        matches!(err, ValidationError::UnknownValue { ref field, .. } if field == "actions[0].activity_type")
    );
}

#[test]
fn parameters_are_checked() {
    let ok = |a: Value| rule("contact.created", json!([]), json!([a]));
    assert!(
        ok(json!({"type": "send_email", "subject": "s"})).is_err(),
        "body or template_id"
    );
    assert!(
        ok(json!({"type": "send_email", "subject": "s", "body": "b", "to": "not-an-email"}))
            .is_err()
    );
    assert!(ok(
        json!({"type": "send_email", "subject": "s", "body": "b", "to": "{{custom_fields.alt}}"})
    )
    .is_ok());
    assert!(matches!(
        ok(json!({"type": "set_field", "field": "phone", "value": "1", "colour": 1})),
        Err(ValidationError::UnknownField { .. })
    ));
    assert!(ok(json!({"type": "create_activity", "activity_type": "note"})).is_err());
    assert!(
        rule("contact.created", json!([]), json!([])).is_err(),
        "one action at least"
    );
    assert!(parse(json!({"trigger_event": "contact.created", "actions": [{"type": "set_field", "field": "phone", "value": "1"}]})).is_err(), "a name");
    let cond = |c: Value| {
        rule(
            "contact.created",
            json!([c]),
            json!([{"type": "set_field", "field": "phone", "value": "1"}]),
        )
    };
    assert!(cond(json!({"field": "email", "op": "exists", "value": "x"})).is_err());
    assert!(cond(json!({"field": "email", "op": "in", "value": "x"})).is_err());
    assert!(cond(json!({"field": "score", "op": "gt", "value": "high"})).is_err());
    assert!(cond(json!({"field": "created_at", "op": "gt", "value": "2026-01-01"})).is_ok());
    assert!(cond(json!({"field": "email", "op": "eq"})).is_err());
}

#[test]
fn a_rule_matches_its_event_and_conditions() {
    let def = rule(
        "contact.updated",
        json!([{"field": "score", "op": "gte", "value": 10}]),
        json!([{"type": "set_field", "field": "phone", "value": "1"}]),
    )
    .unwrap();
    let mut a = Automation {
        id: AutomationId::from_uuid(uuid::Uuid::nil()),
        def,
        enabled: true,
        created_at: Timestamp::from_millis(0),
        updated_at: Timestamp::from_millis(0),
        version: 1,
    };
    let record = json!({"custom_fields": {"score": 12}});
    assert!(a.matches(EventType::ContactUpdated, &Subject::record(&record)));
    assert!(!a.matches(EventType::ContactCreated, &Subject::record(&record)));
    assert!(!a.matches(
        EventType::ContactUpdated,
        &Subject::record(&json!({"custom_fields": {"score": 9}}))
    ));
    a.enabled = false;
    assert!(!a.matches(EventType::ContactUpdated, &Subject::record(&record)));
}

#[test]
fn planning_fills_tags_and_builds_patches() {
    let (c, _) = registries();
    let record = json!({"first_name": "Ada", "email": "ada@x.co", "custom_fields": {"score": 3}});
    let data = MergeData {
        record: Some(&record),
        company: None,
        previous_stage: None,
    };
    let set = Action::SetField {
        field: "phone".into(),
        value: json!("+{{score}}"),
    };
    let planned = plan(&set, EventType::ContactCreated, &c, &data).unwrap();
    let Planned::SetField { target, value } = planned else {
        panic!()
    };
    let p = contact_patch(&target, value).unwrap();
    assert_eq!(p.phone, Patch::Value("+3".into()));
    let email = Action::SendEmail(EmailAction {
        to: Some("{{email}}".into()),
        ..Default::default()
    });
    assert!(
        matches!(plan(&email, EventType::ContactCreated, &c, &data).unwrap(), Planned::SendEmail { to: Some(t), .. } if t == "ada@x.co")
    );
    let p = deal_patch(&SetTarget::Builtin("value_cents"), json!(12.0)).unwrap();
    assert_eq!(p.value_cents, Patch::Value(12));
    assert!(deal_patch(&SetTarget::Builtin("title"), json!(5)).is_err());
    let (subject, html, text) = render_email(
        "Hi {{first_name}}\n",
        "<p>{{first_name}} &lt;3</p>",
        None,
        &data,
    );
    assert_eq!(
        (subject.as_str(), html.as_str(), text.as_str()),
        ("Hi Ada ", "<p>Ada &lt;3</p>", "Ada <3")
    );
}
