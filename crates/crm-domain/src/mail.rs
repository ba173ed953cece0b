//! Email: the workspace's sending connections, templates, and the email messages the service
//! records for every send (simulated in test mode, queued for delivery in live mode).

use crate::{
    error::ValidationError,
    ids::{AutomationId, ConnectionId, ContactId, DealId, EmailId, TemplateId},
    registry::is_http_url,
    time::Timestamp,
    Email,
};

/// Email providers a connection may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    Resend,
    Postmark,
    Sendgrid,
    Smtp,
}

impl Provider {
    pub const ALL: [Provider; 4] = [
        Provider::Resend,
        Provider::Postmark,
        Provider::Sendgrid,
        Provider::Smtp,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Resend => "resend",
            Provider::Postmark => "postmark",
            Provider::Sendgrid => "sendgrid",
            Provider::Smtp => "smtp",
        }
    }

    pub fn parse(s: &str) -> Option<Provider> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// A sender string: `addr@example.com` or `Display Name <addr@example.com>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    pub name: Option<String>,
    pub address: Email,
}

impl Sender {
    pub fn parse(raw: &str) -> Option<Sender> {
        let raw = raw.trim();
        if raw.contains(['\r', '\n']) {
            return None;
        }
        match raw.rfind('<') {
            Some(i) if raw.ends_with('>') => {
                let name = raw[..i].trim().trim_matches('"').trim();
                let address = Email::parse(&raw[i + 1..raw.len() - 1])?;
                Some(Sender {
                    name: (!name.is_empty()).then(|| name.to_owned()),
                    address,
                })
            }
            _ => Email::parse(raw).map(|address| Sender {
                name: None,
                address,
            }),
        }
    }
}

impl std::fmt::Display for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(n) => write!(f, "{n} <{}>", self.address.as_str()),
            None => f.write_str(self.address.as_str()),
        }
    }
}

/// The workspace's own sending account (spec, "Connection").
#[derive(Clone, PartialEq)]
pub struct Connection {
    pub id: ConnectionId,
    pub provider: Provider,
    /// The provider key (SMTP: the password). Write-only: never shown again.
    pub api_key: String,
    pub from: String,
    /// Overrides the provider's API host; for SMTP, the server: `smtp://[user@]host[:port]`
    /// (`?tls=required` for STARTTLS) or `smtps://...` (implicit TLS).
    pub base_url: Option<String>,
    pub created_at: Timestamp,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("provider", &self.provider)
            .field("api_key", &"<redacted>")
            .finish()
    }
}

/// A connection as the client sent it.
#[derive(Debug, Clone, Default)]
pub struct ConnectionDraft {
    pub channel: Option<String>,
    pub provider: Option<String>,
    pub api_key: Option<String>,
    pub from: Option<String>,
    pub base_url: Option<String>,
}

fn is_smtp_url(s: &str) -> bool {
    let rest = s
        .strip_prefix("smtp://")
        .or_else(|| s.strip_prefix("smtps://"));
    rest.is_some_and(|r| {
        let host = r
            .rsplit('@')
            .next()
            .unwrap_or("")
            .split(['/', '?'])
            .next()
            .unwrap_or("");
        !host.is_empty() && !s.chars().any(char::is_whitespace)
    })
}

impl Connection {
    pub fn create(
        id: ConnectionId,
        now: Timestamp,
        draft: ConnectionDraft,
    ) -> Result<Connection, ValidationError> {
        let channel = draft.channel.unwrap_or_else(|| "email".into());
        if channel != "email" {
            return Err(ValidationError::UnknownValue {
                field: "channel".into(),
                value: channel,
                valid_options: vec!["email".into()],
            });
        }
        let provider_raw = draft
            .provider
            .ok_or_else(|| ValidationError::invalid("provider", "is required"))?;
        let provider =
            Provider::parse(&provider_raw).ok_or_else(|| ValidationError::UnknownValue {
                field: "provider".into(),
                value: provider_raw,
                valid_options: Provider::ALL
                    .iter()
                    .map(|p| p.as_str().to_owned())
                    .collect(),
            })?;
        let api_key = draft
            .api_key
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty());
        let api_key = api_key.ok_or_else(|| {
            ValidationError::invalid(
                "api_key",
                "is required (the provider's sending key; SMTP: the password)",
            )
        })?;
        let from = draft.from.ok_or_else(|| {
            ValidationError::invalid("from", "is required, e.g. `Acme <hello@acme.com>`")
        })?;
        let sender = Sender::parse(&from).ok_or_else(|| {
            ValidationError::invalid(
                "from",
                "must be `addr@example.com` or `Name <addr@example.com>`",
            )
        })?;
        let base_url = draft
            .base_url
            .map(|u| u.trim().trim_end_matches('/').to_owned())
            .filter(|u| !u.is_empty());
        match (&base_url, provider) {
            (None, Provider::Smtp) => return Err(ValidationError::invalid("base_url", "is required for smtp: `smtp://user@host:587?tls=required` or `smtps://user@host:465`")),
            (Some(u), Provider::Smtp) if !is_smtp_url(u) => {
                return Err(ValidationError::invalid("base_url", "must be `smtp://[user@]host[:port]` or `smtps://[user@]host[:port]`"))
            }
            (Some(u), p) if p != Provider::Smtp && !is_http_url(u) => return Err(ValidationError::invalid("base_url", "must be an http or https URL")),
            _ => {}
        }
        Ok(Connection {
            id,
            provider,
            api_key,
            from: sender.to_string(),
            base_url,
            created_at: now,
        })
    }

    /// The last four characters of the key: all a response ever shows of it.
    pub fn api_key_last4(&self) -> String {
        let chars: Vec<char> = self.api_key.chars().collect();
        chars[chars.len().saturating_sub(4)..].iter().collect()
    }
}

