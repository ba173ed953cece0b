//! Dry runs: the same use case through [`App::dry_run`]'s application writes nothing and records
//! what it would have done.

use crm_app::{ports::ContactFilter, PageParams};
use crm_domain::{rule::AutomationDraft, EventType};
use serde_json::json;

use crate::support::{env, person};

#[tokio::test]
async fn a_dry_create_records_its_effects_and_leaves_nothing() {
    let env = env().await;
    let rule = env
        .app
        .create_automation(
            &env.caller,
            AutomationDraft {
                name: Some("greet".into()),
                trigger_event: Some("contact.created".into()),
                conditions: None,
                actions: Some(json!([{"type": "send_email", "subject": "Hi {{first_name}}", "body": "<p>Hi</p>"}])),
            },
            true,
        )
        .await
        .unwrap();
    let (dry, recorder) = env.app.dry_run();
    let ada = dry
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    assert_eq!(ada.email.as_ref().unwrap().as_str(), "ada@example.com");
    let fx = recorder.effects();
    assert_eq!(
        fx.events.iter().map(|e| e.event_type).collect::<Vec<_>>(),
        [EventType::ContactCreated]
    );
    assert_eq!(fx.automations.len(), 1);
    assert_eq!(fx.automations[0].id, rule.id);
    assert!(fx.automations[0].matched);
    assert!(fx.automations[0].actions[0].result.is_ok());
    assert_eq!(
        fx.emails,
        [("ada@example.com".to_owned(), "Hi Ada".to_owned())]
    );

    let contacts = env
        .app
        .list_contacts(&env.caller, ContactFilter::default(), PageParams::default())
        .await
        .unwrap();
    assert!(contacts.data.is_empty(), "nothing persists");
    let events = env
        .app
        .list_events(&env.caller, None, PageParams::default())
        .await
        .unwrap();
    assert!(events.data.is_empty());
    let runs = env
        .app
        .list_automation_runs(&env.caller, rule.id.as_str(), PageParams::default())
        .await
        .unwrap();
    assert!(runs.data.is_empty());

    // The real application is untouched by the dry one: its create persists.
    env.app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let contacts = env
        .app
        .list_contacts(&env.caller, ContactFilter::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(contacts.data.len(), 1);
}

#[tokio::test]
async fn a_dry_run_fails_as_the_real_write_would() {
    let env = env().await;
    env.app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let (dry, recorder) = env.app.dry_run();
    let err = dry
        .create_contact(&env.caller, person("Other", "ADA@example.com"), None)
        .await
        .unwrap_err();
    let real = env
        .app
        .create_contact(&env.caller, person("Other", "ADA@example.com"), None)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), real.to_string());
    assert!(recorder.effects().events.is_empty());
}
