//! What every write shares: reference checks, the idempotency result stored inside the write's own
//! transaction, and [`Effects`]: what a write did (the events it emits, the records it changed),
//! collected while it runs and settled by [`App::finish_write`] just before commit.

use std::collections::HashMap;

use crm_domain::{
    history::{field_changes, Author, Change, ChangeAction, FieldChange},
    registry::ReferenceCheck,
    ChangeId, ContactId, DealId, Event, EventId, EventType, ObjectKind, Tenant, Timestamp,
    ValidationError,
};
use serde_json::Value;

use crate::{
    error::AppError,
    idempotency::{IdemClaim, StoredReply},
    ports::{Reference, Referent, Tx},
    App,
};

/// Whether a write tells the world. API writes emit events; batch writes and automation actions
/// are event-silent (spec, Events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    Events,
    Silent,
}

/// A contact or deal: the records events are about and sequences enroll.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RecordRef {
    Contact(ContactId),
    Deal(DealId),
}

impl RecordRef {
    pub fn id(&self) -> &str {
        match self {
            RecordRef::Contact(id) => id.as_str(),
            RecordRef::Deal(id) => id.as_str(),
        }
    }
}

/// An event of this write, not yet in the outbox: its `data` becomes the record as it stands at
/// commit (decisions §11), after the automations it triggers acted.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingEvent {
    pub id: EventId,
    pub event_type: EventType,
    pub record: RecordRef,
    pub created_at: Timestamp,
    /// The record as the client's write left it (what automation conditions see).
    pub data: Value,
    pub changed_fields: Option<Vec<String>>,
    pub previous_stage: Option<Option<String>>,
    /// A merge's survivor event: the records merged into it.
    pub merged_ids: Option<Vec<String>>,
    /// Who made the change: the automations it triggers act for the same request.
    pub author: Author,
}

impl PendingEvent {
    /// The event as it goes to the outbox: its `data` is `at_commit`, the record as automations
    /// left it, when they changed it.
    pub(crate) fn into_event(self, tenant: &Tenant, at_commit: Option<Value>) -> Event {
        Event {
            merged_ids: self.merged_ids,
            id: self.id,
            event_type: self.event_type,
            mode: tenant.mode,
            created_at: self.created_at,
            data: at_commit.unwrap_or(self.data),
            changed_fields: self.changed_fields,
            previous_stage: self.previous_stage,
        }
    }
}

/// A record this write changed (created, updated, deleted or restored), whatever wrote it: an API
/// write, a batch operation or an automation action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedRecord {
    pub record: RecordRef,
    /// Whether the record is (soft-)deleted after the write.
    pub deleted: bool,
}

/// What one write did, collected while it runs.
#[derive(Debug)]
pub struct Effects {
    emit: Emit,
    /// Who makes the changes recorded from now on (history).
    author: Author,
    events: Vec<PendingEvent>,
    changed: Vec<ChangedRecord>,
    /// The history entries of the write, written with its events by [`App::finish_write`].
    history: Vec<Change>,
}

/// A point [`Effects`] can return to when a savepoint rolls back (a failed batch operation or
/// automation action).
#[derive(Debug, Clone, Copy)]
pub struct EffectsMark(usize, usize, usize);

impl Effects {
    pub fn new(emit: Emit, author: Author) -> Effects {
        Effects {
            emit,
            author,
            events: Vec::new(),
            changed: Vec::new(),
            history: Vec::new(),
        }
    }

    pub fn author(&self) -> &Author {
        &self.author
    }

    /// Makes `author` the author of the changes recorded from now on (each automation action).
    pub(crate) fn set_author(&mut self, author: Author) {
        self.author = author;
    }

    /// The history entries recorded so far.
    pub fn history(&self) -> &[Change] {
        &self.history
    }

    /// The history entries, taken out (a write that settles them itself).
    pub(crate) fn take_history(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.history)
    }

    pub fn emits(&self) -> bool {
        self.emit == Emit::Events
    }

    pub fn changed(&mut self, record: RecordRef, deleted: bool) {
        self.changed.push(ChangedRecord { record, deleted });
    }

    pub fn mark(&self) -> EffectsMark {
        EffectsMark(self.events.len(), self.changed.len(), self.history.len())
    }

    pub fn rollback_to(&mut self, mark: EffectsMark) {
        self.events.truncate(mark.0);
        self.changed.truncate(mark.1);
        self.history.truncate(mark.2);
    }

    pub fn events(&self) -> &[PendingEvent] {
        &self.events
    }

    /// Marks the last event as a merge survivor's, naming the records merged into it.
    pub(crate) fn set_merged_ids(&mut self, ids: Vec<String>) {
        if let Some(last) = self.events.last_mut() {
            last.merged_ids = Some(ids);
        }
    }

    /// The events, taken out (the write settles them itself).
    pub(crate) fn take_events(&mut self) -> Vec<PendingEvent> {
        std::mem::take(&mut self.events)
    }

    /// Takes the changes of `other` (an automation action's silent writes).
    pub(crate) fn absorb_changes(&mut self, other: Effects) {
        self.changed.extend(other.changed);
        self.history.extend(other.history);
    }

    /// The changed records, each once, in order of first change, with its last `deleted` state.
    pub fn changed_records(&self) -> Vec<ChangedRecord> {
        let mut out: Vec<ChangedRecord> = Vec::new();
        let mut at: HashMap<&RecordRef, usize> = HashMap::new();
        for c in &self.changed {
            match at.get(&c.record) {
                Some(&i) => out[i].deleted = c.deleted,
                None => {
                    at.insert(&c.record, out.len());
                    out.push(c.clone());
                }
            }
        }
        out
    }
}

