//! "Why hasn't my window fired?" on a running job (issue 35): `held_window` counts
//! generated numbers with a source that reads nothing and holds the watermark at 0. On
//! both engine runners, at 2 workers, `/api/job`'s `why` and `tidewater explain` say
//! that the oldest window, [0, 1 s), waits for the watermark to pass 999 ms, that the
//! input watermark is 0, and that source `Quiet` holds it back, idle. Ctrl-C then
//! drains the job: every window fires. With `--timers` the counts wait in a stateful
//! DoFn's event-time timers instead, and the answer names the earliest timer.

mod common;

use common::RUNNERS;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `held_window` with `extra` on `runner` at 2 workers; waits (20 s at most)
/// for a `why` answer naming the quiet source whose first line contains `first`, with
/// the input watermark at 0.
fn held(
    runner: &str,
    extra: &[&str],
    first: &str,
) -> (
    std::process::Child,
    String,
    Vec<serde_json::Value>,
    common::KillOnDrop,
) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_held_window"))
        .args([
            &format!("--runner={runner}"),
            "--workers=2",
            "--status-addr=127.0.0.1:0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let kill = common::KillOnDrop(child.id());
    let (base, _stderr) = common::status_base(&mut child, runner);
    let job = tidewater_cli::Job::at(&base).unwrap();
    let started = Instant::now();
    loop {
        let s = job.status().unwrap();
        let why = s["why"].as_array().cloned().unwrap_or_default();
        // Settled: the first report may come before the operator's first watermark.
        if why.iter().any(|w| {
            w["held_by"]["source"] == "Quiet"
                && w["lines"][0].as_str().is_some_and(|l| l.contains(first))
                && w["lines"][1] == "The input watermark is 0 ms, 999 ms short."
        }) {
            return (child, base, why, kill);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{runner}: no answer naming the quiet source: {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Ctrl-C: the job drains; its counts per second, each between 1 and 100.
fn drained(runner: &str, child: std::process::Child) -> Vec<u64> {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{runner}: {}", out.status);
    let counts = String::from_utf8(out.stdout).unwrap();
    let windows: Vec<u64> = counts
        .lines()
        .map(|l| l.strip_prefix("numbers ").unwrap().parse().unwrap())
        .collect();
    assert!(!windows.is_empty(), "{runner}: nothing fired");
    assert!(
        windows.iter().all(|&n| (1..=100).contains(&n)),
        "{runner}: {counts}"
    );
    windows
}

/// The answer's second and third sentences: the watermark at 0, held by the idle
/// `Quiet`.
fn held_by_quiet(runner: &str, lines: &[&str]) {
    assert_eq!(
        lines[1], "The input watermark is 0 ms, 999 ms short.",
        "{runner}: {lines:?}"
    );
    assert!(
        lines[2].starts_with("It is held back by source Quiet on worker 0, partition 0, at 0 ms: it is idle, reading nothing"),
        "{runner}: {lines:?}"
    );
}

fn lines(w: &serde_json::Value) -> Vec<&str> {
    w["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect()
}

#[test]
fn the_idle_source_holding_a_window_back_is_named() {
    for runner in RUNNERS {
        let (child, base, why, _kill) = held(runner, &[], "the oldest window");
        assert_eq!(why.len(), 1, "{runner}: {why:?}");
        let w = &why[0];
        assert_eq!(w["task"], "CountPerSecond/Combine", "{runner}: {w}");
        assert_eq!(w["held_by"]["state"], "idle", "{runner}: {w}");
        assert_eq!(w["held_by"]["watermark_ms"], 0, "{runner}: {w}");
        let lines = lines(w);
        assert!(
            lines[0].contains(
                "the oldest window still holding input, [0 ms, 1000 ms) of key \"numbers\""
            ) && lines[0].ends_with(
                "has emitted 0 panes; its trigger waits for the watermark to pass 999 ms."
            ),
            "{runner}: {lines:?}"
        );
        held_by_quiet(runner, &lines);
        let explained = tidewater_cli::run(["tidewater", "explain", "--job", &base]).unwrap();
        assert!(
            explained.contains("It is held back by source Quiet on worker 0, partition 0"),
            "{runner}: {explained}"
        );
        drained(runner, child);
    }
}

#[test]
fn a_stateful_dofns_earliest_timer_and_the_source_holding_it_are_named() {
    for runner in RUNNERS {
        let (child, base, why, _kill) =
            held(runner, &["--timers"], "the earliest event-time timer");
        assert_eq!(why.len(), 1, "{runner}: {why:?}");
        let w = &why[0];
        assert_eq!(w["task"], "FlushPerSecond", "{runner}: {w}");
        assert_eq!(w["held_by"]["state"], "idle", "{runner}: {w}");
        let lines = lines(w);
        // One key: its timers (one per second of event time read so far) wait on one
        // worker, in the global window.
        let (count, rest) = lines[0]
            .strip_prefix(&format!("FlushPerSecond (worker {}): ", w["worker"]))
            .and_then(|l| l.split_once(" timer"))
            .unwrap_or_else(|| panic!("{runner}: {lines:?}"));
        assert!(count.parse::<u64>().unwrap() >= 1, "{runner}: {lines:?}");
        assert!(
            rest.contains(" pending in 1 window; the earliest event-time timer, 'flush-0' of key \"numbers\", key group ")
                && rest.ends_with(", in the global window, fires when the input watermark passes 999 ms."),
            "{runner}: {lines:?}"
        );
        held_by_quiet(runner, &lines);
        let explained = tidewater_cli::run(["tidewater", "explain", "--job", &base]).unwrap();
        assert!(explained.contains("'flush-0'"), "{runner}: {explained}");
        // Drained, every timer fires: the same counts per second as the windows give.
        drained(runner, child);
    }
}
