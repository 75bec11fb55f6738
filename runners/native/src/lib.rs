//! The native runner (Flink style, checkpoint snapshots): not implemented yet.
//!
//! It is selectable with `--runner=native` and refuses every plan up front through
//! the capability check, naming each feature the plan uses, so the conformance matrix
//! shows it as unsupported rather than passing.

use std::sync::Arc;
use tidewater::runner::{register_runner, Capabilities, PipelineResult, Runner};
use tidewater::{plan::Plan, Error, PipelineOptions, Result};

/// The native runner.
pub struct NativeRunner;

const NOT_YET: &str = "the native runner is not implemented yet (it comes with the timely engine)";

impl Runner for NativeRunner {
    fn name(&self) -> &'static str {
        "native"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::none(NOT_YET)
    }

    fn run(&self, _plan: &Plan, _options: &PipelineOptions) -> Result<PipelineResult> {
        Err(Error::Internal(NOT_YET.into()))
    }
}

/// Makes the runner selectable as `--runner=native`.
pub fn register() {
    register_runner(Arc::new(NativeRunner));
}
