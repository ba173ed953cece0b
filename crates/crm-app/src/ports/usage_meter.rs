//! Counting requests against a tenant's allowance for a billing period, and the batched writes
//! that keep counting and keys' `last_used_at` off the request path. The policy (what is counted,
//! what is capped, in which order with the rate limit) is the use case's
//! (`metering.rs`); this port only counts, reserves and writes.

use async_trait::async_trait;
use crm_domain::{Allowance, ApiKeyId, Period, Tenant, Timestamp};

use super::StoreError;

/// Usage counting of one process.
///
/// A meter counts admissions in memory and adds them to the period's counter in the store
/// ([`super::PlanRepo::record_usage`]) when [`UsageMeter::flush`] runs, so a crash loses at most
/// one flush interval of counting. For a capped allowance it MUST NOT admit more than the
/// allowance, counted across every process sharing the store: it admits only from allowance it
/// reserved in the store ([`super::PlanRepo::lock_usage`], leases that expire unless renewed),
/// so that what is used plus what is reserved never passes the allowance.
#[async_trait]
pub trait UsageMeter: Send + Sync {
    /// Counts one request of `tenant` in `period` when that takes no store access (uncapped, or a
    /// reservation in hand); `false`: nothing was counted, ask [`UsageMeter::count`].
    fn count_now(
        &self,
        tenant: &Tenant,
        period: Period,
        allowance: Allowance,
        now: Timestamp,
    ) -> bool;

    /// Counts one request of `tenant` in `period`, reserving more of a capped allowance when it
    /// must. `Ok(false)`: the allowance is used up (nothing was counted); the meter MAY answer
    /// so from memory for a short while before asking the store again, unless the allowance
    /// changed.
    async fn count(
        &self,
        tenant: &Tenant,
        period: Period,
        allowance: Allowance,
        now: Timestamp,
    ) -> Result<bool, StoreError>;

    /// Requests of the tenant's period counted here and not yet written.
    async fn pending(&self, tenant: &Tenant, period: Period) -> u64;

    /// Notes that a key was used at `at`; written by the next flush.
    fn touch(&self, tenant: &Tenant, key: &ApiKeyId, at: Timestamp);

    /// A use of the key noted and not yet written, if any (kept until its write commits).
    fn pending_touch(&self, key: &ApiKeyId) -> Option<Timestamp>;

    /// Writes what was counted and the keys' uses, renews the reservations in use and gives back
    /// those of idle tenants (all of them when `last`, at shutdown). A failed write MUST be kept
    /// for the next flush.
    async fn flush(&self, last: bool);
}
