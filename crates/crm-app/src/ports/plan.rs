//! Plans, settings and the usage counters of billing periods.

use async_trait::async_trait;
use crm_domain::{Tenant, Timestamp};

use super::StoreError;
use crate::identity::Workspace;

/// The usage counter of one tenant's billing period, read under its lock (see [`PlanRepo::lock_usage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageLock {
    /// Requests counted durably in the period.
    pub used: u64,
    /// Allowance reserved by unexpired leases of other holders (processes).
    pub others_reserved: u64,
    /// Allowance reserved by the caller's own lease, expired or not.
    pub own_reserved: u64,
}

/// How many objects under a plan cap the tenant has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanCounts {
    pub active_automations: u64,
    pub sequences: u64,
}

/// Plans, settings and usage metering. Requests are counted per tenant and billing period (keyed
/// by the period's start). A process that must not let a capped allowance overshoot *reserves*
/// part of it under a lease (holder = a process id, with an expiry it renews), hands the
/// reservation out in memory, and moves what it used from its lease to `used` when it flushes.
#[async_trait]
pub trait PlanRepo {
    /// Writes the plan, the overrides and `overage_cap_usd` of `ws.id`; returns whether it exists.
    async fn update_workspace(&mut self, ws: &Workspace) -> Result<bool, StoreError>;
    /// Creates the tenant's counter for the period at 0 if absent and locks it until the
    /// transaction ends (so reservations of several processes queue), then reads it. Leases of
    /// other holders that expired by `now` are dropped. MUST be called before any lease of the
    /// tenant's period is written in the transaction.
    async fn lock_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        holder: &str,
        now: Timestamp,
    ) -> Result<UsageLock, StoreError>;
    /// Adds `counted` to the period's `used` (creating the counter), and sets the holder's lease
    /// to `reserved` (0 deletes it) until `lease_until`. The counter row is written first, so it
    /// takes the same lock as `lock_usage`.
    async fn record_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
        counted: u64,
        holder: &str,
        reserved: u64,
        lease_until: Timestamp,
    ) -> Result<(), StoreError>;
    /// Requests counted durably in the period (0 when none).
    async fn get_usage(
        &mut self,
        tenant: &Tenant,
        period_start: Timestamp,
    ) -> Result<u64, StoreError>;
    /// The tenant's active automations and sequences.
    async fn count_plan_objects(&mut self, tenant: &Tenant) -> Result<PlanCounts, StoreError>;
}
