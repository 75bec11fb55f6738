//! The micro-batch runner (Spark Streaming / Trident style): not implemented yet.
//!
//! It is selectable with `--runner=microbatch` and refuses every plan up front through
//! the capability check, naming each feature the plan uses, so the conformance matrix
//! shows it as unsupported rather than passing.

use std::sync::Arc;
use tidewater::runner::{register_runner, Capabilities, PipelineResult, Runner};
use tidewater::{plan::Plan, Error, PipelineOptions, Result};

/// The micro-batch runner.
pub struct MicrobatchRunner;

const NOT_YET: &str =
    "the microbatch runner is not implemented yet (it comes with the timely engine)";

impl Runner for MicrobatchRunner {
    fn name(&self) -> &'static str {
        "microbatch"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none(NOT_YET)
    }

    fn run(&self, _plan: &Plan, _options: &PipelineOptions) -> Result<PipelineResult> {
        Err(Error::Internal(NOT_YET.into()))
    }
}

/// Makes the runner selectable as `--runner=microbatch`.
pub fn register() {
    register_runner(Arc::new(MicrobatchRunner));
}
