//! The pieces of the `bench` binary (and of `nexmark --json`).

pub mod check;
pub mod input;
pub mod record;
