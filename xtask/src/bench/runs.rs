//! The runs that are not one request shape: the mixed run with the WAL sampled, the webhook
//! fan-out and the sequence steps (see background.rs).

use super::*;

/// The mixed run: closed loop at 32 connections (60 % get, 20 % create, 10 % deal stage, 10 %
/// search) in consecutive windows, with the SQLite WAL size sampled throughout.
#[allow(clippy::too_many_arguments)]
pub(super) fn mixed(
    store: Store,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    sqlite: Option<&Path>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    let wal_path = sqlite.map(|p| PathBuf::from(format!("{}-wal", p.display())));
    let wal_max = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = wal_path.clone().map(|wal| {
        let (wal_max, stop) = (wal_max.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let size = std::fs::metadata(&wal).map_or(0, |m| m.len());
                wal_max.fetch_max(size, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(250));
            }
        })
    });
    server.reset_peak();
    let window = opts.mixed / opts.mixed_windows;
    let mut windows = Vec::new();
    for i in 0..opts.mixed_windows {
        let stats = load::block_on(async {
            Ok(load::closed(
                addr,
                Some(key),
                ctx.clone(),
                &scenarios::MIXED,
                32,
                Duration::ZERO,
                window,
                None,
            )
            .await)
        })?;
        eprintln!(
            "xtask bench: {sname} mixed window {i}: {:.0}/s p99 {:.2} ms errors {}",
            stats.rps(),
            stats.p99_ms,
            stats.errors
        );
        windows.push(stats);
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(s) = sampler {
        let _ = s.join();
    }
    let (first, last) = (
        windows.first().map_or(0.0, load::Stats::rps),
        windows.last().map_or(0.0, load::Stats::rps),
    );
    let requests: u64 = windows.iter().map(|s| s.requests).sum();
    let errors: u64 = windows.iter().map(|s| s.errors).sum();
    let p99 = windows.iter().map(|s| s.p99_ms).fold(0.0, f64::max);
    let p50 = windows.iter().map(|s| s.p50_ms).sum::<f64>() / windows.len().max(1) as f64;
    let mut row = Row::new(
        sname,
        "mixed",
        32,
        &format!("closed {}×{}s", opts.mixed_windows, window.as_secs()),
    );
    row.stats = Some(load::Stats {
        requests,
        errors,
        secs: opts.mixed.as_secs_f64(),
        p50_ms: p50,
        p99_ms: p99,
        first_error: windows.iter().find_map(|s| s.first_error.clone()),
        ..Default::default()
    });
    row.rss_peak_mib = Some(server.memory().1);
    let ratio = if first > 0.0 { last / first } else { 0.0 };
    let mut note = format!("last window ÷ first = {}", percent(ratio));
    if wal_path.is_some() {
        let wal_mib = wal_max.load(Ordering::Relaxed) as f64 / 1048576.0;
        note.push_str(&format!("; WAL max {wal_mib:.1} MiB"));
        row.check(format!("WAL ≤ {WAL_MAX_MIB} MiB"), wal_mib <= WAL_MAX_MIB);
        if opts.long {
            row.check("last minute ≥ 90 % of first".to_owned(), ratio >= 0.9);
        }
    }
    row.note = Some(note);
    rows.push(row);
    Ok(())
}

/// `webhook_fanout` (see background.rs): 5 test-mode webhooks, contacts created at a fixed rate,
/// deliveries per second at the local receiver and event-to-delivery latency.
#[allow(clippy::too_many_arguments)]
pub(super) fn webhook_fanout(
    store: Store,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    server.reset_peak();
    let f = load::block_on(background::webhook_fanout(
        addr,
        key,
        ctx.clone(),
        opts.duration,
    ))?;
    eprintln!(
        "xtask bench: {sname} webhook_fanout: {} contacts, {} of {} deliveries ({} duplicates), {:.0}/s, p50 {:.2} ms p99 {:.2} ms",
        f.contacts,
        f.deliveries,
        f.expected,
        f.duplicates,
        f.stats.rps(),
        f.stats.p50_ms,
        f.stats.p99_ms
    );
    let mode = format!(
        "{}×{:.0}/s",
        background::WEBHOOKS,
        background::CONTACTS_PER_SEC
    );
    let mut row = Row::new(sname, "webhook_fanout", background::WEBHOOKS, &mode);
    row.rss_peak_mib = Some(server.memory().1);
    let (rps, p99) = (f.stats.rps(), f.stats.p99_ms);
    let mut note = format!(
        "{} contacts → {} of {} deliveries, {} duplicates ({} of older events left out); latency = event created_at → receipt",
        f.contacts, f.deliveries, f.expected, f.duplicates, f.older
    );
    if let Some(e) = &f.stats.first_error {
        note.push_str(&format!("; {e}"));
    }
    row.stats = Some(f.stats);
    row.check(
        format!(
            "≥ {} deliveries/s, p99 ≤ {} ms",
            background::FANOUT_MIN_PER_SEC,
            background::FANOUT_MAX_P99_MS
        ),
        rps >= background::FANOUT_MIN_PER_SEC && p99 <= background::FANOUT_MAX_P99_MS,
    );
    row.note = Some(note);
    rows.push(row);
    Ok(())
}

/// `sequence_steps` (see background.rs): 10,000 due steps sent by one test-mode server.
pub(super) fn sequence_steps(
    store: Store,
    bin: &Path,
    db_url: &str,
    run_dir: &Path,
    rows: &mut Vec<Row>,
) -> Result<()> {
    let sname = store.name();
    let r = background::sequence_steps(bin, db_url, run_dir, sname)?;
    let rate = r.steps as f64 / r.secs;
    let span_rate = if r.span_secs > 0.0 {
        r.steps as f64 / r.span_secs
    } else {
        0.0
    };
    eprintln!(
        "xtask bench: {sname} sequence_steps: {} steps in {:.2} s (server start included): {rate:.0}/s; first to last email {:.2} s: {span_rate:.0}/s",
        r.steps, r.secs, r.span_secs
    );
    let mut row = Row::new(sname, "sequence_steps", 0, "10,000 due");
    row.stats = Some(load::Stats {
        requests: r.steps as u64,
        secs: r.secs,
        ..Default::default()
    });
    row.check(
        format!("≥ {} steps/s", background::SEQUENCE_MIN_PER_SEC),
        rate >= background::SEQUENCE_MIN_PER_SEC,
    );
    row.note = Some(format!(
        "steps ÷ seconds from the sending server's start until the database holds them all (then listed through GET /v1/emails, untimed; no latency measured); first to last email created_at: {:.2} s = {span_rate:.0}/s",
        r.span_secs
    ));
    rows.push(row);
    Ok(())
}
