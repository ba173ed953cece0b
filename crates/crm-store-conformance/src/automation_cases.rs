//! Conformance cases of automations and their runs.

use std::sync::Arc;

use crm_app::{ports::Slice, Store, StoreError};
use crm_domain::{
    automation::{ActionType, ConditionOp},
    condition::Condition,
    rule::{Action, ActionOutcome, Automation, AutomationDef, AutomationRun, EmailAction},
    AutomationId, AutomationRunId, EventId, EventType, Mode, Timestamp,
};
use serde_json::json;

use crate::fixtures::*;

fn all() -> Slice {
    Slice {
        before: None,
        limit: 1000,
    }
}

pub fn automation(trigger: EventType, enabled: bool) -> Automation {
    Automation {
        id: AutomationId::from_uuid(uuid()),
        def: AutomationDef {
            name: "Tag VIPs".into(),
            trigger_event: trigger,
            conditions: vec![
                Condition::new("email", ConditionOp::Contains, Some(json!("@acme"))),
                Condition::new("type", ConditionOp::In, Some(json!(["lead", "customer"]))),
                Condition::new("phone", ConditionOp::Exists, None),
            ],
            actions: vec![
                Action::SetField {
                    field: "score".into(),
                    value: json!(3.5),
                },
                Action::CreateActivity {
                    activity_type: "note".into(),
                    body: "Hi {{first_name}}".into(),
                },
                Action::SendEmail(EmailAction {
                    subject: Some("s".into()),
                    body: Some("<p>b</p>".into()),
                    ..Default::default()
                }),
            ],
        },
        enabled,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        updated_at: Timestamp::from_millis(1_700_000_000_000),
        version: 1,
    }
}

pub async fn automations_round_trip_update_and_delete_with_their_runs(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let live = tenant(&ws, Mode::Live);
    let a = automation(EventType::ContactCreated, true);
    let b = automation(EventType::DealStageChanged, false);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_automation(&t, &a).await.unwrap();
    tx.insert_automation(&t, &b).await.unwrap();
    let run = AutomationRun {
        id: AutomationRunId::from_uuid(uuid()),
        automation_id: a.id.clone(),
        event_id: EventId::from_uuid(uuid()),
        event_type: EventType::ContactCreated,
        record_id: "con_x".into(),
        matched: true,
        actions: vec![
            ActionOutcome {
                action_type: ActionType::SetField,
                result: Ok(json!({"field": "score"})),
            },
            ActionOutcome {
                action_type: ActionType::SendEmail,
                result: Err(("no_recipient".into(), "none".into())),
            },
        ],
        created_at: Timestamp::from_millis(1_700_000_000_005),
    };
    let unmatched = AutomationRun {
        id: AutomationRunId::from_uuid(uuid()),
        matched: false,
        actions: vec![],
        ..run.clone()
    };
    tx.insert_automation_runs(&t, &[run.clone(), unmatched.clone()])
        .await
        .unwrap();
    tx.insert_automation_runs(&t, &[]).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_automation(&t, &a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        tx.list_automations(&t, &all()).await.unwrap(),
        vec![b.clone(), a.clone()],
        "newest first"
    );
    assert_eq!(
        tx.list_automations(
            &t,
            &Slice {
                before: Some(b.id.to_string()),
                limit: 10
            }
        )
        .await
        .unwrap(),
        vec![a.clone()]
    );
    assert!(
        tx.list_automations(&live, &all()).await.unwrap().is_empty(),
        "per tenant"
    );
    assert!(tx.get_automation(&live, &a.id).await.unwrap().is_none());
    assert_eq!(
        tx.list_automation_runs(&t, &a.id, &all()).await.unwrap(),
        vec![unmatched.clone(), run.clone()]
    );
    assert!(tx
        .list_automation_runs(&live, &a.id, &all())
        .await
        .unwrap()
        .is_empty());
    assert_eq!(tx.count_active_automations(&t).await.unwrap(), 1);
    assert_eq!(
        tx.count_plan_objects(&t).await.unwrap().active_automations,
        1
    );
    assert_eq!(tx.count_active_automations(&live).await.unwrap(), 0);
    drop(tx);

    let mut tx = store.begin_write().await.unwrap();
    let mut changed = b.clone();
    changed.enabled = true;
    changed.version = 2;
    changed.def.name = "Renamed".into();
    tx.update_automation(&t, &changed).await.unwrap();
    assert!(
        matches!(
            tx.update_automation(&t, &changed).await,
            Err(StoreError::Stale)
        ),
        "already at version 2"
    );
    assert_eq!(
        tx.get_automation(&t, &b.id).await.unwrap(),
        Some(changed.clone())
    );
    assert_eq!(tx.count_active_automations(&t).await.unwrap(), 2);
    assert!(tx.delete_automation(&t, &a.id).await.unwrap());
    assert!(!tx.delete_automation(&t, &a.id).await.unwrap());
    assert!(
        tx.list_automation_runs(&t, &a.id, &all())
            .await
            .unwrap()
            .is_empty(),
        "runs go with their rule"
    );
    tx.commit().await.unwrap();
}

pub async fn active_automations_are_the_enabled_ones_for_the_events_oldest_first(
    store: Arc<dyn Store>,
) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Live);
    let first = automation(EventType::DealUpdated, true);
    let off = automation(EventType::DealUpdated, false);
    let other = automation(EventType::ContactUpdated, true);
    let second = automation(EventType::DealStageChanged, true);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    for a in [&first, &off, &other, &second] {
        tx.insert_automation(&t, a).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = store.begin_write().await.unwrap();
    let found = tx
        .active_automations(&t, &[EventType::DealStageChanged, EventType::DealUpdated])
        .await
        .unwrap();
    assert_eq!(found, vec![first.clone(), second.clone()]);
    assert!(tx
        .active_automations(&t, &[EventType::ContactCreated])
        .await
        .unwrap()
        .is_empty());
    assert!(tx.active_automations(&t, &[]).await.unwrap().is_empty());
    assert!(tx
        .active_automations(&tenant(&ws, Mode::Test), &[EventType::DealUpdated])
        .await
        .unwrap()
        .is_empty());
}
