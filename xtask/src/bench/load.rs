//! The load generator: closed-loop workers (each sends its next request when the last one is
//! answered: throughput) and open-loop workers (requests sent on a fixed schedule, latency counted
//! from the scheduled time, so a stall is not hidden by the client waiting: tail latency).

use std::{
    collections::VecDeque,
    future::Future,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use anyhow::Result;
use rand::{rngs::StdRng, SeedableRng};
use serde_json::{json, Value};
use tokio::{sync::Semaphore, time::Instant};

use super::{
    http::Conn,
    scenarios::{Ctx, Scenario, Worker},
};

/// The measured window: requests started before `measure_from` (warm-up) or after `end` are
/// not counted.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub measure_from: Instant,
    pub end: Instant,
}

impl Window {
    pub fn new(warmup: Duration, duration: Duration) -> Window {
        let now = Instant::now();
        Window {
            measure_from: now + warmup,
            end: now + warmup + duration,
        }
    }

    pub fn running(&self) -> bool {
        Instant::now() < self.end
    }
}

/// What one worker saw.
#[derive(Debug, Default)]
pub struct Recorder {
    pub ok: u64,
    pub errors: u64,
    pub lat_us: Vec<u32>,
    pub first_error: Option<String>,
}

impl Recorder {
    /// Records a request scheduled (or started) at `t0` that has just finished.
    pub fn record(&mut self, w: &Window, t0: Instant, ok: bool) {
        if t0 < w.measure_from || t0 >= w.end {
            return;
        }
        let us = t0.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
        if ok {
            self.ok += 1;
            self.lat_us.push(us);
        } else {
            self.errors += 1;
        }
    }

    pub fn error(&mut self, what: impl FnOnce() -> String) {
        if self.first_error.is_none() {
            self.first_error = Some(what());
        }
    }
}

/// The merged result of a run.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub requests: u64,
    pub errors: u64,
    pub secs: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub first_error: Option<String>,
    /// CPU time (user + system) per counted request over the measured window: the server's,
    /// when its process was given, and the load generator's own.
    pub server_cpu_us: Option<f64>,
    pub client_cpu_us: Option<f64>,
}

/// A process's CPU time so far (all its threads, user + system), in microseconds: `/proc`'s
/// clock ticks (100 a second), so a window of a few seconds at full load reads within 1 %.
fn cpu_us(pid: Option<u32>) -> Option<f64> {
    let path = pid.map_or_else(
        || "/proc/self/stat".to_owned(),
        |p| format!("/proc/{p}/stat"),
    );
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the command name (which may hold spaces): state is the 3rd; utime, stime the 14th, 15th.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10_000.0)
}

/// Samples the server's and this process's CPU time at the window's start and end.
async fn cpu_over(window: Window, server: Option<u32>) -> (Option<f64>, Option<f64>) {
    tokio::time::sleep_until(window.measure_from).await;
    let (s0, c0) = (server.and_then(|p| cpu_us(Some(p))), cpu_us(None));
    tokio::time::sleep_until(window.end).await;
    let (s1, c1) = (server.and_then(|p| cpu_us(Some(p))), cpu_us(None));
    (
        s0.zip(s1).map(|(a, b)| b - a),
        c0.zip(c1).map(|(a, b)| b - a),
    )
}

impl Stats {
    pub fn merge(parts: Vec<Recorder>, secs: f64) -> Stats {
        let mut lat: Vec<u32> = Vec::new();
        let (mut requests, mut errors, mut first_error) = (0, 0, None);
        for p in parts {
            requests += p.ok;
            errors += p.errors;
            lat.extend(p.lat_us);
            if first_error.is_none() {
                first_error = p.first_error;
            }
        }
        lat.sort_unstable();
        let q = |f: f64| {
            if lat.is_empty() {
                0.0
            } else {
                f64::from(lat[((lat.len() - 1) as f64 * f).round() as usize]) / 1000.0
            }
        };
        Stats {
            requests,
            errors,
            secs,
            p50_ms: q(0.50),
            p99_ms: q(0.99),
            first_error,
            ..Stats::default()
        }
    }

    pub fn rps(&self) -> f64 {
        self.requests as f64 / self.secs
    }

    pub fn to_json(&self) -> Value {
        json!({
            "requests": self.requests,
            "errors": self.errors,
            "seconds": self.secs,
            "throughput_per_s": self.rps(),
            "p50_ms": self.p50_ms,
            "p99_ms": self.p99_ms,
            "first_error": self.first_error,
            "server_cpu_us_per_request": self.server_cpu_us,
            "client_cpu_us_per_request": self.client_cpu_us,
        })
    }
}