/// A reusable email: subject, HTML body and optional text part, with merge tags.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    pub id: TemplateId,
    pub name: String,
    pub subject: String,
    pub body: String,
    pub text: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub version: i64,
}

#[derive(Debug, Clone, Default)]
pub struct TemplateDraft {
    pub name: Option<String>,
    pub subject: Option<String>,
    pub body: Option<String>,
    pub text: Option<String>,
}

fn required(field: &str, v: Option<String>) -> Result<String, ValidationError> {
    v.filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ValidationError::invalid(field, "is required"))
}

impl Template {
    pub fn create(
        id: TemplateId,
        now: Timestamp,
        draft: TemplateDraft,
    ) -> Result<Template, ValidationError> {
        let template = Template {
            id,
            name: required("name", draft.name)?.trim().to_owned(),
            subject: required("subject", draft.subject)?,
            body: required("body", draft.body)?,
            text: draft.text.filter(|t| !t.is_empty()),
            created_at: now,
            updated_at: now,
            version: 1,
        };
        template.check_lengths()?;
        Ok(template)
    }

    /// `name` and `subject` are single lines; `body` and `text` free text (decisions §22).
    fn check_lengths(&self) -> Result<(), ValidationError> {
        use crate::text::{check_len, MAX_BODY, MAX_LINE};
        check_len("name", &self.name, MAX_LINE)?;
        check_len("subject", &self.subject, MAX_LINE)?;
        check_len("body", &self.body, MAX_BODY)?;
        match &self.text {
            Some(text) => check_len("text", text, MAX_BODY),
            None => Ok(()),
        }
    }

    /// Applies the fields given (`text: Some(None)` clears it); returns whether anything changed.
    pub fn apply(
        &mut self,
        draft: TemplateDraft,
        clear_text: bool,
        now: Timestamp,
    ) -> Result<bool, ValidationError> {
        let before = self.clone();
        if draft.name.is_some() {
            self.name = required("name", draft.name)?.trim().to_owned();
        }
        if draft.subject.is_some() {
            self.subject = required("subject", draft.subject)?;
        }
        if draft.body.is_some() {
            self.body = required("body", draft.body)?;
        }
        if clear_text {
            self.text = None;
        } else if let Some(t) = draft.text {
            self.text = Some(t).filter(|t| !t.is_empty());
        }
        let changed = *self != before;
        if changed {
            self.check_lengths()?;
            self.updated_at = now;
            self.version += 1;
        }
        Ok(changed)
    }
}

/// Where a delivery stands (decisions §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmailStatus {
    /// Test mode: recorded, never delivered.
    Simulated,
    /// Live mode: waiting for the sending worker (also between retries).
    Queued,
    Sent,
    /// Live mode: the provider refused it on every attempt.
    Failed,
}