/// The records automations changed during a write.
#[derive(Debug, Default)]
pub struct Touched(Vec<RecordRef>);

impl Touched {
    pub fn contains(&self, record: &RecordRef) -> bool {
        self.0.contains(record)
    }
}

/// The references of a write as the store checks them inside the write itself
/// ([`MissingReference`](crate::ports::StoreError::MissingReference) then names one by its index; see [`missing_reference`]).
/// An id whose prefix names no object cannot exist: that is refused here.
pub(crate) fn store_references(refs: &[ReferenceCheck]) -> Result<Vec<Reference<'_>>, AppError> {
    refs.iter()
        .map(|r| match referent(r) {
            Some(referent) => Ok(Reference {
                referent,
                id: &r.id,
            }),
            None => Err(invalid_reference(r)),
        })
        .collect()
}

/// What a reference names, by its id's prefix: a record, a user (an owner), or nothing there
/// can be.
pub(crate) fn referent(r: &ReferenceCheck) -> Option<Referent> {
    if r.names_user() {
        return Some(Referent::User);
    }
    r.object().map(Referent::Record)
}

/// Whether what `referent` names exists with this id (an owner is held against deletion for the
/// rest of the transaction: [`crate::ports::RecordRepo::owner_exists`]).
pub(crate) async fn reference_exists(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    referent: Referent,
    id: &str,
) -> Result<bool, AppError> {
    Ok(match referent {
        Referent::Record(object) => tx.record_exists(tenant, object, id).await?,
        Referent::User => tx.owner_exists(tenant, id).await?,
    })
}

/// The `invalid_reference` error for the reference a store reported missing.
pub(crate) fn missing_reference(refs: &[ReferenceCheck], index: usize) -> AppError {
    match refs.get(index) {
        Some(r) => invalid_reference(r),
        None => AppError::Internal(format!(
            "the store reported reference {index} of {} missing",
            refs.len()
        )),
    }
}

pub(crate) fn invalid_reference(r: &ReferenceCheck) -> AppError {
    ValidationError::InvalidReference {
        field: r.field.clone(),
        value: r.id.clone(),
    }
    .into()
}

/// Fails with `invalid_reference` when a referenced record (or owner) does not exist in the
/// tenant.
pub(crate) async fn check_references(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    refs: &[ReferenceCheck],
) -> Result<(), AppError> {
    for r in refs {
        let exists = match referent(r) {
            Some(referent) => reference_exists(tx, tenant, referent, &r.id).await?,
            None => false,
        };
        if !exists {
            return Err(invalid_reference(r));
        }
    }
    Ok(())
}

/// Writes the reply of a create to its idempotency record, inside the create's transaction,
/// with the operation's success status the claim carries.
pub(crate) async fn finish_in_tx(
    tx: &mut dyn Tx,
    tenant: &Tenant,
    idem: Option<&IdemClaim>,
    body: &Value,
) -> Result<(), AppError> {
    if let Some(claim) = idem {
        let reply = StoredReply {
            status: claim.success_status,
            body: serde_json::to_vec(body).map_err(|e| AppError::Internal(e.to_string()))?,
        };
        tx.finish_idempotency(tenant, &claim.key, &reply).await?;
    }
    Ok(())
}

