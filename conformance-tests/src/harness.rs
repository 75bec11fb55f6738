//! Runs cases on runners and decides each outcome.
//!
//! The rules, for one case on one runner:
//! - the case's declared features must equal the features its plan uses, or the case
//!   fails ("declaration drift") on every runner;
//! - a run refused with [`Error::Unsupported`] is *unsupported* only if the runner's
//!   capabilities lack one of the declared features, and every refused feature is one
//!   it lacks; otherwise it fails;
//! - a run of a case the runner lacks a feature for that is *not* refused fails;
//! - otherwise the case's check decides, and it must pass for every seed.

use crate::case::{Case, Outcome, RunResult};
use crate::matrix::{Matrix, Row};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::time::Duration;
use tidewater::runner::{self, plan_features, Capabilities, Feature, UnsupportedFeature};
use tidewater::{Error, Pipeline, PipelineOptions};

/// How the matrix is run.
#[derive(Clone, Debug)]
pub struct MatrixConfig {
    /// Every case runs once per seed (passed as `--seed`) on every runner, and passes
    /// only if it passes for all of them: the direct runner shuffles elements and draws
    /// bundle sizes from the seed.
    pub seeds: Vec<u64>,
    /// A single run that takes longer fails, so that a hanging runner cannot hang the
    /// suite.
    pub timeout: Duration,
    /// Runner options (`--runner-option KEY=VALUE`) every run gets, e.g. the direct
    /// runner's `checkpoint_every=1`.
    pub runner_options: Vec<(String, String)>,
    /// Runs with `--no-validate` (the direct runner's fast path: no coder round-trips,
    /// natural order, keyed input pushed straight into its operator).
    pub no_validate: bool,
    /// Where stateful DoFns keep their state (`--state-backend`).
    pub state_backend: tidewater::StateBackendKind,
    /// With the embedded backend: windows each grouping keeps in memory
    /// (`--state-hot-windows`; 1 puts nearly every window in the store between
    /// bundles).
    pub state_hot_windows: Option<u64>,
    /// Runner flags (e.g. the micro-batch runner's `--batch-interval`); a run gets
    /// those its runner declares.
    pub runner_flags: tidewater::runner_flags::RunnerFlags,
    /// Workers and processes of the distributed runners (the direct runner always runs
    /// one worker); with `local_cluster`, each case runs in that many processes.
    pub engine: tidewater::EngineOptions,
}

impl Default for MatrixConfig {
    fn default() -> Self {
        MatrixConfig {
            seeds: vec![1, 2, 3],
            timeout: Duration::from_secs(120),
            runner_options: Vec::new(),
            no_validate: false,
            state_backend: Default::default(),
            state_hot_windows: None,
            runner_flags: Default::default(),
            engine: tidewater::EngineOptions::default(),
        }
    }
}

/// Runs every case on every runner of `runners` (names as `--runner` takes them).
///
/// Fails only if a runner name is not registered.
pub fn run_matrix(
    cases: &[Case],
    runners: &[String],
    config: &MatrixConfig,
) -> Result<Matrix, Error> {
    let capabilities = runners
        .iter()
        .map(|r| Ok(runner::lookup_runner(r)?.capabilities()))
        .collect::<Result<Vec<_>, Error>>()?;
    let rows = cases
        .iter()
        .map(|case| Row {
            case: case.name,
            outcomes: runners.iter().map(|r| run_case(case, r, config)).collect(),
        })
        .collect();
    Ok(Matrix {
        runners: runners.to_vec(),
        capabilities,
        rows,
    })
}

