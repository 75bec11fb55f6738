//! A streaming source's epochs: reading within the epochs in flight, pacing when idle,
//! and pausing under watermark alignment.

use super::*;

impl Task {
    /// Whether this source instance is to wait for the others (Flink's watermark
    /// alignment): the watermark it last reported is more than `max_watermark_drift`
    /// ahead of the least its source's active instances reported, as this worker heard
    /// them. Never while the job is stopping, and only for a read (a Create or a
    /// TestStream has one instance). The instance holding the least watermark never
    /// waits, so some instance always reads.
    pub(super) fn ahead_of_its_source(&self) -> bool {
        let (Some(drift), Head::Read { .. }, Some((mine, _, _))) =
            (self.ctx.max_watermark_drift, &self.head, self.sent)
        else {
            return false;
        };
        if self.ctx.stopping.get() {
            return false;
        }
        let floor = match self.ctx.source_views.borrow().get(&self.node) {
            Some(view) => view.floor(),
            None => None,
        };
        floor.is_some_and(|floor| {
            mine.millis() > floor.millis().saturating_add(drift.as_millis() as i64)
        })
    }

    /// On the wall clock, wakes the task for its next processing-time timer.
    pub(super) fn schedule_wakeup(&self) {
        if self.ctx.clock != Clock::Wall || self.batches() {
            return;
        }
        if let Head::Keyed(op) = &self.head {
            if let Some(t) = op.next_wakeup() {
                let ms = t
                    .millis()
                    .saturating_sub(Timestamp::wall_clock().millis())
                    .max(1) as u64;
                self.activator.activate_after(Duration::from_millis(ms));
            }
        }
    }

    /// One activation of a source task.
    pub fn run_source(&mut self) -> Result<()> {
        if self.caps.is_empty() {
            return Ok(());
        }
        self.poll_writes()?;
        if let (
            Policy::Batches {
                max_records,
                trigger,
            },
            Head::Read { .. },
        ) = (self.ctx.policy, &self.head)
        {
            return self.run_batch_source(max_records, trigger);
        }
        let ctx = Rc::clone(&self.ctx);
        if ctx.max_duration.is_some_and(|d| ctx.started.elapsed() >= d)
            || tidewater::runner::drain_requested()
        {
            ctx.stopping.set(true);
        }
        // A new epoch begins every interval; a TestStream's every event is an epoch of
        // its own, after the epoch in which every worker's sources first report, so
        // that with aligned epochs each event is applied everywhere after the previous
        // one, as on the direct runner. A TestStream's events are steps of one span,
        // and a new span (a checkpoint) begins every interval ([`crate::epochs`]).
        let scripted = matches!(
            &self.head,
            Head::TestStream {
                driver: Some(_),
                ..
            }
        );
        // At most K checkpoints in flight: an epoch may be read only once every span
        // up to K before its own is durable. An epoch ends when the interval is over
        // (a scripted step: after its event) and the source has read in it; a source
        // held back in its new epoch waits there, reading nothing and starting no
        // other, so the records in flight stay within K epochs.
        // Every source reports its progress in the epoch it starts in, before it moves
        // on: a TestStream's first event is in the epoch after it, so every consumer
        // has heard from every worker's sources (the watermark is theirs, not the
        // beginning of time) before it applies an event. A source first activated
        // after its interval would otherwise report only in a later span, and windows
        // the script's watermark closed would stay open to its late elements.
        if self.sent.is_none() {
            if ctx.me != 0 {
                crate::fault::delay("late-source");
            }
            self.send_progress()?;
            let cur = self.cur;
            self.flush(cur);
        }
        let k = ctx.epochs_in_flight.max(1);
        let stride = ctx.stride;
        let held_back =
            |e: u64| crate::epochs::held_back(e, stride, k, |t| ctx.probe.less_than(&t));
        let interval_over = Instant::now() >= self.epoch_due;
        if (scripted || interval_over) && self.read_in_epoch {
            let next = crate::epochs::next_epoch(self.cur, stride, scripted && !interval_over);
            // Nothing is read in the epochs skipped to the next span's first.
            self.close(next - 1)?;
            self.move_to(next);
            self.read_in_epoch = false;
            if next.is_multiple_of(stride) {
                self.epoch_due = epoch_due(ctx.epoch_interval);
                if ctx.store.is_some() {
                    ctx.checkpoints.borrow_mut().source_ended(next - 1);
                }
            }
        }
        if held_back(self.cur) {
            self.throttled_since.get_or_insert_with(Instant::now);
            self.activator.activate_after(Duration::from_millis(1));
            return Ok(());
        }
        self.read_in_epoch = true;
        if let Some(since) = self.throttled_since.take() {
            self.figures.add_throttled(since.elapsed());
        }
        // Watermark alignment: ahead of the source's slowest instance by more than the
        // drift, this one waits (its epochs still end, so the others' go on closing).
        if self.ahead_of_its_source() {
            self.drift_paused_since.get_or_insert_with(Instant::now);
            self.activator.activate_after(Duration::from_millis(1));
            return Ok(());
        }
        if let Some(since) = self.drift_paused_since.take() {
            self.figures.add_drift_paused(since.elapsed());
        }
        let cur = self.cur;
        let now = self.now();
        let mut again = None;
        let mut out: Vec<Box<dyn AnyBatch>> = Vec::new();
        let done = match &mut self.head {
            Head::Create(create) => {
                out.extend(create.take());
                true
            }
            Head::TestStream { driver, clock } => {
                again = Some(Duration::ZERO);
                match driver.as_mut().map(|d| d.replay_next(clock)).transpose()? {
                    None => {
                        clock.watermark = Timestamp::MAX;
                        true
                    }
                    Some(Replayed::End) => true,
                    Some(Replayed::Clock) => false,
                    Some(Replayed::Elements(b)) => {
                        out.push(b);
                        false
                    }
                }
            }
            Head::Read { driver, idle } => {
                if ctx.stopping.get() {
                    if ctx.savepoint {
                        // Stop with a savepoint: the partitions keep their positions,
                        // so that a job resumed from it reads on from there.
                        self.collect_metrics();
                        return self.finish();
                    }
                    driver.finish();
                }
                let read = driver
                    .read(ctx.read_size, now, &mut out)
                    .map_err(|e| attribute(e, &self.name))?;
                if !driver.is_done() {
                    if read {
                        *idle = 0;
                        again = Some(Duration::ZERO);
                    } else if ctx.clock == Clock::Simulated {
                        // On a simulated clock an idle source stays idle: it is
                        // drained, as the direct runner does.
                        driver.finish();
                    } else {
                        *idle = (*idle + 1).min(6);
                        again = Some(Duration::from_millis(1 << *idle));
                    }
                }
                driver.is_done()
            }
            _ => return Err(Error::Internal(format!("'{}' is not a source", self.name))),
        };
        let read: usize = out.iter().map(|b| b.len()).sum();
        ctx.read(&self.figures, cur, read);
        // With micro-batches the batch's processing time reaches consumers before its
        // records (its watermark is applied only when the batch closes).
        if self.batches() && !out.is_empty() {
            self.send_progress()?;
        }
        for b in out {
            self.run_stage(b)?;
        }
        self.send_progress()?;
        self.flush(cur);
        self.collect_metrics();
        if done {
            return self.finish();
        }
        let until_epoch = self.epoch_due.saturating_duration_since(Instant::now());
        let delay = again.unwrap_or(until_epoch).min(until_epoch);
        if delay.is_zero() {
            self.activator.activate();
        } else {
            self.activator.activate_after(delay);
        }
        Ok(())
    }
}
