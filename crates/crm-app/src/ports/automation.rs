//! The store ports of automations and their runs. Part of [`crate::ports::Tx`]; every method
//! documents its contract and the conformance suite checks it on each store.

use async_trait::async_trait;
use crm_domain::{
    rule::{Automation, AutomationRun},
    AutomationId, EventType, Tenant,
};

use super::{Slice, StoreError};

#[async_trait]
pub trait AutomationRepo {
    async fn insert_automation(
        &mut self,
        tenant: &Tenant,
        automation: &Automation,
    ) -> Result<(), StoreError>;
    async fn get_automation(
        &mut self,
        tenant: &Tenant,
        id: &AutomationId,
    ) -> Result<Option<Automation>, StoreError>;
    /// Writes every field; MUST return `Stale` unless the stored row is at `version - 1`.
    async fn update_automation(
        &mut self,
        tenant: &Tenant,
        automation: &Automation,
    ) -> Result<(), StoreError>;
    /// Deletes the rule and its runs; returns whether it existed.
    async fn delete_automation(
        &mut self,
        tenant: &Tenant,
        id: &AutomationId,
    ) -> Result<bool, StoreError>;
    /// Newest first.
    async fn list_automations(
        &mut self,
        tenant: &Tenant,
        slice: &Slice,
    ) -> Result<Vec<Automation>, StoreError>;
    /// The enabled rules triggered by any of `events`, in creation order (oldest first). Called
    /// by every write that emits events, so it MUST be one query over an index led by the tenant
    /// and cheap when the tenant has no rules.
    async fn active_automations(
        &mut self,
        tenant: &Tenant,
        events: &[EventType],
    ) -> Result<Vec<Automation>, StoreError>;
    /// Stores runs (one multi-row statement where the backend allows).
    async fn insert_automation_runs(
        &mut self,
        tenant: &Tenant,
        runs: &[AutomationRun],
    ) -> Result<(), StoreError>;
    /// The runs of one rule, newest first.
    async fn list_automation_runs(
        &mut self,
        tenant: &Tenant,
        automation: &AutomationId,
        slice: &Slice,
    ) -> Result<Vec<AutomationRun>, StoreError>;
    /// How many enabled rules the tenant has (the plan cap of active automations).
    async fn count_active_automations(&mut self, tenant: &Tenant) -> Result<u64, StoreError>;
}