/// Runs `case` on `runner` once per seed; the first seed that does not pass decides.
pub fn run_case(case: &Case, runner: &str, config: &MatrixConfig) -> Outcome {
    let seeds: Vec<Option<u64>> = if config.seeds.is_empty() {
        vec![None]
    } else {
        config.seeds.iter().copied().map(Some).collect()
    };
    for seed in seeds {
        let run = crate::scratch::new_run_name();
        let options = PipelineOptions {
            seed,
            runner_options: config.runner_options.clone(),
            no_validate: config.no_validate,
            state_backend: config.state_backend,
            state_hot_windows: config.state_hot_windows,
            runner_flags: flags_for(runner, &config.runner_flags),
            engine: if runner == "direct" {
                tidewater::EngineOptions::default()
            } else {
                cluster_engine(case, runner, seed, config, &run)
            },
            ..PipelineOptions::for_runner(runner)
        };
        // A run that keeps no element copies (the direct runner without validation,
        // the distributed runners) names a failing element by its position: the only
        // way such a failure case may differ.
        let keeps_copies = runner == "direct" && !config.no_validate;
        match run_once_with_timeout(*case, options, config.timeout, run) {
            Outcome::Pass => {}
            Outcome::Fail(reason) if !keeps_copies && names_element_by_position(&reason) => {}
            Outcome::Fail(reason) => {
                return Outcome::Fail(match seed {
                    Some(seed) => format!("with --seed={seed}: {reason}"),
                    None => reason,
                })
            }
            // Unsupported is decided before anything runs, whatever the seed.
            other => return other,
        }
    }
    Outcome::Pass
}

/// The flags of `given` that `runner` declares (another runner's would be refused).
fn flags_for(
    runner: &str,
    given: &tidewater::runner_flags::RunnerFlags,
) -> tidewater::runner_flags::RunnerFlags {
    let declared = tidewater::runner::lookup_runner(runner).map_or(&[][..], |r| r.flags());
    let mut flags = tidewater::runner_flags::RunnerFlags::default();
    for (name, value) in given.iter() {
        if declared.iter().any(|f| f.name == name) {
            flags.set(name, value);
        }
    }
    flags
}

/// The engine options of a run of `case` on a distributed runner: the configured
/// ones and, for a local cluster, the arguments each process runs the case with.
fn cluster_engine(
    case: &Case,
    runner: &str,
    seed: Option<u64>,
    config: &MatrixConfig,
    run: &str,
) -> tidewater::EngineOptions {
    let mut engine = config.engine.clone();
    if engine.local_cluster.is_some() {
        let mut args = vec![
            format!("--runner={runner}"),
            format!("--case={}", case.name),
            format!("--workers={}", engine.workers),
            format!("--guarantee={}", engine.guarantee),
            format!("--scratch-run={run}"),
        ];
        args.extend(seed.map(|s| format!("--seed={s}")));
        args.extend(config.no_validate.then(|| "--no-validate".to_string()));
        if config.state_backend == tidewater::StateBackendKind::Fjall {
            args.push("--state-backend=fjall".to_string());
        }
        if let Some(n) = config.state_hot_windows {
            args.push(format!("--state-hot-windows={n}"));
        }
        for (k, v) in &config.runner_options {
            args.push(format!("--runner-option={k}={v}"));
        }
        for (k, v) in flags_for(runner, &config.runner_flags).iter() {
            args.push(format!("--{k}={v}"));
        }
        engine.child_args = Some(args);
    }
    engine
}

/// Whether a failure is only that the failing element was named by its position.
pub fn names_element_by_position(reason: &str) -> bool {
    reason.starts_with("failing element: expected one containing")
        && reason
            .contains("of its batch (only the direct runner with validation keeps a copy to show)")
}

/// [`run_once`] on its own thread, so that a run that hangs fails after `timeout`
/// instead of hanging the suite (the thread is left behind).
fn run_once_with_timeout(
    case: Case,
    options: PipelineOptions,
    timeout: Duration,
    run: String,
) -> Outcome {
    let (tx, rx) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name(format!("{}@{}", case.name, options.runner))
        .spawn(move || {
            crate::scratch::set_run(run);
            let _ = tx.send(run_with(&case, options));
        });
    if let Err(e) = spawned {
        return Outcome::Fail(format!("cannot start a thread for the run: {e}"));
    }
    match rx.recv_timeout(timeout) {
        Ok(outcome) => outcome,
        Err(mpsc::RecvTimeoutError::Timeout) => Outcome::Fail(format!(
            "the run did not finish within {}s",
            timeout.as_secs()
        )),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Outcome::Fail("the harness thread died without an outcome".into())
        }
    }
}

