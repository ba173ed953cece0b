//! Webhooks: subscriptions, and the fan-out of events into deliveries.

use crm_app::{webhooks::WebhookPatch, AppError, PageParams};

use crate::support::{env, person};

async fn hook(env: &crate::support::Env, events: &[&str]) -> crm_domain::Webhook {
    env.app
        .create_webhook(
            &env.caller,
            Some("https://example.com/hooks".into()),
            Some(events.iter().map(|e| e.to_string()).collect()),
            Some("crm events".into()),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn a_webhook_is_created_with_a_secret_updated_listed_and_deleted() {
    let env = env().await;
    let created = hook(&env, &["contact.created"]).await;
    assert!(!created.secret.is_empty() && created.enabled);
    let patch = WebhookPatch {
        enabled: Some(false),
        ..Default::default()
    };
    let updated = env
        .app
        .update_webhook(&env.caller, created.id.as_str(), patch, Some(1))
        .await
        .unwrap();
    assert!(!updated.enabled);
    assert_eq!(updated.version, 2);
    let listed = env
        .app
        .list_webhooks(&env.caller, PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 1);
    env.app
        .delete_webhook(&env.caller, created.id.as_str())
        .await
        .unwrap();
    let gone = env.app.get_webhook(&env.caller, created.id.as_str()).await;
    assert!(matches!(gone, Err(AppError::NotFound { .. })));
}

#[tokio::test]
async fn a_webhook_without_events_is_refused() {
    let env = env().await;
    let refused = env
        .app
        .create_webhook(
            &env.caller,
            Some("https://example.com/hooks".into()),
            None,
            None,
        )
        .await;
    assert!(
        matches!(refused, Err(AppError::Validation(_))),
        "{refused:?}"
    );
}

#[tokio::test]
async fn an_event_becomes_one_delivery_per_subscribed_webhook() {
    let env = env().await;
    hook(&env, &["contact.created"]).await;
    hook(&env, &["deal.created"]).await;
    env.app
        .create_contact(&env.caller, person("Ada", "ada@example.com"), None)
        .await
        .unwrap();
    let dispatched = env.app.dispatch_events(100).await.unwrap();
    assert_eq!(dispatched.deliveries, 1, "{dispatched:?}");
    let claimed = env.app.claim_deliveries(10, 30_000).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].event_type.as_str(), "contact.created");
}
