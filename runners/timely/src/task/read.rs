//! What a Read task offers its runner's policy ([`crate::policy::ReadPolicy`]): the
//! source driver, the task's epochs, the write-ahead log of ranges, the stage its
//! records run through, and the activations. The policy decides; these carry out.

use super::*;

/// A Read task, as its policy sees it during one activation.
pub struct ReadTask<'a> {
    pub(super) task: &'a mut Task,
}

impl ReadTask<'_> {
    /// The task's current epoch.
    pub fn epoch(&self) -> u64 {
        self.task.cur
    }

    /// The source's transform name.
    pub fn name(&self) -> &str {
        &self.task.name
    }

    /// This worker's global index.
    pub fn worker(&self) -> usize {
        self.task.ctx.me
    }

    /// Where processing time comes from.
    pub fn clock(&self) -> Clock {
        self.task.ctx.clock
    }

    /// How long an epoch lasts at the sources (the checkpoint or batch interval).
    pub fn epoch_interval(&self) -> Duration {
        self.task.ctx.epoch_interval
    }

    /// Records one read takes at most.
    pub fn read_size(&self) -> usize {
        self.task.ctx.read_size
    }

    /// The source driver over the partitions this worker owns.
    pub fn driver(&mut self) -> &mut SourceDriver {
        match &mut self.task.head {
            Head::Read(driver) => driver,
            _ => unreachable!("a ReadTask is made for a Read head only"),
        }
    }

    /// `e`, a source driver's error, named after this source.
    pub fn fail(&self, e: ExecError) -> Error {
        attribute(e, &self.task.name)
    }

    /// Whether the job is stopping (a drain request or the deadline; checked here).
    pub fn check_stop(&mut self) -> bool {
        self.task.check_stop()
    }

    /// Whether the stop is a savepoint: sources stop where they are, so that a job
    /// resumed from it reads on, rather than draining.
    pub fn stop_with_savepoint(&self) -> bool {
        self.task.ctx.savepoint
    }

    /// Sends the task's first progress report, once ([`Task::report_first`]).
    pub fn report_first(&mut self) -> Result<()> {
        self.task.report_first()
    }

    /// Whether every epoch before the current one is complete (and durable, with
    /// checkpoints) on every worker.
    pub fn previous_epochs_complete(&self) -> bool {
        !self.task.ctx.probe.less_than(&self.task.cur)
    }

    /// Whether the current epoch must wait for the epochs in flight before anything is
    /// read in it; if so, the task runs again shortly ([`Task::wait_for_epochs_in_flight`]).
    pub fn wait_for_epochs_in_flight(&mut self) -> bool {
        self.task.wait_for_epochs_in_flight()
    }

    /// Whether this instance waits for its source's slower instances (watermark
    /// alignment, when the engine runs it); if so, the task runs again shortly.
    pub fn wait_for_alignment(&mut self) -> bool {
        let ahead = self.task.ahead_of_its_source();
        if ahead {
            self.task
                .drift_paused_since
                .get_or_insert_with(Instant::now);
            self.task.activator.activate_after(Duration::from_millis(1));
        } else if let Some(since) = self.task.drift_paused_since.take() {
            self.task.figures.add_drift_paused(since.elapsed());
        }
        ahead
    }

    /// The processing time the task reads at (the wall clock, or the epoch's in-band
    /// time under a policy whose time moves at epoch close).
    pub fn processing_time(&self) -> Timestamp {
        self.task.now()
    }

    /// The processing time this source gives its epoch, where its policy sets one
    /// ([`ReadTask::set_processing_time`]; the wall clock when the task started until
    /// then).
    pub fn in_band_time(&self) -> Timestamp {
        self.task.in_band_time
    }

    /// Sets the processing time this source gives its epoch, which travels in-band to
    /// every task downstream ([`crate::policy::EpochPolicy::time_at_close`]).
    pub fn set_processing_time(&mut self, t: Timestamp) {
        self.task.in_band_time = t;
    }

    /// Counts `n` records read in the current epoch.
    pub fn count_read(&mut self, n: usize) {
        let cur = self.task.cur;
        self.task.ctx.read(&self.task.figures, cur, n);
    }

    /// Runs `batch` through the stage; what it emits waits for [`ReadTask::flush`].
    pub fn run(&mut self, batch: Box<dyn AnyBatch>) -> Result<()> {
        self.task.run_stage(batch)
    }

    /// Sends what the stage emitted, at the current epoch.
    pub fn flush(&mut self) {
        let cur = self.task.cur;
        self.task.flush(cur);
    }

    /// Sends the source's progress (its watermark, idleness and processing time) if it
    /// changed, with what the stage emitted before it.
    pub fn send_progress(&mut self) -> Result<()> {
        self.task.send_progress()?;
        self.flush();
        Ok(())
    }

    /// Runs `out` through the stage and sends it with the source's progress.
    pub fn emit(&mut self, out: Vec<Box<dyn AnyBatch>>) -> Result<()> {
        for b in out {
            self.task.run_stage(b)?;
        }
        self.send_progress()?;
        self.task.collect_metrics();
        Ok(())
    }

    /// Ends the current epoch: its range closes (a checkpoint, with checkpoints on) and
    /// the task moves to the next span's first epoch.
    pub fn end_epoch(&mut self) -> Result<()> {
        let next = crate::epochs::next_span(self.task.cur, self.task.ctx.stride);
        self.task.end_epoch(next)
    }

    /// Finishes the task: its last range runs to the end of time.
    pub fn finish(&mut self) -> Result<()> {
        self.task.collect_metrics();
        self.task.finish()
    }

    /// Runs the task again as soon as possible.
    pub fn activate(&self) {
        self.task.activator.activate();
    }

    /// Runs the task again after `delay` (at once if it is zero).
    pub fn activate_after(&self, delay: Duration) {
        if delay.is_zero() {
            self.task.activator.activate();
        } else {
            self.task.activator.activate_after(delay);
        }
    }

    /// Whether the job keeps checkpoints, and so a write-ahead log of ranges.
    pub fn logs(&self) -> bool {
        self.task.ctx.store.is_some()
    }

    /// The ranges the write-ahead log holds for this source in the current epoch, from
    /// every worker that logged them; `None` if none did (or there is no log).
    pub fn logged_ranges(&self) -> Result<Option<Vec<ReadRange>>> {
        let ctx = &self.task.ctx;
        match &ctx.store {
            Some(store) => store.read_offsets(self.task.cur, self.task.node, ctx.plan_hash),
            None => Ok(None),
        }
    }

    /// Logs this worker's `ranges` of the current epoch, durably, before anything of
    /// the epoch is processed (nothing without checkpoints).
    pub fn log_ranges(&self, ranges: &[ReadRange]) -> Result<()> {
        let ctx = &self.task.ctx;
        match &ctx.store {
            Some(store) => {
                store.write_offsets(self.task.cur, self.task.node, ctx.me, ctx.plan_hash, ranges)
            }
            None => Ok(()),
        }
    }

    /// Counts a micro-batch started (the engine's `batches` counter).
    pub fn count_batch(&self) {
        self.task
            .ctx
            .metrics
            .borrow_mut()
            .step_mut(ENGINE_STEP)
            .inc_counter("batches", 1);
    }

    /// A micro-batch's figures, once its last read ran: the worker records them when
    /// the batch is complete everywhere ([`BatchFigures::processing_ms`]).
    pub fn batch_read(&self, figures: BatchFigures, started: Instant) {
        self.task
            .ctx
            .open_batches
            .borrow_mut()
            .push((figures, started));
    }
}
