//! The usage meter of one process ([`crm_app::ports::UsageMeter`]): counts gathered in memory
//! and written by [`UsageMeter::flush`] (run every [`FLUSH_INTERVAL_MS`] by the
//! server), so counting writes nothing per request and a crash loses at most that much counting.
//!
//! A capped allowance must never be overshot, even by several server processes at once, so a
//! process *reserves* blocks of it from the database (under a lock on the counter row, recorded
//! as a lease that expires unless renewed) and admits requests from its block in memory. The sum
//! of what is used and what is reserved never passes the allowance. Near the boundary the blocks
//! shrink to one request, so one process admits exactly the allowance; with several processes a
//! request may be refused while another process still holds a few reserved requests, for at most
//! the flush interval, after which an idle process gives its block back. Reservations are never
//! admitted late: the cap holds. One exception is bounded by the flush interval: when a cap is
//! set on a tenant that was uncapped, requests other processes admitted uncapped in the last
//! second are not yet in the counter.

use std::{
    cell::RefCell,
    sync::{Arc, Mutex},
};

use async_trait::async_trait;
use crm_app::ports::{Clock, KeyUse, Store, StoreError, UsageMeter};
use crm_domain::{Allowance, ApiKeyId, Period, Tenant, Timestamp};
use tokio::sync::Mutex as AsyncMutex;

use crate::FastMap as HashMap;

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

/// An entry, and the lock that keeps its database writes (a flush, a reservation) one at a time.
/// Requests count under the entry's own lock, which is never held across a database write by a
/// flush: on SQLite a write waits for the one writer (an import chunk holds it for its whole
/// transaction), on Postgres for the counter row's lock, and every request of the tenant would
/// wait with it. Taken in this order: `db`, then the entry.
struct EntryCell {
    state: AsyncMutex<Entry>,
    db: AsyncMutex<()>,
}

impl std::ops::Deref for EntryCell {
    type Target = AsyncMutex<Entry>;

    fn deref(&self) -> &AsyncMutex<Entry> {
        &self.state
    }
}

type SharedEntry = Arc<EntryCell>;

/// What a flush read of an entry, to write it without holding the entry.
struct FlushRead {
    tenant: Tenant,
    period_start: Timestamp,
    counted: u64,
    uncovered: u64,
    /// The reservation the write leaves this process.
    keep: u64,
    /// Tokens given back, no longer handed out from the moment they were read.
    given_back: u64,
    was_busy: bool,
    write: bool,
}

/// Tenants one thread keeps at most in [`THREAD_ENTRIES`]; past it each new one takes an old
/// one's place.
const THREAD_ENTRIES_MAX: usize = 4_096;

thread_local! {
    /// Per thread, by tenant: the entry this thread last counted in, with its meter's id and
    /// period start. Finding it in the shared map takes a mutex every worker thread contends for
    /// and a reference count they share, whose cache lines would move between the cores on every
    /// request; [`Meter::count_here`] needs neither.
    static THREAD_ENTRIES: RefCell<HashMap<Tenant, (u64, Timestamp, SharedEntry)>> = RefCell::new(HashMap::default());
}

