//! Admitting a request (rate limit, then usage counting against the quota or spend cap), and
//! the batched writes that keep counting and `last_used_at` off the request path.
//!
//! The policy (decisions §8, §17): every authenticated request is rate-limited per workspace and
//! mode; refused ones (429) count for nothing. Then every request counts toward usage, except
//! [`EXEMPT_OPERATIONS`], which also stay open when the quota or the cap is reached. Test mode is
//! counted and never capped. Live requests are capped by the period's [`Allowance`].
//!
//! Counting writes nothing per request: counts gather in memory and [`App::flush_usage`] (run
//! every [`FLUSH_INTERVAL_MS`] by the server) adds them to the period's counter, so a crash loses
//! at most that much counting. A capped allowance must never be overshot, even by several server
//! processes at once, so a process *reserves* blocks of it from the database (under a lock on
//! the counter row, recorded as a lease that expires unless renewed) and admits requests from
//! its block in memory. The sum of what is used and what is reserved never passes the
//! allowance. Near the boundary the blocks shrink to one request, so one process admits exactly
//! the allowance; with several processes a request may be refused while another process still
//! holds a few reserved requests, for at most the flush interval, after which an idle process
//! gives its block back. Reservations are never admitted late: the cap holds. One exception is
//! bounded by the flush interval: when a cap is set on a tenant that was uncapped, requests
//! other processes admitted uncapped in the last second are not yet in the counter.

use std::{
    cell::{Cell, RefCell},
    sync::{Arc, Mutex},
};

use crate::FastMap as HashMap;

use crm_domain::{Allowance, ApiKeyId, Mode, Period, Refusal as CapRefusal, Tenant, Timestamp};
use tokio::sync::Mutex as AsyncMutex;

use crate::{
    auth::Caller,
    error::AppError,
    ports::{KeyUse, RateLimiter, RateStatus, COARSE_SLACK_MS},
    App,
};

/// Operations that are neither counted nor capped (they are still rate-limited), so that a
/// client at its quota or cap can see and lift it (decisions §8).
pub const EXEMPT_OPERATIONS: [&str; 3] =
    ["svc_get_usage", "svc_get_settings", "svc_update_settings"];

/// How often counts and `last_used_at` reach the database.
pub const FLUSH_INTERVAL_MS: u64 = 1_000;
/// How long a reservation lasts unless the flush renews it.
const LEASE_MS: i64 = 10_000;
/// A reservation is drawn on only while this far from its expiry, so a process whose flushes
/// stall stops using it before other processes may reclaim it.
const LEASE_MARGIN_MS: i64 = 3_000;
/// The largest block reserved at once; blocks are also at most a quarter of what is left.
const MAX_BLOCK: u64 = 100;
/// After a reservation found nothing left, requests are refused from memory for this long
/// before the database is asked again (unless the allowance changed meanwhile).
const EXHAUSTED_RECHECK_MS: i64 = 1_000;

/// A request let through, with the rate budget the transport reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    pub rate: RateStatus,
}

/// A request refused (429), or a failure while admitting it; `rate` when the rate limiter ran.
#[derive(Debug)]
pub struct Refused {
    pub error: AppError,
    pub rate: Option<RateStatus>,
}

/// The in-memory usage of one tenant's period in this process.
#[derive(Debug)]
struct Entry {
    tenant: Tenant,
    period: Period,
    /// Requests counted since the last flush.
    unflushed: u64,
    /// Of those, the ones admitted without a reservation (the tenant was uncapped then): they
    /// are in neither `used` nor a lease yet, so a reservation must count them itself.
    uncovered: u64,
    /// Reserved requests not yet handed out.
    tokens: u64,
    lease_until: Option<Timestamp>,
    /// Whether anything was admitted since the last flush.
    busy: bool,
    /// The allowance at which a reservation last found nothing left, and until when to believe it.
    exhausted: Option<(u64, Timestamp)>,
    /// Dropped from the map by a flush; an admission that finds it so starts over.
    retired: bool,
}

impl Entry {
    /// Counts one admission when nothing more is needed: uncapped, or capped with a token of a
    /// lease not about to end. `false`: nothing was counted (a reservation is needed first).
    fn count_covered(&mut self, allowance: Allowance, now: Timestamp) -> bool {
        match allowance {
            Allowance::Unlimited => self.uncovered += 1,
            Allowance::Capped { .. } => {
                let lease_ok = self
                    .lease_until
                    .is_some_and(|until| now.plus_millis(LEASE_MARGIN_MS) < until);
                if !lease_ok || self.tokens == 0 {
                    return false;
                }
                self.tokens -= 1;
            }
        }
        self.unflushed += 1;
        self.busy = true;
        true
    }
}

