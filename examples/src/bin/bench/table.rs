//! The table printed as runs end.

use super::*;

pub(super) fn print_header() {
    outln!(
        "{:<14} {:<11} {:>2} {:>2} {:>11} {:>8} {:>11} {:>11} {:>8}  note",
        "workload",
        "runner",
        "W",
        "P",
        "records",
        "seconds",
        "records/s",
        "per core",
        "RSS MB"
    );
}

pub(super) fn print_row(r: &BenchRecord) {
    outln!(
        "{:<14} {:<11} {:>2} {:>2} {:>11} {:>8.3} {:>11} {:>11} {:>8}  {}",
        r.workload,
        r.runner,
        r.workers,
        r.processes,
        r.records,
        r.seconds,
        human(r.records_per_s),
        human(r.records_per_s_per_core),
        r.peak_rss_mb.map_or("-".into(), |m| format!("{m:.0}")),
        note(r)
    );
}

/// The note column: what else the run measured.
pub(super) fn note(r: &BenchRecord) -> String {
    let mut s = String::from("ok");
    if let Some(peer) = &r.peer {
        s = format!("peer: {peer}");
    }
    if let (Some(rate), Some(p50), Some(p99), Some(max)) = (
        r.latency_rate_per_s,
        r.p50_latency_ms,
        r.p99_latency_ms,
        r.max_latency_ms,
    ) {
        s.push_str(&format!(
            ", at {}/s: latency p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms",
            human(rate)
        ));
    } else if r.workload == "latency" {
        s.push_str(", peak");
    }
    if let (Some(rec), Some(restart)) = (r.recovery_ms, r.restart_ms) {
        s.push_str(&format!(
            ", recovered in {rec:.0} ms (processes restarted after {restart:.0} ms)"
        ));
    }
    match (r.checkpoint, r.checkpoint_interval_ms) {
        (true, Some(ms)) => s.push_str(&format!(", checkpoints every {ms} ms")),
        (true, None) => s.push_str(", checkpoints"),
        _ => {}
    }
    if let (Some(n), Some(avg)) = (r.checkpoints_completed, r.checkpoint_ms_avg) {
        s.push_str(&format!(" ({n} taken, {avg:.0} ms each on average)"));
    }
    if r.at_least_once {
        s.push_str(", at-least-once");
    }
    if r.over_veth {
        s.push_str(", over veth");
    }
    if let (Some(limit), Some(steal)) = (r.steal_rerun_above, r.steal_pct) {
        s.push_str(&format!(", steal {steal:.1}% > {limit}%: run again"));
    }
    if r.profile == "debug" {
        s.push_str(" (debug build)");
    }
    s
}

pub(super) fn print_error(workload: &str, runner: &str, workers: u32, error: &str) {
    let first = error.lines().next().unwrap_or("");
    outln!(
        "{:<14} {:<11} {:>2} {:>2} {:>11} {:>8} {:>11} {:>11} {:>8}  error: {first}",
        workload,
        runner,
        workers,
        1,
        "-",
        "-",
        "-",
        "-",
        "-"
    );
}
