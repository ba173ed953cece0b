//! The webhook worker `serve` runs beside the HTTP server (decisions §11, §16).
//!
//! Three loops share the work of this process; any number of processes on one database share it
//! with each other through the store (events are taken and deliveries claimed with
//! `FOR UPDATE SKIP LOCKED` on Postgres):
//! - the **dispatcher** turns new events into deliveries, a batch per transaction, as long as
//!   there are more, then polls;
//! - the **sender** claims due deliveries under a lease (as many as it has free send slots),
//!   sends each on its own task (signed, through `crm-outbound`, connections kept alive), and
//!   polls when nothing is due;
//! - the **recorder** writes finished attempts in batches, one transaction each.
//!
//! A process killed mid-delivery records nothing; its claims come due again when their lease
//! ends and another process (or this one, restarted) sends them: delivery is at least once.
//! On shutdown the loops stop claiming, in-flight attempts finish (bounded by the timeout) and
//! their outcomes are recorded.

use std::{sync::Arc, time::Duration};

use anyhow::{bail, Result};
use clap::Args;
use crm_app::{ports::AttemptOutcome, webhooks::Outbound, App};
use crm_domain::{webhook::parse_duration_ms, Backoff};
use tokio::sync::{mpsc, watch, Semaphore};

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
    /// How often the worker looks for new events and due deliveries when idle.
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
        let backoff = Backoff::parse(&self.webhook_backoff).map_err(|e| anyhow::anyhow!("CRM_WEBHOOK_BACKOFF: {e}"))?;
        let timeout = duration("CRM_WEBHOOK_TIMEOUT", &self.webhook_timeout)?;
        let lease_ms = duration("CRM_WEBHOOK_LEASE", &self.webhook_lease)?;
        let poll = duration("CRM_WEBHOOK_POLL", &self.webhook_poll)?;
        if timeout < 1 {
            bail!("CRM_WEBHOOK_TIMEOUT must be positive");
        }
        if lease_ms <= timeout {
            bail!("CRM_WEBHOOK_LEASE ({lease_ms} ms) must exceed CRM_WEBHOOK_TIMEOUT ({timeout} ms)");
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

async fn dispatch_loop(app: App, poll: Duration, mut stop: watch::Receiver<bool>) {
    loop {
        let wait = match app.dispatch_events(DISPATCH_BATCH).await {
            Ok(n) if n as u32 >= DISPATCH_BATCH => Duration::ZERO,
            Ok(_) => poll,
            Err(e) => {
                tracing::warn!(error = %e, "webhook fan-out failed; retrying");
                poll.max(Duration::from_secs(1))
            }
        };
        if (wait.is_zero() && *stop.borrow()) || (!wait.is_zero() && pause(&mut stop, wait).await) {
            return;
        }
    }
}

async fn send_loop(
    app: App,
    outbound: Arc<dyn Outbound>,
    cfg: WorkerConfig,
    record: mpsc::Sender<AttemptOutcome>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(cfg.concurrency));
    let backoff = Arc::new(cfg.backoff.clone());
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
        while permits.len() < target && slots.available_permits() + permits.len() < cfg.concurrency {
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
            let (app, outbound, backoff, record) = (app.clone(), outbound.clone(), backoff.clone(), record.clone());
            tokio::spawn(async move {
                let outcome = app.attempt_delivery(&*outbound, delivery, &backoff).await;
                let _ = record.send(outcome).await;
                drop(permit);
            });
        }
        drop(permits);
        if got < want && pause(&mut stop, cfg.poll).await {
            break;
        }
    }
    // Let in-flight attempts finish (each is bounded by the timeout) so their outcomes are kept.
    let _ = tokio::time::timeout(cfg.timeout + Duration::from_secs(1), slots.acquire_many(cfg.concurrency as u32)).await;
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
pub fn start(app: App, outbound: Arc<dyn Outbound>, cfg: WorkerConfig, stop: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (tx, rx) = mpsc::channel(RECORD_BATCH * 4);
        let recorder = tokio::spawn(record_loop(app.clone(), rx));
        let dispatcher = tokio::spawn(dispatch_loop(app.clone(), cfg.poll, stop.clone()));
        let sender = tokio::spawn(send_loop(app, outbound, cfg, tx, stop));
        let _ = dispatcher.await;
        let _ = sender.await;
        // Every sender task has dropped its channel handle once the slots are back (or timed out).
        let _ = tokio::time::timeout(Duration::from_secs(5), recorder).await;
    })
}
