//! The benchmark's word-count workloads against plain-Rust oracles on a small generated
//! input, and the `bench` binary end to end at a tiny size: runs, records, report.

use std::collections::BTreeMap;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::bench::input::{generate, GenOptions, Input};
use tidewater_examples::bench::workloads::{WordCount, LINES};

/// 300 lines at 100 lines per event-time second: 3 windows.
fn small_input(dir: &std::path::Path) -> Input {
    let options = GenOptions {
        lines: 300,
        lines_per_sec: 100,
        ..Default::default()
    };
    generate(&dir.join("small"), &options).unwrap()
}

fn run(workload: WordCount, input: &Input) -> Vec<String> {
    tidewater_examples::register_runners();
    let p = Pipeline::new(PipelineOptions::default());
    workload.build(
        &p,
        input.text.to_str().unwrap(),
        input.stamped.to_str().unwrap(),
        true,
    );
    let mut lines = p.run().unwrap().captured_values::<String>(LINES).unwrap();
    lines.sort();
    lines
}

/// What each workload outputs, in plain loops over the files.
fn oracle(workload: WordCount, input: &Input) -> Vec<String> {
    let text = std::fs::read_to_string(&input.text).unwrap();
    let words = || text.lines().flat_map(|l| l.split(' '));
    let mut out: Vec<String> = match workload {
        WordCount::Stateless => words().map(|w| format!("{w} 1")).collect(),
        WordCount::Count | WordCount::Stateful => {
            let mut running: BTreeMap<&str, u64> = BTreeMap::new();
            let mut updates = Vec::new();
            for w in words() {
                let n = running.entry(w).or_insert(0);
                *n += 1;
                updates.push(format!("{w} {n}"));
            }
            match workload {
                WordCount::Stateful => updates,
                _ => running.iter().map(|(w, n)| format!("{w} {n}")).collect(),
            }
        }
        WordCount::Windowed => {
            let mut counts: BTreeMap<(i64, &str), u64> = BTreeMap::new();
            for line in std::fs::read_to_string(&input.stamped)
                .unwrap()
                .leak()
                .lines()
            {
                let (ts, ws) = line.split_once('\t').unwrap();
                let start = ts.parse::<i64>().unwrap() / 1000 * 1000;
                for w in ws.split(' ') {
                    *counts.entry((start, w)).or_insert(0) += 1;
                }
            }
            counts
                .iter()
                .map(|((s, w), n)| format!("{s} {w} {n}"))
                .collect()
        }
    };
    out.sort();
    out
}

#[test]
fn every_workload_matches_its_oracle() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    for w in WordCount::ALL {
        let expected = oracle(w, &input);
        assert_eq!(
            expected.len() as u64,
            w.expected_outputs(&input.meta),
            "{}",
            w.name()
        );
        assert_eq!(run(w, &input), expected, "{}", w.name());
    }
}

#[test]
fn the_windowed_input_spans_several_windows() {
    let dir = tempfile::tempdir().unwrap();
    let input = small_input(dir.path());
    let windows: std::collections::BTreeSet<String> = oracle(WordCount::Windowed, &input)
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(windows.len(), 3);
}

/// `bench --report` on the records in `json`, into `docs`: the markdown it wrote.
fn report(json: &std::path::Path, docs: &std::path::Path) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--report", "--json"])
        .arg(json)
        .arg("--docs")
        .arg(docs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::fs::read_to_string(docs.join("benchmarks.md")).unwrap()
}

/// The binary: every word count checked and timed once in its own process, a record
/// each, then the report from those records.
#[test]
fn bench_runs_checks_records_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let bench = env!("CARGO_BIN_EXE_bench");
    let out = std::process::Command::new(bench)
        .args(["--workload", "wordcount", "--words", "3000"])
        .args([
            "--check-words",
            "1000",
            "--runner",
            "direct",
            "--workers",
            "1,2",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("skipping stateless on direct with 2 workers"),
        "{stderr}"
    );
    let records = tidewater_examples::bench::record::read_records(&json).unwrap();
    let names: Vec<&str> = records.iter().map(|r| r.workload.as_str()).collect();
    assert_eq!(names, ["stateless", "count", "stateful", "windowed"]);
    for r in &records {
        assert_eq!(
            (r.runner.as_str(), r.workers, r.processes),
            ("direct", 1, 1)
        );
        assert!(r.peak_rss_mb.is_some() && r.records > 2900, "{r:?}");
    }

    let docs = dir.path().join("docs");
    let md = report(&json, &docs);
    for w in names {
        assert!(md.contains(&format!("## {w}\n")), "{md}");
        assert!(docs.join("benchmarks").join(format!("{w}.svg")).exists());
    }
}

