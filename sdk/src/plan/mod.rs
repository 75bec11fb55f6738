//! The portable plan: a pipeline as versioned JSON (see `docs/plan-format.md`).
//!
//! [`encode`] writes it; [`decode`] reads and checks it. Runners execute only what
//! [`decode`] returned.

mod decode;
mod encode;
pub mod field;
mod json;
pub mod model;

pub use decode::{decode, window_fn_from_spec, windowing_from_spec};
pub use encode::{encode, window_fn_to_spec, windowing_to_spec};
pub use model::*;
