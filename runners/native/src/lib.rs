//! The native runner: the streaming policy on the timely engine (`runners/timely`).
//!
//! Records are applied as they arrive, as in Flink; sources cut epochs every
//! `--checkpoint-interval` (1 s by default) and may run `epochs_in_flight` (2) epochs
//! ahead of the last complete checkpoint; with `--checkpoint-dir` every closed epoch is written
//! and sinks commit an epoch's output once its checkpoint is complete (two-phase
//! commit). `--guarantee=at-least-once` skips the alignment of epochs.
//!
//! Runner options (`--runner-option KEY=VALUE`): the engine's
//! ([`tidewater_runners_timely::launch::COMMON_OPTIONS`]), `epochs_in_flight` and
//! `max_watermark_drift_ms` (Flink's watermark alignment, off by default: an instance
//! of a source whose watermark runs more than this ahead of the source's slowest
//! instance on any worker pauses until it catches up, so that event-time state
//! downstream holds at most that much more than it must; it changes no result).

use std::sync::Arc;
use std::time::Duration;
use tidewater::runner::{register_runner, Capabilities, Feature, PipelineResult, Runner};
use tidewater::{plan::Plan, Error, PipelineOptions, Result};
use tidewater_runners_timely::launch::{EngineRunner, PolicyChoice};

pub mod policy;

pub use tidewater_runners_timely::cluster::CHILD_ENV as CLUSTER_CHILD_ENV;
/// The step under which the engine reports its own figures in a result's metrics
/// (checkpoints, records read, each process's `peak_rss_kb`).
pub use tidewater_runners_timely::metrics::ENGINE_STEP;

/// The native runner.
pub struct NativeRunner;

/// The native runner's own options (`--runner-option KEY=VALUE`), beyond the engine's.
pub const RUNNER_OPTIONS: [(&str, &str); 2] = [
    (
        "epochs_in_flight",
        "epochs a source may run ahead of the last complete checkpoint (default 2)",
    ),
    (
        "max_watermark_drift_ms",
        "watermark alignment: an instance of a source whose watermark runs more than this ahead of the source's slowest instance pauses until it catches up (default: off; 0: off)",
    ),
];

/// The native runner on the engine.
pub const ENGINE_RUNNER: EngineRunner = EngineRunner {
    name: "native",
    options: &RUNNER_OPTIONS,
    policy: streaming,
};

/// The streaming policy: an epoch (a checkpoint) every `--checkpoint-interval`.
fn streaming(options: &PipelineOptions) -> Result<PolicyChoice> {
    let epochs_in_flight = match options.runner_option("epochs_in_flight") {
        None => 2,
        Some(v) => {
            v.parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| Error::InvalidOption {
                    option: format!("--runner-option epochs_in_flight={v}"),
                    message: "expected a positive integer".into(),
                })?
        }
    };
    let max_watermark_drift = tidewater_runners_timely::launch::max_watermark_drift(options, None)?;
    Ok(PolicyChoice {
        policy: Arc::new(policy::Streaming),
        max_watermark_drift,
        interval: options
            .engine
            .checkpoint_interval
            .unwrap_or(Duration::from_secs(1)),
        epochs_in_flight,
    })
}

/// The native runner's flags: the engine's restart strategy.
const FLAGS: [tidewater::runner::RunnerFlag; 1] = [tidewater_runners_timely::restart::FLAG];

impl Runner for NativeRunner {
    fn flags(&self) -> &'static [tidewater::runner::RunnerFlag] {
        &FLAGS
    }

    fn name(&self) -> &'static str {
        "native"
    }

    fn capabilities(&self) -> Capabilities {
        let features = Feature::ALL
            .into_iter()
            .filter(|f| *f != Feature::UnknownTransform);
        Capabilities::new(features, "the native runner does not implement this")
    }

    fn run(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        ENGINE_RUNNER.run(plan, options)
    }
}

/// The engine's figures of a run, for people: records, checkpoints, their cost.
pub fn summary(metrics: &tidewater::exec::MetricResults) -> String {
    tidewater_runners_timely::launch::summary("native", metrics)
}

/// The engine configuration `options` ask for, for a plan on `clock`
/// ([`tidewater_runners_timely::Clock::for_plan`]).
pub fn engine_config(
    options: &PipelineOptions,
    clock: tidewater_runners_timely::Clock,
) -> Result<tidewater_runners_timely::EngineConfig> {
    ENGINE_RUNNER.config(options, clock)
}

/// Makes the runner selectable as `--runner=native`.
pub fn register() {
    register_runner(Arc::new(NativeRunner));
}
