//! The two entry points sequences have into every write, called by [`App::finish_write`] inside
//! the write's transaction, after automations acted and the events reached the outbox.
//!
//! Sequences are built on top of this seam; until then both hooks have nothing to do.

use crm_domain::{Event, Tenant};

use crate::{error::AppError, ports::Tx, write::ChangedRecord, App};

impl App {
    /// "These events happened": enrollment by trigger. Called once per write that emitted events
    /// (API writes of contacts and deals; never for batch writes or automation actions, which are
    /// event-silent), with the events in creation order, each carrying its record as it stands at
    /// commit. Enrolling here keeps enrollment in the triggering write's transaction.
    pub(crate) async fn sequences_on_events(
        &self,
        _tx: &mut dyn Tx,
        _tenant: &Tenant,
        _events: &[Event],
    ) -> Result<(), AppError> {
        Ok(())
    }

    /// "These records changed or were deleted": the exit re-check of enrollments (spec,
    /// "Sequence", rules 6 and 7). Called once per write that changed a contact or deal, whatever
    /// wrote it: API writes, batch operations (which emit nothing) and automation actions. Each
    /// record is listed once, with whether it is deleted after the write.
    pub(crate) async fn sequences_on_changes(
        &self,
        _tx: &mut dyn Tx,
        _tenant: &Tenant,
        _changed: &[ChangedRecord],
    ) -> Result<(), AppError> {
        Ok(())
    }
}
