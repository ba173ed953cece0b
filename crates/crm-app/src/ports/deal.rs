//! Deals.

use async_trait::async_trait;
use crm_domain::{CompanyId, ContactId, Deal, DealId, PipelineId, Tenant, UserId};

use super::{Slice, StoreError};

/// Filters of the deal list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DealFilter {
    /// Case-insensitive substring of the title.
    pub q: Option<String>,
    pub pipeline_id: Option<PipelineId>,
    pub stage: Option<String>,
    pub company_id: Option<CompanyId>,
    pub primary_contact_id: Option<ContactId>,
    /// Owned by this user (decisions §24).
    pub owner_id: Option<UserId>,
    pub include_deleted: bool,
}

/// The active deals of one stage in one currency: how many, and their summed value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageTotal {
    pub stage: String,
    /// `None`: deals without a currency (or without a value).
    pub currency: Option<String>,
    pub deals: u64,
    pub value_cents: i64,
}

#[async_trait]
pub trait DealRepo {
    async fn insert_deal(&mut self, tenant: &Tenant, deal: &Deal) -> Result<(), StoreError>;
    async fn get_deal(&mut self, tenant: &Tenant, id: &DealId) -> Result<Option<Deal>, StoreError>;
    /// Same contract as `update_contact` (`Stale` on a version mismatch).
    async fn update_deal(&mut self, tenant: &Tenant, deal: &Deal) -> Result<(), StoreError>;
    async fn list_deals(
        &mut self,
        tenant: &Tenant,
        filter: &DealFilter,
        slice: &Slice,
    ) -> Result<Vec<Deal>, StoreError>;
    /// The pipeline's active (not deleted) deals, only those `owner` owns when given, counted
    /// and summed per stage and currency, ordered by stage then currency.
    async fn stage_totals(
        &mut self,
        tenant: &Tenant,
        pipeline: &PipelineId,
        owner: Option<&UserId>,
    ) -> Result<Vec<StageTotal>, StoreError>;
}
