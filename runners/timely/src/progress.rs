//! What a worker shows while the job runs: its micro-batches' figures as they complete,
//! and the live progress line on a terminal.

use crate::epochs::FINAL_EPOCH;
use crate::metrics::show_watermark;
use crate::metrics::BatchFigures;
use crate::task::WorkerCtx;
use std::time::{Duration, Instant};

/// Records the figures of this worker's micro-batches up to `passed`, now complete
/// everywhere; the last one goes to `last` (for the progress line).
pub(crate) fn batch_figures(ctx: &WorkerCtx, passed: u64, last: &mut Option<BatchFigures>) {
    let mut open = ctx.open_batches.borrow_mut();
    if !open.iter().any(|(f, _)| f.batch <= passed) {
        return;
    }
    let mut metrics = ctx.metrics.borrow_mut();
    let m = metrics.step_mut(crate::metrics::ENGINE_STEP);
    let mut newest = None;
    open.retain(|(figures, started)| {
        if figures.batch > passed {
            return true;
        }
        let mut f = *figures;
        f.processing_ms = started.elapsed().as_millis() as u64;
        m.update_distribution("batch_records", f.records as i64);
        m.update_distribution("batch_ms", f.processing_ms as i64);
        m.update_distribution("scheduling_delay_ms", f.delay_ms as i64);
        newest = Some(f);
        false
    });
    // The state written up to the batches just complete goes to the newest of them.
    let mut state = ctx.state_bytes.borrow_mut();
    let kept = state.split_off(&passed.saturating_add(1));
    let mut bytes: u64 = state.values().sum();
    if passed == FINAL_EPOCH {
        bytes += kept.values().sum::<u64>();
        state.clear();
    } else {
        *state = kept;
    }
    if let Some(mut f) = newest {
        if ctx.store.is_some() {
            f.state_bytes = bytes;
            m.update_distribution("batch_state_bytes", bytes as i64);
        }
        *last = Some(f);
    }
}

/// The live progress line: records read per second by this worker's sources, the
/// watermark lag (wall clock minus the least watermark of this worker's operators), the
/// last complete checkpoint (its age, duration and size) or micro-batch.
pub(crate) struct Progress {
    started: Instant,
    last: Instant,
    last_records: u64,
}

impl Progress {
    pub(crate) fn new() -> Self {
        Progress {
            started: Instant::now(),
            last: Instant::now(),
            last_records: 0,
        }
    }

    pub(crate) fn show(
        &mut self,
        ctx: &WorkerCtx,
        committed: Option<u64>,
        batch: Option<BatchFigures>,
    ) {
        let dt = self.last.elapsed();
        if dt < Duration::from_secs(1) {
            return;
        }
        let records = ctx.records_read.get();
        let rate = (records - self.last_records) as f64 / dt.as_secs_f64();
        let least = ctx
            .operators
            .borrow()
            .iter()
            .map(|o| o.watermark.get())
            .filter(|w| *w < tidewater::Timestamp::MAX)
            .min();
        let watermark = match least {
            None => "watermark at the end".to_string(),
            Some(w) if w <= tidewater::Timestamp::MIN => "no watermark yet".to_string(),
            // A lag of more than a day means event times that are not the wall
            // clock's (generated data): the watermark itself says more.
            Some(w)
                if ctx.clock == tidewater_runners_core::clock::Clock::Wall
                    && (0..86_400_000)
                        .contains(&(tidewater::Timestamp::wall_clock().millis() - w.millis())) =>
            {
                format!(
                    "watermark lag {:.1}s",
                    (tidewater::Timestamp::wall_clock().millis() - w.millis()) as f64 / 1000.0
                )
            }
            Some(w) => format!("watermark {}", show_watermark(w.millis())),
        };
        let checkpoint = match (ctx.checkpoints.borrow().last, committed) {
            (Some(c), _) if c.epoch != FINAL_EPOCH => format!(
                "checkpoint {} {:.1}s ago{}{}",
                c.epoch,
                c.at.elapsed().as_secs_f64(),
                c.duration_ms
                    .map(|ms| format!(" in {ms} ms"))
                    .unwrap_or_default(),
                c.bytes
                    .map(|b| format!(", {} kB", b / 1000))
                    .unwrap_or_default()
            ),
            (_, Some(e)) if e != FINAL_EPOCH && ctx.store.is_none() => {
                format!("epoch {e} committed")
            }
            _ => "no checkpoint yet".into(),
        };
        let batch = match batch {
            Some(b) => format!(
                "  batch {}: {} records in {} ms, {} ms late, state {} kB",
                b.batch,
                b.records,
                b.processing_ms,
                b.delay_ms,
                b.state_bytes / 1000
            ),
            None => String::new(),
        };
        eprint!(
            "\r{:>6.0}s  {:>10.0} records/s (worker 0)  {:>12} read  {watermark}  {checkpoint}{batch}   ",
            self.started.elapsed().as_secs_f64(),
            rate,
            records
        );
        self.last = Instant::now();
        self.last_records = records;
    }

    pub(crate) fn end(&mut self, records: u64) {
        if self.last_records > 0 || records > 0 {
            eprintln!(
                "\r{:>6.0}s  {records} records read by worker 0{:40}",
                self.started.elapsed().as_secs_f64(),
                ""
            );
        }
    }
}
