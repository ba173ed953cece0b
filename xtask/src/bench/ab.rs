//! The A/B comparisons: a scenario alternated with the hello-world ceiling, or with another
//! scenario on the same server (docs/performance.md, "Ratio").

use super::*;

/// Rounds of the A/B comparison with hello-world (docs/performance.md, "Ratio").
pub(super) const HELLO_ROUNDS: usize = 5;

/// A round counts only if the hello-world rates just before and just after it differ by at most
/// this share of their mean: this VM's speed changes in steps (hello-world at 32 connections
/// jumped from 170,000 to 320,000/s between two rounds of one run), and a round that straddles
/// a step compares the scenario with a rate it did not run at.
pub(super) const STEADY: f64 = 0.15;

/// A scenario compared with its baseline: the two alternated, each round's ratio taken against
/// the mean of the baseline's rates just before and just after it.
pub(super) struct Ab {
    /// The round whose ratio is the median: the row's figures.
    pub(super) median_round: load::Stats,
    /// The baseline rate that round is compared with, so the row's ratio is the median.
    pub(super) median_base: f64,
    pub(super) ratios: Vec<f64>,
    /// Per round: whether the baseline held its speed through it ([`STEADY`]).
    pub(super) steady: Vec<bool>,
    pub(super) base: Vec<f64>,
    /// The scenario compared with.
    pub(super) ceiling: &'static str,
}

impl Ab {
    pub(super) fn note(&self) -> String {
        let pct: Vec<String> = self
            .ratios
            .iter()
            .zip(&self.steady)
            .map(|(r, s)| format!("{:.0}{}", r * 100.0, if *s { "" } else { "*" }))
            .collect();
        let base: Vec<String> = self
            .base
            .iter()
            .map(|h| format!("{:.0}", h / 1000.0))
            .collect();
        let unsteady = if self.steady.iter().all(|s| *s) {
            String::new()
        } else {
            " (* machine changed speed: not counted)".to_owned()
        };
        format!(
            "ratio per round {} %{unsteady}; {} {} k/s",
            pct.join(" / "),
            self.ceiling,
            base.join(" / ")
        )
    }
}

/// On this shared machine hello-world's own rate moves by up to 25 % within a minute, and a
/// single before-and-after bracket left the ratio ±8 points from run to run. So the baseline and
/// the scenario alternate in [`HELLO_ROUNDS`] rounds (`duration` split among them; the first of
/// each with the full warm-up, the rest on warm servers with a short one), and the median
/// of the steady rounds (at least three; else of all) is the row's ratio. Every round's ratio is
/// in the row's note.
#[allow(clippy::too_many_arguments)]
pub(super) fn alternate_with_hello(
    sc: &'static Scenario,
    ceiling: &'static Scenario,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    hello: &Ceiling,
    c: usize,
) -> Result<Ab> {
    let base = |warmup: Duration, round: Duration| -> Result<f64> {
        Ok(hello.closed(ceiling, c, warmup, round)?.rps())
    };
    alternate(sc, ceiling, opts, server, addr, key, ctx, c, base)
}

/// [`alternate_with_hello`] with another scenario of the same server as the baseline.
#[allow(clippy::too_many_arguments)]
pub(super) fn alternate_with_scenario(
    sc: &'static Scenario,
    other: &'static Scenario,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    c: usize,
) -> Result<Ab> {
    let base = |warmup: Duration, round: Duration| -> Result<f64> {
        Ok(closed(other, server, addr, key, ctx, c, warmup, round)?.rps())
    };
    alternate(sc, other, opts, server, addr, key, ctx, c, base)
}

#[allow(clippy::too_many_arguments)]
fn closed(
    sc: &'static Scenario,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    c: usize,
    warmup: Duration,
    round: Duration,
) -> Result<load::Stats> {
    load::block_on(async {
        Ok(load::closed(
            addr,
            Some(key),
            ctx.clone(),
            sc,
            c,
            warmup,
            round,
            Some(server.pid()),
        )
        .await)
    })
}

#[allow(clippy::too_many_arguments)]
fn alternate(
    sc: &'static Scenario,
    baseline: &'static Scenario,
    opts: &Opts,
    server: &procs::Proc,
    addr: &str,
    key: &str,
    ctx: &Arc<Ctx>,
    c: usize,
    base_run: impl Fn(Duration, Duration) -> Result<f64>,
) -> Result<Ab> {
    let round = (opts.duration / 2).max(Duration::from_secs(1));
    let short_warmup = Duration::from_millis(300);
    let warmup = |i: usize| if i == 0 { opts.warmup } else { short_warmup };
    let mut base_rates = vec![base_run(warmup(0), round)?];
    let mut rounds = Vec::with_capacity(HELLO_ROUNDS);
    for i in 0..HELLO_ROUNDS {
        let stats = closed(sc, server, addr, key, ctx, c, warmup(i), round)?;
        base_rates.push(base_run(warmup(i + 1), round)?);
        let base = (base_rates[i] + base_rates[i + 1]) / 2.0;
        let steady = (base_rates[i] - base_rates[i + 1]).abs() <= STEADY * base;
        rounds.push((stats.rps() / base, base, stats, steady));
    }
    let ratios: Vec<f64> = rounds.iter().map(|r| r.0).collect();
    let steady: Vec<bool> = rounds.iter().map(|r| r.3).collect();
    if steady.iter().filter(|s| **s).count() >= 3 {
        rounds.retain(|r| r.3);
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    // The lower of the two middle rounds when an even number are steady: never the kinder one.
    let (_, median_base, median_round, _) = rounds.swap_remove((rounds.len() - 1) / 2);
    Ok(Ab {
        median_round,
        median_base,
        ratios,
        steady,
        base: base_rates,
        ceiling: baseline.name,
    })
}
