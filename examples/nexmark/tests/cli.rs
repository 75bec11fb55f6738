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

/// Q12 without `--verify` reads the source on the processing clock, at any size: it
/// ran on a TestStream inside the plan, and 200,000 events made a plan of 122 MB, over
/// the 64 MB a plan may hold ("malformed plan"). Its panes depend on the clock, but not
/// what they add up to: every bid counted once (discarding panes), every bidder with a
/// pane.
#[test]
fn q12_runs_on_the_processing_clock_beyond_what_a_plan_can_hold() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = nexmark(&[
        "--query",
        "12",
        "--events",
        "200000",
        "--runner",
        "native",
        "--no-validate",
        "--outputs-dir",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("Q12: events=200000 outputs="), "{text}");
    let mut counts = std::collections::BTreeMap::<usize, u64>::new();
    for line in std::fs::read_to_string(dir.path().join("Q12.txt"))
        .unwrap()
        .lines()
    {
        let (bidder, n) = line
            .trim_matches(|c| c == '(' || c == ')')
            .split_once(", ")
            .unwrap_or_else(|| panic!("not a (bidder, count): {line}"));
        *counts.entry(bidder.parse().unwrap()).or_default() += n.parse::<u64>().unwrap();
    }
    let mut want = std::collections::BTreeMap::<usize, u64>::new();
    for e in tidewater_nexmark::NexmarkSource::new(200_000, 10_000).all_events() {
        if let tidewater_nexmark::Event::Bid(b) = e {
            *want.entry(b.bidder).or_default() += 1;
        }
    }
    assert!(counts == want, "bids per bidder differ from the events'");
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

/// Issue 36: a Q3 savepoint (of a run stopped midway: a bounded run's last checkpoint
/// holds no state, its windows all expired) read offline holds, per seller id, the
/// seller (a person of one of Q3's states) once seen, or else the seller's auctions of
/// Q3's category that came first.
#[test]
fn a_q3_savepoint_inspected_shows_the_persons_and_auctions_held_per_key() {
    use tidewater_nexmark::queries::{Q3_CATEGORY, Q3_STATES};
    use tidewater_nexmark::{Event, NexmarkSource};
    let dir = tempfile::tempdir().unwrap();
    let savepoint = dir.path().join("sp");
    let sp = format!("--savepoint-dir={}", savepoint.display());
    let (code, text) = nexmark(&[
        "--runner=native",
        "--query=3",
        "--events=0",
        "--rate=2000",
        "--max-duration=2s",
        "--no-validate",
        &sp,
    ]);
    assert_eq!(code, Some(0), "{text}");
    let inspect = format!("--inspect-savepoint={}", savepoint.display());
    let (code, text) = nexmark(&[
        "--runner=native",
        "--query=3",
        &inspect,
        "--inspect-id=Q3.Join/Join",
    ]);
    assert_eq!(code, Some(0), "{text}");
    let (mut persons, mut pending) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for line in text.lines() {
        let e: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("{line}"));
        let key: u64 = e["key"].as_str().unwrap().parse().unwrap();
        match e["cell"].as_str().unwrap() {
            "person" => {
                assert_eq!(e["value"]["id"].as_u64(), Some(key), "{line}");
                assert!(
                    Q3_STATES.contains(&e["value"]["state"].as_str().unwrap()),
                    "{line}"
                );
                persons.insert(key);
            }
            "pending" => {
                for a in e["value"].as_array().unwrap() {
                    assert_eq!(a["seller"].as_u64(), Some(key), "{line}");
                    assert_eq!(a["category"].as_u64(), Some(Q3_CATEGORY as u64), "{line}");
                }
                pending.insert(key);
            }
            other => panic!("cell {other}: {line}"),
        }
    }
    // Every person held is one of Q3's (of the events the run could have read), and a
    // seller's auctions wait only until the seller comes.
    // (Persons are one event in 50, numbered from 1000: enough events to hold the
    // newest person held.)
    let newest = persons.iter().max().copied().unwrap_or(1000);
    let events = (newest - 1000 + 10) * 50 + 1000;
    let q3_persons: std::collections::BTreeSet<u64> = NexmarkSource::new(events, 2000)
        .all_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Person(p) if Q3_STATES.contains(&p.state.as_str()) => Some(p.id as u64),
            _ => None,
        })
        .collect();
    assert!(!persons.is_empty() && !pending.is_empty(), "{text}");
    assert!(persons.is_subset(&q3_persons), "{persons:?}");
    assert!(persons.is_disjoint(&pending), "{persons:?} {pending:?}");
}

/// Issue 37: on a `--hosts` cluster of 2 processes (on loopback) both end cleanly;
/// process 0, which holds the outputs, verifies them and reports, the other says
/// nothing.
#[test]
fn a_hosts_cluster_verifies_on_process_0_and_ends_cleanly_on_both() {
    let dir = tempfile::tempdir().unwrap();
    let listeners: Vec<std::net::TcpListener> = (0..2)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let hosts = dir.path().join("hosts");
    let listing: String = listeners
        .iter()
        .map(|l| format!("127.0.0.1:{}\n", l.local_addr().unwrap().port()))
        .collect();
    drop(listeners);
    std::fs::write(&hosts, listing).unwrap();
    let start = move |id: usize| {
        std::process::Command::new(env!("CARGO_BIN_EXE_nexmark"))
            .args(["--query", "3", "--events", "2000", "--verify"])
            .args(["--runner", "native", "--processes", "2"])
            .arg(format!("--process-id={id}"))
            .arg(format!("--hosts={}", hosts.display()))
            .output()
    };
    let one = std::thread::spawn({
        let start = start.clone();
        move || start(1)
    });
    let zero = start(0).unwrap();
    let one = one.join().unwrap().unwrap();
    for (id, out) in [(0, &zero), (1, &one)] {
        assert!(
            out.status.success(),
            "process {id}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let said = String::from_utf8_lossy(&zero.stdout);
    assert!(said.contains("Q3: verified against the oracle"), "{said}");
    assert_eq!(String::from_utf8_lossy(&one.stdout), "");
}
