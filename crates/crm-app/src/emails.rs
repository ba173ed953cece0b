//! Email: connections (`/connections`), templates (`/templates`), the record of every email
//! (`/emails`), [`App::queue_email`] (what `send_email` actions and sequence steps call inside
//! their write's transaction), and [`App::deliver_due_emails`], the live sending worker's step.

use crm_domain::{
    mail::{
        next_attempt, Connection, ConnectionDraft, EmailMessage, EmailSource, EmailStatus,
        Template, TemplateDraft,
    },
    merge::MergeData,
    rule::{self, Automation, AutomationDef, EmailAction},
    ActivityDraft, ConnectionId, ContactId, DealId, Email, EmailId, Mode, TemplateId, Tenant,
    ValidationError,
};
use serde_json::{json, Value};

use crm_domain::audit::changes;

use crate::{
    audit::Audited,
    auth::Caller,
    automations::{fail, ActionError},
    error::AppError,
    paging::{page_from, slice_for, Page, PageParams},
    ports::{EmailFilter, EmailSender, SendFailure, StoreError, Tx},
    write::{PendingEvent, RecordRef},
    App,
};

/// The sender shown on test-mode emails when the mode has no connection.
pub const TEST_MODE_FROM: &str = "Test mode <test-mode@example.com>";

/// What the audit log shows of a connection; its key only as redacted.
fn connection_shape(c: &Connection) -> Value {
    json!({"channel": "email", "provider": c.provider.as_str(), "from": c.from, "base_url": c.base_url, "api_key": c.api_key})
}

/// What the audit log shows of a template.
fn template_shape(t: &Template) -> Value {
    json!({"name": t.name, "subject": t.subject, "body": t.body, "text": t.text})
}

const NO_CONNECTION: &str = "live-mode email needs an email connection: POST /connections first";

/// An email to record and, in live mode, deliver.
#[derive(Debug, Clone)]
pub struct EmailDraft {
    pub to: String,
    pub subject: String,
    pub html: String,
    pub text: String,
    pub source: EmailSource,
    /// Where the `email` activity is logged.
    pub contact_id: Option<ContactId>,
    pub deal_id: Option<DealId>,
}

/// A template update: the fields given replace the template's; `clear_text` removes the text part.
#[derive(Debug, Clone, Default)]
pub struct TemplatePatch {
    pub draft: TemplateDraft,
    pub clear_text: bool,
}

fn template_id(id: &str) -> Result<TemplateId, AppError> {
    TemplateId::parse(id).map_err(|_| AppError::not_found("template", id))
}

fn connection_id(id: &str) -> Result<ConnectionId, AppError> {
    ConnectionId::parse(id).map_err(|_| AppError::not_found("connection", id))
}

/// The `email` activity an email is logged as on its contact and deal (none without either).
pub(crate) fn email_activity(email: &EmailMessage) -> Option<ActivityDraft> {
    if email.contact_id.is_none() && email.deal_id.is_none() {
        return None;
    }
    let note = match email.status {
        EmailStatus::Simulated => "simulated, test mode",
        _ => "queued",
    };
    Some(ActivityDraft {
        activity_type: Some("email".into()),
        contact_id: email.contact_id.as_ref().map(ToString::to_string),
        deal_id: email.deal_id.as_ref().map(ToString::to_string),
        body: Some(format!(
            "Email to {}: {} ({note}; {})",
            email.to, email.subject, email.id
        )),
        ..Default::default()
    })
}

impl App {
    /// Records an email in the caller's transaction: `simulated` in test mode (never delivered),
    /// `queued` in live mode for the sending worker, which needs the tenant's email connection.
    /// Logs an `email` activity on its contact and deal.
    pub async fn queue_email(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        draft: EmailDraft,
    ) -> Result<EmailMessage, AppError> {
        let connection = tx.email_connection(tenant).await?;
        let email = self.prepare_email(tenant, connection.as_ref(), draft)?;
        tx.insert_email(tenant, &email).await?;
        if let Some(activity) = email_activity(&email) {
            self.create_activity_in(tx, tenant, activity).await?;
        }
        if let Some(dry) = self.dry() {
            dry.record(|fx| fx.emails.push((email.to.clone(), email.subject.clone())));
        }
        Ok(email)
    }

