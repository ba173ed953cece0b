//! Automations and sequences: the rules every write consults.

use crm_app::{
    automations::AutomationPatch, ports::ActivityFilter, sequences::SequencePatch, AppError,
    PageParams,
};
use crm_domain::{rule::AutomationDraft, sequence::SequenceDraft, ContactDraft};
use serde_json::json;

use crate::support::{env, person};

fn note_on_create(text: &str) -> AutomationDraft {
    AutomationDraft {
        name: Some("note".into()),
        trigger_event: Some("contact.created".into()),
        conditions: None,
        actions: Some(json!([{"type": "create_activity", "activity_type": "note", "body": text}])),
    }
}

#[tokio::test]
async fn an_enabled_automation_acts_on_its_trigger_in_the_same_write() {
    let env = env().await;
    let rule = env
        .app
        .create_automation(&env.caller, note_on_create("hello {{first_name}}"), true)
        .await
        .unwrap();
    let ada = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let filter = ActivityFilter {
        contact_id: Some(ada.id.clone()),
        ..Default::default()
    };
    let notes = env
        .app
        .list_activities(&env.caller, filter, PageParams::default())
        .await
        .unwrap();
    assert_eq!(notes.data.len(), 1);
    assert_eq!(notes.data[0].body.as_deref(), Some("hello Ada"));
    let runs = env
        .app
        .list_automation_runs(&env.caller, rule.id.as_str(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(runs.data.len(), 1);
    assert!(runs.data[0].matched);
}

#[tokio::test]
async fn a_disabled_automation_does_nothing_and_a_deleted_one_is_gone() {
    let env = env().await;
    let rule = env
        .app
        .create_automation(&env.caller, note_on_create("x"), true)
        .await
        .unwrap();
    let patch = AutomationPatch {
        enabled: Some(false),
        ..Default::default()
    };
    let disabled = env
        .app
        .update_automation(&env.caller, rule.id.as_str(), patch)
        .await
        .unwrap();
    assert!(!disabled.enabled);
    env.app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let activities = env
        .app
        .list_activities(&env.caller, Default::default(), PageParams::default())
        .await
        .unwrap();
    assert!(activities.data.is_empty());
    let listed = env
        .app
        .list_automations(&env.caller, PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 1);
    env.app
        .delete_automation(&env.caller, rule.id.as_str())
        .await
        .unwrap();
    let gone = env.app.get_automation(&env.caller, rule.id.as_str()).await;
    assert!(matches!(gone, Err(AppError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn an_automation_on_an_unknown_event_is_refused() {
    let env = env().await;
    let draft = AutomationDraft {
        trigger_event: Some("contact.exploded".into()),
        ..note_on_create("x")
    };
    let refused = env.app.create_automation(&env.caller, draft, true).await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

pub fn welcome() -> SequenceDraft {
    SequenceDraft {
        name: Some("Welcome".into()),
        channel: Some("email".into()),
        trigger: Some(json!({"event": "contact.created"})),
        exit_when: None,
        steps: Some(json!([{"wait_days": 0, "subject": "Hi {{first_name}}", "body": "Welcome"}])),
    }
}

#[tokio::test]
async fn a_triggered_sequence_enrolls_a_new_contact() {
    let env = env().await;
    let seq = env
        .app
        .create_sequence(&env.caller, welcome(), true, false)
        .await
        .unwrap();
    env.app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let enrollments = env
        .app
        .list_sequence_enrollments(&env.caller, seq.id.as_str(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(enrollments.data.len(), 1);
}

#[tokio::test]
async fn a_contact_is_enrolled_by_hand_once_and_unenrolled() {
    let env = env().await;
    let draft = SequenceDraft {
        trigger: None,
        ..welcome()
    };
    let seq = env
        .app
        .create_sequence(&env.caller, draft, true, false)
        .await
        .unwrap();
    let ada = env
        .app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let first = env
        .app
        .enroll_contact(&env.caller, seq.id.as_str(), Some(ada.id.to_string()))
        .await
        .unwrap();
    assert!(first.created);
    let again = env
        .app
        .enroll_contact(&env.caller, seq.id.as_str(), Some(ada.id.to_string()))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.enrollment.id, first.enrollment.id);
    let ended = env
        .app
        .unenroll_contact(&env.caller, seq.id.as_str(), first.enrollment.id.as_str())
        .await
        .unwrap();
    assert!(ended.exit_reason.is_some());
}

#[tokio::test]
async fn a_sequence_is_renamed_and_deleted() {
    let env = env().await;
    let seq = env
        .app
        .create_sequence(&env.caller, welcome(), false, false)
        .await
        .unwrap();
    let patch = SequencePatch {
        name: Some("Hello".into()),
        ..Default::default()
    };
    let renamed = env
        .app
        .update_sequence(&env.caller, seq.id.as_str(), patch)
        .await
        .unwrap();
    assert_eq!(renamed.def.name, "Hello");
    assert_eq!(renamed.version, 2);
    let listed = env
        .app
        .list_sequences(&env.caller, PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 1);
    env.app
        .delete_sequence(&env.caller, seq.id.as_str())
        .await
        .unwrap();
    let gone = env.app.get_sequence(&env.caller, seq.id.as_str()).await;
    assert!(matches!(gone, Err(AppError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn a_contact_without_an_email_is_not_enrolled_by_hand() {
    let env = env().await;
    let seq = env
        .app
        .create_sequence(&env.caller, welcome(), true, false)
        .await
        .unwrap();
    let nameless = ContactDraft {
        first_name: Some("No mail".into()),
        ..Default::default()
    };
    let contact = env
        .app
        .create_contact(&env.caller, nameless, None)
        .await
        .unwrap();
    let refused = env
        .app
        .enroll_contact(&env.caller, seq.id.as_str(), Some(contact.id.to_string()))
        .await;
    assert!(refused.is_err());
}