/// `--cost-words`: the native and micro-batch settings with and without checkpoints
/// run again on a longer input, marked as the fault-tolerance pass, the micro-batch
/// ones in ten batches, and the report judges their cost from those runs.
#[test]
fn the_fault_tolerance_pass_runs_the_checkpointed_settings_again_on_a_longer_input() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let bench = env!("CARGO_BIN_EXE_bench");
    let out = std::process::Command::new(bench)
        .args([
            "--workload",
            "count",
            "--words",
            "3000",
            "--check-words",
            "1000",
        ])
        .args(["--runner", "native,microbatch", "--checkpoint-ms", "0,1000"])
        .args([
            "--cost-words",
            "20000",
            "--cost-reps",
            "3",
            "--reps",
            "2",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let records = tidewater_examples::bench::record::read_records(&json).unwrap();
    let runs: Vec<(&str, bool, u64, bool, Option<u64>)> = records
        .iter()
        .map(|r| {
            let runner = r.runner.as_str();
            (
                runner,
                r.cost_run,
                r.records / 1000,
                r.checkpoint,
                r.batch_records,
            )
        })
        .collect();
    // Rep by rep, off then on: first on the main input (`--reps`), then on the long
    // one (`--cost-reps`), where the micro-batch runner reads 2,000 lines in batches
    // of 200.
    let main = |runner| {
        [
            (runner, false, 2, false, None),
            (runner, false, 2, true, None),
        ]
    };
    let long = |runner, batches| {
        [
            (runner, true, 20, false, batches),
            (runner, true, 20, true, batches),
        ]
    };
    let expected: Vec<_> = [main("native"), main("native")]
        .into_iter()
        .chain([main("microbatch"), main("microbatch")])
        .chain([long("native", None); 3])
        .chain([long("microbatch", Some(200)); 3])
        .flatten()
        .collect();
    assert_eq!(runs, expected, "{records:?}");
    // The native runs align their sources' watermarks (`--watermark-drift-ms`, 2000 by
    // default), the micro-batch ones have nothing to align.
    for r in &records {
        let drift = (r.runner == "native").then_some(2000);
        assert_eq!(r.max_watermark_drift_ms, drift, "{r:?}");
    }
    let md = report(&json, &dir.path().join("docs"));
    assert!(
        md.contains("- **Watermark alignment:** 10 of 10 native runs"),
        "{md}"
    );
    assert!(
        md.contains("## What fault tolerance costs, on long runs"),
        "{md}"
    );
    assert!(md.contains("| count, native W=1 (20"), "{md}");
    assert!(md.contains("in batches of at most 200 lines"), "{md}");
    assert!(md.contains("--cost-words 20100 --cost-reps 3"), "{md}");
}

#[test]
fn an_unknown_runner_or_workload_is_refused_before_anything_runs() {
    let bench = env!("CARGO_BIN_EXE_bench");
    let out = std::process::Command::new(bench)
        .args(["--runner", "nosuch", "--words", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nosuch"));
    let out = std::process::Command::new(bench)
        .args(["--workload", "wordcont", "--words", "10"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown workload 'wordcont'"));
}

/// `latency` fills the latency fields at half the peak it measured first; `recovery`
/// kills a process of a local cluster, times the restarted job's first checkpoint and
/// checks the committed output against the direct runner's (in the run: a wrong
/// output fails it). Only that the figures are there and consistent is asserted:
/// their size is a benchmark's business, not a test's.
#[test]
fn latency_and_recovery_fill_their_fields() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--quick", "--workload", "latency,recovery"])
        .args([
            "--runner",
            "direct,native,microbatch",
            "--checkpoint-ms",
            "200",
        ])
        .args(["--guarantee", "exactly-once,at-least-once"])
        .args(["--latency-seconds", "0.5", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("skipping recovery on direct: it has no checkpoints to recover from"),
        "{stderr}"
    );
    let records = tidewater_examples::bench::record::read_records(&json).unwrap();
    let runs: Vec<(&str, &str, u32, bool, bool)> = records
        .iter()
        .map(|r| {
            (
                r.workload.as_str(),
                r.runner.as_str(),
                r.processes,
                r.checkpoint,
                r.at_least_once,
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            // The direct runner has no checkpoints: it runs neither. Only the native
            // runner aligns, so only it runs at-least-once too; a recovery checks
            // exactly-once output.
            ("latency", "native", 1, true, false),
            ("latency", "native", 1, true, true),
            ("latency", "microbatch", 1, true, false),
            ("recovery", "native", 2, true, false),
            ("recovery", "microbatch", 2, true, false),
        ]
    );
    for r in &records[..3] {
        let (p50, p99, max) = (
            r.p50_latency_ms.unwrap(),
            r.p99_latency_ms.unwrap(),
            r.max_latency_ms.unwrap(),
        );
        assert!(p50 <= p99 && p99 <= max, "{r:?}");
        let rate = r.latency_rate_per_s.unwrap();
        assert_eq!(r.records, (rate * 0.5) as u64, "{r:?}");
        assert_eq!(r.outputs, r.records);
        assert_eq!(r.recovery_ms, None);
    }
    for recovery in &records[3..] {
        let (restart, recovered) = (recovery.restart_ms.unwrap(), recovery.recovery_ms.unwrap());
        assert!(restart <= recovered, "{recovery:?}");
        assert_eq!(recovery.checkpoint_interval_ms, Some(200));
        assert_eq!(recovery.p99_latency_ms, None);
    }
    assert!(stdout.contains("recovered in"), "{stdout}");
}

/// The peer kit is not in a user's clone: without it `--compare-peers` says which flag
/// gives it, before anything runs; and it compares word counts only.
#[test]
fn compare_peers_names_the_flag_for_a_missing_kit() {
    let dir = tempfile::tempdir().unwrap();
    let bench = env!("CARGO_BIN_EXE_bench");
    let out = std::process::Command::new(bench)
        .args(["--compare-peers", "--words", "10", "--peers-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "--peers-dir {}: no run.sh there (the peer kit's directory holds run.sh and setup.sh)",
            dir.path().display()
        )),
        "{stderr}"
    );
    let out = std::process::Command::new(bench)
        .args(["--compare-peers", "--workload", "nexmark-q1", "--peers-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--compare-peers compares the word counts"),
        "{out:?}"
    );
    // A kit without the peers installed says how to install them.
    std::fs::write(dir.path().join("run.sh"), "exit 1\n").unwrap();
    let out = std::process::Command::new(bench)
        .args(["--compare-peers", "--peers", "timely", "--peers-dir"])
        .arg(dir.path())
        .arg("--peers-root")
        .arg(dir.path().join("nothing"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("peer timely is not installed under") && stderr.contains("setup.sh"),
        "{stderr}"
    );
}

/// A latency run during which the hypervisor's steal exceeded `--max-steal` is
/// recorded as disturbed and run again, `--steal-retries` times at most; the report
/// leaves it out of the tables and lists it. A negative limit counts every run as
/// disturbed, so that the path runs whatever this machine's steal.
#[test]
fn a_latency_run_disturbed_by_steal_runs_again_and_is_listed_apart() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("runs.json");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["--quick", "--workload", "latency", "--runner", "native"])
        .args(["--latency-seconds", "0.3", "--reps", "2"])
        .args(["--max-steal=-1", "--steal-retries", "2", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("over --max-steal -1%: it runs again"),
        "{stderr}"
    );
    let records = tidewater_examples::bench::record::read_records(&json).unwrap();
    // Each rep: two disturbed runs, then the third kept whatever its steal.
    let reran: Vec<Option<f64>> = records.iter().map(|r| r.steal_rerun_above).collect();
    assert_eq!(
        reran,
        [Some(-1.0), Some(-1.0), None, Some(-1.0), Some(-1.0), None],
        "{records:?}"
    );
    assert!(records.iter().all(|r| r.steal_pct.is_some()), "{records:?}");
    let md = report(&json, &dir.path().join("docs"));
    assert!(md.contains("4 such runs: native W=1 P=1 p99 "), "{md}");
    // The latency table counts the kept runs only.
    assert!(md.contains("| native | 1 | 1 | off | 2 |"), "{md}");
}
