//! The webhook worker `serve` runs beside the HTTP server (decisions §11, §16).
//!
//! Three loops share the work of this process; any number of processes on one database share it
//! with each other through the store (events are taken and deliveries claimed with
//! `FOR UPDATE SKIP LOCKED` on Postgres):
//! - the **dispatcher** turns new events into deliveries, a batch per transaction, as long as
//!   there are more, then polls; while idle, events this process writes wake it (the
//!   `events_written` signal of [`crm_runtime::Runtime`]);
//! - the **sender** claims due deliveries under a lease (as many as it has free send slots),
//!   sends each on its own task (signed, through `crm-outbound`, connections kept alive), and
//!   polls when nothing is due; while idle, deliveries the dispatcher makes wake it;
//! - the **recorder** writes finished attempts in batches, one transaction each.
//!
//! An idle loop's poll grows from `CRM_WEBHOOK_POLL` to 8 times that while it finds nothing
//! ([`Idle`]), so an idle process does not ask the database twenty times a second.
//!
//! A process killed mid-delivery records nothing; its claims come due again when their lease
//! ends and another process (or this one, restarted) sends them: delivery is at least once.
//! On shutdown the loops stop claiming, in-flight attempts finish (bounded by the timeout) and
//! their outcomes are recorded.

use std::{pin::Pin, sync::Arc, time::Duration};

use anyhow::{bail, Result};
use clap::Args;
use crm_app::{
    ports::AttemptOutcome,
    webhooks::{Dispatched, Outbound},
    App,
};
use crm_domain::{webhook::parse_duration_ms, Backoff};
use tokio::sync::{futures::Notified, mpsc, watch, Notify, Semaphore};

/// Webhook delivery settings.
#[derive(Args, Debug, Clone)]
pub struct WebhookArgs {
    /// Waits between failed attempts 1..5: 1 to 5 comma-separated durations (ms, s, m, h), the
    /// last repeating; the 6th failure dead-letters.
    #[arg(long, env = "CRM_WEBHOOK_BACKOFF", default_value = "1m,5m,30m,2h,6h")]
    pub webhook_backoff: String,
    /// Timeout of one delivery attempt.
    #[arg(long, env = "CRM_WEBHOOK_TIMEOUT", default_value = "10s")]
    pub webhook_timeout: String,
    /// Attempts in flight at once in this process.
    #[arg(long, env = "CRM_WEBHOOK_CONCURRENCY", default_value_t = 64)]
    pub webhook_concurrency: usize,
    /// How long a claimed delivery stays with this process before another may take it (must
    /// exceed the timeout; a killed process's deliveries are retried after it).
    #[arg(long, env = "CRM_WEBHOOK_LEASE", default_value = "60s")]
    pub webhook_lease: String,
    /// How soon the worker looks again for new events and due deliveries when it found none;
    /// doubled with each further empty look, up to 8 times this.
    #[arg(long, env = "CRM_WEBHOOK_POLL", default_value = "100ms")]
    pub webhook_poll: String,
    /// Run the worker in this process (`false`: this process only serves the API).
    #[arg(long, env = "CRM_WEBHOOK_WORKER", default_value_t = true, action = clap::ArgAction::Set)]
    pub webhook_worker: bool,
}

/// The worker's settings, checked.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub backoff: Backoff,
    pub timeout: Duration,
    pub concurrency: usize,
    pub lease_ms: i64,
    pub poll: Duration,
    pub enabled: bool,
}

/// Events per fan-out transaction.
const DISPATCH_BATCH: u32 = 500;
/// Deliveries per claim.
const CLAIM_BATCH: usize = 200;
/// How long a claim waits for more free slots while sends are in flight.
const LINGER: Duration = Duration::from_millis(5);
/// Outcomes per recording transaction.
const RECORD_BATCH: usize = 500;

fn duration(name: &str, raw: &str) -> Result<i64> {
    match parse_duration_ms(raw) {
        Some(ms) => Ok(ms),
        None => bail!("{name}: `{raw}` is not a duration (e.g. 250ms, 10s, 1m)"),
    }
}

