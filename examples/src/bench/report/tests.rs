//! Tests of `report.rs`.

use super::*;
use crate::bench::record::tests::sample;

fn run(workload: &str, runner: &str, workers: u32, rate: f64, rss: f64) -> BenchRecord {
    let mut r = sample();
    r.workload = workload.into();
    r.runner = runner.into();
    r.workers = workers;
    r.records_per_s = rate;
    r.records_per_s_per_core = rate / workers as f64;
    r.seconds = r.records as f64 / rate;
    r.peak_rss_mb = Some(rss);
    r
}

/// Three runs of direct (median 4M), one of a second runner at 1 and 2 workers, a
/// Nexmark query, a run with latency figures (and one run again for its steal), a
/// recovery, a peer and the fault-tolerance pass's runs.
fn records() -> Vec<BenchRecord> {
    let mut checkpointed = run("stateless", "native", 1, 3e6, 30.0);
    checkpointed.checkpoint = true;
    checkpointed.checkpoint_interval_ms = Some(1000);
    let mut latency = run("latency", "native", 1, 1e6, 25.0);
    latency.records = 5_000_000;
    latency.seconds = 5.0;
    latency.latency_rate_per_s = Some(1e6);
    latency.p50_latency_ms = Some(1.25);
    latency.p99_latency_ms = Some(8.5);
    latency.max_latency_ms = Some(20.0);
    latency.max_watermark_drift_ms = Some(2000);
    latency.steal_pct = Some(3.2);
    // Disturbed by steal and run again: out of the table, listed.
    let mut disturbed = latency.clone();
    disturbed.p99_latency_ms = Some(30.0);
    disturbed.steal_pct = Some(12.5);
    disturbed.steal_rerun_above = Some(5.0);
    let long = |runner: &str, rate: f64, checkpoint: bool| {
        let mut r = run("count", runner, 1, rate, 13.0);
        r.batch_records = (runner == "microbatch").then_some(500_000);
        r.records = 50_000_000;
        r.seconds = 5e7 / rate;
        r.cost_run = true;
        r.checkpoint = checkpoint;
        r.checkpoint_interval_ms = checkpoint.then_some(1000);
        r
    };
    let mut recovery = run("recovery", "native", 1, 20_000.0, 0.0);
    recovery.records = 140_000;
    recovery.seconds = 7.5;
    recovery.outputs = 400_000;
    recovery.processes = 2;
    recovery.peak_rss_mb = None;
    recovery.checkpoint = true;
    recovery.checkpoint_interval_ms = Some(1000);
    recovery.recovery_ms = Some(1500.0);
    recovery.restart_ms = Some(30.0);
    let mut flink = run("count", "flink", 1, 2e6, 650.0);
    flink.peer = Some("Flink 2.3.0 (OpenJDK 17.0.15)".into());
    let mut q5 = run("nexmark-q5", "direct", 1, 450_000.0, 40.0);
    q5.records = 500_000;
    vec![
        run("count", "direct", 1, 5e6, 20.0),
        run("count", "direct", 1, 3e6, 22.0),
        run("count", "direct", 1, 4e6, 21.0),
        run("count", "native", 1, 6e6, 12.0),
        run("count", "native", 2, 9e6, 14.0),
        flink,
        checkpointed,
        disturbed,
        latency,
        recovery,
        q5,
        long("native", 6e6, false),
        long("native", 5.7e6, true),
        long("microbatch", 5e6, false),
        long("microbatch", 4.8e6, true),
    ]
}

#[test]
fn markdown_snapshot() {
    insta::assert_snapshot!(render_markdown(&records(), "benchmarks/results.json"));
}

#[test]
fn median_is_the_middle_run() {
    let groups = group(&records());
    assert_eq!(groups[0].0, "count");
    assert_eq!(groups[0].1.len(), 4);
    assert_eq!(groups[0].1[0].median().records_per_s, 4e6);
    assert_eq!(groups[0].1[2].label(), "native W=2");
    assert_eq!(groups[0].1[3].label(), "flink p=1");
    assert_eq!(groups[1].1[0].label(), "native W=1 ckpt 1000ms");
    assert_eq!(groups[3].1[0].label(), "native W=1 P=2 ckpt 1000ms");
}

#[test]
fn a_chart_per_workload_with_a_bar_per_setting() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("benchmarks").join("results.json");
    write_report(&records(), dir.path(), &json).unwrap();
    let md = std::fs::read_to_string(dir.path().join("benchmarks.md")).unwrap();
    assert!(md.contains("[`benchmarks/results.json`](benchmarks/results.json)"));
    for (w, title) in [
        ("count", "records/s"),
        ("stateless", "records/s"),
        ("nexmark-q5", "records/s"),
        ("latency", "p99 latency at half the peak rate"),
        ("recovery", "kill to first checkpoint after it"),
    ] {
        let svg = std::fs::read_to_string(dir.path().join("benchmarks").join(svg_name(w))).unwrap();
        assert!(svg.starts_with("<svg"), "{w}: {svg:.80}");
        assert!(svg.contains(&format!("{w}: {title}")), "{w}");
    }
    let latency = std::fs::read_to_string(dir.path().join("benchmarks/latency.svg")).unwrap();
    assert!(latency.contains("8.5 ms"), "the p99 is the bar's label");
    let recovery = std::fs::read_to_string(dir.path().join("benchmarks/recovery.svg")).unwrap();
    assert!(recovery.contains("1500 ms"));
    let count = std::fs::read_to_string(dir.path().join("benchmarks/count.svg")).unwrap();
    for label in [
        "direct W=1",
        "native W=1",
        "native W=2",
        "flink p=1",
        "4.00M",
        "9.00M",
    ] {
        assert!(count.contains(label), "{label} missing");
    }
}

#[test]
fn the_reproducing_command_names_groups_and_round_sizes() {
    let names = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        workload_flag(&names(&["stateless", "count", "stateful", "windowed"])),
        "wordcount"
    );
    let all: Vec<String> = WordCount::ALL
        .iter()
        .map(|w| w.name().to_string())
        .chain(["latency".to_string(), "recovery".to_string()])
        .chain((0..=14).map(|q| format!("nexmark-q{q}")))
        .collect();
    assert_eq!(workload_flag(&all), "all");
    assert_eq!(workload_flag(&all[..4]), "wordcount");
    let no_figures: Vec<String> = all
        .iter()
        .filter(|w| !matches!(w.as_str(), "latency" | "recovery"))
        .cloned()
        .collect();
    assert_eq!(workload_flag(&no_figures), "wordcount,nexmark");
    assert_eq!(
        workload_flag(&names(&["count", "nexmark-q5"])),
        "count,nexmark-q5"
    );
    assert_eq!(round_to_3_digits(2_000_376), 2_000_000);
    assert_eq!(round_to_3_digits(100_215), 100_000);
    assert_eq!(round_to_3_digits(999), 999);
}

#[test]
fn dates_are_utc() {
    assert_eq!(utc(0), "1970-01-01 00:00");
    assert_eq!(utc(1_700_000_000), "2023-11-14 22:13");
    assert_eq!(utc(951_782_400), "2000-02-29 00:00");
}
