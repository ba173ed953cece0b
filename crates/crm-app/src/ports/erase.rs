//! Erasure (decisions §25): a contact, company or deal removed for good with every trace of its
//! personal data, in the caller's transaction.

use async_trait::async_trait;
use crm_domain::{ObjectKind, Tenant, Timestamp};

use super::StoreError;

/// A record whose reference to the erased one was set to null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearedReference {
    /// `contact`, `company` or `deal`.
    pub object: ObjectKind,
    pub id: String,
    /// The field that pointed at it: `company_id`, `primary_contact_id` or
    /// `custom_fields.<key>`.
    pub field: String,
    /// The record's version after the change.
    pub version: i64,
}

/// What an erasure removed or scrubbed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Erasure {
    /// History entries of the record, scrubbed (`from`/`to` null, `erased: true`).
    pub history_entries: u64,
    /// Activities attached to it alone, deleted.
    pub activities_deleted: u64,
    /// Activities also attached to another record, unlinked from it.
    pub activities_unlinked: u64,
    /// Emails to it (or about it), stripped of `to`, `subject`, `html` and `text`.
    pub emails_scrubbed: u64,
    /// Stored events whose snapshot was the record, now `{"id", "object", "erased": true}`.
    pub events_scrubbed: u64,
    /// Idempotency replays that held it, dropped.
    pub idempotency_replays: u64,
    /// Active sequence enrollments of it, ended (`erased`).
    pub enrollments_ended: u64,
    /// Automation runs about it, dropped.
    pub automation_runs: u64,
    /// Import row errors that quoted it (its id, or a contact's email), dropped.
    pub import_errors: u64,
    /// Contacts, companies and deals that pointed at it.
    pub references: Vec<ClearedReference>,
}

#[async_trait]
pub trait EraseRepo {
    /// Removes the record `id` of `object` (contact, company or deal; soft-deleted or not) from
    /// the tenant for good and scrubs what holds its data, as [`Erasure`] lists, at `now`;
    /// `None` when no such record exists. Records whose reference is cleared get `version` + 1
    /// and `updated_at` = `now`; no event is written. Rolled back, it leaves nothing changed (a
    /// dry run).
    async fn erase_record(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
        now: Timestamp,
    ) -> Result<Option<Erasure>, StoreError>;
}