impl WebhookArgs {
    pub fn config(&self) -> Result<WorkerConfig> {
        let backoff = Backoff::parse(&self.webhook_backoff)
            .map_err(|e| anyhow::anyhow!("CRM_WEBHOOK_BACKOFF: {e}"))?;
        let timeout = duration("CRM_WEBHOOK_TIMEOUT", &self.webhook_timeout)?;
        let lease_ms = duration("CRM_WEBHOOK_LEASE", &self.webhook_lease)?;
        let poll = duration("CRM_WEBHOOK_POLL", &self.webhook_poll)?;
        if timeout < 1 {
            bail!("CRM_WEBHOOK_TIMEOUT must be positive");
        }
        if lease_ms <= timeout {
            bail!(
                "CRM_WEBHOOK_LEASE ({lease_ms} ms) must exceed CRM_WEBHOOK_TIMEOUT ({timeout} ms)"
            );
        }
        if self.webhook_concurrency == 0 {
            bail!("CRM_WEBHOOK_CONCURRENCY must be at least 1");
        }
        Ok(WorkerConfig {
            backoff,
            timeout: Duration::from_millis(timeout as u64),
            concurrency: self.webhook_concurrency,
            lease_ms,
            poll: Duration::from_millis(poll.max(1) as u64),
            enabled: self.webhook_worker,
        })
    }
}

/// Sleeps `d`, or less if shutdown comes first; returns whether to stop.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => *stop.borrow(),
        _ = stop.changed() => true,
    }
}

/// How many times an idle loop's wait doubles: up to 8 × `poll`, so an idle process looks about
/// once every 0.8 s by default instead of ten times a second (see [`Idle`]).
const IDLE_DOUBLINGS: u32 = 3;

/// How many empty looks after a wake-up still wait only `poll`: a write inside a transaction
/// announces its events before it commits, so the looks right after it may find nothing yet.
const LOOKS_HELD_AFTER_WAKE: u32 = 3;

/// How long a loop waits before it looks again: `poll` after a look that found work, after the
/// first empty one and for [`LOOKS_HELD_AFTER_WAKE`] empty looks after a wake-up; else twice as
/// long after each further empty look, up to 2^[`IDLE_DOUBLINGS`] × `poll`.
#[derive(Debug, Default)]
struct Idle {
    empty_looks: u32,
    /// Empty looks still to wait only `poll` after a wake-up.
    held: u32,
}

impl Idle {
    fn found(&mut self, work: bool) {
        if work {
            self.empty_looks = 0;
            self.held = 0;
        } else if self.held > 0 {
            self.held -= 1;
            self.empty_looks = 1;
        } else {
            self.empty_looks = self.empty_looks.saturating_add(1);
        }
    }

    fn woken(&mut self) {
        self.empty_looks = 0;
        self.held = LOOKS_HELD_AFTER_WAKE;
    }

    fn wait(&self, poll: Duration) -> Duration {
        let factor = 1u32 << self.empty_looks.saturating_sub(1).min(IDLE_DOUBLINGS);
        poll.saturating_mul(factor)
    }

    /// Sleeps this loop's wait, or shutdown comes first; returns whether to stop. After a look
    /// that found work the wait is `poll` whatever else is announced meanwhile: each look is a
    /// transaction, and under load a look per write would multiply them. After an empty look,
    /// `woken` (armed before that look, so that a write during it counts) ends the wait at once.
    async fn pause(
        &mut self,
        poll: Duration,
        woken: Pin<&mut Notified<'_>>,
        stop: &mut watch::Receiver<bool>,
    ) -> bool {
        if self.empty_looks == 0 {
            return pause(stop, poll).await;
        }
        if *stop.borrow() {
            return true;
        }
        tokio::select! {
            _ = tokio::time::sleep(self.wait(poll)) => *stop.borrow(),
            _ = woken => {
                self.woken();
                *stop.borrow()
            }
            _ = stop.changed() => true,
        }
    }
}

