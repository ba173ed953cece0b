//! Erasure (decisions §25): a contact, company or deal removed for good, with what holds its
//! personal data scrubbed, in one transaction: its history keeps its shape with every value
//! null, activities attached to it alone go, emails to it lose their address and content, event
//! snapshots of it become `{"id", "object", "erased": true}`, idempotency replays and import row
//! errors holding it and its automation runs are dropped, its enrollments end (`erased`), and references to it become
//! null (each such record gets a history entry by `system`, `via: direct`). No event is written,
//! so webhooks receive nothing. The erasure itself is audited. A dry run performs the same in
//! its transaction and rolls it back, so its counts are exactly what the erasure would do.

use crm_domain::{
    history::{Author, Change, ChangeAction, FieldChange, Via},
    ChangeId, ObjectKind, Timestamp,
};
use serde_json::{json, Value};

use crate::{
    audit::Audited,
    auth::{Caller, Scope},
    error::AppError,
    ports::{ClearedReference, Erasure},
    App,
};

impl App {
    /// Erases the record `id` of `object` (contact, company or deal; soft-deleted ones too) for
    /// the caller, who needs the `erase` scope beside the object's `:write`. 404 when no such
    /// record exists. A dry run is the generic one: this erasure in a transaction that rolls
    /// back at commit.
    #[tracing::instrument(level = "debug", skip_all, err(level = "debug"))]
    pub async fn erase_record(
        &self,
        caller: &Caller,
        object: ObjectKind,
        id: &str,
    ) -> Result<Erasure, AppError> {
        caller.require(Scope::write("erase"))?;
        let now = self.clock.now();
        let mut tx = self.store.begin_write().await?;
        let erasure = tx
            .erase_record(&caller.tenant, object, id, now)
            .await?
            .ok_or_else(|| AppError::not_found(object.as_str(), id))?;
        let changes = self.cleared_reference_changes(caller, &erasure.references, id, now);
        tx.insert_changes(&caller.tenant, &changes).await?;
        let what = Audited::new(
            match object {
                ObjectKind::Contact => "contact.erased",
                ObjectKind::Company => "company.erased",
                _ => "deal.erased",
            },
            object.as_str(),
            id,
            Vec::new(),
        );
        self.audit(&mut tx, caller, what).await?;
        tx.commit().await?;
        Ok(erasure)
    }

    /// The history entries of records whose reference to `id` the system set to null (an
    /// erased record, a deleted owner): by `system`, `via: direct`, in the caller's request.
    pub(crate) fn cleared_reference_changes(
        &self,
        caller: &Caller,
        cleared: &[ClearedReference],
        id: &str,
        now: Timestamp,
    ) -> Vec<Change> {
        let author = Author {
            request_id: caller.author(Via::Direct).request_id,
            ..Author::system()
        };
        cleared
            .iter()
            .map(|r| Change {
                id: ChangeId::from_uuid(self.ids.new_uuid()),
                object: r.object,
                record_id: r.id.clone(),
                at: now,
                action: ChangeAction::Updated,
                author: author.clone(),
                changes: vec![FieldChange {
                    field: r.field.clone(),
                    from: json!(id),
                    to: Value::Null,
                }],
                merged_ids: None,
                erased: false,
            })
            .collect()
    }
}