/// Builds, checks the declaration, runs and checks `case` on `runner` with `seed`.
pub fn run_once(case: &Case, runner: &str, seed: Option<u64>) -> Outcome {
    run_with(
        case,
        PipelineOptions {
            seed,
            ..PipelineOptions::for_runner(runner)
        },
    )
}

/// Builds, checks the declaration, runs and checks `case` with `options`.
pub fn run_with(case: &Case, options: PipelineOptions) -> Outcome {
    let _cleanup = crate::scratch::Cleanup;
    let runner = options.runner.clone();
    let runner = runner.as_str();
    let p = Pipeline::new(options);
    if let Err(message) = guard(|| (case.build)(&p)) {
        return Outcome::Fail(format!("building the pipeline panicked: {message}"));
    }
    let plan = match p.to_plan() {
        Ok(plan) => plan,
        Err(e) => return Outcome::Fail(format!("the pipeline does not construct: {e}")),
    };
    if let Some(drift) = declaration_drift(case.features, &plan_features(&plan)) {
        return Outcome::Fail(format!("declaration drift: {drift}"));
    }
    let capabilities = match runner::lookup_runner(runner) {
        Ok(r) => r.capabilities(),
        Err(e) => return Outcome::Fail(e.to_string()),
    };
    match guard(|| p.run()) {
        Ok(result) => judge(case, &capabilities, result),
        Err(message) => Outcome::Fail(format!(
            "the run panicked instead of returning an error: {message}"
        )),
    }
}

/// Decides the outcome of a run of `case` on a runner with `capabilities`.
pub fn judge(case: &Case, capabilities: &Capabilities, result: RunResult) -> Outcome {
    let lacking: Vec<Feature> = case
        .features
        .iter()
        .copied()
        .filter(|f| !capabilities.supports(*f))
        .collect();
    match result {
        Err(e @ Error::Unsupported { .. }) => judge_refusal(e, &lacking, capabilities),
        result if !lacking.is_empty() => Outcome::Fail(format!(
            "runner ran a case it does not support: its capabilities lack {}, yet the run {}",
            list(&lacking),
            match &result {
                Ok(_) => "succeeded".to_string(),
                Err(e) => format!("failed with another error instead of refusing the plan: {e}"),
            }
        )),
        result => match guard(|| (case.check)(result)) {
            Ok(Ok(())) => Outcome::Pass,
            Ok(Err(reason)) => Outcome::Fail(reason),
            Err(message) => Outcome::Fail(format!("the check panicked: {message}")),
        },
    }
}

/// Unsupported only if the runner lacks a declared feature and refused nothing else.
fn judge_refusal(e: Error, lacking: &[Feature], capabilities: &Capabilities) -> Outcome {
    let Error::Unsupported { unsupported, .. } = &e else {
        unreachable!("called with Error::Unsupported")
    };
    if lacking.is_empty() {
        return Outcome::Fail(format!(
            "runner refused a case whose features it claims to support: {e}"
        ));
    }
    let wrongly_refused: BTreeSet<Feature> = unsupported
        .iter()
        .map(|u| u.feature)
        .filter(|f| capabilities.supports(*f))
        .collect();
    if !wrongly_refused.is_empty() {
        return Outcome::Fail(format!(
            "runner refused features it claims to support ({}): {e}",
            list(&wrongly_refused.into_iter().collect::<Vec<_>>())
        ));
    }
    Outcome::Unsupported(refusal_summary(unsupported))
}

