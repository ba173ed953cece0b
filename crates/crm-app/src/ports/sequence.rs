//! The store ports of sequences and their enrollments. Part of [`crate::ports::Tx`]; every method
//! documents its contract and the conformance suite checks it on each store.

use async_trait::async_trait;
use crm_domain::{
    mail::EmailMessage,
    sequence::{Enrollment, ExitReason, Sequence},
    Activity, Contact, ContactId, Deal, DealId, EnrollmentId, EventType, SequenceId, Tenant,
    Timestamp,
};

use super::{Slice, StoreError};

/// An enrollment the scheduler claimed (locked for its transaction), with its tenant.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimedEnrollment {
    pub tenant: Tenant,
    pub enrollment: Enrollment,
}

#[async_trait]
pub trait SequenceRepo {
    async fn insert_sequence(
        &mut self,
        tenant: &Tenant,
        sequence: &Sequence,
    ) -> Result<(), StoreError>;
    /// Locked for update in a write transaction (Postgres).
    async fn get_sequence(
        &mut self,
        tenant: &Tenant,
        id: &SequenceId,
    ) -> Result<Option<Sequence>, StoreError>;
    /// The sequences among `ids` that exist (any order).
    async fn get_sequences(
        &mut self,
        tenant: &Tenant,
        ids: &[SequenceId],
    ) -> Result<Vec<Sequence>, StoreError>;
    /// Writes every field; MUST return `Stale` unless the stored row is at `version - 1`.
    async fn update_sequence(
        &mut self,
        tenant: &Tenant,
        sequence: &Sequence,
    ) -> Result<(), StoreError>;
    /// Deletes the sequence (its enrollments stay, as history); returns whether it existed.
    async fn delete_sequence(
        &mut self,
        tenant: &Tenant,
        id: &SequenceId,
    ) -> Result<bool, StoreError>;
    /// Newest first.
    async fn list_sequences(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Sequence>, StoreError>;
    /// The enabled sequences triggered by any of `events`, oldest first. Called by every write
    /// that emits events: one query over an index led by the tenant.
    async fn triggered_sequences(
        &mut self,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Sequence>, StoreError>;
    /// How many sequences the tenant has (the plan cap).
    async fn count_sequences(&mut self, tenant: &Tenant) -> Result<u64, StoreError>;

    /// Inserts enrollments in one statement where the backend allows; an enrollment whose
    /// (sequence, contact) pair exists already — in any state — is skipped, as is a repeat within
    /// `enrollments`. Returns the ids of those inserted.
    async fn insert_enrollments(
        &mut self,
        tenant: &Tenant,
        enrollments: &[Enrollment],
    ) -> Result<Vec<EnrollmentId>, StoreError>;
    /// One enrollment of one sequence (locked for update in a write transaction).
    async fn get_enrollment(
        &mut self,
        tenant: &Tenant,
        sequence: &SequenceId,
        id: &EnrollmentId,
    ) -> Result<Option<Enrollment>, StoreError>;
    /// The enrollments of a sequence, newest first.
    async fn list_enrollments(
        &mut self,
        tenant: &Tenant,
        sequence: &SequenceId,
        slice: &Slice,
    ) -> Result<Vec<Enrollment>, StoreError>;
    /// Active enrollments whose source record is one of `source_ids` (locked for update in a
    /// write transaction). Called by every write that changed contacts or deals: one query over
    /// an index of active enrollments led by the tenant.
    async fn active_enrollments_by_source(
        &mut self,
        tenant: &Tenant,
        source_ids: &[String],
    ) -> Result<Vec<Enrollment>, StoreError>;
    /// Of `contacts`, those already enrolled (in any state) in `sequence`.
    async fn enrolled_contacts(
        &mut self,
        tenant: &Tenant,
        sequence: &SequenceId,
        contacts: &[ContactId],
    ) -> Result<Vec<ContactId>, StoreError>;
    /// Writes state, exit reason, steps sent, next send time and times of each enrollment, and
    /// ends any hold-back.
    async fn update_enrollments(
        &mut self,
        tenant: &Tenant,
        enrollments: &[Enrollment],
    ) -> Result<(), StoreError>;
    /// Ends every active enrollment of a sequence with `reason`; returns how many.
    async fn end_sequence_enrollments(
        &mut self,
        tenant: &Tenant,
        sequence: &SequenceId,
        reason: ExitReason,
        now: Timestamp,
    ) -> Result<u64, StoreError>;

    /// Scheduler, across tenants: up to `limit` active enrollments whose next step is due by
    /// `now` and that are not held back (see [`SequenceRepo::hold_back_enrollments`]), earliest
    /// due first, locked until this transaction ends. A concurrent transaction never gets an
    /// enrollment this one holds (Postgres: `FOR UPDATE SKIP LOCKED`; SQLite: its one writer), so
    /// a step is sent at most once, and nothing is written to claim them: a process that dies
    /// mid-round releases its steps with its transaction.
    async fn lock_due_enrollments(
        &mut self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<ClaimedEnrollment>, StoreError>;
    /// Scheduler: keeps `ids` from being claimed until `until`, recording `holder` (the process
    /// that held them back): what a round does with a tenant whose sends failed, so that its steps
    /// are retried later instead of blocking every round. Any write of the enrollment's state ends it.
    async fn hold_back_enrollments(
        &mut self,
        tenant: &Tenant,
        ids: &[EnrollmentId],
        holder: &str,
        until: Timestamp,
    ) -> Result<(), StoreError>;
    /// Scheduler: writes each enrollment's new state (as `update_enrollments`) only where the row
    /// is still active and still at `sent_before` steps sent — that is, nobody else advanced or
    /// ended it meanwhile. Returns the ids written; a step is sent only for those.
    async fn advance_claimed_enrollments(
        &mut self,
        tenant: &Tenant,
        updates: &[(Enrollment, u32)],
    ) -> Result<Vec<EnrollmentId>, StoreError>;

    /// Scheduler: inserts the emails of a round's steps and their `email` activities, in
    /// multi-row statements (the rows `insert_email` and `insert_activity` write, many at once).
    async fn insert_step_emails(
        &mut self,
        tenant: &Tenant,
        emails: &[EmailMessage],
        activities: &[Activity],
    ) -> Result<(), StoreError>;

    /// Contacts among `ids` (soft-deleted included), any order, in one query.
    async fn contacts_by_ids(
        &mut self,
        tenant: &Tenant,
        ids: &[ContactId],
    ) -> Result<Vec<Contact>, StoreError>;
    /// Deals among `ids` (soft-deleted included), any order, in one query.
    async fn deals_by_ids(
        &mut self,
        tenant: &Tenant,
        ids: &[DealId],
    ) -> Result<Vec<Deal>, StoreError>;
}
