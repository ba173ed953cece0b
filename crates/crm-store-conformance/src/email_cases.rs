//! Conformance cases of email connections, templates and email messages.

use std::sync::Arc;

use crm_app::{
    ports::{EmailFilter, Slice},
    Store, StoreError,
};
use crm_domain::{
    mail::{Connection, EmailMessage, EmailSource, EmailStatus, Provider, Template},
    AutomationId, ConnectionId, ContactId, EmailId, Mode, TemplateId, Timestamp,
};

use crate::fixtures::*;

fn all() -> Slice {
    Slice {
        before: None,
        limit: 1000,
    }
}

fn connection(from: &str) -> Connection {
    Connection {
        id: ConnectionId::from_uuid(uuid()),
        provider: Provider::Postmark,
        api_key: "pm-secret".into(),
        from: from.into(),
        base_url: Some("http://127.0.0.1:9".into()),
        created_at: Timestamp::from_millis(1_700_000_000_000),
    }
}

pub fn email(status: EmailStatus, contact: Option<ContactId>, next: Option<i64>) -> EmailMessage {
    EmailMessage {
        id: EmailId::from_uuid(uuid()),
        to: "ada@example.com".into(),
        from: "Acme <hi@acme.com>".into(),
        subject: "Hi".into(),
        html: "<p>Hi</p>".into(),
        text: "Hi".into(),
        status,
        error: None,
        source: EmailSource::Automation {
            automation_id: AutomationId::from_uuid(uuid()),
        },
        contact_id: contact,
        deal_id: None,
        attempts: 0,
        next_attempt_at: next.map(Timestamp::from_millis),
        provider_message_id: None,
        created_at: Timestamp::from_millis(1_700_000_000_000),
        sent_at: None,
    }
}