    /// The email [`App::queue_email`] records for `draft`, given the tenant's email connection
    /// (also used by the batched sends of sequence steps).
    pub(crate) fn prepare_email(
        &self,
        tenant: &Tenant,
        connection: Option<&Connection>,
        draft: EmailDraft,
    ) -> Result<EmailMessage, AppError> {
        let to = Email::parse(&draft.to).ok_or_else(|| {
            ValidationError::invalid(
                "to",
                format!("`{}` is not a valid e-mail address", draft.to),
            )
        })?;
        let now = self.clock.now();
        let (status, from, next_attempt_at) = match (tenant.mode, connection) {
            (Mode::Test, c) => (
                EmailStatus::Simulated,
                c.map(|c| c.from.clone())
                    .unwrap_or_else(|| TEST_MODE_FROM.to_owned()),
                None,
            ),
            (Mode::Live, Some(c)) => (EmailStatus::Queued, c.from.clone(), Some(now)),
            (Mode::Live, None) => {
                return Err(ValidationError::invalid("connection", NO_CONNECTION).into())
            }
        };
        Ok(EmailMessage {
            id: EmailId::from_uuid(self.ids.new_uuid()),
            to: to.as_str().to_owned(),
            from,
            subject: draft.subject,
            html: draft.html,
            text: draft.text,
            status,
            error: None,
            source: draft.source,
            contact_id: draft.contact_id,
            deal_id: draft.deal_id,
            attempts: 0,
            next_attempt_at,
            provider_message_id: None,
            created_at: now,
            sent_at: None,
        })
    }

    /// An email that could not be sent, recorded as `failed` with the reason, so that a send that
    /// did not happen is visible in `GET /emails` instead of vanishing.
    pub(crate) fn failed_email(
        &self,
        tenant: &Tenant,
        connection: Option<&Connection>,
        draft: EmailDraft,
        reason: String,
    ) -> EmailMessage {
        let from = match (tenant.mode, connection) {
            (_, Some(c)) => c.from.clone(),
            (Mode::Test, None) => TEST_MODE_FROM.to_owned(),
            (Mode::Live, None) => String::new(),
        };
        let now = self.clock.now();
        EmailMessage {
            id: EmailId::from_uuid(self.ids.new_uuid()),
            to: draft.to,
            from,
            subject: draft.subject,
            html: draft.html,
            text: draft.text,
            status: EmailStatus::Failed,
            error: Some(reason),
            source: draft.source,
            contact_id: draft.contact_id,
            deal_id: draft.deal_id,
            attempts: 0,
            next_attempt_at: None,
            provider_message_id: None,
            created_at: now,
            sent_at: None,
        }
    }

    /// Checks a rule's `send_email` actions when it is created or changed: the templates they
    /// name exist, and in live mode an email connection exists.
    pub(crate) async fn check_email_actions(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        def: &AutomationDef,
    ) -> Result<(), AppError> {
        for (i, action) in def.actions.iter().enumerate() {
            if let rule::Action::SendEmail(EmailAction {
                template_id: Some(t),
                ..
            }) = action
            {
                let found = match TemplateId::parse(t) {
                    Ok(id) => tx.get_template(tenant, &id).await?.is_some(),
                    Err(_) => false,
                };
                if !found {
                    return Err(ValidationError::InvalidReference {
                        field: format!("actions[{i}].template_id"),
                        value: t.clone(),
                    }
                    .into());
                }
            }
        }
        if tenant.mode == Mode::Live
            && def.sends_email()
            && tx.email_connection(tenant).await?.is_none()
        {
            return Err(ValidationError::invalid(
                "actions",
                format!("send_email: {NO_CONNECTION}"),
            )
            .into());
        }
        Ok(())
    }

    /// The recipient of a `send_email` without `to`: the triggering contact, or the deal's
    /// primary contact (with its email).
    async fn default_contact(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        event: &PendingEvent,
    ) -> Result<Option<(ContactId, Option<String>)>, AppError> {
        let contact_id = match &event.record {
            RecordRef::Contact(id) => Some(id.clone()),
            RecordRef::Deal(_) => event
                .data
                .get("primary_contact_id")
                .and_then(Value::as_str)
                .and_then(|s| ContactId::parse(s).ok()),
        };
        let Some(id) = contact_id else {
            return Ok(None);
        };
        let contact = tx.get_contact(tenant, &id).await?;
        Ok(contact.map(|c| (c.id, c.email.map(|e| e.as_str().to_owned()))))
    }

