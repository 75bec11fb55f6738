//! The streaming policy: records flow as they arrive, and a source ends its epoch (a
//! checkpoint) every `--checkpoint-interval`, at the same instant on every worker, as
//! Flink's coordinator injects a checkpoint's barriers at all sources at once.

use std::time::{Duration, Instant};
use tidewater_runners_timely::epochs;
use tidewater_runners_timely::policy::{EpochPolicy, ReadPolicy, ReadTask};
use tidewater_runners_timely::Clock;

/// The streaming policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Streaming;

impl EpochPolicy for Streaming {
    fn time_at_close(&self) -> bool {
        false
    }

    fn reader(&self) -> Box<dyn ReadPolicy> {
        Box::new(StreamingReader {
            // Set at the first activation, from the interval.
            due: None,
            read_in_epoch: true,
            stretching: false,
            idle: 0,
        })
    }
}

/// One Read task's epochs.
struct StreamingReader {
    /// When the current epoch ends: at the next multiple of the interval on the wall
    /// clock, the same on every worker ([`epochs::epoch_end`]).
    due: Option<Instant>,
    /// Whether the source has read (or tried to) in its current epoch, which may then
    /// end.
    read_in_epoch: bool,
    /// Whether the current epoch is past its end, waiting for the checkpoints before to
    /// let the next one start.
    stretching: bool,
    /// Idle reads in a row (for the back-off).
    idle: u32,
}

impl ReadPolicy for StreamingReader {
    fn activate(&mut self, task: &mut dyn ReadTask) -> tidewater::Result<()> {
        let stopping = task.check_stop();
        task.report_first()?;
        let due = *self
            .due
            .get_or_insert_with(|| epochs::due(task.epoch_interval()));
        // An epoch ends when the interval is over and the source has read in it; a
        // source held back by the epochs in flight waits in its new epoch.
        // On the simulated clock a Read is read out in its first epoch, before the
        // script's first event (which follows that epoch everywhere, core's clock.rs).
        let read_out_first = task.clock() == Clock::Simulated;
        let now = Instant::now();
        self.stretching = false;
        if now >= due && self.read_in_epoch && !read_out_first {
            // A checkpoint slower than the interval stretches the epoch rather than
            // pausing the source (as Flink starts its next checkpoint only once the one
            // before is complete, and processing goes on meanwhile): while the next
            // epoch would wait for the epochs in flight, this one goes on, for at most
            // `epochs_in_flight` more intervals, after which the source waits as before
            // (what is in flight stays bounded however slow the checkpoints are).
            let interval = task.epoch_interval();
            let limit = due + interval.saturating_mul(task.epochs_in_flight() as u32);
            if now < limit && task.next_epoch_held() {
                self.stretching = true;
            } else {
                task.end_epoch()?;
                self.read_in_epoch = false;
                self.due = Some(epochs::due(interval));
            }
        }
        if task.wait_for_epochs_in_flight() {
            return Ok(());
        }
        self.read_in_epoch = true;
        // Watermark alignment: ahead of the source's slowest instance by more than the
        // drift, this one waits (its epochs still end, so the others' go on closing).
        if task.wait_for_alignment() {
            return Ok(());
        }
        if stopping {
            if task.stop_with_savepoint() {
                // Stop with a savepoint: the partitions keep their positions, so that a
                // job resumed from it reads on from there.
                return task.finish();
            }
            task.driver().finish();
        }
        // On the simulated clock a Read reads at the clock's start, and one that finds
        // nothing is drained (core's clock.rs).
        let clock = task.clock();
        let (read_size, now) = (task.read_size(), clock.read_time(task.processing_time()));
        let mut out = Vec::new();
        let read = task
            .driver()
            .read(read_size, now, &mut out)
            .map_err(|e| task.fail(e))?;
        task.driver().drain_if_idle(read, clock);
        let mut again = None;
        if !task.driver().is_done() {
            if read {
                self.idle = 0;
                again = Some(Duration::ZERO);
            } else {
                self.idle = (self.idle + 1).min(6);
                again = Some(Duration::from_millis(1 << self.idle));
            }
        }
        let done = task.driver().is_done();
        task.count_read(out.iter().map(|b| b.len()).sum());
        task.emit(out)?;
        if done {
            return task.finish();
        }
        let until_epoch = if self.stretching {
            // The epoch ends once the checkpoints before let the next one start.
            Duration::from_millis(1)
        } else {
            self.due.map_or(Duration::ZERO, |d| {
                d.saturating_duration_since(Instant::now())
            })
        };
        task.activate_after(again.unwrap_or(until_epoch).min(until_epoch));
        Ok(())
    }
}
