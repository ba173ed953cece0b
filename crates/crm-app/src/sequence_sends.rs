//! Sending sequence steps: what a sequence needs of email (templates that exist, a live-mode
//! connection), and [`App::send_due_sequence_steps`], one round of the scheduler worker.
//!
//! A round is one transaction. It locks up to `batch` due enrollments across tenants (rows other
//! rounds hold are skipped: see [`crate::ports::SequenceRepo::lock_due_enrollments`]),
//! then per tenant, inside a savepoint: loads the sequences, recipients and source records of the
//! claimed enrollments in a few queries, re-checks every exit rule right before the send, advances
//! the enrollments still at the step they were claimed at (one statement), and records the email
//! of each advanced step as [`App::queue_email`] does, all of them in two multi-row statements.
//! A step is sent at most once; a process that dies mid-round loses nothing: its transaction rolls
//! back and another round claims the steps again. Nothing is written to claim a step (the locks
//! live as long as the round's transaction).

use std::collections::{HashMap, HashSet};

use crm_domain::{
    mail::{EmailSource, EmailStatus, Template},
    merge::MergeData,
    rule::render_email,
    sequence::{Enrollment, SequenceDef, Step},
    Activity, ActivityId, CompanyId, Contact, ContactId, EnrollmentId, Mode, ObjectKind,
    SequenceId, TemplateId, Tenant, ValidationError,
};
use serde_json::Value;

use crate::{
    emails::{email_activity, EmailDraft},
    error::AppError,
    ports::Tx,
    sequences::exit_reason,
    App,
};

/// The savepoint around one tenant's part of a round.
const TENANT_SAVEPOINT: &str = "sequence_tenant";

const NO_CONNECTION: &str = "a live-mode sequence sends email: POST /connections first";

/// What one scheduler round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendRound {
    /// Enrollments claimed.
    pub claimed: usize,
    /// Steps sent (emails queued or simulated).
    pub sent: usize,
    /// Enrollments ended by a re-check before the send.
    pub exited: usize,
    /// Steps of tenants whose sends failed, held back to be retried later.
    pub held_back: usize,
}

impl App {
    /// A definition's steps name templates that exist, and a live-mode sequence has an email
    /// connection (decisions §17).
    pub(crate) async fn check_sequence_sending(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        def: &SequenceDef,
    ) -> Result<(), AppError> {
        for (i, step) in def.steps.iter().enumerate() {
            if let Some(t) = &step.template_id {
                let found = match TemplateId::parse(t) {
                    Ok(id) => tx.get_template(tenant, &id).await?.is_some(),
                    Err(_) => false,
                };
                if !found {
                    return Err(ValidationError::InvalidReference {
                        field: format!("steps[{i}].template_id"),
                        value: t.clone(),
                    }
                    .into());
                }
            }
        }
        if tenant.mode == Mode::Live && tx.email_connection(tenant).await?.is_none() {
            return Err(ValidationError::invalid("channel", NO_CONNECTION).into());
        }
        Ok(())
    }

    /// The template a step names, if it names one that (still) exists.
    pub(crate) async fn step_template(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        step: &Step,
    ) -> Result<Option<Template>, AppError> {
        match step.template_id.as_deref().map(TemplateId::parse) {
            Some(Ok(id)) => Ok(tx.get_template(tenant, &id).await?),
            _ => Ok(None),
        }
    }

    /// One round of the scheduler, in one transaction: locks up to `batch` due steps, then per
    /// tenant re-checks their exit rules and sends them. A tenant whose sends fail is rolled back
    /// to before its part and its steps are held back for `hold_back_ms` under `holder`'s name,
    /// so the other tenants' steps still go out and the failing ones are retried later. See the
    /// module documentation.
    pub async fn send_due_sequence_steps(
        &self,
        holder: &str,
        batch: u32,
        hold_back_ms: i64,
    ) -> Result<SendRound, AppError> {
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let claimed = tx.lock_due_enrollments(now, batch).await?;
        let mut round = SendRound {
            claimed: claimed.len(),
            ..SendRound::default()
        };
        let mut by_tenant: Vec<(Tenant, Vec<Enrollment>)> = Vec::new();
        for c in claimed {
            match by_tenant.iter_mut().find(|(t, _)| *t == c.tenant) {
                Some((_, list)) => list.push(c.enrollment),
                None => by_tenant.push((c.tenant, vec![c.enrollment])),
            }
        }
        for (tenant, enrollments) in by_tenant {
            let ids: Vec<EnrollmentId> = enrollments.iter().map(|e| e.id.clone()).collect();
            tx.savepoint(TENANT_SAVEPOINT).await?;
            match self.send_claimed_in(&mut *tx, &tenant, enrollments).await {
                Ok((sent, exited)) => {
                    tx.release_savepoint(TENANT_SAVEPOINT).await?;
                    round.sent += sent;
                    round.exited += exited;
                }
                Err(e) => {
                    tracing::error!(workspace = %tenant.workspace_id, mode = tenant.mode.as_str(), steps = ids.len(), error = %e,
                        "sequence sends failed; their steps are retried in {hold_back_ms} ms");
                    tx.rollback_to_savepoint(TENANT_SAVEPOINT).await?;
                    tx.release_savepoint(TENANT_SAVEPOINT).await?;
                    tx.hold_back_enrollments(&tenant, &ids, holder, now.plus_millis(hold_back_ms))
                        .await?;
                    round.held_back += ids.len();
                }
            }
        }
        tx.commit().await?;
        Ok(round)
    }

