//! The full conformance matrix on every registered runner.
//!
//! The direct runner is the reference: it must pass every case, and so must the native
//! and the micro-batch runner, on one worker and on several (CI runs both again on two
//! processes). A failure anywhere is a bug in a runner, the SDK or a case. The rendered matrix is snapshotted; it holds no timing, and the seeds are
//! fixed. The snapshot is the expected matrix, not merely the last one seen: a
//! cell that turns to FAIL must be fixed in the code, not accepted into it.

use std::sync::OnceLock;
use tidewater_conformance::{all_cases, harness, register_runners, Matrix, MatrixConfig};

fn matrix() -> &'static Matrix {
    static MATRIX: OnceLock<Matrix> = OnceLock::new();
    MATRIX.get_or_init(|| {
        register_runners();
        let runners: Vec<String> = tidewater::runner::registered_runners()
            .iter()
            .map(|r| r.name().to_string())
            .collect();
        assert_eq!(runners, ["direct", "microbatch", "native"]);
        harness::with_quiet_panics(|| {
            harness::run_matrix(&all_cases(), &runners, &MatrixConfig::default())
        })
        .expect("every runner is registered")
    })
}

fn describe<'a>(
    cells: impl Iterator<Item = (&'static str, &'a str, &'a tidewater_conformance::Outcome)>,
) -> String {
    cells
        .map(|(case, runner, o)| {
            format!(
                "[{runner}] {case}: {} {}",
                o.label(),
                o.reason().unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn no_cell_fails() {
    let failed = describe(matrix().cells().filter(|(_, _, o)| o.is_fail()));
    assert!(failed.is_empty(), "failed cells:\n{failed}");
}

#[test]
fn direct_runner_passes_every_case() {
    let not_passed = describe(
        matrix()
            .cells()
            .filter(|(_, r, o)| *r == "direct" && !o.is_pass()),
    );
    assert!(
        not_passed.is_empty(),
        "direct cells that did not pass:\n{not_passed}"
    );
}

#[test]
fn the_engine_runners_pass_every_case_on_one_worker() {
    let not_passed = describe(
        matrix()
            .cells()
            .filter(|(_, r, o)| (*r == "native" || *r == "microbatch") && !o.is_pass()),
    );
    assert!(
        not_passed.is_empty(),
        "native and microbatch cells that did not pass:\n{not_passed}"
    );
}

/// Every case on the native and the micro-batch runner with 2 and 3 worker threads:
/// keyed state split over workers by key group, watermarks the minimum over every
/// upstream worker, side inputs broadcast.
#[test]
fn the_engine_runners_pass_every_case_on_several_workers() {
    register_runners();
    let runners = ["native".to_string(), "microbatch".to_string()];
    for workers in [2, 3] {
        let config = MatrixConfig {
            engine: tidewater::EngineOptions {
                workers,
                ..Default::default()
            },
            ..MatrixConfig::default()
        };
        let m = harness::with_quiet_panics(|| harness::run_matrix(&all_cases(), &runners, &config))
            .expect("the engine runners are registered");
        let not_passed = describe(m.cells().filter(|(_, _, o)| !o.is_pass()));
        assert!(
            not_passed.is_empty(),
            "cells that did not pass with {workers} workers:\n{not_passed}"
        );
    }
}

#[test]
fn rendered_matrix() {
    insta::assert_snapshot!(matrix().render());
}

/// Every case again on the direct runner while it snapshots its whole state at every
/// step, throws it away, and restores it redistributed over 1 to 4 virtual workers:
/// each semantic case is then also a test of snapshot, rescale and restore.
#[test]
fn direct_runner_passes_every_case_restoring_from_a_snapshot_at_every_step() {
    register_runners();
    let config = MatrixConfig {
        runner_options: vec![("checkpoint_every".into(), "1".into())],
        ..MatrixConfig::default()
    };
    let m = harness::with_quiet_panics(|| {
        harness::run_matrix(&all_cases(), &["direct".to_string()], &config)
    })
    .expect("the direct runner is registered");
    let not_passed = describe(m.cells().filter(|(_, _, o)| !o.is_pass()));
    assert!(
        not_passed.is_empty(),
        "direct cells that did not pass with checkpoint_every=1:\n{not_passed}"
    );
}

/// Every case again on the direct runner's fast path (no validation: natural order,
/// keyed input pushed straight into its operator and its output run downstream at
/// once). Without validation no copy of each element is kept for error messages, so a
/// failure case may only differ in naming the failing element by position.
#[test]
fn direct_runner_passes_every_case_without_validation() {
    register_runners();
    let config = MatrixConfig {
        no_validate: true,
        ..MatrixConfig::default()
    };
    let m = harness::with_quiet_panics(|| {
        harness::run_matrix(&all_cases(), &["direct".to_string()], &config)
    })
    .expect("the direct runner is registered");
    // The harness accepts a failing element named by position in this mode.
    let not_passed = describe(m.cells().filter(|(_, _, o)| !o.is_pass()));
    assert!(
        not_passed.is_empty(),
        "direct cells that did not pass with --no-validate:\n{not_passed}"
    );
}
