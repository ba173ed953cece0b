//! Records by kind and id: what a reference-typed field or a write's references point at.

use async_trait::async_trait;
use crm_domain::{Company, CompanyId, ObjectKind, Tenant};

use super::StoreError;

/// A record a write points at, which must exist (as [`RecordRepo::record_exists`] says) for the
/// write to happen. Handing these to the insert instead of checking them first lets a networked
/// store check them in the INSERT itself: one round trip fewer per create.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reference<'a> {
    pub object: ObjectKind,
    pub id: &'a str,
}

#[async_trait]
pub trait RecordRepo {
    /// Whether a record of `object` with this id exists in the tenant (soft-deleted ones count:
    /// they can be restored, and references to them stay valid).
    async fn record_exists(
        &mut self,
        tenant: &Tenant,
        object: ObjectKind,
        id: &str,
    ) -> Result<bool, StoreError>;
    /// The companies of `ids` in the tenant, soft-deleted ones included, in any order, read in
    /// one statement (the related records of a page: decisions §19). Ids of no company are
    /// absent.
    async fn companies_by_ids(
        &mut self,
        tenant: &Tenant,
        ids: &[CompanyId],
    ) -> Result<Vec<Company>, StoreError>;
}
