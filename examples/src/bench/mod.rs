//! The pieces of the `bench` binary (and of `nexmark --json`): the peers' input
//! generator, the word-count workloads, the run record, the output check and the report.

pub mod check;
pub mod input;
pub mod record;
pub mod report;
pub mod workloads;
