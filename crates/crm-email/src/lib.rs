//! Email providers: the adapter behind crm-app's [`EmailSender`] port. Resend, Postmark and
//! SendGrid are reached over their documented HTTP send APIs (the connection's `base_url`
//! replaces the provider's host, e.g. for a regional endpoint or a local fake in tests); SMTP goes
//! through `lettre` (tokio, rustls).
//!
//! This crate knows providers' wire formats and nothing of CRM rules: it sends the message it is
//! given through the connection it is given, and says whether a failure is worth retrying.

use std::time::Duration;

use async_trait::async_trait;
use crm_app::ports::{EmailSender, SendFailure};
use crm_domain::mail::{Connection, EmailMessage, Provider, Sender};
use serde_json::{json, Value};

/// How long one delivery attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

pub const RESEND_HOST: &str = "https://api.resend.com";
pub const POSTMARK_HOST: &str = "https://api.postmarkapp.com";
pub const SENDGRID_HOST: &str = "https://api.sendgrid.com";

/// Sends through the provider a connection names.
#[derive(Clone)]
pub struct ProviderSender {
    http: reqwest::Client,
}

impl ProviderSender {
    pub fn new() -> ProviderSender {
        let http = reqwest::Client::builder()
            .timeout(ATTEMPT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("crm-email/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_default();
        ProviderSender { http }
    }
}

impl Default for ProviderSender {
    fn default() -> Self {
        Self::new()
    }
}

/// One HTTP send request: where, with which headers, which JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Value,
}

fn host(connection: &Connection, default: &str) -> String {
    connection
        .base_url
        .clone()
        .unwrap_or_else(|| default.to_owned())
}

/// The request each HTTP provider documents for sending one message.
pub fn http_request(connection: &Connection, email: &EmailMessage) -> Option<HttpRequest> {
    let key = &connection.api_key;
    Some(match connection.provider {
        // https://resend.com/docs/api-reference/emails/send-email
        Provider::Resend => HttpRequest {
            url: format!("{}/emails", host(connection, RESEND_HOST)),
            headers: vec![("authorization", format!("Bearer {key}"))],
            body: json!({"from": email.from, "to": [email.to], "subject": email.subject, "html": email.html, "text": email.text}),
        },
        // https://postmarkapp.com/developer/api/email-api#send-a-single-email
        Provider::Postmark => HttpRequest {
            url: format!("{}/email", host(connection, POSTMARK_HOST)),
            headers: vec![
                ("x-postmark-server-token", key.clone()),
                ("accept", "application/json".into()),
            ],
            body: json!({
                "From": email.from, "To": email.to, "Subject": email.subject,
                "HtmlBody": email.html, "TextBody": email.text, "MessageStream": "outbound",
            }),
        },
        // https://www.twilio.com/docs/sendgrid/api-reference/mail-send/mail-send
        Provider::Sendgrid => {
            let sender = Sender::parse(&email.from);
            let from = match &sender {
                Some(Sender {
                    name: Some(name),
                    address,
                }) => json!({"email": address.as_str(), "name": name}),
                Some(Sender {
                    name: None,
                    address,
                }) => json!({"email": address.as_str()}),
                None => json!({"email": email.from}),
            };
            HttpRequest {
                url: format!("{}/v3/mail/send", host(connection, SENDGRID_HOST)),
                headers: vec![("authorization", format!("Bearer {key}"))],
                body: json!({
                    "personalizations": [{"to": [{"email": email.to}]}],
                    "from": from,
                    "subject": email.subject,
                    // SendGrid requires text/plain before text/html.
                    "content": [{"type": "text/plain", "value": email.text}, {"type": "text/html", "value": email.html}],
                }),
            }
        }
        Provider::Smtp => return None,
    })
}

/// 2xx: sent; 408, 429 and 5xx: worth retrying; any other status: refused for good.
fn classify(status: u16, body: &str) -> Result<(), SendFailure> {
    let detail = || {
        let snippet: String = body.chars().take(300).collect();
        format!("provider answered HTTP {status}: {snippet}")
    };
    match status {
        200..=299 => Ok(()),
        408 | 429 | 500..=599 => Err(SendFailure::Retryable(detail())),
        _ => Err(SendFailure::Permanent(detail())),
    }
}

/// The provider's id of the message, from its answer.
fn message_id(
    provider: Provider,
    headers: &reqwest::header::HeaderMap,
    body: &str,
) -> Option<String> {
    match provider {
        Provider::Sendgrid => headers
            .get("x-message-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        Provider::Resend => serde_json::from_str::<Value>(body)
            .ok()?
            .get("id")?
            .as_str()
            .map(str::to_owned),
        Provider::Postmark => serde_json::from_str::<Value>(body)
            .ok()?
            .get("MessageID")?
            .as_str()
            .map(str::to_owned),
        Provider::Smtp => None,
    }
}

impl ProviderSender {
    async fn send_http(
        &self,
        connection: &Connection,
        email: &EmailMessage,
        request: HttpRequest,
    ) -> Result<Option<String>, SendFailure> {
        let mut builder = self.http.post(&request.url).json(&request.body);
        for (name, value) in &request.headers {
            builder = builder.header(*name, value);
        }
        let response = builder.send().await.map_err(|e| {
            SendFailure::Retryable(format!("could not reach the provider: {}", without_url(&e)))
        })?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        classify(status, &body)?;
        if connection.provider == Provider::Postmark {
            // Postmark reports some refusals in a 200 body with a non-zero ErrorCode.
            let code = serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v.get("ErrorCode").and_then(Value::as_i64))
                .unwrap_or(0);
            if code != 0 {
                return Err(SendFailure::Permanent(format!(
                    "postmark ErrorCode {code}: {}",
                    body.chars().take(300).collect::<String>()
                )));
            }
        }
        tracing::debug!(email = %email.id, provider = connection.provider.as_str(), "email sent");
        Ok(message_id(connection.provider, &headers, &body))
    }
}

/// A reqwest error without the URL (which may carry credentials in a custom base_url).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    kind.to_owned()
}