/// Runs `workers` copies of `work` over one window and merges what they recorded, with the CPU
/// time per request of `server` (a process id) and of this process over the measured window.
pub async fn run_workers<F, Fut>(
    workers: usize,
    warmup: Duration,
    duration: Duration,
    server: Option<u32>,
    work: F,
) -> Stats
where
    F: Fn(usize, Window) -> Fut,
    Fut: Future<Output = Recorder> + Send + 'static,
{
    let window = Window::new(warmup, duration);
    let cpu = tokio::spawn(cpu_over(window, server));
    let handles: Vec<_> = (0..workers)
        .map(|i| tokio::spawn(work(i, window)))
        .collect();
    let mut parts = Vec::with_capacity(workers);
    for h in handles {
        parts.push(h.await.unwrap_or_default());
    }
    let mut stats = Stats::merge(parts, duration.as_secs_f64());
    let (server_us, client_us) = cpu.await.unwrap_or_default();
    let per_request = |us: f64| us / stats.requests.max(1) as f64;
    (stats.server_cpu_us, stats.client_cpu_us) =
        (server_us.map(per_request), client_us.map(per_request));
    stats
}

/// The open loop's arrivals: request times `interval` apart over the window, released at their
/// time by a thread of their own and taken, oldest first, by whichever connection is free.
///
/// Not `tokio::time::sleep_until`: tokio's timer rounds every deadline up to the next
/// millisecond, so a schedule kept with it sends each request up to a millisecond late (and
/// counts that as the server's latency) and sends them in bursts at the millisecond ticks
/// (at 13,500/s, 13 at once). `std::thread::sleep` keeps to Linux's 50 µs timer slack, as
/// `pgbench --rate`, the raw baseline's open loop, does.
pub struct Arrivals {
    due: Mutex<VecDeque<Instant>>,
    released: Semaphore,
}

/// How far ahead of its time an arrival may be released along with one that is due: the
/// kernel's own timer slack for a sleeping thread, so no wake-up is spent on one alone.
const ARRIVAL_SLACK: Duration = Duration::from_micros(50);

impl Arrivals {
    /// Starts releasing arrivals `interval` apart from now until the window's end. The schedule
    /// starts here, not when the pacer thread first runs, so a thread that starts late releases
    /// the arrivals already due at once instead of losing them.
    pub fn start(window: Window, interval: Duration) -> Arc<Arrivals> {
        let arrivals = Arc::new(Arrivals {
            due: Mutex::new(VecDeque::new()),
            released: Semaphore::new(0),
        });
        let pacer = arrivals.clone();
        let first = Instant::now();
        std::thread::spawn(move || pacer.release(first, window, interval));
        arrivals
    }

    fn release(&self, first: Instant, window: Window, interval: Duration) {
        let mut next = first;
        while next < window.end {
            let now = Instant::now();
            if next > now + ARRIVAL_SLACK {
                std::thread::sleep(next - now);
                continue;
            }
            let mut n = 0;
            {
                let mut due = self.due.lock().unwrap_or_else(PoisonError::into_inner);
                while next <= now + ARRIVAL_SLACK && next < window.end {
                    due.push_back(next);
                    next += interval;
                    n += 1;
                }
            }
            self.released.add_permits(n);
        }
        // Connections still busy at the end take what is left (see `next`).
        self.released.close();
    }

    /// The scheduled time of the next request to send, once it is due; `None` when the window
    /// is over and every arrival has been taken.
    async fn next(&self) -> Option<Instant> {
        if let Ok(permit) = self.released.acquire().await {
            permit.forget();
        }
        // After `close`, the arrivals released but not yet taken are still sent: a backlog at
        // the window's end is what a stall looks like, and it is counted.
        self.due
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop_front()
    }
}

