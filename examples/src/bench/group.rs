//! The runs of a report grouped by workload and setting ([`Group`]), each setting's
//! median run, and how figures are written: what the report, the peers' table and the
//! targets all read.

use super::record::BenchRecord;
use std::fmt::Write as _;

/// The runs of one setting of one workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// The runner.
    pub runner: String,
    /// Workers per process.
    pub workers: u32,
    /// Processes.
    pub processes: u32,
    /// Checkpoints on, and their interval.
    pub checkpoint: (bool, Option<u64>),
    /// Checkpoints without alignment (`--guarantee at-least-once`).
    pub at_least_once: bool,
    /// State in the embedded store (`--state-backend fjall`).
    pub embedded_state: bool,
    /// Bytes of state per word beside its count (`--state-value-bytes`).
    pub state_value_bytes: Option<usize>,
    /// Its runs, in the order they ran.
    pub runs: Vec<BenchRecord>,
}

impl Group {
    /// Whether these are a peer's runs (`bench --compare-peers`).
    pub fn is_peer(&self) -> bool {
        self.runs[0].peer.is_some()
    }

    /// The label of its bar: `direct W=1`, `native W=2 P=2 ckpt 1000ms`, and for a
    /// peer its parallelism: `flink p=1`.
    pub fn label(&self) -> String {
        let mut s = match self.is_peer() {
            true => format!("{} p={}", self.runner, self.workers),
            false => format!("{} W={}", self.runner, self.workers),
        };
        if self.processes != 1 {
            let _ = write!(s, " P={}", self.processes);
        }
        match self.checkpoint {
            (true, Some(ms)) => {
                let _ = write!(s, " ckpt {ms}ms");
            }
            (true, None) => s.push_str(" ckpt"),
            (false, _) => {}
        }
        if self.at_least_once {
            s.push_str(" at-least-once");
        }
        if self.embedded_state {
            s.push_str(" fjall state");
        }
        if let Some(n) = self.state_value_bytes {
            let _ = write!(s, " +{n} B/word");
        }
        s
    }

    /// The median run (the lower middle one for an even count) by the workload's
    /// figure: records/s, or p99 latency for `latency`, recovery time for `recovery`.
    pub fn median(&self) -> &BenchRecord {
        let mut runs: Vec<&BenchRecord> = self.runs.iter().collect();
        runs.sort_by(|a, b| figure(a).total_cmp(&figure(b)));
        runs[(runs.len() - 1) / 2]
    }
}

/// The figure a run is ranked and charted by.
pub(crate) fn figure(r: &BenchRecord) -> f64 {
    match r.workload.as_str() {
        "latency" => r.p99_latency_ms.unwrap_or(f64::INFINITY),
        "recovery" => r.recovery_ms.unwrap_or(f64::INFINITY),
        _ => r.records_per_s,
    }
}

/// Records by workload (in the order each first ran), then by setting (likewise); the
/// fault-tolerance pass's runs (`cost_run`) are apart, in [`cost_groups`], and runs
/// disturbed by steal and run again (`steal_rerun_above`) are left out.
pub fn group(records: &[BenchRecord]) -> Vec<(String, Vec<Group>)> {
    group_where(records, |r| !r.cost_run && r.steal_rerun_above.is_none())
}

/// The fault-tolerance pass's runs (`bench --cost-words`), grouped as [`group`] does.
pub fn cost_groups(records: &[BenchRecord]) -> Vec<(String, Vec<Group>)> {
    group_where(records, |r| r.cost_run)
}

fn group_where(
    records: &[BenchRecord],
    keep: impl Fn(&BenchRecord) -> bool,
) -> Vec<(String, Vec<Group>)> {
    let mut out: Vec<(String, Vec<Group>)> = Vec::new();
    for r in records.iter().filter(|r| keep(r)) {
        let i = match out.iter().position(|(w, _)| *w == r.workload) {
            Some(i) => i,
            None => {
                out.push((r.workload.clone(), Vec::new()));
                out.len() - 1
            }
        };
        let groups = &mut out[i].1;
        let key = (
            r.runner.as_str(),
            r.workers,
            r.processes,
            (r.checkpoint, r.checkpoint_interval_ms),
            r.at_least_once,
            r.embedded_state,
            r.state_value_bytes,
        );
        match groups.iter_mut().find(|g| {
            (
                g.runner.as_str(),
                g.workers,
                g.processes,
                g.checkpoint,
                g.at_least_once,
                g.embedded_state,
                g.state_value_bytes,
            ) == key
        }) {
            Some(g) => g.runs.push(r.clone()),
            None => groups.push(Group {
                runner: r.runner.clone(),
                workers: r.workers,
                processes: r.processes,
                checkpoint: (r.checkpoint, r.checkpoint_interval_ms),
                at_least_once: r.at_least_once,
                embedded_state: r.embedded_state,
                state_value_bytes: r.state_value_bytes,
                runs: vec![r.clone()],
            }),
        }
    }
    out
}

/// `12.3M`, `456k`, `789`.
pub fn human(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2}M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.0}k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}
