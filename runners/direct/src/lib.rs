//! The direct runner: Tidewater's reference runner, in one process, with Beam
//! DirectRunner-style validation.
//!
//! With validation on (the default) every element round-trips through its coder,
//! elements are shuffled within and across bundles and bundle sizes are drawn from a
//! seed (`--seed`, printed on failure so the order can be replayed), and a failing DoFn
//! is reported with its element's debug form. `--no-validate` turns all of that off for
//! speed. Everything with semantics lives in `tidewater-runners-core`.
//!
//! Runner options (`--runner-option KEY=VALUE`): `bundle_size`, `lift_combiners`,
//! `partial_flush_groups`, `max_key_groups` (default 128), `commit_every_ms` (how often
//! a job without checkpoints commits its sinks; default 1000), and
//! `checkpoint_every=N`:
//! every N rounds, snapshot every operator, source and held input in the runner-neutral
//! snapshot format, throw the in-memory state away and restore it, with keyed state
//! redistributed over 1 to 4 virtual workers (drawn from the seed) and merged back.
//!
//! `--status-addr` serves the running job's status as the engine runners do, for its
//! one worker (`status.rs`).

use std::sync::Arc;
use tidewater::exec::DEFAULT_MAX_KEY_GROUPS;
use tidewater::runner::{register_runner, Capabilities, Feature, PipelineResult, Runner};
use tidewater::{plan::Plan, Error, PipelineOptions, Result};
use tidewater_runners_core::translate;

mod scheduler;
mod status;

pub use scheduler::{execute, Clock, ExecOptions};

/// Bundle size limit with validation on (sizes are drawn from 1 to this).
const VALIDATING_BUNDLE_SIZE: usize = 100;
/// The most key groups a job may have (Flink's limit on maxParallelism).
const MAX_KEY_GROUPS_LIMIT: u32 = 32_768;
/// Bundle size with validation off.
const FAST_BUNDLE_SIZE: usize = 10_000;

/// The direct runner.
pub struct DirectRunner;

impl Runner for DirectRunner {
    fn name(&self) -> &'static str {
        "direct"
    }

    fn capabilities(&self) -> Capabilities {
        let features = Feature::ALL
            .into_iter()
            .filter(|f| *f != Feature::UnknownTransform);
        Capabilities::new(features, "the direct runner does not implement this")
    }

    fn run(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        // Says what a run would restore, or what a savepoint holds, and ends.
        tidewater_runners_core::restore::answer_if_asked(plan, &options.engine)?;
        let exec = translate(plan)?;
        let mut exec_options = exec_options(options, Clock::for_plan(&exec))?;
        let served = status::serve_if_asked(options, &exec, exec_options.lift_combiners)?;
        exec_options.status = served.as_ref().map(|s| s.board.clone());
        let result = execute(&exec, &exec_options);
        if let Some(served) = served {
            served.end(result.as_ref().err().map(|e| e.to_string()));
        }
        result
    }
}

/// The direct runner's options (`--runner-option KEY=VALUE`), with their meaning.
pub const RUNNER_OPTIONS: [(&str, &str); 6] = [
    (
        "bundle_size",
        "largest bundle (default 100 with validation, 10000 without)",
    ),
    (
        "lift_combiners",
        "true|false: combine partially before the shuffle (default true)",
    ),
    (
        "partial_flush_groups",
        "a partial-combine table holding more groups is flushed early (default 100000)",
    ),
    (
        "max_key_groups",
        "number of key groups keyed state is split into (default 128)",
    ),
    (
        "checkpoint_every",
        "every N rounds, snapshot, throw away and restore (rescaled) all state",
    ),
    (
        "commit_every_ms",
        "how often a job without checkpoints commits its sinks (default 1000)",
    ),
];

fn exec_options(options: &PipelineOptions, clock: Clock) -> Result<ExecOptions> {
    if let Some((key, value)) = options
        .runner_options
        .iter()
        .find(|(k, _)| !RUNNER_OPTIONS.iter().any(|(known, _)| known == k))
    {
        return Err(Error::InvalidOption {
            option: format!("--runner-option {key}={value}"),
            message: format!(
                "the direct runner has no option '{key}'; its options are:\n{}",
                RUNNER_OPTIONS
                    .iter()
                    .map(|(k, m)| format!("  {k}: {m}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            ),
        });
    }
    let validate = !options.no_validate;
    let seed = options.seed.unwrap_or_else(fresh_seed);
    let parse_opt = |key: &str| -> Result<Option<usize>> {
        match options.runner_option(key) {
            None => Ok(None),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or_else(|| Error::InvalidOption {
                    option: format!("--runner-option {key}={v}"),
                    message: "expected a positive integer".into(),
                }),
        }
    };
    let parse = |key: &str, default: usize| Ok::<_, Error>(parse_opt(key)?.unwrap_or(default));
    let max_key_groups = parse("max_key_groups", DEFAULT_MAX_KEY_GROUPS as usize)?;
    let commit_every_ms = parse("commit_every_ms", 1000)?;
    let max_key_groups = u32::try_from(max_key_groups)
        .ok()
        .filter(|m| *m <= MAX_KEY_GROUPS_LIMIT)
        .ok_or_else(|| Error::InvalidOption {
            option: format!("--runner-option max_key_groups={max_key_groups}"),
            message: format!("at most {MAX_KEY_GROUPS_LIMIT}"),
        })?;
    let lift = match options.runner_option("lift_combiners") {
        None | Some("true") => true,
        Some("false") => false,
        Some(v) => {
            return Err(Error::InvalidOption {
                option: format!("--runner-option lift_combiners={v}"),
                message: "expected true or false".into(),
            })
        }
    };
    Ok(ExecOptions {
        validate,
        shuffle_seed: validate.then_some(seed),
        max_bundle_size: parse(
            "bundle_size",
            if validate {
                VALIDATING_BUNDLE_SIZE
            } else {
                FAST_BUNDLE_SIZE
            },
        )?,
        lift_combiners: lift,
        partial_flush_groups: parse("partial_flush_groups", 100_000)?,
        clock,
        max_duration: options.max_duration,
        checkpoint_every: parse_opt("checkpoint_every")?,
        job_id: options.job_id.clone(),
        accept_duplicates: options.accept_duplicates,
        // Without checkpoints, a job commits its sinks every second (or every
        // `commit_every_ms`), so that its output appears as it runs; a job shorter than
        // that is one epoch, committed when it ends.
        commit_interval: parse_opt("checkpoint_every")?
            .is_none()
            .then(|| std::time::Duration::from_millis(commit_every_ms as u64)),
        max_key_groups,
        state: tidewater_runners_core::state::StateChoice::of(options),
        status: None,
        savepoint_dir: options.engine.savepoint_dir.clone(),
        from_savepoint: options.engine.from_savepoint.clone(),
        allow_non_restored_state: options.engine.allow_non_restored_state,
        replay_hint: validate.then(|| {
            format!("direct runner seed {seed}; rerun with --seed={seed} to replay this order")
        }),
    })
}

fn fresh_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish()
}

/// Makes the direct runner selectable as `--runner=direct`.
pub fn register() {
    register_runner(Arc::new(DirectRunner));
    tidewater::runner::register_plan_renderer(tidewater_runners_core::dot::render_dot);
}
