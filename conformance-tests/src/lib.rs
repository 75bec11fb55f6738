//! Tidewater's conformance suite, in the spirit of Beam's ValidatesRunner tests.
//!
//! Each [`Case`] is written once: it declares the [`Feature`]s it uses, builds a
//! pipeline, and checks the exact outcome of the run. The [`harness`] runs every case
//! on every requested runner and fills a [`Matrix`] of [`Outcome`]s. A case that needs
//! a feature the runner lacks must be refused by the runner up front and is then
//! reported as unsupported, with the reason; it is never silently passed.
//!
//! ```
//! use tidewater_conformance::{all_cases, harness, MatrixConfig};
//! tidewater_conformance::register_runners();
//! let cases: Vec<_> = all_cases().into_iter().filter(|c| c.name == "create/elements").collect();
//! let matrix = harness::run_matrix(&cases, &["direct".to_string()], &MatrixConfig::default()).unwrap();
//! assert!(matrix.rows[0].outcomes[0].is_pass());
//! ```
//!
//! [`Feature`]: tidewater::runner::Feature

pub mod case;
pub mod cases;
pub mod check;
pub mod harness;
pub mod matrix;
pub mod scratch;
pub mod topic;

pub use case::{Case, Outcome};
pub use cases::all_cases;
pub use harness::MatrixConfig;
pub use matrix::Matrix;

/// Registers every runner of the workspace, so that `--runner all` finds them.
pub fn register_runners() {
    tidewater_runner_direct::register();
    tidewater_runner_microbatch::register();
    tidewater_runner_native::register();
}
