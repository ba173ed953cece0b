//! Bulk imports: the import rows, the file kept in chunks until the import ends, the row errors,
//! and the workers' claims under a lease.

use async_trait::async_trait;
use crm_domain::{import::Import, ImportId, Tenant, Timestamp};
use serde_json::Value;

use super::{Slice, StoreError};

/// A stored piece of an import's file: whole CSV records (no header), the first being CSV
/// record `first_row` of the file (the header is row 1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportChunk {
    pub seq: i64,
    pub first_row: i64,
    pub row_count: i64,
    pub data: Vec<u8>,
}

/// A row that failed: its CSV record number and its problem document (as the use cases hand it
/// over, without its `type` URL).
#[derive(Debug, Clone, PartialEq)]
pub struct ImportError {
    pub row: i64,
    pub problem: Value,
}

#[async_trait]
pub trait ImportRepo {
    /// Inserts `import` as it is. MUST return `Duplicate` when its `idempotency_key` is set and
    /// another import of the tenant holds that key, leaving the transaction usable.
    async fn insert_import(&mut self, tenant: &Tenant, import: &Import) -> Result<(), StoreError>;
    /// Stores `chunk` of the import `id`'s file.
    async fn insert_import_chunk(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        chunk: &ImportChunk,
    ) -> Result<(), StoreError>;
    /// The import `id` of the tenant, in any status.
    async fn get_import(&mut self, tenant: &Tenant, id: &str)
        -> Result<Option<Import>, StoreError>;
    /// The import holding `key` as its idempotency key.
    async fn get_import_by_key(
        &mut self,
        tenant: &Tenant,
        key: &str,
    ) -> Result<Option<Import>, StoreError>;
    /// The tenant's imports newest first, as `slice` says, except those still receiving their
    /// file.
    async fn list_imports(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Import>, StoreError>;
    /// Writes `import`'s status, counts, chunk counters, error, malformed row, idempotency key,
    /// fingerprint and finish time. MUST return `Duplicate` as [`ImportRepo::insert_import`]
    /// does for the key.
    async fn update_import(&mut self, tenant: &Tenant, import: &Import) -> Result<(), StoreError>;
    /// Cancels the import `id` if it is `queued` or `running`: sets only its status, finish time
    /// and claim (never the counts a worker's chunk may be committing), waiting for a chunk's
    /// transaction that holds the row. Returns whether it was cancelled.
    async fn cancel_import(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        at: Timestamp,
    ) -> Result<bool, StoreError>;
    /// The stored chunk `seq` of the import `id`, if it is still kept.
    async fn get_import_chunk(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        seq: i64,
    ) -> Result<Option<ImportChunk>, StoreError>;
    /// Drops the import's stored chunks up to and including `seq` (all of them when `None`,
    /// with the keys of [`ImportRepo::insert_import_keys`]); returns how many chunks were dropped.
    async fn delete_import_chunks(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        upto: Option<i64>,
    ) -> Result<u64, StoreError>;
    /// Records dedupe keys (normalised emails or domains) a dry run of the import `id` would
    /// have written, so that later chunks see them; a key already recorded stays once.
    async fn insert_import_keys(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        keys: &[String],
    ) -> Result<(), StoreError>;
    /// Those of `keys` recorded for the import `id`, in any order, read in one statement.
    async fn import_keys_among(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        keys: &[String],
    ) -> Result<Vec<String>, StoreError>;
    /// Deletes the import `id`, its chunks, its keys and its errors (an upload that failed).
    async fn delete_import(&mut self, tenant: &Tenant, id: &ImportId) -> Result<(), StoreError>;
    /// Records row errors of the import `id`. A row already recorded keeps its first error.
    async fn insert_import_errors(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        errors: &[ImportError],
    ) -> Result<(), StoreError>;
    /// The import's row errors in row order, after row `after` (from the start when `None`), at
    /// most `limit`.
    async fn list_import_errors(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<ImportError>, StoreError>;
    /// Claims one import of any tenant that is `queued`, or `running` with its lease ended
    /// before `now` (a worker that stopped): sets it `running` with `claim_token` until
    /// `lease_until`, and returns it. Two concurrent claims MUST NOT return the same import
    /// (`FOR UPDATE SKIP LOCKED` on Postgres; the single writer on SQLite).
    async fn claim_import(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
        claim_token: &str,
    ) -> Result<Option<(Tenant, Import)>, StoreError>;
    /// Claims the import `id` of `tenant` as [`ImportRepo::claim_import`] would claim it (when it
    /// is queued, or running under a lease that ended before `now`); `None` otherwise.
    async fn claim_import_by_id(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        now: Timestamp,
        lease_until: Timestamp,
        claim_token: &str,
    ) -> Result<Option<Import>, StoreError>;
    /// Extends the claim `claim_token` on the import `id` to `lease_until` and locks its row
    /// for the rest of the transaction; MUST return `false`, changing nothing, when the import
    /// is no longer `running` under that token (cancelled, or claimed by another after the
    /// lease ended).
    async fn renew_import_claim(
        &mut self,
        tenant: &Tenant,
        id: &ImportId,
        claim_token: &str,
        lease_until: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Housekeeping across tenants: deletes the errors of imports finished before
    /// `errors_before`, and imports still receiving (with their chunks) created before
    /// `receiving_before` (uploads cut off by a stopped process). Returns how many rows went.
    async fn purge_imports(
        &mut self,
        errors_before: Timestamp,
        receiving_before: Timestamp,
    ) -> Result<u64, StoreError>;
}
