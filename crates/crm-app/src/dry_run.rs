//! Dry runs (decisions §18, §24 "Dry run, corrected"): a write runs in full, through the same use
//! case as the real one, in a transaction that [`Tx::commit`] rolls back instead of committing.
//!
//! [`App::dry_run`] gives the same application with two differences, so that no use case needs a
//! dry-run branch of its own: its store's write transactions are dry ([`DryRunStore`]:
//! [`Tx::roll_back_at_commit`] on each), and it carries a [`DryRun`] recorder that the write path
//! fills where the effects happen ([`App::finish_write`]: events and the webhooks they reach;
//! [`App::run_automations`]: each evaluation and its actions' outcomes; the sequence hooks:
//! enrollments and exits; [`App::queue_email`]: emails). Contact creates are never grouped and
//! never take the one-statement path, and no outbox signal is given. Nothing reaches another
//! transaction: no idempotency record (the entry point neither reads nor claims keys for a dry
//! run), no configuration change announced, no cache kept from what the dry transaction wrote.

use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use crm_domain::{
    rule::ActionOutcome,
    sequence::{Enrollment, ExitReason},
    AutomationId, ContactId, EnrollmentId, EventType, SequenceId, WebhookId,
};

use crate::{
    ports::{ConfigEvents, NoOutboxSignal, Store, StoreError, Tx},
    App,
};

/// An event the write would emit.
#[derive(Debug, Clone, PartialEq)]
pub struct WouldEmit {
    pub event_type: EventType,
    pub changed_fields: Option<Vec<String>>,
}

/// An automation the write's events trigger, evaluated: whether it matched, and for a matched one
/// each action's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct WouldRun {
    pub id: AutomationId,
    pub name: String,
    pub matched: bool,
    pub actions: Vec<ActionOutcome>,
}

/// Everything a dry run's write would have done beyond its own result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DryRunEffects {
    pub events: Vec<WouldEmit>,
    pub automations: Vec<WouldRun>,
    /// (sequence, contact) of each enrollment the write would start.
    pub enrollments: Vec<(SequenceId, ContactId)>,
    /// (sequence, contact, reason) of each enrollment the write would end.
    pub exits: Vec<(SequenceId, ContactId, ExitReason)>,
    /// (webhook, event type) of each delivery the write's events would queue.
    pub webhooks: Vec<(WebhookId, EventType)>,
    /// (to, subject) of each email the write would send at once.
    pub emails: Vec<(String, String)>,
}

/// The recorder of one dry run, filled by the write path of [`App::dry_run`]'s application.
#[derive(Debug, Default)]
pub struct DryRun(Mutex<DryRunEffects>);

impl DryRun {
    fn lock(&self) -> MutexGuard<'_, DryRunEffects> {
        // A panic while recording leaves plain data behind: still readable.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds to what was recorded.
    pub(crate) fn record(&self, f: impl FnOnce(&mut DryRunEffects)) {
        f(&mut self.lock());
    }

    /// How many emails were recorded: an automation action that fails returns to it.
    pub(crate) fn emails_mark(&self) -> usize {
        self.lock().emails.len()
    }

    pub(crate) fn emails_rollback(&self, mark: usize) {
        self.lock().emails.truncate(mark);
    }

    /// What the write would have done.
    pub fn effects(&self) -> DryRunEffects {
        self.lock().clone()
    }
}

/// A store whose write transactions are dry runs: each rolls back at `commit`.
struct DryRunStore(Arc<dyn Store>);

#[async_trait]
impl Store for DryRunStore {
    async fn begin_write(&self) -> Result<Box<dyn Tx>, StoreError> {
        let mut tx = self.0.begin_write().await?;
        tx.roll_back_at_commit();
        Ok(tx)
    }

    async fn begin_read(&self) -> Result<Box<dyn Tx>, StoreError> {
        self.0.begin_read().await
    }

    // `insert_contact_alone` keeps the trait's default: a dry write transaction of its own.

    async fn ping(&self) -> Result<(), StoreError> {
        self.0.ping().await
    }

    async fn follow_config_changes(&self, _: Arc<dyn ConfigEvents>) {
        // A dry run's application never follows the feed; the real one does.
    }
}

impl App {
    /// The same application for one dry run, and the recorder its write path fills.
    pub fn dry_run(&self) -> (App, Arc<DryRun>) {
        let recorder = Arc::new(DryRun::default());
        let app = App {
            store: Arc::new(DryRunStore(self.store.clone())),
            create_groups: crate::create_groups::CreateGroups::default(),
            events_written: Arc::new(NoOutboxSignal),
            dry_run: Some(recorder.clone()),
            ..self.clone()
        };
        (app, recorder)
    }

    /// The recorder, when this application runs a dry run.
    pub(crate) fn dry(&self) -> Option<&DryRun> {
        self.dry_run.as_deref()
    }

    /// A dry run's enrollments: those of `enrollments` the store `inserted`.
    pub(crate) fn record_dry_enrollments(
        &self,
        enrollments: &[Enrollment],
        inserted: &[EnrollmentId],
    ) {
        if let Some(dry) = self.dry() {
            dry.record(|fx| {
                fx.enrollments.extend(
                    enrollments
                        .iter()
                        .filter(|e| inserted.contains(&e.id))
                        .map(|e| (e.sequence_id.clone(), e.contact_id.clone())),
                )
            });
        }
    }

    /// A dry run's exits: the enrollments that ended.
    pub(crate) fn record_dry_exits(&self, ended: &[Enrollment]) {
        if let Some(dry) = self.dry() {
            dry.record(|fx| {
                fx.exits.extend(ended.iter().filter_map(|e| {
                    e.exit_reason
                        .map(|r| (e.sequence_id.clone(), e.contact_id.clone(), r))
                }))
            });
        }
    }
}
