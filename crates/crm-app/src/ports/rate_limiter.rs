//! Per-minute request budgets.

use async_trait::async_trait;
use crm_domain::Tenant;

/// to `limit`), with what the `RateLimit-*` headers report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateStatus {
    pub allowed: bool,
    /// Requests per minute.
    pub limit: u32,
    /// Requests that could be sent right now.
    pub remaining: u32,
    /// Seconds until the budget is whole again.
    pub reset_secs: u64,
    /// When refused: seconds until one request would be admitted.
    pub retry_after_secs: u64,
}

/// Per-minute request budgets, one per tenant (workspace and mode). One process keeps them in
/// memory; several processes share them through an adapter (Redis).
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// Takes one request from `tenant`'s budget of `per_minute` (the limit may change between
    /// calls: a plan change applies at once). A refused request takes nothing.
    async fn acquire(&self, tenant: &Tenant, per_minute: u32) -> RateStatus;

    /// The same, answered at once when the budget is in this process's memory, without a future
    /// to allocate and poll on every request; `None` when it must be asked of a shared store
    /// (then call [`RateLimiter::acquire`]).
    fn acquire_now(&self, _tenant: &Tenant, _per_minute: u32) -> Option<RateStatus> {
        None
    }
}
