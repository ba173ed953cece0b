//! Activities (notes, calls, meetings, emails logged).

use async_trait::async_trait;
use crm_domain::{Activity, ActivityId, ContactId, DealId, Tenant};

use super::{Slice, StoreError};

/// Filters of the activity list.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActivityFilter {
    pub contact_id: Option<ContactId>,
    pub deal_id: Option<DealId>,
    pub activity_type: Option<String>,
}

#[async_trait]
pub trait ActivityRepo {
    async fn insert_activity(
        &mut self,
        tenant: &Tenant,
        activity: &Activity,
    ) -> Result<(), StoreError>;
    async fn get_activity(
        &mut self,
        tenant: &Tenant,
        id: &ActivityId,
    ) -> Result<Option<Activity>, StoreError>;
    /// `Stale` unless the row is at `version - 1`.
    async fn update_activity(
        &mut self,
        tenant: &Tenant,
        activity: &Activity,
    ) -> Result<(), StoreError>;
    async fn delete_activity(&mut self, tenant: &Tenant, id: &ActivityId)
        -> Result<(), StoreError>;
    /// Newest first by `(occurred_at, id)`.
    async fn list_activities(
        &mut self,
        tenant: &Tenant,
        filter: &ActivityFilter,
        slice: &Slice,
    ) -> Result<Vec<Activity>, StoreError>;
}
