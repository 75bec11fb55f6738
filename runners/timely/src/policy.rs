//! A runner's epoch policy: when a source's epochs end, what it reads in each, and
//! what it logs before an epoch runs. The engine hosts a policy and knows none by
//! name; `runners/native` implements the streaming one (records flow as they arrive,
//! an epoch every checkpoint interval, Flink's model) and `runners/microbatch` the
//! batch one (an epoch is a batch whose ranges are fixed and logged before it runs,
//! Spark Streaming's model).
//!
//! A policy governs the Read sources. Create, Impulse and TestStream heads follow
//! their script on every runner ([`crate::task`]'s `scripted` part), and every other
//! task follows the epochs its inputs bring.

use crate::task::ReadTask;
use tidewater::Result;

/// How a runner cuts its sources' input into epochs.
pub trait EpochPolicy: Send + Sync + std::fmt::Debug {
    /// Whether watermarks and processing time move only when an epoch closes
    /// everywhere (micro-batches: what a batch fires is part of its close), rather
    /// than as progress arrives. Processing time then travels in-band, as the time a
    /// source gives its epoch ([`ReadTask::set_processing_time`]).
    fn time_at_close(&self) -> bool;

    /// The policy of one Read task on one worker, with its own state.
    fn reader(&self) -> Box<dyn ReadPolicy>;
}

/// The policy of one Read task: it runs on every activation of the task.
pub trait ReadPolicy {
    /// One activation: decide whether the current epoch ends, read what belongs to the
    /// epoch through [`ReadTask`], and say when to run again (or finish the task).
    fn activate(&mut self, task: &mut ReadTask<'_>) -> Result<()>;
}
