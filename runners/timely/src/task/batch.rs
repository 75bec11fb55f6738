//! The micro-batch policy: a batch per epoch, its offsets logged before it runs,
//! results applied at its close, and when the job stops (Spark's triggers).

use super::*;

impl Task {
    /// One activation of a source task reading micro-batches. A batch starts once the
    /// previous one is complete everywhere and its time has come; it reads what the
    /// source's partitions have available (at most its share of the record limit),
    /// logs the ranges before anything is processed (with checkpoints on), runs them
    /// through the stage and closes: the rest of the dataflow finishes the batch.
    pub(super) fn run_batch_source(
        &mut self,
        max_records: Option<u64>,
        trigger: BatchTrigger,
    ) -> Result<()> {
        let ctx = Rc::clone(&self.ctx);
        if self.batch_run.is_some() {
            return self.continue_batch();
        }
        if ctx.max_duration.is_some_and(|d| ctx.started.elapsed() >= d)
            || tidewater::runner::drain_requested()
        {
            ctx.stopping.set(true);
        }
        let started = Instant::now();
        if ctx.probe.less_than(&self.cur) {
            // The previous batch is not complete everywhere yet.
            self.activator.activate_after(Duration::from_millis(1));
            return Ok(());
        }
        if trigger == BatchTrigger::Interval && !ctx.stopping.get() && started < self.epoch_due {
            self.activator
                .activate_after(self.epoch_due.saturating_duration_since(started));
            return Ok(());
        }
        let due = self.epoch_due;
        self.epoch_due = (due + ctx.epoch_interval).max(started);
        let delay_ms = started.saturating_duration_since(due).as_millis() as u64;
        if ctx.clock == Clock::Wall {
            self.batch_time = Timestamp::wall_clock().max(self.batch_time);
        }
        let cur = self.cur;
        // The batch's processing time reaches every consumer before its records.
        self.send_progress()?;
        let Head::Read { driver, .. } = &mut self.head else {
            return Err(Error::Internal(format!("'{}' is not a source", self.name)));
        };
        // A stop with a savepoint leaves the partitions where they are, so that a job
        // resumed from it reads on; otherwise the sources drain.
        let mut stop = ctx.stopping.get() && ctx.savepoint;
        if ctx.stopping.get() && !ctx.savepoint {
            driver.finish();
        }
        if !self.run_ends_fixed {
            // Spark's Trigger.AvailableNow: the end of every partition this worker
            // owns is taken once, at the start of the run (a run restored from a
            // checkpoint taken within it keeps the ends it had).
            match trigger {
                BatchTrigger::Interval => driver.end_run(),
                BatchTrigger::Once | BatchTrigger::AvailableNow => driver
                    .fix_run_ends(self.batch_time)
                    .map_err(|e| attribute(e, &self.name))?,
            }
            self.run_ends_fixed = true;
        }
        // A run restored after its last batch has nothing left to read.
        if trigger != BatchTrigger::Interval && driver.reached_run_ends() {
            stop = true;
        }
        let mut out = Vec::new();
        let mut plan = None;
        let mut logged_here = Vec::new();
        if !stop && !driver.is_done() {
            let logged = match &ctx.store {
                Some(store) => store.read_offsets(cur, self.node, ctx.plan_hash)?,
                None => None,
            };
            // Other workers' ranges of this batch may be logged already: only a range
            // of a partition this worker reads means the batch ran before.
            let replayed = logged.as_ref().is_some_and(|l| {
                l.iter()
                    .any(|r| driver.partitions().contains_key(&r.partition))
            });
            if replayed {
                eprintln!(
                    "{}: batch {cur} runs again with the source ranges logged before the failure (worker {})",
                    self.name, ctx.me
                );
            }
            let limit = if trigger == BatchTrigger::Once {
                None
            } else {
                max_records
            };
            // The ranges are fixed before the batch runs: planned from what the
            // source has available (then read as the batch runs), or read whole.
            let ranges = match driver
                .plan_batch(logged.as_deref(), limit, self.batch_time)
                .map_err(|e| attribute(e, &self.name))?
            {
                Some(p) => {
                    let ranges = p.ranges();
                    plan = Some(p);
                    ranges
                }
                None => {
                    let read = driver
                        .read_batch(
                            logged.as_deref(),
                            limit,
                            ctx.read_size,
                            self.batch_time,
                            &mut out,
                        )
                        .map_err(|e| attribute(e, &self.name))?;
                    stop = trigger_stops(trigger, read.limited);
                    read.ranges
                }
            };
            if let Some(store) = &ctx.store {
                let replayed = logged.as_ref().is_some_and(|l| {
                    ranges
                        .iter()
                        .all(|r| l.iter().any(|x| x.partition == r.partition))
                });
                if !replayed {
                    store.write_offsets(cur, self.node, ctx.me, ctx.plan_hash, &ranges)?;
                    crate::fault::point("offsets");
                    logged_here = ranges;
                }
            }
        }
        let records: usize = out.iter().map(|b| b.len()).sum();
        ctx.read(&self.figures, cur, records);
        ctx.metrics
            .borrow_mut()
            .step_mut(ENGINE_STEP)
            .inc_counter("batches", 1);
        self.batch_run = Some(BatchRun {
            queue: out.into(),
            plan,
            logged: logged_here,
            trigger,
            stop,
            figures: BatchFigures {
                batch: cur,
                records: records as u64,
                processing_ms: 0,
                delay_ms,
                state_bytes: 0,
            },
            started,
        });
        self.continue_batch()
    }

