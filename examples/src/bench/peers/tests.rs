//! Tests of `peers.rs`.

use super::*;
use crate::bench::record::tests::sample;

const HEADER: &str =
    "rep\tpeer\tworkload\tvariant\tpar\tinput\twall_s\tmaxrss_kb\tuser_s\tsys_s\trc\tresult";

fn meta() -> InputMeta {
    InputMeta {
        lines: 1000,
        words: 10_000,
        distinct_words: 900,
        windowed_records: 950,
        seed: 42,
        vocab: 10_000,
        lines_per_sec: 10_000,
    }
}

/// Rows as run.sh writes them (its printf, fields from a real run's logs).
fn raw() -> String {
    [
        HEADER,
        "1\ttimely\tstateless\t-\t1\twc1000.txt\t0.01\t7000\t0.01\t0.00\t0\tRESULT peer=timely workload=stateless workers=1 words_in=10000 records_out=10000 sum_counts=10000 job_ms=2",
        "1\tflink\tstateful\tstreaming\t1\twc1000.txt\t4.5\t680000\t7.0\t0.5\t0\tRESULT peer=flink workload=stateful parallelism=1 mode=streaming ckpt_ms=0 records_out=900 sum_counts=10000 job_ms=900 net_ms=5 jvm_ms=3500",
        "1\tflink\trolling\tstreaming\t1\twc1000.txt\t4.6\t690000\t7.1\t0.5\t0\tRESULT peer=flink workload=rolling parallelism=1 mode=streaming ckpt_ms=0 records_out=10000 sum_counts=5000000 job_ms=950 net_ms=10 jvm_ms=3500",
        "1\tflink\tstateful\tstreaming+ckpt1s\t1\twc1000.txt\t4.7\t650000\t7.0\t0.5\t0\tRESULT peer=flink workload=stateful parallelism=1 mode=streaming ckpt_ms=1000 records_out=900 sum_counts=10000 job_ms=960 net_ms=8 jvm_ms=3500",
        "1\tspark\tss-stateful\tds\t1\twc1000.txt\t12.0\t1200000\t20\t1\t0\tRESULT peer=spark workload=ss-stateful parallelism=1 variant=ds records_out=900 sum_counts=10000 job_ms=20 startup_ms=5000 jvm_ms=300",
        "1\tspark\twindowed\tds\t1\twc1000.ts.txt\t12.0\t1000000\t20\t1\t0\tRESULT peer=spark workload=windowed parallelism=1 variant=ds records_out=949 sum_counts=10000 job_ms=40 startup_ms=5000 jvm_ms=300",
        "1\tflink\tempty\tstreaming\t1\tempty.txt\t4.0\t290000\t6\t0.4\t0\tRESULT peer=flink workload=empty parallelism=1 mode=streaming ckpt_ms=0 records_out=0 sum_counts=0 job_ms=700 net_ms=600 jvm_ms=3000",
        "1\tspark\tstateless\tsql\t2\twc1000.txt\tNA\tNA\tNA\tNA\t124\t",
    ]
    .join("\n")
        + "\n"
}

#[test]
fn the_raw_tsv_parses() {
    let runs = parse_raw(&raw()).unwrap();
    assert_eq!(runs.len(), 8);
    assert_eq!(runs[1].peer, "flink");
    assert_eq!(runs[1].maxrss_kb, Some(680_000));
    assert_eq!(runs[1].job_seconds(), Some(0.005));
    assert_eq!(runs[0].job_seconds(), Some(0.002));
    assert_eq!(runs[7].wall_s, None);
    assert_eq!(runs[7].rc, 124);
    assert!(runs[7].result.is_empty());
    let e = parse_raw("rep\tpeer\n").unwrap_err().to_string();
    assert!(e.starts_with("not run.sh's raw TSV"), "{e}");
}

#[test]
fn peer_runs_map_to_our_workloads_runners_and_checkpoints() {
    let runs = parse_raw(&raw()).unwrap();
    type Mapped<'a> = (Option<&'a str>, String, (bool, Option<u64>));
    let mapped: Vec<Mapped> = runs
        .iter()
        .map(|r| (r.our_workload(), r.runner(), r.checkpoint()))
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        mapped,
        vec![
            (Some("stateless"), s("timely"), (false, None)),
            (Some("count"), s("flink"), (false, None)),
            (Some("stateful"), s("flink"), (false, None)),
            (Some("count"), s("flink"), (true, Some(1000))),
            (Some("count"), s("spark-ss"), (true, None)),
            (Some("windowed"), s("spark"), (false, None)),
            (None, s("flink"), (false, None)),
            (Some("stateless"), s("spark-sql"), (false, None)),
        ]
    );
}

