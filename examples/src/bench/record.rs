//! One measured run, as a JSON object: what `bench` writes (one per line) and
//! `bench --report` reads. The `nexmark --json` binary writes the same objects.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// One run of one workload on one runner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchRecord {
    /// The workload (`stateless`, `count`, `stateful`, `windowed`, `nexmark-q0`, ...).
    pub workload: String,
    /// The runner, as given to `--runner`.
    pub runner: String,
    /// Workers per process.
    pub workers: u32,
    /// Processes.
    pub processes: u32,
    /// Input records: words for the word counts, events for Nexmark.
    pub records: u64,
    /// Wall time of the run inside the process: from `run` called to `run` returned
    /// (process start and pipeline construction excluded).
    pub seconds: f64,
    /// `records / seconds`.
    pub records_per_s: f64,
    /// `records_per_s / (workers * processes)`.
    pub records_per_s_per_core: f64,
    /// Median latency from event creation to sink output, where measured.
    pub p50_latency_ms: Option<f64>,
    /// 99th percentile latency, where measured.
    pub p99_latency_ms: Option<f64>,
    /// Largest latency, where measured.
    pub max_latency_ms: Option<f64>,
    /// The process's peak resident set (`VmHWM`), in MiB.
    pub peak_rss_mb: Option<f64>,
    /// Whether the run took checkpoints.
    pub checkpoint: bool,
    /// The checkpoint interval, when checkpointing.
    pub checkpoint_interval_ms: Option<u64>,
    /// The native runner checkpointed without aligning its inputs
    /// (`--guarantee at-least-once`): what exactly-once's alignment costs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub at_least_once: bool,
    /// A cluster run's processes were on hosts of a network (namespaces joined by veth
    /// pairs, `--over-veth`), not on loopback.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_veth: bool,
    /// Stateful DoFns kept their state in the embedded store (`--state-backend fjall`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub embedded_state: bool,
    /// Records the sink received.
    pub outputs: u64,
    /// Whether the direct runner's validation was on.
    pub validate: bool,
    /// `release` or `debug`: debug figures are not worth reporting.
    pub profile: String,
    /// The machine: CPU model, cores, memory.
    pub machine: String,
    /// The one-minute load average when the run started: how busy the machine was.
    pub load_avg_1m: Option<f64>,
    /// When the run started, in seconds since the Unix epoch.
    pub started_at_unix_s: u64,
    /// The `latency` workload: the fixed rate (records/s) the latencies were measured
    /// at, half the peak measured just before on the same setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_rate_per_s: Option<f64>,
    /// The `recovery` workload: milliseconds from the SIGKILL of one process of the
    /// local cluster to the first checkpoint (or batch) the restarted job completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_ms: Option<f64>,
    /// The `recovery` workload: milliseconds from the SIGKILL to the restarted
    /// processes being started by the supervisor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_ms: Option<f64>,
    /// A peer's run (`bench --compare-peers`): the system and its version, e.g.
    /// `Flink 2.3.0 (OpenJDK 17.0.15)`; `runner` then names the peer and its variant
    /// (`flink`, `flink-batch`, `spark`, `spark-ss`, `timely`, ...) and `workers` its
    /// parallelism. `None` for our runners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// The share of the machine's CPU time (in percent, all cores) the hypervisor
    /// gave to other guests while the run was timed: the `steal` of `/proc/stat`. On
    /// a shared VM a few percent of it is a stall of milliseconds somewhere, which a
    /// p99 latency shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_pct: Option<f64>,
    /// A run of the fault-tolerance pass (`bench --cost-words`): the same settings
    /// with checkpoints on and off on a longer input, so that each run takes some ten
    /// checkpoints. These runs are judged for what fault tolerance costs and kept out
    /// of the throughput tables.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_run: bool,
    /// A micro-batch run in batches of at most this many lines, back to back until
    /// the input's end (`bench --batch-records`; the fault-tolerance pass's micro-batch
    /// runs), rather than the runner's default of 30,000 records a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_records: Option<u64>,
    /// The `stateful` workload kept this many bytes of state per word beside its count
    /// (`bench --state-value-bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_value_bytes: Option<usize>,
    /// A run disturbed by the hypervisor and run again (`bench --max-steal`): its steal
    /// exceeded this many percent. Kept in the JSON, left out of the report's tables
    /// and targets, and listed there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_rerun_above: Option<f64>,
    /// A native run with watermark alignment (`bench --watermark-drift-ms`, the runner
    /// option `max_watermark_drift_ms`): its drift in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_watermark_drift_ms: Option<u64>,
    /// A checkpointed run: the checkpoints it completed, and how long one took on
    /// average (from the end of its epoch at the sources to its manifest written).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints_completed: Option<u64>,
    /// See `checkpoints_completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_ms_avg: Option<f64>,
}

/// When a run started and how busy the machine was then.
#[derive(Clone, Copy, Debug)]
pub struct RunStart {
    /// The one-minute load average.
    pub load_avg_1m: Option<f64>,
    /// Seconds since the Unix epoch.
    pub unix_s: u64,
    /// The machine's CPU time so far.
    pub cpu: Option<CpuTimes>,
}