    /// Runs the next read of the batch's records through the stage and sends them on
    /// (reading the next chunk of a planned batch first); after the last, closes the
    /// batch (or finishes the task after its last batch). One read per activation, so
    /// that consumers on this worker run in between and the records in flight stay
    /// few.
    pub(super) fn continue_batch(&mut self) -> Result<()> {
        let cur = self.cur;
        let Some(run) = self.batch_run.as_mut() else {
            return Ok(());
        };
        if let (true, Some(plan), Head::Read { driver, .. }) =
            (run.queue.is_empty(), run.plan.as_mut(), &mut self.head)
        {
            if !plan.is_read() {
                let mut out = Vec::new();
                driver
                    .read_planned(plan, self.ctx.read_size, self.batch_time, &mut out)
                    .map_err(|e| attribute(e, &self.name))?;
                let records: usize = out.iter().map(|b| b.len()).sum();
                self.ctx.read(&self.figures, cur, records);
                run.figures.records += records as u64;
                run.queue.extend(out);
            }
        }
        if let Some(b) = run.queue.pop_front() {
            self.run_stage(b)?;
            self.flush(cur);
            self.activator.activate();
            return Ok(());
        }
        let mut run = self.batch_run.take().expect("a batch is running");
        let Head::Read { driver, .. } = &mut self.head else {
            return Err(Error::Internal(format!("'{}' is not a source", self.name)));
        };
        if let Some(plan) = run.plan.take() {
            let read = driver
                .settle_planned(plan)
                .map_err(|e| attribute(e, &self.name))?;
            // A partition that had fewer records than it said ends the batch early:
            // the log gets the ranges read, before anything of the batch is durable.
            if let Some(store) = &self.ctx.store {
                if !run.logged.is_empty() && run.logged != read.ranges {
                    store.write_offsets(
                        cur,
                        self.node,
                        self.ctx.me,
                        self.ctx.plan_hash,
                        &read.ranges,
                    )?;
                }
            }
            run.stop |= trigger_stops(run.trigger, read.limited);
        }
        let end = run.stop || driver.is_done();
        self.ctx
            .open_batches
            .borrow_mut()
            .push((run.figures, run.started));
        self.send_progress()?;
        self.flush(cur);
        self.collect_metrics();
        if end {
            // The run is over: the next one takes its own ends.
            if let Head::Read { driver, .. } = &mut self.head {
                driver.end_run();
            }
            return self.finish();
        }
        let next = crate::epochs::next_span(cur, self.ctx.stride);
        self.close(next - 1)?;
        self.move_to(next);
        if self.ctx.store.is_some() {
            self.ctx.checkpoints.borrow_mut().source_ended(next - 1);
        }
        self.activator.activate_after(Duration::from_millis(1));
        Ok(())
    }
}

/// Whether a run ends after a batch whose read found `limited` (some partition has
/// more in the run).
fn trigger_stops(trigger: BatchTrigger, limited: bool) -> bool {
    match trigger {
        BatchTrigger::Interval => false,
        BatchTrigger::Once => true,
        BatchTrigger::AvailableNow => !limited,
    }
}
