//! Email bodies: connections, templates and the emails sent or simulated.

use crm_domain::mail::{Connection, EmailMessage, EmailSource, Template};
use schemars::JsonSchema;
use serde::Serialize;

use super::{opt_ts, ts, versioned};

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Connection")]
pub struct ConnectionBody {
    /// `conn_` prefix.
    pub id: String,
    pub object: &'static str,
    pub channel: &'static str,
    pub provider: &'static str,
    pub from: String,
    pub base_url: Option<String>,
    /// The last four characters of the key; the key itself is never shown again.
    pub api_key_last4: String,
    pub created_at: String,
}

impl From<&Connection> for ConnectionBody {
    fn from(c: &Connection) -> Self {
        ConnectionBody {
            id: c.id.as_str().to_owned(),
            object: "connection",
            channel: "email",
            provider: c.provider.as_str(),
            from: c.from.clone(),
            base_url: c.base_url.clone(),
            api_key_last4: c.api_key_last4(),
            created_at: ts(c.created_at),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Template")]
pub struct TemplateBody {
    /// `tpl_` prefix.
    pub id: String,
    pub object: &'static str,
    pub name: String,
    pub subject: String,
    pub body: String,
    pub text: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub version: i64,
}

versioned!(TemplateBody);

impl From<&Template> for TemplateBody {
    fn from(t: &Template) -> Self {
        TemplateBody {
            id: t.id.as_str().to_owned(),
            object: "template",
            name: t.name.clone(),
            subject: t.subject.clone(),
            body: t.body.clone(),
            text: t.text.clone(),
            created_at: ts(t.created_at),
            updated_at: ts(t.updated_at),
            version: t.version,
        }
    }
}

/// What sent an email.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(rename = "EmailSource")]
pub enum EmailSourceBody {
    /// A rule's `send_email` action.
    Automation { automation_id: String },
    /// A sequence's step (`step` from 0).
    Sequence { sequence_id: String, step: u32 },
}

impl From<&EmailSource> for EmailSourceBody {
    fn from(s: &EmailSource) -> Self {
        match s {
            EmailSource::Automation { automation_id } => EmailSourceBody::Automation {
                automation_id: automation_id.as_str().to_owned(),
            },
            EmailSource::Sequence { sequence_id, step } => EmailSourceBody::Sequence {
                sequence_id: sequence_id.clone(),
                step: *step,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[schemars(rename = "Email")]
pub struct EmailBody {
    /// `em_` prefix.
    pub id: String,
    pub object: &'static str,
    pub to: String,
    pub from: String,
    pub subject: String,
    pub html: String,
    pub text: String,
    /// simulated (test mode), queued, sent or failed.
    pub status: &'static str,
    /// The provider's last error.
    pub error: Option<String>,
    /// `{type: "automation", automation_id}` or `{type: "sequence", sequence_id, step}`.
    pub source: EmailSourceBody,
    pub contact_id: Option<String>,
    pub deal_id: Option<String>,
    pub attempts: u32,
    pub next_attempt_at: Option<String>,
    pub provider_message_id: Option<String>,
    pub created_at: String,
    pub sent_at: Option<String>,
}

impl From<&EmailMessage> for EmailBody {
    fn from(e: &EmailMessage) -> Self {
        EmailBody {
            id: e.id.as_str().to_owned(),
            object: "email",
            to: e.to.clone(),
            from: e.from.clone(),
            subject: e.subject.clone(),
            html: e.html.clone(),
            text: e.text.clone(),
            status: e.status.as_str(),
            error: e.error.clone(),
            source: (&e.source).into(),
            contact_id: e.contact_id.as_ref().map(|id| id.as_str().to_owned()),
            deal_id: e.deal_id.as_ref().map(|id| id.as_str().to_owned()),
            attempts: e.attempts,
            next_attempt_at: opt_ts(e.next_attempt_at),
            provider_message_id: e.provider_message_id.clone(),
            created_at: ts(e.created_at),
            sent_at: opt_ts(e.sent_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{
        mail::{EmailStatus, Provider},
        AutomationId, ConnectionId, ContactId, DealId, EmailId, TemplateId, Timestamp,
    };
    use serde_json::{json, Value};

    const T0: i64 = 1_700_000_000_000;

    /// The domain's `Connection::snapshot()`, which this body replaces.
    fn old_connection(x: &Connection) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "connection",
            "channel": "email",
            "provider": x.provider.as_str(),
            "from": x.from,
            "base_url": x.base_url,
            "api_key_last4": x.api_key_last4(),
            "created_at": x.created_at.to_string(),
        })
    }

    /// The domain's `Template::snapshot()`, which this body replaces.
    fn old_template(x: &Template) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "template",
            "name": x.name,
            "subject": x.subject,
            "body": x.body,
            "text": x.text,
            "created_at": x.created_at.to_string(),
            "updated_at": x.updated_at.to_string(),
            "version": x.version,
        })
    }

    /// The domain's `EmailMessage::snapshot()`, which this body replaces.
    fn old_email(x: &EmailMessage) -> Value {
        json!({
            "id": x.id.as_str(),
            "object": "email",
            "to": x.to,
            "from": x.from,
            "subject": x.subject,
            "html": x.html,
            "text": x.text,
            "status": x.status.as_str(),
            "error": x.error,
            "source": match &x.source {
                EmailSource::Automation { automation_id } => {
                    json!({"type": "automation", "automation_id": automation_id.as_str()})
                }
                EmailSource::Sequence { sequence_id, step } => {
                    json!({"type": "sequence", "sequence_id": sequence_id, "step": step})
                }
            },
            "contact_id": x.contact_id.as_ref().map(ContactId::as_str),
            "deal_id": x.deal_id.as_ref().map(DealId::as_str),
            "attempts": x.attempts,
            "next_attempt_at": x.next_attempt_at.map(|t| t.to_string()),
            "provider_message_id": x.provider_message_id,
            "created_at": x.created_at.to_string(),
            "sent_at": x.sent_at.map(|t| t.to_string()),
        })
    }

    #[test]
    fn serializes_as_the_email_snapshots_did() {
        let c = Connection {
            id: ConnectionId::from_uuid(uuid::Uuid::from_u128(1)),
            provider: Provider::ALL[0],
            api_key: "secret-key-1234".into(),
            from: "a@example.com".into(),
            base_url: None,
            created_at: Timestamp::from_millis(T0),
        };
        crate::bodies::assert_same_json(&ConnectionBody::from(&c), &old_connection(&c));
        let t = Template {
            id: TemplateId::from_uuid(uuid::Uuid::from_u128(2)),
            name: "Hi".into(),
            subject: "Hi {{first_name}}".into(),
            body: "<p>Hi</p>".into(),
            text: None,
            created_at: Timestamp::from_millis(T0),
            updated_at: Timestamp::from_millis(T0 + 1),
            version: 2,
        };
        crate::bodies::assert_same_json(&TemplateBody::from(&t), &old_template(&t));
        let mut e = EmailMessage {
            id: EmailId::from_uuid(uuid::Uuid::from_u128(3)),
            to: "b@example.com".into(),
            from: "a@example.com".into(),
            subject: "s".into(),
            html: "<p>h</p>".into(),
            text: "h".into(),
            status: EmailStatus::Simulated,
            error: Some("boom".into()),
            source: EmailSource::Automation {
                automation_id: AutomationId::from_uuid(uuid::Uuid::from_u128(4)),
            },
            contact_id: Some(ContactId::from_uuid(uuid::Uuid::from_u128(5))),
            deal_id: None,
            attempts: 2,
            next_attempt_at: Some(Timestamp::from_millis(T0 + 5)),
            provider_message_id: None,
            created_at: Timestamp::from_millis(T0),
            sent_at: None,
        };
        crate::bodies::assert_same_json(&EmailBody::from(&e), &old_email(&e));
        e.source = EmailSource::Sequence {
            sequence_id: "seq_x".into(),
            step: 1,
        };
        crate::bodies::assert_same_json(&EmailBody::from(&e), &old_email(&e));
    }
}