impl RunStart {
    /// Now.
    pub fn now() -> RunStart {
        RunStart {
            load_avg_1m: load_avg_1m(),
            unix_s: now_unix_s(),
            cpu: CpuTimes::now(),
        }
    }

    /// The hypervisor's steal since this start, in percent of the CPU time passed.
    pub fn steal_pct(&self) -> Option<f64> {
        self.cpu?.steal_pct_until(&CpuTimes::now()?)
    }
}

/// The machine's CPU time, all cores, in clock ticks: the first line of `/proc/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTimes {
    /// Every state's ticks (guest time is already in user and nice).
    pub total: u64,
    /// Ticks the hypervisor ran another guest while this one wanted the CPU.
    pub steal: u64,
}

impl CpuTimes {
    /// Now, where the system tells.
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The `cpu` line of a `/proc/stat`: user nice system idle iowait irq softirq
    /// steal (guest and guest_nice follow, counted in user and nice already).
    pub fn parse(stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        Some(CpuTimes {
            total: ticks.iter().sum(),
            steal: *ticks.get(7)?,
        })
    }

    /// The steal between this and `later`, in percent of the ticks between them.
    pub fn steal_pct_until(&self, later: &CpuTimes) -> Option<f64> {
        let total = later.total.checked_sub(self.total)?;
        let steal = later.steal.checked_sub(self.steal)?;
        (total > 0).then(|| steal as f64 * 100.0 / total as f64)
    }
}

impl BenchRecord {
    /// A record of `records` processed in `seconds` by a run that started at `start`,
    /// with this process's peak RSS and the machine's description; latency not
    /// measured and no checkpoints.
    pub fn measured(
        workload: &str,
        runner: &str,
        workers: u32,
        records: u64,
        seconds: f64,
        outputs: u64,
        start: RunStart,
    ) -> BenchRecord {
        let records_per_s = records as f64 / seconds.max(1e-9);
        BenchRecord {
            workload: workload.to_string(),
            runner: runner.to_string(),
            workers,
            processes: 1,
            records,
            seconds,
            records_per_s,
            records_per_s_per_core: records_per_s / workers.max(1) as f64,
            p50_latency_ms: None,
            p99_latency_ms: None,
            max_latency_ms: None,
            peak_rss_mb: peak_rss_mb(),
            checkpoint: false,
            checkpoint_interval_ms: None,
            at_least_once: false,
            over_veth: false,
            embedded_state: false,
            outputs,
            validate: false,
            profile: if cfg!(debug_assertions) {
                "debug"
            } else {
                "release"
            }
            .to_string(),
            machine: machine(),
            load_avg_1m: start.load_avg_1m,
            started_at_unix_s: start.unix_s,
            latency_rate_per_s: None,
            recovery_ms: None,
            restart_ms: None,
            peer: None,
            steal_pct: start.steal_pct(),
            cost_run: false,
            batch_records: None,
            state_value_bytes: None,
            steal_rerun_above: None,
            max_watermark_drift_ms: None,
            checkpoints_completed: None,
            checkpoint_ms_avg: None,
        }
    }

    /// Makes this the record of a local cluster of `processes` processes (nothing with
    /// 1): per core over all of them, and the peak RSS of the largest, as they
    /// reported it in `result` (the supervisor's own is not the job's).
    pub fn on_cluster(&mut self, processes: u32, result: &tidewater::PipelineResult) {
        if processes > 1 {
            self.processes = processes;
            self.records_per_s_per_core =
                self.records_per_s / f64::from(self.workers.max(1) * processes);
            self.peak_rss_mb = result
                .metrics
                .distribution(tidewater_runner_native::ENGINE_STEP, "peak_rss_kb")
                .map(|d| d.max as f64 / 1024.0);
        }
    }

    /// Notes the checkpoints a checkpointed run completed, and their average time, as
    /// its figures in `result` say.
    pub fn checkpoints_of(&mut self, result: &tidewater::PipelineResult) {
        let step = tidewater_runner_native::ENGINE_STEP;
        self.checkpoints_completed = result
            .metrics
            .counter(step, "checkpoints")
            .map(|n| n.max(0) as u64);
        self.checkpoint_ms_avg = result
            .metrics
            .distribution(step, "checkpoint_ms")
            .filter(|d| d.count > 0)
            .map(|d| d.sum as f64 / d.count as f64);
    }

    /// The record as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a record always serializes")
    }
}

/// This process's peak resident set in MiB (`VmHWM` in `/proc/self/status`), where
/// the system tells.
pub fn peak_rss_mb() -> Option<f64> {
    tidewater::exec::peak_rss_kb().map(|kb| kb as f64 / 1024.0)
}

