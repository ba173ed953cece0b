//! Idempotency records.

use async_trait::async_trait;
use crm_domain::{Tenant, Timestamp};

use super::StoreError;

/// A request's stored outcome: what a replay answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredReply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// An idempotency record: a claim while its request runs, its outcome once it finished.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdemRecord {
    pub key: String,
    /// Hash of method, path and canonical body: "the same request".
    pub fingerprint: String,
    pub reply: Option<StoredReply>,
    pub created_at: Timestamp,
    pub locked_until: Timestamp,
    /// Read back: whether the process that wrote the record still runs (see
    /// [`IdempotencyRepo::get_idempotency`]). Ignored on writes, which record the writing process.
    pub owner_alive: bool,
}

/// Idempotency records (decisions §9). A record without a reply is a claim: a request is running
/// under its key. A claim belongs to the process that wrote it, through a database session (or,
/// on SQLite, a lock) that lives exactly as long as that process, so that a retry after the
/// process died need not wait out the claim's lease.
#[async_trait]
pub trait IdempotencyRepo {
    /// Inserts a new in-flight record unless one exists for (tenant, key); returns whether it did.
    /// The record MUST name this process as its owner (`record.owner_alive` is ignored).
    async fn insert_idempotency(
        &mut self,
        tenant: &Tenant,
        record: &IdemRecord,
    ) -> Result<bool, StoreError>;
    /// The record for (tenant, key). In a write transaction it MUST lock the record against
    /// other writers until commit, so that two requests never both take over one claim.
    ///
    /// `owner_alive` MUST be false once the process that wrote a claim is gone, however it ended
    /// (`SIGKILL` included), within a second and without waiting for the claim's lease; it MUST
    /// be true while that process runs, whichever process asks (several processes sharing one
    /// database included). Where a store cannot tell (a record written before owners were
    /// recorded), it is true and the lease decides.
    async fn get_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<IdemRecord>, StoreError>;
    /// Replaces the record for (tenant, record.key), this process becoming its owner.
    async fn put_idempotency(
        &mut self,
        tenant: &Tenant,
        record: &IdemRecord,
    ) -> Result<(), StoreError>;
    async fn delete_idempotency(&mut self, tenant: &Tenant, key: &str) -> Result<(), StoreError>;
    /// Stores the outcome of the request holding `key` and marks it finished.
    async fn finish_idempotency(
        &mut self,
        tenant: &Tenant,
        key: &str,
        reply: &StoredReply,
    ) -> Result<(), StoreError>;
}
