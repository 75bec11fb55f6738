//! A source task's activation: a Read source runs its runner's policy
//! ([`crate::policy`]) over [`crate::policy::ReadTask`]; a Create, Impulse or TestStream follows its
//! script the same way on every runner. The mechanisms both use are here: stopping,
//! the first progress report, the epochs in flight, ending an epoch, watermark
//! alignment.

use super::read::Reading;
use super::*;

impl Task {
    /// One activation of a source task.
    pub fn run_source(&mut self) -> Result<()> {
        if self.caps.is_empty() {
            return Ok(());
        }
        self.poll_writes()?;
        if let Some(mut reader) = self.reader.take() {
            let result = reader.activate(&mut Reading { task: self });
            self.reader = Some(reader);
            return result;
        }
        self.run_scripted()
    }

    /// Whether the job is stopping: a drain was requested or its deadline passed
    /// (noted for every task of the worker).
    pub(super) fn check_stop(&self) -> bool {
        let ctx = &self.ctx;
        if ctx.max_duration.is_some_and(|d| ctx.started.elapsed() >= d)
            || tidewater::runner::drain_requested()
        {
            ctx.stopping.set(true);
        }
        ctx.stopping.get()
    }

    /// Every source reports its progress in the epoch it starts in, before it moves
    /// on: a TestStream's first event is in the epoch after it, so every consumer has
    /// heard from every worker's sources (the watermark is theirs, not the beginning of
    /// time) before it applies an event. A source first activated after its interval
    /// would otherwise report only in a later span, and windows the script's watermark
    /// closed would stay open to its late elements.
    pub(super) fn report_first(&mut self) -> Result<()> {
        if self.sent.is_some() {
            return Ok(());
        }
        if self.ctx.me != 0 {
            crate::fault::delay("late-source");
        }
        self.send_progress()?;
        let cur = self.cur;
        self.flush(cur);
        Ok(())
    }

    /// At most K checkpoints in flight: an epoch may be read only once every span up
    /// to K before its own is complete and committed (its manifest written, the sinks
    /// committed through it), not only durable (every task's part written): a 2PC
    /// sink's open transactions, and whatever a slow manifest holds back, so stay
    /// within K + 1 epochs. A source held back in its new epoch waits there, reading
    /// nothing and starting no other; it runs again shortly.
    pub(super) fn wait_for_epochs_in_flight(&mut self) -> bool {
        let held = self.held_back(self.cur);
        if held {
            self.throttled_since.get_or_insert_with(Instant::now);
            self.activator.activate_after(Duration::from_millis(1));
        } else if let Some(since) = self.throttled_since.take() {
            self.figures.add_throttled(since.elapsed());
        }
        held
    }

    /// Whether epoch `e` must wait for the epochs in flight before anything is read in
    /// it ([`crate::epochs::held_back`] on the checkpoints complete so far).
    pub(super) fn held_back(&self, e: u64) -> bool {
        let ctx = &self.ctx;
        let committed = ctx.committed.get();
        crate::epochs::held_back(e, ctx.stride, ctx.epochs_in_flight, |t| {
            committed.is_none_or(|c| c.saturating_add(1) < t)
        })
    }

    /// Closes the epochs before `next` (nothing is read in those skipped to a span's
    /// first) and moves there; a new span's first epoch ends a checkpoint's epochs at
    /// this source.
    pub(super) fn end_epoch(&mut self, next: u64) -> Result<()> {
        self.close(next - 1)?;
        self.move_to(next);
        if next.is_multiple_of(self.ctx.stride) && self.ctx.store.is_some() {
            self.ctx.checkpoints.borrow_mut().source_ended(next - 1);
        }
        Ok(())
    }

    /// Whether this source instance is to wait for the others (Flink's watermark
    /// alignment): the watermark it last reported is more than `max_watermark_drift`
    /// ahead of the least its source's active instances reported, as this worker heard
    /// them. Never while the job is stopping, and only for a read (a Create or a
    /// TestStream has one instance). The instance holding the least watermark never
    /// waits, so some instance always reads.
    pub(super) fn ahead_of_its_source(&self) -> bool {
        let (Some(drift), Head::Read(_), Some((mine, _, _))) =
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
        if self.ctx.clock != Clock::Wall || self.ctx.policy.time_at_close() {
            return;
        }
        {
            if let Some(t) = self.head.next_wakeup() {
                let ms = t
                    .millis()
                    .saturating_sub(Timestamp::wall_clock().millis())
                    .max(1) as u64;
                self.activator.activate_after(Duration::from_millis(ms));
            }
        }
    }

    /// One activation of a Create, Impulse or TestStream. A TestStream's every event
    /// is an epoch of its own, after the epoch in which every worker's sources first
    /// report, so that with aligned epochs each event is applied everywhere after the
    /// previous one, as on the direct runner. Its events are steps of one span, and a
    /// new span (a checkpoint) begins every interval ([`crate::epochs`]).
    fn run_scripted(&mut self) -> Result<()> {
        self.check_stop();
        let scripted = matches!(
            &self.head,
            Head::TestStream {
                driver: Some(_),
                ..
            }
        );
        self.report_first()?;
        // An epoch ends when the interval is over (a scripted step: after its event)
        // and the source has read in it.
        let interval_over = Instant::now() >= self.epoch_due;
        if (scripted || interval_over) && self.read_in_epoch {
            let next =
                crate::epochs::next_epoch(self.cur, self.ctx.stride, scripted && !interval_over);
            self.end_epoch(next)?;
            self.read_in_epoch = false;
            if next.is_multiple_of(self.ctx.stride) {
                self.epoch_due = crate::epochs::due(self.ctx.epoch_interval);
            }
        }
        if self.wait_for_epochs_in_flight() {
            return Ok(());
        }
        self.read_in_epoch = true;
        let cur = self.cur;
        let mut out: Vec<Box<dyn AnyBatch>> = Vec::new();
        let done = match &mut self.head {
            Head::Create(create) => {
                out.extend(create.take());
                true
            }
            Head::TestStream { driver, clock } => {
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
            _ => return Err(Error::Internal(format!("'{}' is not a source", self.name))),
        };
        let read: usize = out.iter().map(|b| b.len()).sum();
        self.ctx.read(&self.figures, cur, read);
        // Where time moves at epoch close, the processing time reaches consumers
        // before the records.
        if self.ctx.policy.time_at_close() && !out.is_empty() {
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
        // The next event at once.
        self.activator.activate();
        Ok(())
    }
}