impl EmailStatus {
    pub const ALL: [EmailStatus; 4] = [
        EmailStatus::Simulated,
        EmailStatus::Queued,
        EmailStatus::Sent,
        EmailStatus::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EmailStatus::Simulated => "simulated",
            EmailStatus::Queued => "queued",
            EmailStatus::Sent => "sent",
            EmailStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<EmailStatus> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

/// What sent an email.
#[derive(Debug, Clone, PartialEq)]
pub enum EmailSource {
    Automation {
        automation_id: AutomationId,
    },
    /// A sequence step (filled by sequences: the sequence's id and the step's index).
    Sequence {
        sequence_id: String,
        step: u32,
    },
}

/// One email the service sent or simulated (`GET /emails`).
#[derive(Debug, Clone, PartialEq)]
pub struct EmailMessage {
    pub id: EmailId,
    pub to: String,
    pub from: String,
    pub subject: String,
    pub html: String,
    pub text: String,
    pub status: EmailStatus,
    /// The last provider error (kept while retrying; set when failed).
    pub error: Option<String>,
    pub source: EmailSource,
    pub contact_id: Option<ContactId>,
    pub deal_id: Option<DealId>,
    /// Delivery attempts made.
    pub attempts: u32,
    /// When the worker may next try (queued emails).
    pub next_attempt_at: Option<Timestamp>,
    /// The provider's id of the sent message.
    pub provider_message_id: Option<String>,
    pub created_at: Timestamp,
    pub sent_at: Option<Timestamp>,
}

impl EmailMessage {}

/// Waits between delivery attempts of a live email: after the first failure the first entry,
/// and so on; when the schedule is used up, the email is `failed`.
pub const DEFAULT_EMAIL_BACKOFF_MS: [i64; 5] = [30_000, 120_000, 600_000, 3_600_000, 21_600_000];

/// What to do after a failed attempt number `attempts` (1-based): retry at the instant given, or
/// give up.
pub fn next_attempt(schedule: &[i64], attempts: u32, now: Timestamp) -> Option<Timestamp> {
    let i = usize::try_from(attempts).ok()?.checked_sub(1)?;
    schedule.get(i).map(|ms| now.plus_millis(*ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn draft(provider: &str, base_url: Option<&str>) -> ConnectionDraft {
        ConnectionDraft {
            channel: Some("email".into()),
            provider: Some(provider.into()),
            api_key: Some("re_secret_1234".into()),
            from: Some("Acme <Hello@Acme.com>".into()),
            base_url: base_url.map(String::from),
        }
    }

    fn create(d: ConnectionDraft) -> Result<Connection, ValidationError> {
        Connection::create(
            ConnectionId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            d,
        )
    }

    #[test]
    fn connections_validate_and_never_show_the_key() {
        let c = create(draft("resend", Some("http://127.0.0.1:9/"))).unwrap();
        assert_eq!(
            (c.from.as_str(), c.base_url.as_deref()),
            ("Acme <hello@acme.com>", Some("http://127.0.0.1:9"))
        );
        assert_eq!(c.api_key_last4(), "1234");
        assert!(!format!("{c:?}").contains("re_secret"));
        assert!(
            matches!(create(draft("mailgun", None)), Err(ValidationError::UnknownValue { valid_options, .. }) if valid_options.len() == 4)
        );
        assert!(create(draft("smtp", None)).is_err(), "smtp needs a server");
        assert!(create(draft("smtp", Some("https://x"))).is_err());
        assert!(create(draft("smtp", Some("smtp://me@127.0.0.1:2525"))).is_ok());
        assert!(create(draft("postmark", Some("ftp://x"))).is_err());
        let mut bad_from = draft("resend", None);
        bad_from.from = Some("not an address".into());
        assert!(create(bad_from).is_err());
        let mut sms = draft("resend", None);
        sms.channel = Some("sms".into());
        assert!(matches!(
            create(sms),
            Err(ValidationError::UnknownValue { .. })
        ));
    }

    #[test]
    fn senders_parse_both_forms() {
        assert_eq!(Sender::parse("a@b.co").unwrap().to_string(), "a@b.co");
        assert_eq!(
            Sender::parse("\"Ada L\" <a@b.co>").unwrap().to_string(),
            "Ada L <a@b.co>"
        );
        assert!(Sender::parse("Ada <a@b.co>\r\nBcc: x@y.z").is_none());
    }

    #[test]
    fn templates_require_their_parts_and_patch() {
        let d = TemplateDraft {
            name: Some("Welcome".into()),
            subject: Some("Hi {{first_name}}".into()),
            body: Some("<p>Hi</p>".into()),
            text: None,
        };
        let mut t = Template::create(
            TemplateId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            d,
        )
        .unwrap();
        assert!(Template::create(
            TemplateId::from_uuid(Uuid::nil()),
            Timestamp::from_millis(0),
            TemplateDraft::default()
        )
        .is_err());
        assert!(!t
            .apply(
                TemplateDraft {
                    name: Some("Welcome".into()),
                    ..Default::default()
                },
                false,
                Timestamp::from_millis(1)
            )
            .unwrap());
        assert!(t
            .apply(
                TemplateDraft {
                    text: Some("Hi".into()),
                    ..Default::default()
                },
                false,
                Timestamp::from_millis(2)
            )
            .unwrap());
        assert_eq!((t.text.as_deref(), t.version), (Some("Hi"), 2));
        assert!(t
            .apply(TemplateDraft::default(), true, Timestamp::from_millis(3))
            .unwrap());
        assert_eq!(t.text, None);
        assert!(t
            .apply(
                TemplateDraft {
                    body: Some(" ".into()),
                    ..Default::default()
                },
                false,
                Timestamp::from_millis(4)
            )
            .is_err());
    }

    #[test]
    fn retries_follow_the_schedule_then_stop() {
        let now = Timestamp::from_millis(1_000);
        assert_eq!(
            next_attempt(&DEFAULT_EMAIL_BACKOFF_MS, 1, now),
            Some(Timestamp::from_millis(31_000))
        );
        assert_eq!(
            next_attempt(&DEFAULT_EMAIL_BACKOFF_MS, 5, now),
            Some(Timestamp::from_millis(21_601_000))
        );
        assert_eq!(next_attempt(&DEFAULT_EMAIL_BACKOFF_MS, 6, now), None);
        assert_eq!(next_attempt(&[], 1, now), None);
    }
}