/// Turns new events into deliveries: again at once after a full batch, else after the loop's
/// wait ([`Idle`]), which `wake` (this process wrote events) ends early only after an empty
/// look. `sender` is told when deliveries were made.
async fn dispatch_loop<F, Fut>(
    mut dispatch: F,
    poll: Duration,
    wake: Arc<Notify>,
    sender: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Dispatched, crm_app::AppError>>,
{
    let mut idle = Idle::default();
    loop {
        // Armed before the look, so that events written during it end the pause after it;
        // `notify_waiters` stores nothing for a loop that has not armed one.
        let mut woken = std::pin::pin!(wake.notified());
        woken.as_mut().enable();
        match dispatch().await {
            Ok(done) => {
                idle.found(done.events > 0);
                if done.deliveries > 0 {
                    sender.notify_waiters();
                }
                if done.events as u32 >= DISPATCH_BATCH {
                    if *stop.borrow() {
                        return;
                    }
                    continue;
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "webhook fan-out failed; retrying");
                if pause(&mut stop, poll.max(Duration::from_secs(1))).await {
                    return;
                }
                continue;
            }
        }
        if idle.pause(poll, woken.as_mut(), &mut stop).await {
            return;
        }
    }
}

async fn send_loop(
    app: App,
    outbound: Arc<dyn Outbound>,
    cfg: WorkerConfig,
    record: mpsc::Sender<AttemptOutcome>,
    wake: Arc<Notify>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(cfg.concurrency));
    let backoff = Arc::new(cfg.backoff.clone());
    let mut idle = Idle::default();
    loop {
        if *stop.borrow() {
            break;
        }
        // Wait for a free slot, then claim as many as are free.
        let first = tokio::select! {
            p = slots.clone().acquire_owned() => p.expect("never closed"),
            _ = stop.changed() => break,
        };
        // One claim should serve several slots: while sends are in flight and fewer than half
        // the slots are free, wait a moment for more to come back (each claim is a transaction).
        let mut permits = vec![first];
        let target = (cfg.concurrency / 2).clamp(1, CLAIM_BATCH);
        let linger = tokio::time::Instant::now() + LINGER;
        while permits.len() < target && slots.available_permits() + permits.len() < cfg.concurrency
        {
            match tokio::time::timeout_at(linger, slots.clone().acquire_owned()).await {
                Ok(p) => permits.push(p.expect("never closed")),
                Err(_) => break,
            }
        }
        while permits.len() < CLAIM_BATCH {
            match slots.clone().try_acquire_owned() {
                Ok(p) => permits.push(p),
                Err(_) => break,
            }
        }
        let want = permits.len();
        let mut woken = std::pin::pin!(wake.notified());
        woken.as_mut().enable();
        let claimed = match app.claim_deliveries(want as u32, cfg.lease_ms).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "claiming webhook deliveries failed; retrying");
                drop(permits);
                if pause(&mut stop, cfg.poll.max(Duration::from_secs(1))).await {
                    break;
                }
                continue;
            }
        };
        let got = claimed.len();
        for delivery in claimed {
            let permit = permits.pop().expect("claimed no more than the free slots");
            let (app, outbound, backoff, record) = (
                app.clone(),
                outbound.clone(),
                backoff.clone(),
                record.clone(),
            );
            tokio::spawn(async move {
                let outcome = app.attempt_delivery(&*outbound, delivery, &backoff).await;
                let _ = record.send(outcome).await;
                drop(permit);
            });
        }
        drop(permits);
        idle.found(got > 0);
        if got < want && idle.pause(cfg.poll, woken.as_mut(), &mut stop).await {
            break;
        }
    }
    // Let in-flight attempts finish (each is bounded by the timeout) so their outcomes are kept.
    let _ = tokio::time::timeout(
        cfg.timeout + Duration::from_secs(1),
        slots.acquire_many(cfg.concurrency as u32),
    )
    .await;
}

async fn record_loop(app: App, mut outcomes: mpsc::Receiver<AttemptOutcome>) {
    let mut batch = Vec::with_capacity(RECORD_BATCH);
    while outcomes.recv_many(&mut batch, RECORD_BATCH).await > 0 {
        // A failed write is retried a few times; the claims expire if it never succeeds.
        for attempt in 0..5 {
            match app.record_attempts(&batch).await {
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, attempt, "recording webhook attempts failed");
                    tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
                }
            }
        }
        batch.clear();
    }
}

