//! A Read task as its runner's policy sees it ([`crate::policy::ReadTask`]).

use super::*;
use crate::policy::ReadTask;

/// A Read task during one activation of its policy.
pub(super) struct Reading<'a> {
    pub(super) task: &'a mut Task,
}

impl ReadTask for Reading<'_> {
    fn epoch(&self) -> u64 {
        self.task.cur
    }

    fn name(&self) -> &str {
        &self.task.name
    }

    fn worker(&self) -> usize {
        self.task.ctx.me
    }

    fn clock(&self) -> Clock {
        self.task.ctx.clock
    }

    fn epoch_interval(&self) -> Duration {
        self.task.ctx.epoch_interval
    }

    fn read_size(&self) -> usize {
        self.task.ctx.read_size
    }

    fn driver(&mut self) -> &mut SourceDriver {
        match &mut self.task.head {
            Head::Read(driver) => driver,
            _ => unreachable!("a ReadTask is made for a Read head only"),
        }
    }

    fn fail(&self, e: ExecError) -> Error {
        attribute(e, &self.task.name)
    }

    fn check_stop(&mut self) -> bool {
        self.task.check_stop()
    }

    fn stop_with_savepoint(&self) -> bool {
        self.task.ctx.savepoint
    }

    fn report_first(&mut self) -> Result<()> {
        self.task.report_first()
    }

    fn previous_epochs_complete(&self) -> bool {
        !self.task.ctx.probe.less_than(&self.task.cur)
    }

    fn wait_for_epochs_in_flight(&mut self) -> bool {
        self.task.wait_for_epochs_in_flight()
    }

    fn next_epoch_held(&self) -> bool {
        let next = crate::epochs::next_span(self.task.cur, self.task.ctx.stride);
        self.task.held_back(next)
    }

    fn epochs_in_flight(&self) -> u64 {
        self.task.ctx.epochs_in_flight
    }

    fn wait_for_alignment(&mut self) -> bool {
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

    fn ahead_of_its_source(&self) -> bool {
        self.task.ahead_of_its_source()
    }

    fn processing_time(&self) -> Timestamp {
        self.task.now()
    }

    fn in_band_time(&self) -> Timestamp {
        self.task.in_band_time
    }

    fn set_processing_time(&mut self, t: Timestamp) {
        self.task.in_band_time = t;
    }

    fn count_read(&mut self, n: usize) {
        let cur = self.task.cur;
        self.task.ctx.read(&self.task.figures, cur, n);
    }

    fn run(&mut self, batch: Box<dyn AnyBatch>) -> Result<()> {
        self.task.run_stage(batch)
    }

    fn flush(&mut self) {
        let cur = self.task.cur;
        self.task.flush(cur);
    }

    fn send_progress(&mut self) -> Result<()> {
        self.task.send_progress()?;
        self.flush();
        Ok(())
    }

    fn emit(&mut self, out: Vec<Box<dyn AnyBatch>>) -> Result<()> {
        for b in out {
            self.task.run_stage(b)?;
        }
        self.send_progress()?;
        self.task.collect_metrics();
        Ok(())
    }

    fn end_epoch(&mut self) -> Result<()> {
        let next = crate::epochs::next_span(self.task.cur, self.task.ctx.stride);
        self.task.end_epoch(next)
    }

    fn finish(&mut self) -> Result<()> {
        self.task.collect_metrics();
        self.task.finish()
    }

    fn activate(&self) {
        self.task.activator.activate();
    }

    fn activate_after(&self, delay: Duration) {
        if delay.is_zero() {
            self.task.activator.activate();
        } else {
            self.task.activator.activate_after(delay);
        }
    }

    fn logs(&self) -> bool {
        self.task.ctx.store.is_some()
    }

    fn logged_ranges(&self) -> Result<Option<Vec<ReadRange>>> {
        let ctx = &self.task.ctx;
        match &ctx.store {
            Some(store) => store.read_offsets(self.task.cur, ctx.identity.id_of(&self.task.name)),
            None => Ok(None),
        }
    }

    fn log_ranges(&self, ranges: &[ReadRange]) -> Result<()> {
        let ctx = &self.task.ctx;
        match &ctx.store {
            Some(store) => {
                let source = ctx.identity.id_of(&self.task.name);
                store.write_offsets(self.task.cur, source, ctx.me, ranges)
            }
            None => Ok(()),
        }
    }

    fn count_batch(&self) {
        self.task
            .ctx
            .metrics
            .borrow_mut()
            .step_mut(ENGINE_STEP)
            .inc_counter("batches", 1);
    }

    fn batch_read(&self, figures: BatchFigures, started: Instant) {
        self.task
            .ctx
            .open_batches
            .borrow_mut()
            .push((figures, started));
    }
}