/// The process's metering state, shared by every clone of its application.
pub struct Meter {
    /// Tells this meter's entries in [`THREAD_ENTRIES`] from another's (tests run many apps).
    id: u64,
    /// This process's lease holder id.
    holder: String,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
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
    /// `holder`: this process's lease holder id (unique among the processes sharing `store`).
    pub fn new(holder: String, store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Meter {
        Meter {
            id: crate::instance_id(),
            holder,
            store,
            clock,
            entries: Mutex::new(HashMap::default()),
            touches: Mutex::new(HashMap::default()),
        }
    }

    /// The tenant's entry for `period`, made empty when it has none.
    fn entry(&self, tenant: &Tenant, period: Period) -> SharedEntry {
        let mut entries = lock(&self.entries);
        if let Some(entry) = entries
            .get(tenant)
            .and_then(|periods| periods.get(&period.start))
        {
            return entry.clone();
        }
        let entry = Arc::new(EntryCell {
            state: AsyncMutex::new(Entry {
                tenant: tenant.clone(),
                period,
                unflushed: 0,
                uncovered: 0,
                tokens: 0,
                lease_until: None,
                busy: false,
                exhausted: None,
                retired: false,
            }),
            db: AsyncMutex::new(()),
        });
        entries
            .entry(tenant.clone())
            .or_default()
            .insert(period.start, entry.clone());
        entry
    }

    /// Counts an admission in this thread's entry for the tenant's `period` when that is all it
    /// takes: the entry is there, not retired, free, and (capped) holds a token of a lease not
    /// about to end. `false`: nothing was counted, go the long way ([`UsageMeter::count`]).
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

    /// Writes what `entry` counted and the reservation it keeps (none when `last`, or when it
    /// was idle since the last flush), then retires it if it stayed idle. The entry is locked
    /// only to read it and to apply what was written (see [`EntryCell`]).
    async fn flush_entry(&self, entry: &SharedEntry, last: bool) {
        let _db = entry.db.lock().await;
        let now = self.clock.now();
        let read = {
            let mut e = entry.lock().await;
            if e.retired {
                // Another flush retired it since this one listed it: a newer entry of the same
                // tenant and period may be in the map, and must stay there.
                return;
            }
            let was_busy = std::mem::replace(&mut e.busy, false);
            let give_back = last || !was_busy;
            let write = e.unflushed > 0 || e.tokens > 0 || e.lease_until.is_some();
            FlushRead {
                tenant: e.tenant.clone(),
                period_start: e.period.start,
                counted: e.unflushed,
                uncovered: e.uncovered,
                keep: if give_back { 0 } else { e.tokens },
                given_back: if write && give_back {
                    std::mem::take(&mut e.tokens)
                } else {
                    0
                },
                was_busy,
                write,
            }
        };
        let lease_until = now.plus_millis(LEASE_MS);
        let written = if read.write {
            async {
                let mut tx = self.store.begin_write().await?;
                tx.record_usage(
                    &read.tenant,
                    read.period_start,
                    read.counted,
                    &self.holder,
                    read.keep,
                    lease_until,
                )
                .await?;
                tx.commit().await
            }
            .await
        } else {
            Ok(())
        };
        let mut e = entry.lock().await;
        if let Err(err) = written {
            tracing::warn!(error = %err, "usage flush failed; retrying at the next flush");
            // The database still holds what was given back, and the counts are still to write.
            e.tokens += read.given_back;
            e.busy |= read.was_busy;
            return;
        }
        if read.write {
            // Requests counted during the write stay for the next flush.
            e.unflushed -= read.counted;
            e.uncovered -= read.uncovered;
            e.lease_until = (read.keep > 0).then_some(lease_until);
        }
        let still_exhausted = e.exhausted.is_some_and(|(_, until)| now < until);
        if !read.was_busy && !e.busy && e.unflushed == 0 && e.tokens == 0 && !still_exhausted {
            e.retired = true;
            self.remove(&e.tenant, e.period.start);
        }
    }

    /// Reserves a block of the tenant's allowance of `allowance` requests for this process.
    async fn reserve(
        &self,
        e: &mut Entry,
        allowance: u64,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let holder = &self.holder;
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

#[async_trait]
impl UsageMeter for Meter {
    fn count_now(
        &self,
        tenant: &Tenant,
        period: Period,
        allowance: Allowance,
        now: Timestamp,
    ) -> bool {
        self.count_here(tenant, period, allowance, now)
    }

    async fn count(
        &self,
        tenant: &Tenant,
        period: Period,
        allowance: Allowance,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        loop {
            let entry = self.entry(tenant, period);
            self.remember_here(&entry, tenant, period);
            // Uncontended (nearly always: the lock is held only to count, or for a reservation),
            // taking it is one compare-and-swap; awaiting `lock()` builds and polls a future.
            let mut e = match entry.try_lock() {
                Ok(e) => e,
                Err(_) => entry.lock().await,
            };
            if e.retired {
                continue;
            }
            if e.count_covered(allowance, now) {
                return Ok(true);
            }
            let Allowance::Capped { requests, .. } = allowance else {
                unreachable!("an uncapped admission is always covered");
            };
            // A reservation writes: the entry's `db` lock first (a flush may be writing), then
            // the entry again, which may have been given tokens or retired meanwhile.
            drop(e);
            let _db = entry.db.lock().await;
            let mut e = entry.lock().await;
            if e.retired {
                continue;
            }
            if e.count_covered(allowance, now) {
                return Ok(true);
            }
            // No token of a fresh lease: what is left of a lease about to end is not used.
            e.tokens = 0;
            let believed_exhausted = e
                .exhausted
                .is_some_and(|(at, until)| at == requests && now < until);
            if !believed_exhausted {
                self.reserve(&mut e, requests, now).await?;
            }
            return Ok(e.count_covered(allowance, now));
        }
    }

    async fn pending(&self, tenant: &Tenant, period: Period) -> u64 {
        let entry = lock(&self.entries)
            .get(tenant)
            .and_then(|periods| periods.get(&period.start))
            .cloned();
        match entry {
            Some(e) => e.lock().await.unflushed,
            None => 0,
        }
    }

    fn touch(&self, tenant: &Tenant, id: &ApiKeyId, at: Timestamp) {
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

    fn pending_touch(&self, id: &ApiKeyId) -> Option<Timestamp> {
        lock(&self.touches).get(id).map(|u| u.at)
    }

    async fn flush(&self, last: bool) {
        let entries: Vec<SharedEntry> = lock(&self.entries)
            .values()
            .flat_map(|periods| periods.values().cloned())
            .collect();
        for entry in entries {
            self.flush_entry(&entry, last).await;
        }
        // Copied, not taken: until the write commits, a read of the key still finds its use here.
        let mut uses: Vec<KeyUse> = lock(&self.touches).values().cloned().collect();
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
        match written {
            Ok(()) => {
                let mut touches = lock(&self.touches);
                for u in &uses {
                    // A use since the copy stays for the next flush.
                    if touches.get(&u.id).is_some_and(|pending| pending.at <= u.at) {
                        touches.remove(&u.id);
                    }
                }
            }
            Err(err) => {
                tracing::warn!(error = %err, "last_used_at flush failed; retrying at the next flush")
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
