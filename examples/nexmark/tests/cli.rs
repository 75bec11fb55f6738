//! The nexmark binary refuses an unbounded run it could not end or check, and an
//! unbounded run with an end reports its progress and stops.

fn nexmark(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nexmark"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .env_remove("RUST_LIB_BACKTRACE")
        .output()
        .expect("runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

#[test]
fn an_unbounded_run_needs_an_end_and_cannot_be_verified() {
    let (code, text) = nexmark(&["--events", "0", "--query", "1"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        text.trim(),
        "Error: --events 0 runs unbounded: give --max-duration (e.g. --max-duration 30s) to stop it"
    );
    let (code, text) = nexmark(&["--events", "0", "--verify", "--max-duration", "1s"]);
    assert_eq!(code, Some(1));
    assert_eq!(
        text.trim(),
        "Error: --verify needs a bounded run to compare with the oracle: give --events N (0 is unbounded)"
    );
}

#[test]
fn an_unbounded_run_with_an_end_stops_and_reports() {
    let (code, text) = nexmark(&[
        "--events",
        "0",
        "--query",
        "2",
        "--max-duration",
        "1s",
        "--no-validate",
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Q2: unbounded for "), "{text}");
}

#[test]
fn q10_leaves_no_files_behind_unless_asked() {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_nexmark"))
        .args(["--query", "10", "--events", "1000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let pid = child.id();
    let out = child.wait_with_output().expect("ends");
    assert!(out.status.success());
    let dir = std::env::temp_dir().join(format!("tidewater-nexmark-q10-{pid}"));
    assert!(!dir.exists(), "{} was left behind", dir.display());
    let kept = tempfile::tempdir().unwrap();
    let (code, text) = nexmark(&[
        "--query",
        "10",
        "--events",
        "1000",
        "--q10-dir",
        kept.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(std::fs::read_dir(kept.path()).unwrap().count() > 0);
}

/// `--json` prints one `bench` record per query on stdout, counting outputs in a sink;
/// `--outputs-dir` writes them, one line each, for `bench`'s check between runners.
#[test]
fn json_records_and_output_files_for_bench() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nexmark"))
        .args([
            "--query",
            "10",
            "--events",
            "2000",
            "--json",
            "--no-validate",
        ])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let records: Vec<tidewater_examples::bench::record::BenchRecord> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(records.len(), 1, "{stdout}");
    let r = &records[0];
    assert_eq!(
        (r.workload.as_str(), r.runner.as_str(), r.workers, r.records),
        ("nexmark-q10", "direct", 1, 2000)
    );
    assert!(
        r.outputs > 0 && !r.validate && r.peak_rss_mb.is_some(),
        "{r:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let (code, text) = nexmark(&[
        "--query",
        "5",
        "--events",
        "2000",
        "--outputs-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    let lines = std::fs::read_to_string(dir.path().join("Q5.txt")).unwrap();
    assert!(
        text.contains(&format!("outputs={}", lines.lines().count())),
        "{text}"
    );
    assert!(lines.starts_with("AuctionCount {"), "{lines}");
}

/// The records of a `--json` run.
fn records(args: &[&str]) -> Vec<tidewater_examples::bench::record::BenchRecord> {
    let (code, text) = nexmark(args);
    assert_eq!(code, Some(0), "{text}");
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// On a local cluster the counting sinks run in its processes, which end inside the
/// run: the supervisor's record still counts every output they committed (they hand
/// their counts back in files), once, and reports the cluster's processes.
#[test]
fn a_local_cluster_counts_the_outputs_its_processes_committed() {
    let direct = records(&["--query", "8", "--events", "3000", "--json"]);
    let cluster = records(&[
        "--query",
        "8",
        "--events",
        "3000",
        "--json",
        "--runner",
        "native",
        "--workers",
        "2",
        "--local-cluster",
        "2",
    ]);
    assert_eq!(direct.len(), 1);
    assert_eq!(cluster.len(), 1);
    assert!(direct[0].outputs > 0, "{direct:?}");
    let c = &cluster[0];
    assert_eq!(
        (
            c.workload.as_str(),
            c.runner.as_str(),
            c.workers,
            c.processes
        ),
        ("nexmark-q8", "native", 2, 2)
    );
    assert_eq!(c.outputs, direct[0].outputs, "{c:?}");
    assert!(c.peak_rss_mb.is_some(), "{c:?}");
}

/// `--query all` on a local cluster runs each query on a cluster of its own (a
/// cluster's processes run one pipeline), each checked against its oracle.
#[test]
fn every_query_runs_and_verifies_on_a_local_cluster() {
    let (code, text) = nexmark(&[
        "--query",
        "all",
        "--events",
        "500",
        "--verify",
        "--runner",
        "native",
        "--local-cluster",
        "2",
    ]);
    assert_eq!(code, Some(0), "{text}");
    for q in 0..=14 {
        assert!(
            text.contains(&format!("Q{q}: verified against the oracle")),
            "Q{q}: {text}"
        );
    }
}
