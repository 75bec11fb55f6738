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

use crate::metrics::BatchFigures;
use crate::Clock;
use std::time::{Duration, Instant};
use tidewater::exec::{AnyBatch, ExecError};
use tidewater::{Error, Result, Timestamp};
use tidewater_runners_core::source_driver::{ReadRange, SourceDriver};

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
    fn activate(&mut self, task: &mut dyn ReadTask) -> Result<()>;
}

/// What a Read task offers its policy during an activation: the source driver, the
/// task's epochs, the write-ahead log of ranges, the stage its records run through,
/// and the activations. The policy decides; these carry out. The engine implements it
/// (`task/read.rs`).
pub trait ReadTask {
    /// The task's current epoch.
    fn epoch(&self) -> u64;

    /// The source's transform name.
    fn name(&self) -> &str;

    /// This worker's global index.
    fn worker(&self) -> usize;

    /// Where processing time comes from.
    fn clock(&self) -> Clock;

    /// How long an epoch lasts at the sources (the checkpoint or batch interval).
    fn epoch_interval(&self) -> Duration;

    /// Records one read takes at most.
    fn read_size(&self) -> usize;

    /// The source driver over the partitions this worker owns.
    fn driver(&mut self) -> &mut SourceDriver;

    /// `e`, a source driver's error, named after this source.
    fn fail(&self, e: ExecError) -> Error;

    /// Whether the job is stopping (a drain request or the deadline; checked here).
    fn check_stop(&mut self) -> bool;

    /// Whether the stop is a savepoint: sources stop where they are, so that a job
    /// resumed from it reads on, rather than draining.
    fn stop_with_savepoint(&self) -> bool;

    /// Sends the task's first progress report, once: every source reports in the epoch
    /// it starts in, before it moves on.
    fn report_first(&mut self) -> Result<()>;

    /// Whether every epoch before the current one is complete (and durable, with
    /// checkpoints) on every worker.
    fn previous_epochs_complete(&self) -> bool;

    /// Whether the current epoch must wait for the epochs in flight before anything is
    /// read in it (at most `epochs_in_flight` checkpoints in flight); if so, the task
    /// runs again shortly.
    fn wait_for_epochs_in_flight(&mut self) -> bool;

    /// Whether the epoch after the current one would wait for the epochs in flight
    /// ([`ReadTask::wait_for_epochs_in_flight`] once there), asked before ending this
    /// one; nothing is recorded.
    fn next_epoch_held(&self) -> bool;

    /// The checkpoints a source may run ahead of the last complete one
    /// (`epochs_in_flight`).
    fn epochs_in_flight(&self) -> u64;

    /// Whether this instance waits for its source's slower instances (watermark
    /// alignment, when the engine runs it); if so, the task runs again shortly.
    fn wait_for_alignment(&mut self) -> bool;

    /// Whether this instance's watermark runs more than the policy's drift ahead of
    /// its source's slowest instance (watermark alignment), without waiting: a
    /// micro-batch then reads little of it in the next batch.
    fn ahead_of_its_source(&self) -> bool;

    /// The processing time the task reads at (the wall clock, or the epoch's in-band
    /// time under a policy whose time moves at epoch close).
    fn processing_time(&self) -> Timestamp;

    /// The processing time this source gives its epoch, where its policy sets one
    /// ([`ReadTask::set_processing_time`]; the wall clock when the task started until
    /// then).
    fn in_band_time(&self) -> Timestamp;

    /// Sets the processing time this source gives its epoch, which travels in-band to
    /// every task downstream ([`EpochPolicy::time_at_close`]).
    fn set_processing_time(&mut self, t: Timestamp);

    /// Counts `n` records read in the current epoch.
    fn count_read(&mut self, n: usize);

    /// Runs `batch` through the stage; what it emits waits for [`ReadTask::flush`].
    fn run(&mut self, batch: Box<dyn AnyBatch>) -> Result<()>;

    /// Sends what the stage emitted, at the current epoch.
    fn flush(&mut self);

    /// Sends the source's progress (its watermark, idleness and processing time) if it
    /// changed, with what the stage emitted before it.
    fn send_progress(&mut self) -> Result<()>;

    /// Runs `out` through the stage and sends it with the source's progress.
    fn emit(&mut self, out: Vec<Box<dyn AnyBatch>>) -> Result<()>;

    /// Ends the current epoch: its range closes (a checkpoint, with checkpoints on) and
    /// the task moves to the next span's first epoch.
    fn end_epoch(&mut self) -> Result<()>;

    /// Finishes the task: its last range runs to the end of time.
    fn finish(&mut self) -> Result<()>;

    /// Runs the task again as soon as possible.
    fn activate(&self);

    /// Runs the task again after `delay` (at once if it is zero).
    fn activate_after(&self, delay: Duration);

    /// Whether the job keeps checkpoints, and so a write-ahead log of ranges.
    fn logs(&self) -> bool;

    /// The ranges the write-ahead log holds for this source in the current epoch, from
    /// every worker that logged them; `None` if none did (or there is no log).
    fn logged_ranges(&self) -> Result<Option<Vec<ReadRange>>>;

    /// Logs this worker's `ranges` of the current epoch, durably, before anything of
    /// the epoch is processed (nothing without checkpoints).
    fn log_ranges(&self, ranges: &[ReadRange]) -> Result<()>;

    /// Counts a micro-batch started (the engine's `batches` counter).
    fn count_batch(&self);

    /// A micro-batch's figures, once its last read ran: the worker records them when
    /// the batch is complete everywhere ([`BatchFigures::processing_ms`]).
    fn batch_read(&self, figures: BatchFigures, started: Instant);
}
