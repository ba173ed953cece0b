//! The two entry points sequences have into every write, called by [`App::finish_write`] inside
//! the write's transaction, after automations acted and the events reached the outbox.

use std::collections::HashMap;

use crm_domain::{
    sequence::{self, Enrollment},
    ContactId, EnrollmentId, Event, EventType, Tenant,
};

use crate::{error::AppError, ports::Tx, sequences::reachable, write::ChangedRecord, App};

impl App {
    /// "These events happened": enrollment by trigger. Called once per write that emitted events
    /// (API writes of contacts and deals; never for batch writes or automation actions, which are
    /// event-silent), with the events in creation order, each carrying its record as it stands at
    /// commit. Enrolling here keeps enrollment in the triggering write's transaction.
    ///
    /// One query finds the tenant's enabled sequences for these event types (none: done). A
    /// record enrolls when it meets the sequence's filter and not its exit conditions and has a
    /// recipient with an email (a deal: its primary contact); the enrollment is skipped when the
    /// contact was ever enrolled in that sequence (at most once per sequence, spec rule 5).
    pub(crate) async fn sequences_on_events(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        events: &[Event],
    ) -> Result<(), AppError> {
        let mut types: Vec<EventType> = events.iter().map(|e| e.event_type).collect();
        types.sort_by_key(|t| t.as_str());
        types.dedup();
        let seqs = self.triggered_sequences(tx, tenant, &types).await?;
        if seqs.is_empty() {
            return Ok(());
        }
        let mut wanted: Vec<(usize, ContactId, String)> = Vec::new();
        for event in events {
            for (i, seq) in seqs.iter().enumerate() {
                if !seq.enrolls(event.event_type, &event.data) {
                    continue;
                }
                let object = seq.def.source_object();
                let Some(contact) = sequence::recipient(object, &event.data) else {
                    continue;
                };
                let Some(source) = event.data.get("id").and_then(|v| v.as_str()) else {
                    continue;
                };
                wanted.push((i, contact, source.to_owned()));
            }
        }
        if wanted.is_empty() {
            return Ok(());
        }
        let ids: Vec<ContactId> = wanted.iter().map(|(_, c, _)| c.clone()).collect();
        let contacts: HashMap<ContactId, crm_domain::Contact> = tx
            .contacts_by_ids(tenant, &ids)
            .await?
            .into_iter()
            .map(|c| (c.id.clone(), c))
            .collect();
        let now = self.clock.now();
        let enrollments: Vec<Enrollment> = wanted
            .into_iter()
            .filter(|(_, c, _)| reachable(contacts.get(c)))
            .map(|(i, c, source)| {
                let seq = &seqs[i];
                Enrollment::start(
                    EnrollmentId::from_uuid(self.ids.new_uuid()),
                    seq,
                    c,
                    seq.def.source_object(),
                    source,
                    now,
                )
            })
            .collect();
        let inserted = tx.insert_enrollments(tenant, &enrollments).await?;
        self.record_dry_enrollments(&enrollments, &inserted);
        Ok(())
    }

    /// "These records changed or were deleted": the exit re-check of enrollments (spec,
    /// "Sequence", rules 6 and 7). Called once per write that changed a contact or deal, whatever
    /// wrote it: API writes, batch operations (which emit nothing) and automation actions. Each
    /// record is listed once, with whether it is deleted after the write.
    ///
    /// One query finds the active enrollments whose source is among the records (none: done;
    /// no query at all when the tenant has no sequence);
    /// those whose source is deleted end with `source_deleted`, those whose source now meets the
    /// sequence's exit conditions with `exit_condition`.
    pub(crate) async fn sequences_on_changes(
        &self,
        tx: &mut dyn Tx,
        tenant: &Tenant,
        changed: &[ChangedRecord],
    ) -> Result<(), AppError> {
        if !self.tenant_has_sequences(tx, tenant).await? {
            return Ok(());
        }
        let ids: Vec<String> = changed.iter().map(|c| c.record.id().to_owned()).collect();
        let active = tx.active_enrollments_by_source(tenant, &ids).await?;
        self.recheck_enrollments(tx, tenant, active, self.clock.now())
            .await?;
        Ok(())
    }
}
