//! Window assignment and merging: the WindowFns' semantics, once for every runner.

mod assign;
mod merge;

pub use assign::{AssignWindowsFn, WindowAssigner};
pub use merge::merge_windows;