pub async fn connections_and_templates_round_trip_per_tenant(store: Arc<dyn Store>) {
    let ws = workspace();
    let (t, live) = (tenant(&ws, Mode::Test), tenant(&ws, Mode::Live));
    let (old, new) = (connection("old@acme.com"), connection("new@acme.com"));
    let tpl = Template {
        id: TemplateId::from_uuid(uuid()),
        name: "Welcome".into(),
        subject: "Hi {{first_name}}".into(),
        body: "<p>Hi</p>".into(),
        text: None,
        created_at: Timestamp::from_millis(1),
        updated_at: Timestamp::from_millis(1),
        version: 1,
    };
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_connection(&t, &old).await.unwrap();
    tx.insert_connection(&t, &new).await.unwrap();
    tx.insert_template(&t, &tpl).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = store.begin_write().await.unwrap();
    assert_eq!(
        tx.get_connection(&t, &old.id).await.unwrap(),
        Some(old.clone())
    );
    assert_eq!(
        tx.list_connections(&t, &all()).await.unwrap(),
        vec![new.clone(), old.clone()]
    );
    assert_eq!(
        tx.email_connection(&t).await.unwrap(),
        Some(new.clone()),
        "the newest connection sends"
    );
    assert_eq!(tx.email_connection(&live).await.unwrap(), None);
    assert!(tx.get_connection(&live, &old.id).await.unwrap().is_none());
    assert!(tx.delete_connection(&t, &new.id).await.unwrap());
    assert!(!tx.delete_connection(&t, &new.id).await.unwrap());
    assert_eq!(tx.email_connection(&t).await.unwrap(), Some(old.clone()));

    assert_eq!(
        tx.get_template(&t, &tpl.id).await.unwrap(),
        Some(tpl.clone())
    );
    assert!(tx.get_template(&live, &tpl.id).await.unwrap().is_none());
    let mut changed = tpl.clone();
    changed.text = Some("Hi".into());
    changed.version = 2;
    tx.update_template(&t, &changed).await.unwrap();
    assert!(matches!(
        tx.update_template(&t, &changed).await,
        Err(StoreError::Stale)
    ));
    assert_eq!(
        tx.list_templates(&t, &all()).await.unwrap(),
        vec![changed.clone()]
    );
    assert!(tx.delete_template(&t, &tpl.id).await.unwrap());
    assert!(tx.list_templates(&t, &all()).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}

pub async fn emails_list_newest_first_with_filters(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Test);
    let c = ContactId::from_uuid(uuid());
    let a = email(EmailStatus::Simulated, Some(c.clone()), None);
    let b = email(EmailStatus::Simulated, None, None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    tx.insert_email(&t, &a).await.unwrap();
    tx.insert_email(&t, &b).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(
        tx.list_emails(&t, &EmailFilter::default(), &all())
            .await
            .unwrap(),
        vec![b.clone(), a.clone()]
    );
    let by_contact = EmailFilter {
        contact_id: Some(c),
        ..Default::default()
    };
    assert_eq!(
        tx.list_emails(&t, &by_contact, &all()).await.unwrap(),
        vec![a.clone()]
    );
    let sent = EmailFilter {
        status: Some(EmailStatus::Sent),
        ..Default::default()
    };
    assert!(tx.list_emails(&t, &sent, &all()).await.unwrap().is_empty());
    assert_eq!(tx.get_email(&t, &a.id).await.unwrap(), Some(a.clone()));
    assert!(tx
        .list_emails(&tenant(&ws, Mode::Live), &EmailFilter::default(), &all())
        .await
        .unwrap()
        .is_empty());
}

pub async fn due_emails_are_claimed_once_until_the_claim_expires(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Live);
    let due = email(EmailStatus::Queued, None, Some(1_000));
    let later = email(EmailStatus::Queued, None, Some(5_000));
    let simulated = email(EmailStatus::Simulated, None, None);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    for e in [&due, &later, &simulated] {
        tx.insert_email(&t, e).await.unwrap();
    }
    tx.commit().await.unwrap();

    let claim = |now: i64| {
        let store = store.clone();
        async move {
            let mut tx = store.begin_write().await.unwrap();
            let got = tx
                .claim_due_emails(
                    Timestamp::from_millis(now),
                    Timestamp::from_millis(now + 1_000),
                    10,
                )
                .await
                .unwrap();
            tx.commit().await.unwrap();
            got
        }
    };
    let got = claim(2_000).await;
    assert_eq!(
        got,
        vec![(t.clone(), due.clone())],
        "only due, queued emails"
    );
    assert!(claim(2_500).await.is_empty(), "claimed until 3000");
    let again = claim(3_000).await;
    assert_eq!(
        again.len(),
        1,
        "an expired claim is taken over (the worker died)"
    );

    let mut sent = due.clone();
    sent.status = EmailStatus::Sent;
    sent.attempts = 1;
    sent.next_attempt_at = None;
    sent.sent_at = Some(Timestamp::from_millis(3_100));
    sent.provider_message_id = Some("pm-1".into());
    let mut tx = store.begin_write().await.unwrap();
    tx.finish_email_attempt(&t, &sent).await.unwrap();
    tx.commit().await.unwrap();
    let got = claim(6_000).await;
    assert_eq!(got, vec![(t.clone(), later.clone())]);
    let mut tx = store.begin_read().await.unwrap();
    assert_eq!(tx.get_email(&t, &sent.id).await.unwrap(), Some(sent));
}

pub async fn concurrent_claimers_never_share_an_email(store: Arc<dyn Store>) {
    let ws = workspace();
    let t = tenant(&ws, Mode::Live);
    let mut tx = store.begin_write().await.unwrap();
    tx.insert_workspace(&ws).await.unwrap();
    for _ in 0..40 {
        tx.insert_email(&t, &email(EmailStatus::Queued, None, Some(1_000)))
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            loop {
                let mut tx = store.begin_write().await.unwrap();
                let got = tx
                    .claim_due_emails(
                        Timestamp::from_millis(2_000),
                        Timestamp::from_millis(60_000),
                        3,
                    )
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                if got.is_empty() {
                    return ids;
                }
                ids.extend(got.into_iter().map(|(_, e)| e.id));
            }
        }));
    }
    let mut all_ids = Vec::new();
    for t in tasks {
        all_ids.extend(t.await.unwrap());
    }
    let n = all_ids.len();
    all_ids.sort();
    all_ids.dedup();
    assert_eq!(
        (n, all_ids.len()),
        (40, 40),
        "every email claimed exactly once"
    );
}
