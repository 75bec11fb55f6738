//! Savepoints are portable across every runner (issue 36, part 6): the crash job is
//! stopped with a savepoint on one runner, resumed from it on the next, stopped again
//! with a savepoint of its own, and so on; the last runner runs it to the end. The
//! engine runners run 2 workers when stopped and 1 when finishing, the direct runner
//! its one. The lines of all the runs together are the direct runner's output of one
//! uninterrupted run, line for line, each exactly once. Two chains take every ordered
//! pair of runners once:
//!
//! - native → micro-batch → direct → native;
//! - micro-batch → native → direct → micro-batch.
//!
//! A savepoint asked of a running direct job (SIGUSR1) is kept while it goes on, and
//! a native job resumed from it writes exactly what came after it.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};

/// More records than the other crash tests: three stops of 1 s at [`RATE`] leave the
/// last run a third of them or more.
const CHAIN_RECORDS: u64 = 60_000;

/// The flags of `runner` at `workers` (the direct runner has one).
fn flags(runner: &'static str, workers: u32) -> Vec<String> {
    let mut flags = runner_flags(runner).to_vec();
    if runner != "direct" {
        flags.push(format!("--workers={workers}"));
    }
    flags
}

/// Runs the crash job on `runner` from savepoint `from` (if any) into `out`: stopped
/// after 1 s with a savepoint in `to`, or to its end if `to` is `None`. Its lines.
fn leg(runner: &'static str, from: Option<&Path>, to: Option<&Path>, out: &Path) -> Vec<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crash_job"));
    cmd.args(flags(runner, if to.is_some() { 2 } else { 1 }))
        .arg(format!("--records={CHAIN_RECORDS}"))
        .arg(format!("--rate={RATE}"))
        .arg(format!("--output={}", out.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(from) = from {
        cmd.arg(format!("--from-savepoint={}", from.display()));
    }
    if let Some(to) = to {
        cmd.arg("--max-duration=1s")
            .arg(format!("--savepoint-dir={}", to.display()));
    }
    let what = format!(
        "{runner} from {:?} to {:?}",
        from.map(|f| f.file_name()),
        to.map(|t| t.file_name())
    );
    finish(cmd.spawn().unwrap(), &what);
    if out.exists() {
        tidewater_examples::crash_job::committed_lines(out).unwrap()
    } else {
        Vec::new()
    }
}

/// Runs the chain of `runners`; the lines of all its runs together are exact.
fn chain(runners: [&'static str; 4]) {
    let _s = serial();
    let dir = tempfile::tempdir().unwrap();
    let mut all = Vec::new();
    let mut from: Option<std::path::PathBuf> = None;
    for (i, runner) in runners.into_iter().enumerate() {
        let last = i + 1 == runners.len();
        let to = (!last).then(|| dir.path().join(format!("savepoint-{i}-{runner}")));
        let lines = leg(
            runner,
            from.as_deref(),
            to.as_deref(),
            &dir.path().join(format!("out-{i}")),
        );
        // Every run reads some: a stop that ended the job would leave the next nothing
        // to resume.
        assert!(
            !lines.is_empty(),
            "{runners:?}: run {i} on {runner} wrote nothing"
        );
        all.extend(lines);
        from = to;
    }
    all.sort();
    let expected = reference_of(CHAIN_RECORDS);
    assert_eq!(
        all.len(),
        expected.len(),
        "{runners:?}: the runs together wrote {} lines, an uninterrupted run {}",
        all.len(),
        expected.len()
    );
    assert!(all == expected, "{runners:?}: the lines differ");
}

#[test]
fn a_savepoint_moves_native_to_micro_batch_to_direct_to_native() {
    chain(["native", "microbatch", "direct", "native"]);
}

#[test]
fn a_savepoint_moves_micro_batch_to_native_to_direct_to_micro_batch() {
    chain(["microbatch", "native", "direct", "microbatch"]);
}
