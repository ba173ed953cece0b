//! The audit log (decisions §25): entries written in the transaction of the change they record,
//! listed per tenant newest first, and dropped once older than their retention.

use async_trait::async_trait;
use crm_domain::{audit::AuditEntry, Tenant, Timestamp};

use super::{Slice, StoreError};

/// What `GET /audit` narrows its list by; `None` does not narrow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// An entry's `action`, exactly.
    pub action: Option<String>,
    /// An entry's `target.id`, exactly.
    pub target_id: Option<String>,
    /// An entry's `actor.id`, exactly.
    pub actor_id: Option<String>,
}

#[async_trait]
pub trait AuditRepo {
    /// Inserts `entries` (each a new entry) in this transaction.
    async fn insert_audit(
        &mut self,
        tenant: &Tenant,
        entries: &[AuditEntry],
    ) -> Result<(), StoreError>;
    /// The tenant's entries matching `filter` (every given member), newest first by id.
    async fn list_audit(
        &mut self,
        tenant: &Tenant,
        filter: &AuditFilter,
        slice: &Slice,
    ) -> Result<Vec<AuditEntry>, StoreError>;
    /// Deletes every tenant's entries written before `before`; answers how many.
    async fn delete_audit_before(&mut self, before: Timestamp) -> Result<u64, StoreError>;
}
