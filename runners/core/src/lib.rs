//! Semantics every Tidewater runner shares, like Beam's runners-core: translating the
//! decoded plan into executable units, fusing ParDos into stages, invoking DoFns over
//! bundles, grouping by encoded key with combiners lifted before the shuffle, and
//! metrics. A runner decides only scheduling, parallelism, data movement and recovery.

pub mod checkpoint;
pub mod executor;
pub mod fusion;
pub mod keyed;
pub mod reduce;
pub mod side_inputs;
pub mod snapshot;
pub mod source_driver;
pub mod stage;
pub mod state;
pub mod stateful;
pub mod timers;
pub mod translate;
pub mod triggers;
pub mod windowing;

pub use executor::{execute, Clock, ExecOptions};
pub use translate::{translate, ExecutablePlan};
