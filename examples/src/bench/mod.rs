//! The pieces of the `bench` binary.

pub mod input;