#[test]
fn a_peer_run_is_checked_and_becomes_a_record() {
    let runs = parse_raw(&raw()).unwrap();
    let start = RunStart {
        load_avg_1m: Some(1.5),
        unix_s: 1_700_000_000,
        cpu: None,
    };
    let r = runs[1]
        .to_record(&meta(), "Flink 2.3.0", start)
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            r.workload.as_str(),
            r.runner.as_str(),
            r.workers,
            r.records,
            r.outputs
        ),
        ("count", "flink", 1, 10_000, 900)
    );
    assert_eq!((r.seconds, r.records_per_s), (0.005, 2_000_000.0));
    assert_eq!(r.peak_rss_mb, Some(680_000.0 / 1024.0));
    assert_eq!(r.peer.as_deref(), Some("Flink 2.3.0"));
    // The rolling count's sum is not the words'; its records are.
    assert!(runs[2].to_record(&meta(), "Flink", start).unwrap().is_ok());
    assert_eq!(
        runs[5].to_record(&meta(), "Spark", start).unwrap(),
        Err("949 records out, 950 expected".into())
    );
    assert_eq!(runs[6].to_record(&meta(), "Flink", start), None);
    assert_eq!(
        runs[7].to_record(&meta(), "Spark", start).unwrap(),
        Err("exit code 124 (timed out)".into())
    );
}

fn rec(workload: &str, runner: &str, workers: u32, rate: f64, peer: bool) -> BenchRecord {
    let mut r = sample();
    r.workload = workload.into();
    r.runner = runner.into();
    r.workers = workers;
    r.records_per_s = rate;
    r.peer = peer.then(|| format!("{runner} 1.0"));
    r
}

#[test]
fn ratios_pair_medians_at_the_same_parallelism_and_checkpointing() {
    let mut ckpt = rec("count", "native", 1, 3e6, false);
    ckpt.checkpoint = true;
    let mut flink_ckpt = rec("count", "flink", 1, 2e6, true);
    flink_ckpt.checkpoint = true;
    let records = vec![
        rec("stateless", "native", 1, 8e6, false),
        rec("stateless", "native", 1, 6e6, false),
        rec("stateless", "native", 1, 7e6, false),
        rec("stateless", "timely", 1, 10e6, true),
        rec("stateless", "timely", 2, 15e6, true),
        rec("count", "native", 1, 5e6, false),
        rec("count", "microbatch", 1, 4e6, false),
        rec("count", "flink", 1, 2e6, true),
        rec("count", "flink-batch", 1, 1e6, true),
        rec("count", "spark", 1, 1.6e6, true),
        ckpt,
        flink_ckpt,
    ];
    let got: Vec<(String, String, u32, bool, String, Option<f64>)> = ratios(&records)
        .iter()
        .map(|r| {
            (
                r.workload.clone(),
                r.runner.clone(),
                r.workers,
                r.checkpoint,
                format!("{:.3}", r.ratio),
                r.target,
            )
        })
        .collect();
    let s = |x: &str| x.to_string();
    assert_eq!(
        got,
        vec![
            (s("stateless"), s("native"), 1, false, s("0.700"), Some(0.8)),
            (s("count"), s("native"), 1, false, s("2.500"), Some(2.0)),
            (s("count"), s("native"), 1, false, s("3.125"), None),
            (s("count"), s("microbatch"), 1, false, s("2.000"), None),
            (s("count"), s("microbatch"), 1, false, s("2.500"), Some(2.0)),
            (s("count"), s("native"), 1, true, s("1.500"), None),
        ]
    );
    let text = ratios_text(&ratios(&records));
    assert!(
        text.contains(
            "stateless  native      1 off      7.00M timely         10.00M  0.70x (target >= 0.8x: not met)"
        ),
        "{text}"
    );
    assert!(text.contains("2.50x (target >= 2x: met)"), "{text}");
    let md = ratios_markdown(&ratios(&records));
    assert!(
        md.contains(
            "| count | native | 1 | off | 5.00M | flink | 2.00M | 2.50x (target ≥ 2x: met) |"
        ),
        "{md}"
    );
}

#[test]
fn peer_workloads_follow_ours() {
    let ours: Vec<String> = ["count", "stateful", "nexmark-q1", "windowed"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(peer_workloads(&ours), vec!["stateful", "windowed"]);
}

#[test]
fn versions_come_from_the_installed_packages() {
    let root = tempfile::tempdir().unwrap();
    let site = root.path().join("venv-flink/lib/python3.11/site-packages");
    std::fs::create_dir_all(site.join("apache_flink-2.3.0.dist-info")).unwrap();
    std::fs::create_dir_all(site.join("apache_flink_libraries-2.3.0.dist-info")).unwrap();
    std::fs::create_dir_all(root.path().join("timely-wc")).unwrap();
    std::fs::write(
        root.path().join("timely-wc/Cargo.lock"),
        "[[package]]\nname = \"timely\"\nversion = \"0.32.0\"\nsource = \"registry\"\n",
    )
    .unwrap();
    assert_eq!(
        peer_version(root.path(), "flink", Some("OpenJDK 17.0.15")),
        "Flink 2.3.0 (OpenJDK 17.0.15)"
    );
    assert_eq!(
        peer_version(root.path(), "timely", None),
        "timely 0.32.0 (hand-written)"
    );
    assert_eq!(
        peer_version(root.path(), "spark", None),
        "Spark (version unknown)"
    );
    assert_eq!(
        java_version_of("openjdk version \"17.0.15\" 2025-04-15"),
        "OpenJDK 17.0.15"
    );
}