/// Starts the worker; the returned task ends after `stop` turns true and in-flight work is
/// recorded.
pub fn start(
    app: App,
    events_written: Arc<Notify>,
    outbound: Arc<dyn Outbound>,
    cfg: WorkerConfig,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (tx, rx) = mpsc::channel(RECORD_BATCH * 4);
        let recorder = tokio::spawn(record_loop(app.clone(), rx));
        let deliveries_made = Arc::new(Notify::new());
        let dispatch = {
            let app = app.clone();
            move || {
                let app = app.clone();
                async move { app.dispatch_events(DISPATCH_BATCH).await }
            }
        };
        let dispatcher = tokio::spawn(dispatch_loop(
            dispatch,
            cfg.poll,
            events_written,
            deliveries_made.clone(),
            stop.clone(),
        ));
        let sender = tokio::spawn(send_loop(app, outbound, cfg, tx, deliveries_made, stop));
        let _ = dispatcher.await;
        let _ = sender.await;
        // Every sender task has dropped its channel handle once the slots are back (or timed out).
        let _ = tokio::time::timeout(Duration::from_secs(5), recorder).await;
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex,
    };

    use tokio::time::Instant;

    use super::*;

    /// Milliseconds between consecutive looks.
    fn gaps(looks: &[Instant]) -> Vec<u128> {
        looks
            .windows(2)
            .map(|w| (w[1] - w[0]).as_millis())
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_dispatcher_looks_ever_less_often_and_again_at_once_when_events_are_written() {
        let looks = Arc::new(Mutex::new(Vec::new()));
        let pending = Arc::new(AtomicUsize::new(0));
        let dispatch = {
            let (looks, pending) = (looks.clone(), pending.clone());
            move || {
                looks.lock().unwrap().push(Instant::now());
                let n = pending.swap(0, Ordering::SeqCst);
                async move {
                    Ok(Dispatched {
                        events: n,
                        deliveries: n,
                    })
                }
            }
        };
        let (wake, sender) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(dispatch_loop(
            dispatch,
            Duration::from_millis(100),
            wake.clone(),
            sender.clone(),
            stop_rx,
        ));

        // Idle: the waits double from `poll` up to 8 × `poll`.
        tokio::time::sleep(Duration::from_millis(4_000)).await;
        let idle: Vec<Instant> = std::mem::take(&mut *looks.lock().unwrap());
        assert_eq!(gaps(&idle), [100, 200, 400, 800, 800, 800, 800]);

        // Events written: a look at once, the sender told, and `poll` again from there on, even
        // if more writes are announced while the loop waits after finding work.
        pending.store(3, Ordering::SeqCst);
        let mut told = Box::pin(sender.notified());
        told.as_mut().enable();
        let woken_at = Instant::now();
        wake.notify_waiters();
        tokio::time::timeout(Duration::from_millis(1), told)
            .await
            .expect("the sender is told at once");
        tokio::time::sleep(Duration::from_millis(50)).await;
        wake.notify_waiters();
        tokio::time::sleep(Duration::from_millis(650)).await;
        let after: Vec<Instant> = std::mem::take(&mut *looks.lock().unwrap());
        assert_eq!(after[0], woken_at, "looked when woken");
        assert_eq!(gaps(&after), [100, 100, 200]);

        // Events announced before their commit (inside a transaction): the woken look finds
        // nothing, and the next looks keep to `poll` for a while, so a commit 150 ms later is
        // found at the second of them, not after a doubled wait.
        let woken_at = Instant::now();
        wake.notify_waiters();
        tokio::time::sleep(Duration::from_millis(150)).await;
        pending.store(2, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let held: Vec<Instant> = std::mem::take(&mut *looks.lock().unwrap());
        assert_eq!(
            held.iter()
                .map(|t| (*t - woken_at).as_millis())
                .collect::<Vec<_>>(),
            [0, 100, 200]
        );
        assert_eq!(
            pending.load(Ordering::SeqCst),
            0,
            "the committed events were taken at the third look"
        );

        stop_tx.send(true).unwrap();
        task.await.unwrap();
    }

    #[test]
    fn idle_waits_double_up_to_eight_polls_and_work_resets_them() {
        let poll = Duration::from_millis(50);
        let mut idle = Idle::default();
        let mut waits = vec![idle.wait(poll).as_millis()];
        for _ in 0..6 {
            idle.found(false);
            waits.push(idle.wait(poll).as_millis());
        }
        assert_eq!(waits, [50, 50, 100, 200, 400, 400, 400]);
        idle.found(true);
        assert_eq!(idle.wait(poll), poll);
    }
}