type SharedEntry = Arc<AsyncMutex<Entry>>;

/// Tenants one thread keeps at most in [`THREAD_ENTRIES`]; past it each new one takes an old
/// one's place.
const THREAD_ENTRIES_MAX: usize = 4_096;

thread_local! {
    /// Per thread, by tenant: the entry this thread last counted in, with its meter's id and
    /// period start. Finding it in the shared map took a mutex both worker threads contend for
    /// and a reference count they share, whose cache lines then moved between the cores on every
    /// request (docs/performance-history.md); [`Meter::count_here`] needs neither.
    static THREAD_ENTRIES: RefCell<HashMap<Tenant, (u64, Timestamp, SharedEntry)>> = RefCell::new(HashMap::default());
}

/// The process's metering state. One per [`App`] (clones share it).
pub struct Meter {
    /// Tells this meter's entries in [`THREAD_ENTRIES`] from another's (tests run many apps).
    id: u64,
    /// This process's lease holder id.
    holder: String,
    limiter: Arc<dyn RateLimiter>,
    /// By tenant, then period start (a tenant has two periods only briefly, at a period's end).
    /// Nested so that a request finds its entry by reference, without cloning the tenant.
    entries: Mutex<HashMap<Tenant, HashMap<Timestamp, SharedEntry>>>,
    touches: Mutex<HashMap<ApiKeyId, KeyUse>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The maps hold plain data that stays consistent even if a holder panicked.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Meter {
    pub fn new(holder: String, limiter: Arc<dyn RateLimiter>) -> Meter {
        Meter {
            id: crate::instance_id(),
            holder,
            limiter,
            entries: Mutex::new(HashMap::default()),
            touches: Mutex::new(HashMap::default()),
        }
    }

    /// The billing period containing `at`. The last one found is kept per thread (its calendar
    /// arithmetic was a third of an admission), without a lock; a period depends only on the
    /// clock, so one cache serves every `Meter`.
    fn period_containing(at: Timestamp) -> Period {
        thread_local! {
            static LAST: Cell<Period> = Cell::new(Period::containing(Timestamp::from_millis(0)));
        }
        LAST.with(|last| {
            if !last.get().contains(at) {
                last.set(Period::containing(at));
            }
            last.get()
        })
    }

    fn entry(&self, tenant: &Tenant, period: Period) -> SharedEntry {
        let mut entries = lock(&self.entries);
        if let Some(entry) = entries
            .get(tenant)
            .and_then(|periods| periods.get(&period.start))
        {
            return entry.clone();
        }
        let entry = Arc::new(AsyncMutex::new(Entry {
            tenant: tenant.clone(),
            period,
            unflushed: 0,
            uncovered: 0,
            tokens: 0,
            lease_until: None,
            busy: false,
            exhausted: None,
            retired: false,
        }));
        entries
            .entry(tenant.clone())
            .or_default()
            .insert(period.start, entry.clone());
        entry
    }

    /// Counts an admission in this thread's entry for the tenant's `period` when that is all it
    /// takes: the entry is there, not retired, free, and (capped) holds a token of a lease not
    /// about to end. `false`: nothing was counted, go the long way ([`App::admit`]).
    fn count_here(
        &self,
        tenant: &Tenant,
        period: Period,
        allowance: Allowance,
        now: Timestamp,
    ) -> bool {
        THREAD_ENTRIES.with(|entries| {
            let Ok(entries) = entries.try_borrow() else {
                return false;
            };
            let Some((meter, start, entry)) = entries.get(tenant) else {
                return false;
            };
            if *meter != self.id || *start != period.start {
                return false;
            }
            let Ok(mut e) = entry.try_lock() else {
                return false;
            };
            !e.retired && e.count_covered(allowance, now)
        })
    }

    /// Makes `entry` this thread's for its tenant (see [`Meter::count_here`]).
    fn remember_here(&self, entry: &SharedEntry, tenant: &Tenant, period: Period) {
        THREAD_ENTRIES.with(|entries| {
            let Ok(mut entries) = entries.try_borrow_mut() else {
                return;
            };
            crate::insert_bounded(
                &mut entries,
                THREAD_ENTRIES_MAX,
                tenant.clone(),
                (self.id, period.start, entry.clone()),
            );
        });
    }

    /// Drops a retired entry (a flush found it idle).
    fn remove(&self, tenant: &Tenant, period_start: Timestamp) {
        let mut entries = lock(&self.entries);
        if let Some(periods) = entries.get_mut(tenant) {
            periods.remove(&period_start);
            if periods.is_empty() {
                entries.remove(tenant);
            }
        }
    }

    /// Notes that a key was used at `at`; written by the next flush.
    pub fn touch(&self, tenant: &Tenant, id: &ApiKeyId, at: Timestamp) {
        let mut touches = lock(&self.touches);
        match touches.get_mut(id) {
            // The common case: the key was used since the last flush. No clone of the id.
            Some(slot) => slot.at = slot.at.max(at),
            None => {
                touches.insert(
                    id.clone(),
                    KeyUse {
                        tenant: tenant.clone(),
                        id: id.clone(),
                        at,
                    },
                );
            }
        }
    }

    /// A use of the key not yet written, if any.
    pub fn pending_touch(&self, id: &ApiKeyId) -> Option<Timestamp> {
        lock(&self.touches).get(id).map(|u| u.at)
    }

    /// Requests of the tenant's period counted here and not yet flushed.
    pub async fn pending(&self, tenant: &Tenant, period: Period) -> u64 {
        let entry = lock(&self.entries)
            .get(tenant)
            .and_then(|periods| periods.get(&period.start))
            .cloned();
        match entry {
            Some(e) => e.lock().await.unflushed,
            None => 0,
        }
    }
}

fn refusal_error(caller: &Caller, refusal: CapRefusal, included: u64) -> AppError {
    match refusal {
        CapRefusal::QuotaExceeded => AppError::QuotaExceeded {
            plan: caller.workspace.plan.as_str(),
            included,
        },
        CapRefusal::SpendCapReached => AppError::SpendCapReached {
            cap_usd: caller.workspace.overage_cap_usd.unwrap_or(0.0),
        },
    }
}

/// The block to reserve when `headroom` requests are left: a quarter of it, at least one, at
/// most [`MAX_BLOCK`]; so blocks shrink as the boundary nears and little sits unused in any one
/// process.
fn block_size(headroom: u64) -> u64 {
    if headroom == 0 {
        0
    } else {
        (headroom / 4).clamp(1, MAX_BLOCK).min(headroom)
    }
}

impl App {
    /// Admits one request of `operation` (a catalog name) for `caller`: rate limit first, then
    /// counting and, in live mode, the quota or spend cap. Every transport calls this once per
    /// operation call, so REST, MCP and A2A share limits and counts.
    pub async fn admit(&self, caller: &Caller, operation: &str) -> Result<Admission, Refused> {
        let limits = caller.workspace.limits();
        let limiter = &self.meter.limiter;
        let rate = match limiter.acquire_now(&caller.tenant, limits.rate_limit_per_minute) {
            Some(rate) => rate,
            None => {
                limiter
                    .acquire(&caller.tenant, limits.rate_limit_per_minute)
                    .await
            }
        };
        if !rate.allowed {
            return Err(Refused {
                error: AppError::RateLimited {
                    retry_after_secs: rate.retry_after_secs,
                },
                rate: Some(rate),
            });
        }
        if EXEMPT_OPERATIONS.contains(&operation) {
            return Ok(Admission { rate });
        }
        let allowance = match caller.tenant.mode {
            Mode::Test => Allowance::Unlimited,
            Mode::Live => limits.live_allowance(caller.workspace.overage_cap_usd),
        };
        let mut now = self.clock.now_coarse();
        let mut period = Meter::period_containing(now);
        // A tick behind, the coarse clock could count a request of the new period's first
        // milliseconds in the one just ended: near the end, the precise clock decides.
        if period.end.millis() - now.millis() <= COARSE_SLACK_MS {
            now = self.clock.now();
            period = Meter::period_containing(now);
        }
        if self
            .meter
            .count_here(&caller.tenant, period, allowance, now)
        {
            return Ok(Admission { rate });
        }
        loop {
            let entry = self.meter.entry(&caller.tenant, period);
            self.meter.remember_here(&entry, &caller.tenant, period);
            // Uncontended (nearly always: the lock is held only to count, or for a reservation),
            // taking it is one compare-and-swap; awaiting `lock()` built and polled a future.
            let mut e = match entry.try_lock() {
                Ok(e) => e,
                Err(_) => entry.lock().await,
            };
            if e.retired {
                continue;
            }
            if e.count_covered(allowance, now) {
                return Ok(Admission { rate });
            }
            let Allowance::Capped { requests, refusal } = allowance else {
                unreachable!("an uncapped admission is always covered");
            };
            // No token of a fresh lease: what is left of a lease about to end is not used.
            e.tokens = 0;
            let believed_exhausted = e
                .exhausted
                .is_some_and(|(at, until)| at == requests && now < until);
            if !believed_exhausted {
                // Boxed: a reservation is rare, and its future would size every admission's.
                Box::pin(self.reserve(&mut e, requests, now))
                    .await
                    .map_err(|error| Refused {
                        error,
                        rate: Some(rate),
                    })?;
            }
            if e.count_covered(allowance, now) {
                return Ok(Admission { rate });
            }
            return Err(Refused {
                error: refusal_error(caller, refusal, limits.included_requests),
                rate: Some(rate),
            });
        }
    }