/// One HTTP worker: a connection (reopened after an error) and the scenario's requests, sent as
/// soon as the last is answered (`arrivals` is `None`: closed loop) or at the arrivals' times
/// (open loop; latency counted from the scheduled time).
async fn http_worker(
    addr: Arc<str>,
    key: Option<Arc<str>>,
    ctx: Arc<Ctx>,
    scenario: &'static Scenario,
    mut worker: Worker,
    window: Window,
    arrivals: Option<Arc<Arrivals>>,
) -> Recorder {
    let mut rec = Recorder::default();
    let mut conn: Option<Conn> = None;
    loop {
        let t0 = match &arrivals {
            Some(arrivals) => match arrivals.next().await {
                Some(t) => t,
                None => break,
            },
            None if window.running() => Instant::now(),
            None => break,
        };
        if conn.is_none() {
            match Conn::open(&addr, key.as_deref()).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    rec.error(|| format!("{e:#}"));
                    rec.record(&window, t0, false);
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let req = (scenario.make)(&ctx, &mut worker);
        let Some(c) = conn.as_mut() else { continue };
        match c.send(&req).await {
            Ok(resp) => {
                let ok = (200..300).contains(&resp.status);
                if !ok {
                    rec.error(|| {
                        format!(
                            "{} {} -> {}: {}",
                            req.method,
                            req.path,
                            resp.status,
                            String::from_utf8_lossy(resp.body)
                        )
                    });
                }
                if let Some(after) = scenario.after {
                    after(&ctx, &mut worker, &resp);
                }
                rec.record(&window, t0, ok);
            }
            Err(e) => {
                rec.error(|| format!("{} {}: {e:#}", req.method, req.path));
                rec.record(&window, t0, false);
                conn = None;
            }
        }
    }
    rec
}

fn worker(id: usize, workers: usize, seed: u64) -> Worker {
    Worker {
        id,
        workers,
        n: 0,
        rng: StdRng::seed_from_u64(seed ^ (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
        last: 0,
    }
}

/// Closed loop: `concurrency` connections, each sending as fast as answers come.
/// `server` is the server's process id, for its CPU time per request.
#[allow(clippy::too_many_arguments)]
pub async fn closed(
    addr: &str,
    key: Option<&str>,
    ctx: Arc<Ctx>,
    scenario: &'static Scenario,
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
    server: Option<u32>,
) -> Stats {
    let addr: Arc<str> = addr.into();
    let key: Option<Arc<str>> = key.map(Into::into);
    let seed = ctx.next_seed();
    run_workers(concurrency, warmup, duration, server, |i, window| {
        http_worker(
            addr.clone(),
            key.clone(),
            ctx.clone(),
            scenario,
            worker(i, concurrency, seed),
            window,
            None,
        )
    })
    .await
}

/// Open loop: `connections` connections sharing `rate` requests per second between them.
#[allow(clippy::too_many_arguments)]
pub async fn open(
    addr: &str,
    key: Option<&str>,
    ctx: Arc<Ctx>,
    scenario: &'static Scenario,
    connections: usize,
    rate: f64,
    warmup: Duration,
    duration: Duration,
) -> Stats {
    let addr: Arc<str> = addr.into();
    let key: Option<Arc<str>> = key.map(Into::into);
    let seed = ctx.next_seed();
    let interval = Duration::from_secs_f64(1.0 / rate.max(1.0));
    let arrivals = OnceLock::new();
    run_workers(connections, warmup, duration, None, |i, window| {
        let arrivals = arrivals
            .get_or_init(|| Arrivals::start(window, interval))
            .clone();
        http_worker(
            addr.clone(),
            key.clone(),
            ctx.clone(),
            scenario,
            worker(i, connections, seed),
            window,
            Some(arrivals),
        )
    })
    .await
}

/// Runs `f` in a fresh multi-threaded runtime (the load generator's own).
pub fn block_on<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every arrival of the window is handed out once, in order, `interval` apart, and none
    /// before its time (less the slack); then `next` ends.
    #[test]
    fn arrivals_are_released_at_their_time_and_all_taken() {
        let taken = block_on(async {
            let window = Window::new(Duration::ZERO, Duration::from_millis(60));
            let arrivals = Arrivals::start(window, Duration::from_millis(2));
            let mut taken = Vec::new();
            while let Some(t) = arrivals.next().await {
                let now = Instant::now();
                assert!(now + ARRIVAL_SLACK >= t, "released {:?} early", t - now);
                taken.push(t);
            }
            Ok(taken)
        })
        .unwrap();
        assert!((29..=30).contains(&taken.len()), "{} arrivals", taken.len());
        for pair in taken.windows(2) {
            assert_eq!(pair[1] - pair[0], Duration::from_millis(2));
        }
    }

    /// Arrivals not taken by the window's end (every connection busy) are still handed out
    /// afterwards, so a stall at the end is counted, not dropped.
    #[test]
    fn a_backlog_at_the_end_is_still_handed_out() {
        let taken = block_on(async {
            let window = Window::new(Duration::ZERO, Duration::from_millis(20));
            let arrivals = Arrivals::start(window, Duration::from_millis(1));
            tokio::time::sleep(Duration::from_millis(60)).await;
            let mut n = 0;
            while arrivals.next().await.is_some() {
                n += 1;
            }
            Ok(n)
        })
        .unwrap();
        assert!((19..=20).contains(&taken), "{taken} arrivals");
    }
}