    async fn send_claimed_in(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        enrollments: Vec<Enrollment>,
    ) -> Result<(usize, usize), AppError> {
        let now = self.clock.now();
        let mut seq_ids: Vec<SequenceId> =
            enrollments.iter().map(|e| e.sequence_id.clone()).collect();
        seq_ids.sort();
        seq_ids.dedup();
        let seqs: HashMap<SequenceId, crm_domain::sequence::Sequence> = tx
            .get_sequences(tenant, &seq_ids)
            .await?
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect();
        // The recipients, read once: a contact-sourced enrollment's source is its recipient.
        let mut contact_ids: Vec<ContactId> =
            enrollments.iter().map(|e| e.contact_id.clone()).collect();
        contact_ids.sort();
        contact_ids.dedup();
        let contacts: HashMap<ContactId, Contact> = tx
            .contacts_by_ids(tenant, &contact_ids)
            .await?
            .into_iter()
            .map(|c| (c.id.clone(), c))
            .collect();
        let sources: Vec<_> = enrollments
            .iter()
            .map(|e| (e.source_object, e.source_id.clone()))
            .collect();
        let snapshots = self
            .source_snapshots(tx, tenant, &sources, &contacts)
            .await?;

        let mut updates: Vec<(Enrollment, u32)> = Vec::with_capacity(enrollments.len());
        // (position in `updates`, step index) of each step to send once the advance holds.
        let mut sends: Vec<(usize, usize)> = Vec::new();
        let mut exits: Vec<EnrollmentId> = Vec::new();
        for mut e in enrollments {
            let before = e.steps_sent;
            let seq = seqs.get(&e.sequence_id);
            let recipient = contacts
                .get(&e.contact_id)
                .filter(|c| c.deleted_at.is_none());
            // The recipient of a deal-sourced enrollment is gone: nothing left to send to.
            let reason = exit_reason(&e, seq, snapshots.get(&e.source_id)).or_else(|| {
                recipient
                    .is_none()
                    .then_some(crm_domain::sequence::ExitReason::SourceDeleted)
            });
            match (reason, seq) {
                (Some(reason), _) => {
                    e.exit(reason, now);
                    exits.push(e.id.clone());
                }
                (None, Some(seq)) => {
                    let index = before as usize;
                    if index < seq.def.steps.len() {
                        sends.push((updates.len(), index));
                    }
                    e.step_sent(&seq.def.steps, now);
                }
                (None, None) => unreachable!("exit_reason ends enrollments without a sequence"),
            }
            updates.push((e, before));
        }
        let advanced: HashSet<EnrollmentId> = tx
            .advance_claimed_enrollments(tenant, &updates)
            .await?
            .into_iter()
            .collect();
        let exited = exits.iter().filter(|id| advanced.contains(*id)).count();
        let mut companies: HashMap<CompanyId, Option<Value>> = HashMap::new();
        let mut templates: HashMap<String, Option<Template>> = HashMap::new();
        let mut drafts: Vec<(EmailDraft, Option<String>)> = Vec::with_capacity(sends.len());
        for (at, index) in sends {
            let (e, _) = &updates[at];
            if !advanced.contains(&e.id) {
                continue;
            }
            let seq = &seqs[&e.sequence_id];
            let step = &seq.def.steps[index];
            let contact = &contacts[&e.contact_id];
            let Some(to) = contact.email.as_ref().map(|m| m.as_str().to_owned()) else {
                continue;
            };
            let template = match &step.template_id {
                Some(t) => {
                    if !templates.contains_key(t) {
                        let found = self.step_template(tx, tenant, step).await?;
                        templates.insert(t.clone(), found);
                    }
                    templates[t].clone()
                }
                None => None,
            };
            let (subject, body, text) = match (&template, &step.subject, &step.body) {
                (Some(t), s, b) => (
                    s.clone().unwrap_or_else(|| t.subject.clone()),
                    b.clone().unwrap_or_else(|| t.body.clone()),
                    step.text.clone().or_else(|| t.text.clone()),
                ),
                (None, Some(s), Some(b)) => (s.clone(), b.clone(), step.text.clone()),
                // The step's template was deleted after the sequence was made: nothing can be sent,
                // and the step is recorded as a failed email so the loss is visible.
                _ => {
                    let failure = format!(
                        "step {} names template {} which no longer exists",
                        index + 1,
                        step.template_id.as_deref().unwrap_or("-")
                    );
                    tracing::warn!(sequence = %seq.id, step = index + 1, "{failure}");
                    let draft = EmailDraft {
                        to,
                        subject: step.subject.clone().unwrap_or_default(),
                        html: String::new(),
                        text: String::new(),
                        source: EmailSource::Sequence {
                            sequence_id: seq.id.to_string(),
                            step: index as u32 + 1,
                        },
                        contact_id: Some(contact.id.clone()),
                        deal_id: match e.source_object {
                            crm_domain::sequence::SourceObject::Deal => {
                                crm_domain::DealId::parse(&e.source_id).ok()
                            }
                            crm_domain::sequence::SourceObject::Contact => None,
                        },
                    };
                    drafts.push((draft, Some(failure)));
                    continue;
                }
            };
            let record = self.views.contact(contact);
            let company = match &contact.company_id {
                Some(cid)
                    if [&subject, &body].iter().any(|t| t.contains("company."))
                        || text.as_deref().is_some_and(|t| t.contains("company.")) =>
                {
                    if !companies.contains_key(cid) {
                        let c = tx
                            .get_company(tenant, cid)
                            .await?
                            .map(|c| self.views.company(&c));
                        companies.insert(cid.clone(), c);
                    }
                    companies[cid].clone()
                }
                _ => None,
            };
            let data = MergeData {
                record: Some(&record),
                company: company.as_ref(),
                previous_stage: None,
            };
            let (subject, html, text) = render_email(&subject, &body, text.as_deref(), &data);
            let deal_id = match e.source_object {
                crm_domain::sequence::SourceObject::Deal => {
                    crm_domain::DealId::parse(&e.source_id).ok()
                }
                crm_domain::sequence::SourceObject::Contact => None,
            };
            let draft = EmailDraft {
                to,
                subject,
                html,
                text,
                source: EmailSource::Sequence {
                    sequence_id: seq.id.to_string(),
                    step: index as u32 + 1,
                },
                contact_id: Some(contact.id.clone()),
                deal_id,
            };
            drafts.push((draft, None));
        }
        let sent = self.queue_step_emails(tx, tenant, drafts).await?;
        Ok((sent, exited))
    }

