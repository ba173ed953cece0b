//! Email: connections, templates, and live email queued by a sequence step then delivered
//! through the sender port.

use async_trait::async_trait;
use crm_app::{
    emails::TemplatePatch,
    ports::{EmailFilter, EmailSender, SendFailure},
    AppError, PageParams,
};
use crm_domain::mail::{Connection, ConnectionDraft, EmailMessage, EmailStatus, TemplateDraft};

use crate::{
    rules::welcome,
    support::{env, person},
};

mockall::mock! {
    pub Sender {}

    #[async_trait]
    impl EmailSender for Sender {
        async fn send(
            &self,
            connection: &Connection,
            email: &EmailMessage,
        ) -> Result<Option<String>, SendFailure>;
    }
}

fn resend() -> ConnectionDraft {
    ConnectionDraft {
        channel: Some("email".into()),
        provider: Some("resend".into()),
        api_key: Some("re_test_123".into()),
        from: Some("Ada <ada@example.com>".into()),
        base_url: None,
    }
}

#[tokio::test]
async fn a_connection_is_created_listed_and_deleted() {
    let env = env().await;
    let created = env
        .app
        .create_connection(&env.live, resend())
        .await
        .unwrap();
    assert_eq!(
        env.app
            .get_connection(&env.live, created.id.as_str())
            .await
            .unwrap()
            .from,
        "Ada <ada@example.com>"
    );
    let listed = env
        .app
        .list_connections(&env.live, PageParams::default())
        .await
        .unwrap();
    assert_eq!(listed.data.len(), 1);
    env.app
        .delete_connection(&env.live, created.id.as_str())
        .await
        .unwrap();
    let gone = env.app.get_connection(&env.live, created.id.as_str()).await;
    assert!(matches!(gone, Err(AppError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn a_template_is_created_updated_and_deleted() {
    let env = env().await;
    let draft = TemplateDraft {
        name: Some("welcome".into()),
        subject: Some("Hi".into()),
        body: Some("<p>Hello</p>".into()),
        text: None,
    };
    let created = env.app.create_template(&env.caller, draft).await.unwrap();
    let patch = TemplatePatch {
        draft: TemplateDraft {
            subject: Some("Hello there".into()),
            ..Default::default()
        },
        clear_text: false,
    };
    let updated = env
        .app
        .update_template(&env.caller, created.id.as_str(), patch)
        .await
        .unwrap();
    assert_eq!(
        (updated.subject.as_str(), updated.version),
        ("Hello there", 2)
    );
    assert_eq!(
        updated.body, "<p>Hello</p>",
        "what the patch left out is kept"
    );
    env.app
        .delete_template(&env.caller, created.id.as_str())
        .await
        .unwrap();
    let listed = env
        .app
        .list_templates(&env.caller, PageParams::default())
        .await
        .unwrap();
    assert!(listed.data.is_empty());
}

#[tokio::test]
async fn a_live_sequence_step_is_queued_then_delivered_through_the_sender() {
    let env = env().await;
    env.app
        .create_connection(&env.live, resend())
        .await
        .unwrap();
    env.app
        .create_sequence(&env.live, welcome(), true, false)
        .await
        .unwrap();
    env.app
        .create_contact(&env.live, person("Grace", "grace@example.com"), None)
        .await
        .unwrap();
    let round = env
        .app
        .send_due_sequence_steps("test", 10, 1_000)
        .await
        .unwrap();
    assert_eq!(round.claimed, 1, "{round:?}");
    let queued = env
        .app
        .list_emails(&env.live, EmailFilter::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(queued.data.len(), 1);
    assert_eq!(queued.data[0].status, EmailStatus::Queued);
    assert_eq!(queued.data[0].subject, "Hi Grace");

    let mut sender = MockSender::new();
    sender
        .expect_send()
        .withf(|_, email| email.to == "grace@example.com")
        .times(1)
        .returning(|_, _| Ok(Some("msg-1".into())));
    let tried = env
        .app
        .deliver_due_emails(&sender, &[60_000], 10, 30_000)
        .await
        .unwrap();
    assert_eq!(tried, 1);
    let sent = env
        .app
        .get_email(&env.live, queued.data[0].id.as_str())
        .await
        .unwrap();
    assert_eq!(sent.status, EmailStatus::Sent);
    assert_eq!(sent.provider_message_id.as_deref(), Some("msg-1"));
}

#[tokio::test]
async fn a_permanent_refusal_fails_the_email_without_a_retry() {
    let env = env().await;
    env.app
        .create_connection(&env.live, resend())
        .await
        .unwrap();
    env.app
        .create_sequence(&env.live, welcome(), true, false)
        .await
        .unwrap();
    env.app
        .create_contact(&env.live, person("Grace", "grace@example.com"), None)
        .await
        .unwrap();
    env.app
        .send_due_sequence_steps("test", 10, 1_000)
        .await
        .unwrap();
    let mut sender = MockSender::new();
    sender
        .expect_send()
        .times(1)
        .returning(|_, _| Err(SendFailure::Permanent("bad key".into())));
    env.app
        .deliver_due_emails(&sender, &[60_000], 10, 30_000)
        .await
        .unwrap();
    let emails = env
        .app
        .list_emails(&env.live, EmailFilter::default(), PageParams::default())
        .await
        .unwrap();
    assert_eq!(emails.data[0].status, EmailStatus::Failed);
    assert_eq!(emails.data[0].error.as_deref(), Some("bad key"));
}