/// One line: the refused features with the transforms that use them, grouped by the
/// runner's reason.
fn refusal_summary(unsupported: &[UnsupportedFeature]) -> String {
    let mut by_reason: BTreeMap<&str, BTreeMap<Feature, Vec<&str>>> = BTreeMap::new();
    for u in unsupported {
        by_reason
            .entry(u.reason.as_str())
            .or_default()
            .entry(u.feature)
            .or_default()
            .push(u.transform.as_str());
    }
    by_reason
        .into_iter()
        .map(|(reason, features)| {
            let uses: Vec<String> = features
                .into_iter()
                .map(|(f, mut ts)| {
                    ts.sort_unstable();
                    format!(
                        "{f} ({})",
                        ts.iter()
                            .map(|t| format!("'{t}'"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })
                .collect();
            format!("refused {}: {reason}", uses.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// What differs between the declared features and those the plan uses, if anything.
pub fn declaration_drift(declared: &[Feature], used: &[(Feature, String)]) -> Option<String> {
    let declared: BTreeSet<Feature> = declared.iter().copied().collect();
    let used_set: BTreeSet<Feature> = used.iter().map(|(f, _)| *f).collect();
    if declared == used_set {
        return None;
    }
    let mut parts = Vec::new();
    let undeclared: Vec<String> = used
        .iter()
        .filter(|(f, _)| !declared.contains(f))
        .map(|(f, t)| format!("{f} (by '{t}')"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !undeclared.is_empty() {
        parts.push(format!(
            "the plan uses undeclared {}",
            undeclared.join(", ")
        ));
    }
    let unused: Vec<Feature> = declared.difference(&used_set).copied().collect();
    if !unused.is_empty() {
        parts.push(format!("declared but unused: {}", list(&unused)));
    }
    Some(parts.join("; "))
}

fn list(features: &[Feature]) -> String {
    features
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs `f` with the panic hook silenced: every panic of user code or of a check is
/// caught and reported in the matrix, and the default hook would interleave its
/// messages (and backtraces) with it.
pub fn with_quiet_panics<R>(f: impl FnOnce() -> R) -> R {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = catch_unwind(AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// Runs `f`, turning a panic into its message.
fn guard<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use tidewater::plan::Plan;
    use tidewater::runner::{register_runner, PipelineResult, PipelineState, Runner};

    fn ok_result() -> RunResult {
        Ok(PipelineResult {
            state: PipelineState::Done,
            metrics: Default::default(),
            captured: BTreeMap::new(),
            holds_captures: true,
        })
    }

    fn nothing(_: &Pipeline) {}

    fn always_passes(_: RunResult) -> Result<(), String> {
        Ok(())
    }

    const CASE: Case = Case {
        name: "test/case",
        features: &[Feature::Create, Feature::GroupByKey],
        build: nothing,
        check: always_passes,
    };

    fn refusal(features: &[Feature]) -> RunResult {
        Err(Error::Unsupported {
            runner: "test".into(),
            unsupported: features
                .iter()
                .map(|&feature| UnsupportedFeature {
                    feature,
                    transform: "T".into(),
                    reason: "not here".into(),
                })
                .collect(),
        })
    }

    #[test]
    fn refusal_by_a_runner_that_lacks_a_declared_feature_is_unsupported() {
        let caps = Capabilities::new([Feature::Create], "not here");
        assert_eq!(
            judge(&CASE, &caps, refusal(&[Feature::GroupByKey])),
            Outcome::Unsupported("refused GroupByKey ('T'): not here".into())
        );
    }

    #[test]
    fn refusal_by_a_runner_that_supports_everything_declared_fails() {
        let caps = Capabilities::new([Feature::Create, Feature::GroupByKey], "");
        let outcome = judge(&CASE, &caps, refusal(&[Feature::GroupByKey]));
        assert!(
            outcome
                .reason()
                .unwrap()
                .starts_with("runner refused a case whose features it claims to support"),
            "{outcome:?}"
        );
    }

    #[test]
    fn refusal_of_a_supported_feature_fails_even_if_another_is_lacking() {
        let caps = Capabilities::new([Feature::Create], "not here");
        let outcome = judge(
            &CASE,
            &caps,
            refusal(&[Feature::Create, Feature::GroupByKey]),
        );
        assert!(
            outcome
                .reason()
                .unwrap()
                .starts_with("runner refused features it claims to support (Create)"),
            "{outcome:?}"
        );
    }

    #[test]
    fn a_run_of_an_unsupported_case_fails() {
        let caps = Capabilities::new([Feature::Create], "not here");
        let outcome = judge(&CASE, &caps, ok_result());
        assert_eq!(
            outcome,
            Outcome::Fail("runner ran a case it does not support: its capabilities lack GroupByKey, yet the run succeeded".into())
        );
    }

    #[test]
    fn a_supported_case_is_decided_by_its_check() {
        let caps = Capabilities::new([Feature::Create, Feature::GroupByKey], "");
        assert_eq!(judge(&CASE, &caps, ok_result()), Outcome::Pass);
        let failing = Case {
            check: |_| Err("wrong".into()),
            ..CASE
        };
        assert_eq!(
            judge(&failing, &caps, ok_result()),
            Outcome::Fail("wrong".into())
        );
        let panicking = Case {
            check: |_| panic!("oops"),
            ..CASE
        };
        assert_eq!(
            judge(&panicking, &caps, ok_result()),
            Outcome::Fail("the check panicked: oops".into())
        );
    }

    #[test]
    fn drift_names_both_directions() {
        let used = vec![
            (Feature::Create, "Xs".to_string()),
            (Feature::ParDo, "Double".to_string()),
        ];
        assert_eq!(
            declaration_drift(&[Feature::Create, Feature::ParDo], &used),
            None
        );
        assert_eq!(
            declaration_drift(&[Feature::Create, Feature::GroupByKey], &used).unwrap(),
            "the plan uses undeclared ParDo (by 'Double'); declared but unused: GroupByKey"
        );
    }

    /// The direct runner without GroupByKey: the SDK's capability check must refuse
    /// what uses it, and run the rest.
    struct NoGroupByKey;

    impl Runner for NoGroupByKey {
        fn name(&self) -> &'static str {
            "test-no-group-by-key"
        }
        fn capabilities(&self) -> Capabilities {
            let all = Feature::ALL
                .into_iter()
                .filter(|f| !matches!(f, Feature::GroupByKey | Feature::UnknownTransform));
            Capabilities::new(all, "this test runner has no shuffle")
        }
        fn run(&self, plan: &Plan, options: &PipelineOptions) -> tidewater::Result<PipelineResult> {
            tidewater_runner_direct::DirectRunner.run(plan, options)
        }
    }

    fn case(name: &str) -> Case {
        crate::all_cases()
            .into_iter()
            .find(|c| c.name == name)
            .unwrap()
    }

    #[test]
    fn a_partial_runner_gets_unsupported_and_pass_cells() {
        crate::register_runners();
        register_runner(Arc::new(NoGroupByKey));
        let config = MatrixConfig {
            seeds: vec![7],
            ..MatrixConfig::default()
        };
        assert_eq!(
            run_case(&case("pardo/map"), "test-no-group-by-key", &config),
            Outcome::Pass
        );
        assert_eq!(
            run_case(&case("group_by_key/basic"), "test-no-group-by-key", &config),
            Outcome::Unsupported(
                "refused GroupByKey ('Group'): this test runner has no shuffle".into()
            )
        );
    }

    fn undeclared(p: &Pipeline) {
        p.create("Xs", vec![1u8]).capture("xs");
    }

    #[test]
    fn drift_fails_on_every_runner() {
        crate::register_runners();
        let drifting = Case {
            build: undeclared,
            ..CASE
        };
        for runner in ["direct", "native"] {
            assert_eq!(
                run_once(&drifting, runner, None),
                Outcome::Fail("declaration drift: the plan uses undeclared Capture (by 'Capture[xs]'); declared but unused: GroupByKey".into())
            );
        }
    }
}