    /// `send_email`: the template (if named) or the action's own text, merge tags filled from the
    /// triggering record (HTML-escaped in the HTML part), sent to `to` or the default recipient.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send_email_action(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        event: &PendingEvent,
        rule: &Automation,
        to: Option<String>,
        email: EmailAction,
        data: &MergeData<'_>,
    ) -> Result<Value, ActionError> {
        let (subject, body, text) = match &email.template_id {
            Some(t) => {
                let id = template_id(t)?;
                let tpl = tx
                    .get_template(tenant, &id)
                    .await?
                    .ok_or_else(|| AppError::not_found("template", t.as_str()))?;
                (tpl.subject, tpl.body, tpl.text)
            }
            None => (
                email.subject.unwrap_or_default(),
                email.body.unwrap_or_default(),
                email.text,
            ),
        };
        let contact = self.default_contact(tx, tenant, event).await?;
        let recipient = match to {
            Some(to) => to,
            None => match contact.as_ref().and_then(|(_, e)| e.clone()) {
                Some(e) => e,
                None => {
                    return Err(fail(
                        "no_recipient",
                        "no `to`, and the triggering record has no contact with an email",
                    ))
                }
            },
        };
        let (subject, html, text) = rule::render_email(&subject, &body, text.as_deref(), data);
        let deal_id = match &event.record {
            RecordRef::Deal(id) => Some(id.clone()),
            RecordRef::Contact(_) => None,
        };
        let draft = EmailDraft {
            to: recipient,
            subject,
            html,
            text,
            source: EmailSource::Automation {
                automation_id: rule.id.clone(),
            },
            contact_id: contact.map(|(id, _)| id),
            deal_id,
        };
        let queued = self.queue_email(tx, tenant, draft).await?;
        Ok(
            json!({"email_id": queued.id.as_str(), "status": queued.status.as_str(), "to": queued.to}),
        )
    }

    // ---- connections ----

    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_connection(
        &self,
        caller: &Caller,
        draft: ConnectionDraft,
    ) -> Result<Connection, AppError> {
        let connection = Connection::create(
            ConnectionId::from_uuid(self.ids.new_uuid()),
            self.clock.now(),
            draft,
        )?;
        let mut tx = self.store.begin_write().await?;
        tx.insert_connection(&caller.tenant, &connection).await?;
        let diff = changes(None, Some(&connection_shape(&connection)));
        let what = Audited::new(
            "connection.created",
            "connection",
            connection.id.as_str(),
            diff,
        );
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(connection)
    }

    pub async fn get_connection(&self, caller: &Caller, id: &str) -> Result<Connection, AppError> {
        let id = connection_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_connection(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("connection", id.as_str()))
    }

    pub async fn list_connections(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Connection>, AppError> {
        let slice = slice_for(&page, &caller.tenant, "connections", "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_connections(&caller.tenant, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            "connections",
            "",
            |c| c.id.to_string(),
        ))
    }

    pub async fn delete_connection(
        &self,
        caller: &Caller,
        id: &str,
    ) -> Result<ConnectionId, AppError> {
        let id = connection_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let before = tx.get_connection(&caller.tenant, &id).await?;
        if !tx.delete_connection(&caller.tenant, &id).await? {
            return Err(AppError::not_found("connection", id.as_str()));
        }
        let diff = changes(before.as_ref().map(connection_shape).as_ref(), None);
        let what = Audited::new("connection.deleted", "connection", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(id)
    }

    // ---- templates ----

    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn create_template(
        &self,
        caller: &Caller,
        draft: TemplateDraft,
    ) -> Result<Template, AppError> {
        let template = Template::create(
            TemplateId::from_uuid(self.ids.new_uuid()),
            self.clock.now(),
            draft,
        )?;
        let mut tx = self.store.begin_write().await?;
        tx.insert_template(&caller.tenant, &template).await?;
        let diff = changes(None, Some(&template_shape(&template)));
        let what = Audited::new("template.created", "template", template.id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(template)
    }

    pub async fn get_template(&self, caller: &Caller, id: &str) -> Result<Template, AppError> {
        let id = template_id(id)?;
        let mut tx = self.store.begin_read().await?;
        tx.get_template(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("template", id.as_str()))
    }

    pub async fn list_templates(
        &self,
        caller: &Caller,
        page: PageParams,
    ) -> Result<Page<Template>, AppError> {
        let slice = slice_for(&page, &caller.tenant, "templates", "")?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_templates(&caller.tenant, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            "templates",
            "",
            |t| t.id.to_string(),
        ))
    }

    pub async fn update_template(
        &self,
        caller: &Caller,
        id: &str,
        patch: TemplatePatch,
    ) -> Result<Template, AppError> {
        let id = template_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let mut template = tx
            .get_template(&caller.tenant, &id)
            .await?
            .ok_or_else(|| AppError::not_found("template", id.as_str()))?;
        let before = template_shape(&template);
        if !template.apply(patch.draft, patch.clear_text, self.clock.now())? {
            return Ok(template);
        }
        match tx.update_template(&caller.tenant, &template).await {
            Err(StoreError::Stale) => {
                return Err(AppError::VersionConflict {
                    current: template.version - 1,
                })
            }
            other => other?,
        }
        let diff = changes(Some(&before), Some(&template_shape(&template)));
        let what = Audited::new("template.updated", "template", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(template)
    }

    /// Deletes a template for good. Rules that name it then record a `not_found` failure when
    /// they run.
    pub async fn delete_template(&self, caller: &Caller, id: &str) -> Result<TemplateId, AppError> {
        let id = template_id(id)?;
        let mut tx = self.store.begin_write().await?;
        let before = tx.get_template(&caller.tenant, &id).await?;
        if !tx.delete_template(&caller.tenant, &id).await? {
            return Err(AppError::not_found("template", id.as_str()));
        }
        let diff = changes(before.as_ref().map(template_shape).as_ref(), None);
        let what = Audited::new("template.deleted", "template", id.as_str(), diff);
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(id)
    }

    // ---- emails ----

    pub async fn list_emails(
        &self,
        caller: &Caller,
        filter: EmailFilter,
        page: PageParams,
    ) -> Result<Page<EmailMessage>, AppError> {
        let fingerprint = format!("{filter:?}");
        let slice = slice_for(&page, &caller.tenant, "emails", &fingerprint)?;
        let mut tx = self.store.begin_read().await?;
        let rows = tx.list_emails(&caller.tenant, &filter, &slice).await?;
        Ok(page_from(
            rows,
            &page,
            &caller.tenant,
            "emails",
            &fingerprint,
            |e| e.id.to_string(),
        ))
    }

    pub async fn get_email(&self, caller: &Caller, id: &str) -> Result<EmailMessage, AppError> {
        let parsed = EmailId::parse(id).map_err(|_| AppError::not_found("email", id))?;
        let mut tx = self.store.begin_read().await?;
        tx.get_email(&caller.tenant, &parsed)
            .await?
            .ok_or_else(|| AppError::not_found("email", id))
    }

    /// One step of the live sending worker: claims up to `batch` due emails (any tenant) with a
    /// lease of `lease_ms`, sends each through its tenant's connection, and records the outcome:
    /// `sent`; or the provider's error, retried after the next wait of `backoff_ms`; or `failed`
    /// when the schedule is used up or the provider refused for good. Returns how many it tried.
    /// An email whose worker dies mid-send is claimed again when the lease expires (at least
    /// once).
    pub async fn deliver_due_emails(
        &self,
        sender: &dyn EmailSender,
        backoff_ms: &[i64],
        batch: u32,
        lease_ms: i64,
    ) -> Result<usize, AppError> {
        let now = self.clock.now();
        let claimed = {
            let mut tx = self.store.begin_write().await?;
            let claimed = tx
                .claim_due_emails(now, now.plus_millis(lease_ms), batch)
                .await?;
            tx.commit().await?;
            claimed
        };
        for (tenant, mut email) in claimed.iter().cloned() {
            let connection = {
                let mut tx = self.store.begin_read().await?;
                tx.email_connection(&tenant).await?
            };
            let outcome = match &connection {
                Some(c) => sender.send(c, &email).await,
                None => Err(SendFailure::Retryable(
                    "the workspace has no email connection (POST /connections)".into(),
                )),
            };
            let at = self.clock.now();
            email.attempts += 1;
            match outcome {
                Ok(provider_id) => {
                    email.status = EmailStatus::Sent;
                    email.provider_message_id = provider_id;
                    email.sent_at = Some(at);
                    email.error = None;
                    email.next_attempt_at = None;
                }
                Err(failure) => {
                    let (message, retry) = match failure {
                        SendFailure::Retryable(m) => (m, true),
                        SendFailure::Permanent(m) => (m, false),
                    };
                    tracing::warn!(email = %email.id, attempt = email.attempts, error = %message, "email delivery failed");
                    email.error = Some(message);
                    match next_attempt(backoff_ms, email.attempts, at).filter(|_| retry) {
                        Some(next) => email.next_attempt_at = Some(next),
                        None => {
                            email.status = EmailStatus::Failed;
                            email.next_attempt_at = None;
                        }
                    }
                }
            }
            let mut tx = self.store.begin_write().await?;
            tx.finish_email_attempt(&tenant, &email).await?;
            tx.commit().await?;
        }
        Ok(claimed.len())
    }
}
