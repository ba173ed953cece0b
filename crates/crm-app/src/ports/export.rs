//! Exports: the export rows, their files kept in numbered chunks until they expire, and the
//! workers' claims under a lease (the same claim rules as imports').

use async_trait::async_trait;
use crm_domain::{export::Export, ExportId, Tenant, Timestamp};

use super::StoreError;

#[async_trait]
pub trait ExportRepo {
    /// Inserts `export` as it is.
    async fn insert_export(&mut self, tenant: &Tenant, export: &Export) -> Result<(), StoreError>;
    /// The export `id` of the tenant, in any status, expired or not.
    async fn get_export(&mut self, tenant: &Tenant, id: &str)
        -> Result<Option<Export>, StoreError>;
    /// Writes `export`'s status, row counts, resume position, chunk count, error, finish and
    /// expiry times. A finished export no longer holds a claim.
    async fn update_export(&mut self, tenant: &Tenant, export: &Export) -> Result<(), StoreError>;
    /// Stores chunk `seq` of the export `id`'s file.
    async fn insert_export_chunk(
        &mut self,
        tenant: &Tenant,
        id: &ExportId,
        seq: i64,
        data: &[u8],
    ) -> Result<(), StoreError>;
    /// The stored chunk `seq` of the export `id`, if it is kept.
    async fn get_export_chunk(
        &mut self,
        tenant: &Tenant,
        id: &ExportId,
        seq: i64,
    ) -> Result<Option<Vec<u8>>, StoreError>;
    /// Claims one export of any tenant that is `queued`, or `running` with its lease ended
    /// before `now`: sets it `running` with `claim_token` until `lease_until`, and returns it.
    /// Two concurrent claims MUST NOT return the same export.
    async fn claim_export(
        &mut self,
        now: Timestamp,
        lease_until: Timestamp,
        claim_token: &str,
    ) -> Result<Option<(Tenant, Export)>, StoreError>;
    /// Extends the claim `claim_token` on the export `id` to `lease_until` and locks its row for
    /// the rest of the transaction; MUST return `false`, changing nothing, when the export is no
    /// longer `running` under that token.
    async fn renew_export_claim(
        &mut self,
        tenant: &Tenant,
        id: &ExportId,
        claim_token: &str,
        lease_until: Timestamp,
    ) -> Result<bool, StoreError>;
    /// Housekeeping across tenants: deletes the exports (and their chunks) that expired before
    /// `now`. Returns how many exports went.
    async fn purge_exports(&mut self, now: Timestamp) -> Result<u64, StoreError>;
}
