//! Companies.

use async_trait::async_trait;
use crm_domain::{Company, CompanyId, Tenant, UserId};

use super::{Slice, StoreError};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompanyFilter {
    /// Case-insensitive substring of name or domain.
    pub q: Option<String>,
    pub domain: Option<String>,
    /// Owned by this user (decisions §24).
    pub owner_id: Option<UserId>,
    pub include_deleted: bool,
}

#[async_trait]
pub trait CompanyRepo {
    async fn insert_company(
        &mut self,
        tenant: &Tenant,
        company: &Company,
    ) -> Result<(), StoreError>;
    async fn get_company(
        &mut self,
        tenant: &Tenant,
        id: &CompanyId,
    ) -> Result<Option<Company>, StoreError>;
    /// Same contract as `update_contact` (`Stale` on a version mismatch).
    async fn update_company(
        &mut self,
        tenant: &Tenant,
        company: &Company,
    ) -> Result<(), StoreError>;
    /// Newest first. Merged tombstones are never listed, not even with `include_deleted`.
    async fn list_companies(
        &mut self,
        tenant: &Tenant,
        filter: &CompanyFilter,
        slice: &Slice,
    ) -> Result<Vec<Company>, StoreError>;
}
