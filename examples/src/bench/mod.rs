//! The pieces of the `bench` binary (and of `nexmark --json`): the peers' input
//! generator, the word-count workloads, the run record, the output check, the report, the
//! targets it judges and the peers side by side.

pub mod check;
pub mod group;
pub mod input;
pub mod peers;
pub mod record;
pub mod report;
pub mod targets;
pub mod workloads;