/// The one-minute load average (`/proc/loadavg`).
pub fn load_avg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Seconds since the Unix epoch.
pub fn now_unix_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `<CPU model>, <N> cores, <M> GiB` from `/proc`, or what of it is known.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mem = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        let kb: f64 = s
            .lines()
            .find(|l| l.starts_with("MemTotal:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb / 1024.0 / 1024.0)
    });
    match mem {
        Some(gib) => format!("{cpu}, {cores} cores, {gib:.0} GiB"),
        None => format!("{cpu}, {cores} cores"),
    }
}

/// Reads records written one per line (blank lines skipped).
pub fn read_records(path: &Path) -> anyhow::Result<Vec<BenchRecord>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a benchmark record", path.display(), i + 1))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fixed record: its JSON is the format the report and other tools read.
    pub(crate) fn sample() -> BenchRecord {
        BenchRecord {
            workload: "count".into(),
            runner: "direct".into(),
            workers: 1,
            processes: 1,
            records: 2_000_000,
            seconds: 0.5,
            records_per_s: 4_000_000.0,
            records_per_s_per_core: 4_000_000.0,
            p50_latency_ms: None,
            p99_latency_ms: None,
            max_latency_ms: None,
            peak_rss_mb: Some(21.5),
            checkpoint: false,
            checkpoint_interval_ms: None,
            at_least_once: false,
            over_veth: false,
            embedded_state: false,
            outputs: 9_999,
            validate: false,
            profile: "release".into(),
            machine: "AMD EPYC, 2 cores, 23 GiB".into(),
            load_avg_1m: Some(0.42),
            started_at_unix_s: 1_700_000_000,
            latency_rate_per_s: None,
            recovery_ms: None,
            restart_ms: None,
            peer: None,
            steal_pct: None,
            cost_run: false,
            batch_records: None,
            state_value_bytes: None,
            steal_rerun_above: None,
            max_watermark_drift_ms: None,
            checkpoints_completed: None,
            checkpoint_ms_avg: None,
        }
    }

    #[test]
    fn json_format() {
        insta::assert_snapshot!(sample().to_json_line(), @r#"{"workload":"count","runner":"direct","workers":1,"processes":1,"records":2000000,"seconds":0.5,"records_per_s":4000000.0,"records_per_s_per_core":4000000.0,"p50_latency_ms":null,"p99_latency_ms":null,"max_latency_ms":null,"peak_rss_mb":21.5,"checkpoint":false,"checkpoint_interval_ms":null,"outputs":9999,"validate":false,"profile":"release","machine":"AMD EPYC, 2 cores, 23 GiB","load_avg_1m":0.42,"started_at_unix_s":1700000000}"#);
    }

    #[test]
    fn new_fields_are_written_only_when_set_and_old_records_still_read() {
        let mut r = sample();
        r.workload = "recovery".into();
        r.recovery_ms = Some(1234.5);
        r.restart_ms = Some(40.0);
        let line = r.to_json_line();
        assert!(
            line.ends_with(
                r#""started_at_unix_s":1700000000,"recovery_ms":1234.5,"restart_ms":40.0}"#
            ),
            "{line}"
        );
        let back: BenchRecord = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
        let mut peer = sample();
        peer.peer = Some("Flink 2.3.0".into());
        assert!(peer.to_json_line().ends_with(r#","peer":"Flink 2.3.0"}"#));
    }

    #[test]
    fn records_read_back_one_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.json");
        let mut second = sample();
        second.runner = "native".into();
        second.workers = 2;
        std::fs::write(
            &path,
            format!("{}\n\n{}\n", sample().to_json_line(), second.to_json_line()),
        )
        .unwrap();
        assert_eq!(read_records(&path).unwrap(), vec![sample(), second]);
    }

    #[test]
    fn a_bad_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.json");
        std::fs::write(&path, format!("{}\n{{}}\n", sample().to_json_line())).unwrap();
        let e = format!("{:#}", read_records(&path).unwrap_err());
        assert!(e.contains("runs.json:2: not a benchmark record"), "{e}");
    }

    #[test]
    fn steal_is_the_eighth_cpu_figure_over_the_ticks_passed() {
        let before = CpuTimes::parse("cpu  100 0 50 800 10 0 5 35 0 0\ncpu0 1 2 3\n").unwrap();
        assert_eq!(
            before,
            CpuTimes {
                total: 1000,
                steal: 35
            }
        );
        let after = CpuTimes::parse("cpu  300 0 100 1400 10 0 5 185 0 0\n").unwrap();
        assert_eq!(before.steal_pct_until(&after), Some(15.0));
        assert_eq!(before.steal_pct_until(&before), None);
        assert_eq!(CpuTimes::parse("intr 1 2\n"), None);
        let mut r = sample();
        r.steal_pct = Some(2.5);
        r.cost_run = true;
        let line = r.to_json_line();
        assert!(
            line.ends_with(r#","steal_pct":2.5,"cost_run":true}"#),
            "{line}"
        );
    }

    #[test]
    fn per_core_divides_by_workers() {
        let r = BenchRecord::measured("stateless", "native", 2, 1000, 0.5, 1000, RunStart::now());
        assert_eq!(r.records_per_s, 2000.0);
        assert_eq!(r.records_per_s_per_core, 1000.0);
    }
}
