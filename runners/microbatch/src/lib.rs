//! The micro-batch runner: the batch policy on the timely engine (`runners/timely`),
//! as Spark Streaming, Structured Streaming's micro-batch mode and Storm Trident run.
//!
//! The input is cut into batches, one every `--batch-interval` (500 ms by default; the
//! next starts once the previous one is complete), and by size: a batch reads at most
//! `--max-records-per-batch` from a source (30,000 by default), and when a source
//! had more available (a backlog, a bounded input) the next batch starts at once. So a
//! bounded input of any size runs in batches of bounded size, and the windows a batch
//! opens before its end moves the watermark stay few. A batch is an epoch of the
//! engine:
//!
//! 1. each source partition's range for it (start position, record count: at most
//!    its share of `--max-records-per-batch`) is fixed from what is available and,
//!    with `--checkpoint-dir`, appended to the write-ahead offset log, synced;
//! 2. the batch runs through every worker: keyed exchanges, lifted combiners, state;
//!    watermarks and processing time advance only at its end, where event-time and
//!    processing-time triggers and timers fire (a processing-time trigger finer than
//!    the interval fires at the next boundary);
//! 3. at its end every task writes its state in core's snapshot format, sinks stage
//!    their output, and the batch's manifest (the commit-log entry) makes it
//!    complete; sinks then commit it by batch id.
//!
//! A job started on a checkpoint directory restores the last complete batch and runs
//! the logged batch after it again with exactly its ranges. `--trigger available-now`
//! takes each source partition's end when the run starts (what the source says it has
//! available) and runs batches until every partition reached it, as Spark's
//! `Trigger.AvailableNow`: records arriving during the run are the next run's, and a
//! run restored after a crash stops at the ends it took. `--trigger once` does the
//! same in one batch. Both then stop with the state and source positions kept. A
//! source that cannot say what it has available ends such a run after a batch in
//! which it gave less than its share of the limit.
//!
//! Runner options (`--runner-option KEY=VALUE`): the engine's
//! ([`tidewater_runners_timely::launch::COMMON_OPTIONS`]).

use std::sync::Arc;
use tidewater::runner::{register_runner, Capabilities, Feature, PipelineResult, Runner};
use tidewater::{plan::Plan, PipelineOptions, Result};
use tidewater_runners_timely::launch::EngineRunner;

pub mod policy;

/// The micro-batch runner.
pub struct MicrobatchRunner;

/// The micro-batch runner on the engine.
pub const ENGINE_RUNNER: EngineRunner = EngineRunner {
    name: "microbatch",
    options: &[(
        "max_watermark_drift_ms",
        "watermark alignment: a source instance whose watermark runs more than this ahead of its slowest instance reads one record a partition per batch until they catch up, so that the windows it opens ahead stay few (default 10000; 0: off)",
    )],
    policy: policy::choose,
};

impl Runner for MicrobatchRunner {
    fn name(&self) -> &'static str {
        "microbatch"
    }

    fn flags(&self) -> &'static [tidewater::runner::RunnerFlag] {
        &policy::FLAGS
    }

    fn capabilities(&self) -> Capabilities {
        let features = Feature::ALL
            .into_iter()
            .filter(|f| *f != Feature::UnknownTransform);
        let at_boundaries = "watermarks, processing time, triggers and timers advance at batch boundaries: a processing-time trigger or timer finer than --batch-interval fires at the next boundary, an event-time window at the end of the batch in which the watermark passes it";
        Capabilities::new(features, "the microbatch runner does not implement this")
            .with_note(Feature::WindowInto, at_boundaries)
            .with_note(Feature::StatefulParDo, at_boundaries)
    }

    fn run(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult> {
        ENGINE_RUNNER.run(plan, options)
    }
}

/// The engine's figures of a run, for people: records, batches, their cost.
pub fn summary(metrics: &tidewater::exec::MetricResults) -> String {
    tidewater_runners_timely::launch::summary("microbatch", metrics)
}

/// Makes the runner selectable as `--runner=microbatch`.
pub fn register() {
    register_runner(Arc::new(MicrobatchRunner));
}