impl App {
    /// Records a history entry of this write, by its current author (decisions §18, §24): a
    /// create's (`before` `None`) lists every non-null writable field of `after`, an update's
    /// the writable fields that differ; `before` and `after` are the record's bodies. An update
    /// that changed no writable field records nothing.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_change(
        &self,
        fx: &mut Effects,
        object: ObjectKind,
        record_id: &str,
        action: ChangeAction,
        at: Timestamp,
        before: Option<&Value>,
        after: Option<&Value>,
    ) {
        let changes = match after {
            Some(after) => field_changes(before, after),
            None => Vec::new(),
        };
        if action == ChangeAction::Updated && changes.is_empty() {
            return;
        }
        self.record_entry(fx, object, record_id, action, at, changes, None);
    }

    /// Records a history entry with its changes as given.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn record_entry(
        &self,
        fx: &mut Effects,
        object: ObjectKind,
        record_id: &str,
        action: ChangeAction,
        at: Timestamp,
        changes: Vec<FieldChange>,
        merged_ids: Option<Vec<String>>,
    ) {
        let change = Change {
            id: ChangeId::from_uuid(self.ids.new_uuid()),
            object,
            record_id: record_id.to_owned(),
            at,
            action,
            author: fx.author.clone(),
            erased: false,
            changes,
            merged_ids,
        };
        fx.history.push(change);
    }

    /// Records an event of this write, unless the write is silent. It reaches the outbox in
    /// [`App::finish_write`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn emit(
        &self,
        fx: &mut Effects,
        event_type: EventType,
        record: RecordRef,
        now: Timestamp,
        data: Value,
        changed_fields: Option<Vec<String>>,
        previous_stage: Option<Option<String>>,
    ) {
        if fx.emit == Emit::Silent {
            return;
        }
        fx.events.push(PendingEvent {
            id: EventId::from_uuid(self.ids.new_uuid()),
            event_type,
            record,
            created_at: now,
            data,
            changed_fields,
            previous_stage,
            merged_ids: None,
            author: fx.author.clone(),
        });
    }

    /// The one call every write makes before it commits, in its transaction:
    ///
    /// 1. runs the automations the write's events trigger ([`App::run_automations`]): conditions
    ///    see each record as the client's write left it, actions act silently (no events, so
    ///    rules cannot chain) and each in its own savepoint, a failing one recorded on its run;
    /// 2. writes the events to the outbox, each carrying its record as it stands now;
    /// 3. hands sequences the events (enrollment by trigger) and every changed record, whatever
    ///    changed it (exit re-check) — see [`App::sequences_on_events`] and
    ///    [`App::sequences_on_changes`].
    ///
    /// A silent write (batch) has no events, so it runs no automations and enrolls nothing; its
    /// changed records still reach sequences.
    ///
    /// Returns the records automations changed, so the use case can answer with the record as
    /// committed.
    pub(crate) async fn finish_write(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        mut fx: Effects,
    ) -> Result<Touched, AppError> {
        let events = fx.take_events();
        let mut finals: HashMap<RecordRef, Value> = HashMap::new();
        if !events.is_empty() {
            let outcome = self.run_automations(tx, tenant, &events).await?;
            finals = outcome.finals;
            fx.absorb_changes(outcome.effects);
        }
        let written: Vec<Event> = events
            .into_iter()
            .map(|pending| {
                let data = finals.get(&pending.record).cloned();
                pending.into_event(tenant, data)
            })
            .collect();
        let history = fx.take_history();
        tx.insert_events_and_changes(tenant, &written, &history)
            .await?;
        if let Some(dry) = self.dry() {
            self.record_dry_events(tx, tenant, dry, &written).await?;
        }
        if !written.is_empty() {
            self.events_written.notify_waiters();
            self.sequences_on_events(tx, tenant, &written).await?;
        }
        let changed = fx.changed_records();
        if !changed.is_empty() {
            self.sequences_on_changes(tx, tenant, &changed).await?;
        }
        Ok(Touched(finals.into_keys().collect()))
    }

    /// A dry run's events, and the webhooks each would reach ([`crm_domain::webhook::reaches`],
    /// the fan-out's own rule).
    async fn record_dry_events(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        dry: &crate::dry_run::DryRun,
        written: &[Event],
    ) -> Result<(), AppError> {
        let hooks = if written.is_empty() {
            Vec::new()
        } else {
            self.all_webhooks(tx, tenant).await?
        };
        dry.record(|fx| {
            for event in written {
                fx.events.push(crate::dry_run::WouldEmit {
                    event_type: event.event_type,
                    changed_fields: event.changed_fields.clone(),
                });
                for hook in hooks
                    .iter()
                    .filter(|h| h.receives(event.event_type, event.created_at))
                {
                    fx.webhooks.push((hook.id.clone(), event.event_type));
                }
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn contact(n: u128) -> RecordRef {
        RecordRef::Contact(ContactId::from_uuid(Uuid::from_u128(n)))
    }

    #[test]
    fn changed_records_are_listed_once_with_their_last_state() {
        let mut fx = Effects::new(Emit::Silent, Author::system());
        fx.changed(contact(1), false);
        fx.changed(contact(2), false);
        let mark = fx.mark();
        fx.changed(contact(3), false);
        fx.rollback_to(mark);
        fx.changed(contact(1), true);
        let changed = fx.changed_records();
        assert_eq!(
            changed,
            [
                ChangedRecord {
                    record: contact(1),
                    deleted: true
                },
                ChangedRecord {
                    record: contact(2),
                    deleted: false
                }
            ]
        );
    }
}
