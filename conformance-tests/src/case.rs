//! A conformance case and the outcome of running it on one runner.

use std::fmt;
use tidewater::runner::Feature;
use tidewater::{Error, Pipeline, PipelineResult};

/// What a case's check sees: the run's result, or the error it failed with (cases
/// about failing user code expect the error).
pub type RunResult = Result<PipelineResult, Error>;

/// One conformance case, written once and run on every runner.
///
/// `features` must be exactly the features the built pipeline uses (as
/// [`tidewater::runner::plan_features`] computes them); the harness fails a case whose
/// declaration drifts from its pipeline, so that "unsupported" is always decided on an
/// honest declaration.
#[derive(Clone, Copy)]
pub struct Case {
    /// `area/what`, unique.
    pub name: &'static str,
    /// The features the pipeline uses.
    pub features: &'static [Feature],
    /// Builds the pipeline on `p`; outputs to check are captured with `.capture(name)`.
    pub build: fn(&Pipeline),
    /// Compares the run's exact outcome with the expected one; `Err` says what differs.
    pub check: fn(RunResult) -> Result<(), String>,
}

impl fmt::Debug for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .field("features", &self.features)
            .finish_non_exhaustive()
    }
}

/// The outcome of one case on one runner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The runner ran the case and the check passed (for every seed).
    Pass,
    /// Wrong output, an unexpected error, a runner that ran what it does not support or
    /// refused what it does, or a case whose declared features drifted from its plan.
    Fail(String),
    /// The runner lacks a feature the case declares and refused the plan up front.
    Unsupported(String),
}

impl Outcome {
    /// Whether it passed.
    pub fn is_pass(&self) -> bool {
        matches!(self, Outcome::Pass)
    }

    /// Whether it failed.
    pub fn is_fail(&self) -> bool {
        matches!(self, Outcome::Fail(_))
    }

    /// Whether the runner refused it as unsupported.
    pub fn is_unsupported(&self) -> bool {
        matches!(self, Outcome::Unsupported(_))
    }

    /// The matrix cell: `pass`, `FAIL` or `unsupported`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail(_) => "FAIL",
            Outcome::Unsupported(_) => "unsupported",
        }
    }

    /// Why it failed or was unsupported.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Outcome::Pass => None,
            Outcome::Fail(r) | Outcome::Unsupported(r) => Some(r),
        }
    }
}
