//! The portable plan: a pipeline as versioned JSON (see `docs/plan-format.md`).
//!
//! [`encode`] writes it; [`decode`] reads and checks it. Runners execute only what
//! [`decode`] returned.

mod decode;
mod encode;
pub mod model;

pub use decode::decode;
pub use encode::encode;
pub use model::*;