#[async_trait]
impl EmailSender for ProviderSender {
    async fn send(
        &self,
        connection: &Connection,
        email: &EmailMessage,
    ) -> Result<Option<String>, SendFailure> {
        match http_request(connection, email) {
            Some(request) => self.send_http(connection, email, request).await,
            None => smtp::send(connection, email).await,
        }
    }
}

pub mod smtp {
    //! SMTP delivery via lettre. The connection's `base_url` names the server:
    //! `smtp://[user@]host[:port]` (STARTTLS when the server offers it; `?tls=required` insists
    //! on it, `?tls=none` never tries), or `smtps://[user@]host[:port]` (implicit TLS). The
    //! password is the connection's `api_key`; the user defaults to the sender's address.

    use crm_app::ports::SendFailure;
    use crm_domain::mail::{Connection, EmailMessage, Sender};
    use lettre::{
        message::{Mailbox, MultiPart},
        transport::smtp::{
            authentication::Credentials,
            client::{Tls, TlsParameters},
        },
        AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
    };

    use super::ATTEMPT_TIMEOUT;

    /// Where and how to reach an SMTP server.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Server {
        pub implicit_tls: bool,
        pub user: Option<String>,
        pub host: String,
        pub port: u16,
        /// `required`, `opportunistic` or `none` (STARTTLS; ignored with implicit TLS).
        pub starttls: String,
    }

    fn percent_decode(s: &str) -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                if let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(b);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    pub fn parse(url: &str) -> Option<Server> {
        let (implicit_tls, rest) = match url.strip_prefix("smtps://") {
            Some(r) => (true, r),
            None => (false, url.strip_prefix("smtp://")?),
        };
        let (authority, query) = match rest.split_once('?') {
            Some((a, q)) => (a.trim_end_matches('/'), Some(q)),
            None => (rest.trim_end_matches('/'), None),
        };
        let (user, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(percent_decode(u)).filter(|u| !u.is_empty()), h),
            None => (None, authority),
        };
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || hostport.starts_with('[') => {
                (h.trim_matches(['[', ']']).to_owned(), p.parse().ok()?)
            }
            _ => (
                hostport.trim_matches(['[', ']']).to_owned(),
                if implicit_tls { 465 } else { 587 },
            ),
        };
        if host.is_empty() {
            return None;
        }
        let starttls = query
            .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("tls=")))
            .unwrap_or("opportunistic")
            .to_owned();
        if !["required", "opportunistic", "none"].contains(&starttls.as_str()) {
            return None;
        }
        Some(Server {
            implicit_tls,
            user,
            host,
            port,
            starttls,
        })
    }

    fn mailbox(raw: &str) -> Result<Mailbox, SendFailure> {
        let sender = Sender::parse(raw)
            .ok_or_else(|| SendFailure::Permanent(format!("`{raw}` is not an address")))?;
        let address = sender
            .address
            .as_str()
            .parse()
            .map_err(|_| SendFailure::Permanent(format!("`{raw}` is not an address")))?;
        Ok(Mailbox::new(sender.name, address))
    }

    pub async fn send(
        connection: &Connection,
        email: &EmailMessage,
    ) -> Result<Option<String>, SendFailure> {
        let url = connection.base_url.as_deref().unwrap_or_default();
        let server = parse(url).ok_or_else(|| {
            SendFailure::Permanent(
                "the connection's base_url is not an smtp:// or smtps:// server".into(),
            )
        })?;
        let tls = |host: &str| {
            TlsParameters::new(host.to_owned())
                .map_err(|e| SendFailure::Permanent(format!("TLS setup failed: {e}")))
        };
        let mut builder =
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server.host.clone())
                .port(server.port)
                .timeout(Some(ATTEMPT_TIMEOUT));
        builder = if server.implicit_tls {
            builder.tls(Tls::Wrapper(tls(&server.host)?))
        } else {
            match server.starttls.as_str() {
                "required" => builder.tls(Tls::Required(tls(&server.host)?)),
                "none" => builder.tls(Tls::None),
                _ => builder.tls(Tls::Opportunistic(tls(&server.host)?)),
            }
        };
        let from = mailbox(&email.from)?;
        let user = server
            .user
            .clone()
            .unwrap_or_else(|| from.email.to_string());
        let transport = builder
            .credentials(Credentials::new(user, connection.api_key.clone()))
            .build();
        let message = Message::builder()
            .from(from)
            .to(mailbox(&email.to)?)
            .subject(email.subject.clone())
            .multipart(MultiPart::alternative_plain_html(
                email.text.clone(),
                email.html.clone(),
            ))
            .map_err(|e| SendFailure::Permanent(format!("could not build the message: {e}")))?;
        match transport.send(message).await {
            Ok(response) => Ok(response.message().next().map(str::to_owned)),
            Err(e) if e.is_permanent() => {
                Err(SendFailure::Permanent(format!("SMTP server refused: {e}")))
            }
            Err(e) => Err(SendFailure::Retryable(format!("SMTP delivery failed: {e}"))),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn server_urls_parse() {
            assert_eq!(
                parse("smtp://me%40x.co@127.0.0.1:2525?tls=none"),
                Some(Server {
                    implicit_tls: false,
                    user: Some("me@x.co".into()),
                    host: "127.0.0.1".into(),
                    port: 2525,
                    starttls: "none".into()
                })
            );
            assert_eq!(parse("smtps://mail.example.com").unwrap().port, 465);
            assert_eq!(parse("smtp://mail.example.com").unwrap().port, 587);
            assert_eq!(
                parse("smtp://mail.example.com").unwrap().starttls,
                "opportunistic"
            );
            assert!(parse("smtp://mail.example.com?tls=maybe").is_none());
            assert!(parse("https://x").is_none());
            assert!(parse("smtp://").is_none());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crm_domain::{
        mail::{EmailSource, EmailStatus},
        AutomationId, ConnectionId, EmailId, Timestamp,
    };

    fn email() -> EmailMessage {
        EmailMessage {
            id: EmailId::from_uuid(uuid::Uuid::nil()),
            to: "ada@example.com".into(),
            from: "Acme <hi@acme.com>".into(),
            subject: "Hi".into(),
            html: "<p>Hi</p>".into(),
            text: "Hi".into(),
            status: EmailStatus::Queued,
            error: None,
            source: EmailSource::Automation {
                automation_id: AutomationId::from_uuid(uuid::Uuid::nil()),
            },
            contact_id: None,
            deal_id: None,
            attempts: 0,
            next_attempt_at: None,
            provider_message_id: None,
            created_at: Timestamp::from_millis(0),
            sent_at: None,
        }
    }

    fn connection(provider: Provider, base_url: Option<&str>) -> Connection {
        Connection {
            id: ConnectionId::from_uuid(uuid::Uuid::nil()),
            provider,
            api_key: "KEY".into(),
            from: "Acme <hi@acme.com>".into(),
            base_url: base_url.map(String::from),
            created_at: Timestamp::from_millis(0),
        }
    }

    #[test]
    fn requests_follow_each_provider_s_documented_shape() {
        let r = http_request(&connection(Provider::Resend, None), &email()).unwrap();
        assert_eq!(r.url, "https://api.resend.com/emails");
        assert_eq!(r.headers, vec![("authorization", "Bearer KEY".to_owned())]);
        assert_eq!(r.body["to"], json!(["ada@example.com"]));
        let r = http_request(
            &connection(Provider::Postmark, Some("http://127.0.0.1:1")),
            &email(),
        )
        .unwrap();
        assert_eq!(r.url, "http://127.0.0.1:1/email");
        assert_eq!(r.headers[0], ("x-postmark-server-token", "KEY".to_owned()));
        assert_eq!(
            (
                r.body["HtmlBody"].as_str(),
                r.body["MessageStream"].as_str()
            ),
            (Some("<p>Hi</p>"), Some("outbound"))
        );
        let r = http_request(&connection(Provider::Sendgrid, None), &email()).unwrap();
        assert_eq!(r.url, "https://api.sendgrid.com/v3/mail/send");
        assert_eq!(
            r.body["from"],
            json!({"email": "hi@acme.com", "name": "Acme"})
        );
        assert_eq!(r.body["content"][0]["type"], "text/plain");
        assert!(http_request(&connection(Provider::Smtp, Some("smtp://x")), &email()).is_none());
    }

    #[test]
    fn statuses_are_classified() {
        assert!(classify(202, "").is_ok());
        assert!(matches!(classify(429, ""), Err(SendFailure::Retryable(_))));
        assert!(matches!(classify(503, ""), Err(SendFailure::Retryable(_))));
        assert!(
            matches!(classify(401, "bad key"), Err(SendFailure::Permanent(m)) if m.contains("401"))
        );
    }
}