    /// Reserves a block of the tenant's allowance of `allowance` requests for this process.
    async fn reserve(&self, e: &mut Entry, allowance: u64, now: Timestamp) -> Result<(), AppError> {
        let holder = &self.meter.holder;
        let mut tx = self.store.begin_write().await?;
        let held = tx
            .lock_usage(&e.tenant, e.period.start, holder, now)
            .await?;
        let committed = held
            .used
            .saturating_add(held.others_reserved)
            .saturating_add(held.own_reserved)
            .saturating_add(e.uncovered);
        let grant = block_size(allowance.saturating_sub(committed));
        if grant > 0 {
            let lease_until = now.plus_millis(LEASE_MS);
            tx.record_usage(
                &e.tenant,
                e.period.start,
                0,
                holder,
                held.own_reserved + grant,
                lease_until,
            )
            .await?;
            tx.commit().await?;
            e.tokens += grant;
            e.lease_until = Some(lease_until);
            e.exhausted = None;
        } else {
            drop(tx);
            e.exhausted = Some((allowance, now.plus_millis(EXHAUSTED_RECHECK_MS)));
        }
        Ok(())
    }

    /// Writes the counts gathered since the last flush and the keys' `last_used_at`, renews the
    /// reservations in use and gives back those of idle tenants (all of them when `last`, at
    /// shutdown). A failed write is kept for the next flush.
    pub async fn flush_usage(&self, last: bool) {
        let holder = self.meter.holder.clone();
        let entries: Vec<SharedEntry> = lock(&self.meter.entries)
            .values()
            .flat_map(|periods| periods.values().cloned())
            .collect();
        for entry in entries {
            let mut e = entry.lock().await;
            let now = self.clock.now();
            let give_back = last || !e.busy;
            let keep = if give_back { 0 } else { e.tokens };
            let lease_changes = e.tokens > 0 || e.lease_until.is_some();
            if e.unflushed > 0 || lease_changes {
                let lease_until = now.plus_millis(LEASE_MS);
                let written = async {
                    let mut tx = self.store.begin_write().await?;
                    tx.record_usage(
                        &e.tenant,
                        e.period.start,
                        e.unflushed,
                        &holder,
                        keep,
                        lease_until,
                    )
                    .await?;
                    tx.commit().await
                }
                .await;
                if let Err(err) = written {
                    tracing::warn!(error = %err, "usage flush failed; retrying at the next flush");
                    continue;
                }
                e.unflushed = 0;
                e.uncovered = 0;
                e.tokens = keep;
                e.lease_until = (keep > 0).then_some(lease_until);
            }
            let was_busy = std::mem::replace(&mut e.busy, false);
            let still_exhausted = e.exhausted.is_some_and(|(_, until)| now < until);
            if !was_busy && e.unflushed == 0 && e.tokens == 0 && !still_exhausted {
                e.retired = true;
                self.meter.remove(&e.tenant, e.period.start);
            }
        }
        let mut uses: Vec<KeyUse> = std::mem::take(&mut *lock(&self.meter.touches))
            .into_values()
            .collect();
        if uses.is_empty() {
            return;
        }
        // A fixed order, so that two processes touching the same keys lock them alike.
        uses.sort_by(|a, b| a.id.cmp(&b.id));
        let written = async {
            let mut tx = self.store.begin_write().await?;
            tx.touch_api_keys(&uses).await?;
            tx.commit().await
        }
        .await;
        if let Err(err) = written {
            tracing::warn!(error = %err, "last_used_at flush failed; retrying at the next flush");
            for u in uses {
                self.meter.touch(&u.tenant, &u.id, u.at);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_shrink_towards_the_boundary() {
        assert_eq!(block_size(0), 0);
        assert_eq!(block_size(1), 1);
        assert_eq!(block_size(3), 1);
        assert_eq!(block_size(8), 2);
        assert_eq!(block_size(1_000), 100);
    }
}