    /// [`App::queue_email`] for many emails at once: the connection and the activity registry are
    /// read once and the emails and their `email` activities written in multi-row statements. The
    /// recipients and deals were read in this transaction, so their references hold. A step that
    /// cannot be sent (its template was deleted, a live tenant has no email connection any more,
    /// the address is not valid) is recorded as a `failed` email with the reason, without an
    /// activity, rather than stalling every step of the tenant or vanishing. Returns how many
    /// emails were recorded.
    async fn queue_step_emails(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        drafts: Vec<(EmailDraft, Option<String>)>,
    ) -> Result<usize, AppError> {
        if drafts.is_empty() {
            return Ok(0);
        }
        let connection = tx.email_connection(tenant).await?;
        // Cached, as for any activity create: a statement less per tenant in every round.
        let registry = self.registry(tx, tenant, ObjectKind::Activity).await?;
        let now = self.clock.now();
        let mut emails = Vec::with_capacity(drafts.len());
        let mut activities = Vec::with_capacity(drafts.len());
        for (draft, failure) in drafts {
            let email = match failure {
                Some(reason) => self.failed_email(tenant, connection.as_ref(), draft, reason),
                None => match self.prepare_email(tenant, connection.as_ref(), draft.clone()) {
                    Ok(email) => email,
                    Err(AppError::Validation(v)) => {
                        tracing::warn!(workspace = %tenant.workspace_id, error = %v, "sequence step not sent");
                        self.failed_email(tenant, connection.as_ref(), draft, v.to_string())
                    }
                    Err(other) => return Err(other),
                },
            };
            if email.status != EmailStatus::Failed {
                if let Some(draft) = email_activity(&email) {
                    let (activity, _refs) = Activity::create(
                        ActivityId::from_uuid(self.ids.new_uuid()),
                        now,
                        draft,
                        &registry,
                    )?;
                    activities.push(activity);
                }
            }
            emails.push(email);
        }
        tx.insert_step_emails(tenant, &emails, &activities).await?;
        Ok(emails.len())
    }
}
