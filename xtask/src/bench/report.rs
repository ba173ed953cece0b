//! The result table, and what the run records of the machine it ran on.

use super::*;

/// One line of the result table.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) store: &'static str,
    pub(super) scenario: String,
    pub(super) concurrency: usize,
    pub(super) mode: String,
    pub(super) stats: Option<load::Stats>,
    pub(super) per_request: u32,
    pub(super) rss_peak_mib: Option<f64>,
    pub(super) baseline: Option<(String, f64)>,
    pub(super) target: Option<String>,
    pub(super) pass: Option<bool>,
    pub(super) note: Option<String>,
}

impl Row {
    pub(super) fn new(store: &'static str, scenario: &str, concurrency: usize, mode: &str) -> Row {
        Row {
            store,
            scenario: scenario.to_owned(),
            concurrency,
            mode: mode.to_owned(),
            stats: None,
            per_request: 1,
            rss_peak_mib: None,
            baseline: None,
            target: None,
            pass: None,
            note: None,
        }
    }

    pub(super) fn ratio(&self) -> Option<f64> {
        let (_, base) = self.baseline.as_ref()?;
        Some(self.stats.as_ref()?.rps() / base)
    }

    pub(super) fn json(&self) -> Value {
        json!({
            "store": self.store,
            "scenario": self.scenario,
            "concurrency": self.concurrency,
            "mode": self.mode,
            "stats": self.stats.as_ref().map(load::Stats::to_json),
            "records_per_request": self.per_request,
            "rss_peak_mib": self.rss_peak_mib,
            "baseline": self.baseline.as_ref().map(|(n, v)| json!({"name": n, "throughput_per_s": v})),
            "ratio": self.ratio(),
            "target": self.target,
            "pass": self.pass,
            "note": self.note,
        })
    }

    /// Adds a target and whether it holds (a later failing target turns the row to fail).
    pub(super) fn check(&mut self, target: String, pass: bool) {
        self.target = Some(match self.target.take() {
            Some(t) => format!("{t}; {target}"),
            None => target,
        });
        self.pass = Some(self.pass.unwrap_or(true) && pass);
    }
}

pub(super) fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<9} {:<26} {:>4} {:<13} {:>10} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10} {:>7}  target",
        "store",
        "scenario",
        "conc",
        "mode",
        "thr/s",
        "p50 ms",
        "p99 ms",
        "RSS MiB",
        "srv µs",
        "cli µs",
        "base/s",
        "ratio"
    );
    for r in rows {
        let (thr, p50, p99) = match &r.stats {
            // No latency measured (sequence_steps): both quantiles are 0.
            Some(s) if s.p50_ms == 0.0 && s.p99_ms == 0.0 => {
                (format!("{:.0}", s.rps()), "-".into(), "-".into())
            }
            Some(s) => (
                format!("{:.0}", s.rps()),
                format!("{:.2}", s.p50_ms),
                format!("{:.2}", s.p99_ms),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let base = r
            .baseline
            .as_ref()
            .map_or("-".into(), |(_, v)| format!("{v:.0}"));
        let ratio = r.ratio().map_or("-".into(), percent);
        let rss = r.rss_peak_mib.map_or("-".into(), |v| format!("{v:.1}"));
        let cpu = |us: Option<f64>| us.map_or("-".into(), |v| format!("{v:.1}"));
        let (srv, cli) = (
            cpu(r.stats.as_ref().and_then(|s| s.server_cpu_us)),
            cpu(r.stats.as_ref().and_then(|s| s.client_cpu_us)),
        );
        let target = match (&r.target, r.pass) {
            (Some(t), Some(true)) => format!("PASS {t}"),
            (Some(t), Some(false)) => format!("FAIL {t}"),
            (None, Some(false)) => "FAIL".into(),
            _ => String::new(),
        };
        let note = r
            .note
            .as_deref()
            .map(|n| format!("  [{}]", n.chars().take(160).collect::<String>()))
            .unwrap_or_default();
        println!(
            "{:<9} {:<26} {:>4} {:<13} {:>10} {:>8} {:>8} {:>8} {:>7} {:>7} {:>10} {:>7}  {target}{note}",
            r.store,
            r.scenario,
            if r.concurrency == 0 { "-".into() } else { r.concurrency.to_string() },
            r.mode,
            thr,
            p50,
            p99,
            rss,
            srv,
            cli,
            base,
            ratio
        );
    }
}

pub(super) fn utc_now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

pub(super) fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned());
    let mem = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let total = mem
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .map(|m| m.trim().to_owned());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    json!({
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu_model": model,
        "memory": total,
        "kernel": kernel.trim(),
        "loadavg_at_end": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(),
    })
}

pub(super) fn git_commit(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .current_dir(root)
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A ratio as a percentage to a tenth: rounded to a whole number, 79.8 % printed as a failing
/// "80 %" beside a target of 80 %.
pub(super) fn percent(ratio: f64) -> String {
    format!("{:.1} %", ratio * 100.0)
}
