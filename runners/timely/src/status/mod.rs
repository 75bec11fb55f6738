//! What a running job shows about itself (issue 35): the types, the board, the server
//! and control are `tidewater-runners-status`'s (shared with the direct runner); here
//! are the engine's parts: its figures as a worker's status ([`worker_status`]), the
//! gathering of every worker's figures in process 0 ([`gather`]), a local cluster's
//! supervised status ([`supervised`]), and control of an engine job ([`control`]).
//!
//! The figures are the ones the live progress line and the end-of-run summary read
//! (`metrics.rs`): per operator and worker, records in and out, the input watermark,
//! time throttled, paused by watermark alignment and held for alignment; per worker,
//! records read; on worker 0 the last checkpoints. Publishing copies a few numbers per
//! operator once a second, off the per-record path.

pub mod control;
pub mod gather;
pub mod supervised;

pub use tidewater_runners_status::{
    server, why, Board, CheckpointStatus, JobState, JobStatus, OperatorStatus, Rates,
    RestartStatus, SavepointStatus, StatusSource, WorkerStatus, RESTARTS_KEPT,
};

use crate::metrics::{Checkpoints, OperatorFigures};
use std::time::Instant;

/// An operator's figures as its status shows them.
fn operator_status(o: &OperatorFigures) -> OperatorStatus {
    let w = o.watermark.get();
    OperatorStatus {
        name: o.name.clone(),
        source: o.source,
        records_in: o.records_in.get(),
        records_out: o.records_out.get(),
        watermark_ms: (w > tidewater::Timestamp::MIN).then(|| w.millis()),
        busy_ms: o.busy.get().as_millis() as u64,
        throttled_ms: o.throttled.get().as_millis() as u64,
        drift_paused_ms: o.drift_paused.get().as_millis() as u64,
        alignment_ms: o.alignment.get().as_millis() as u64,
        rates: None,
        windows: o.windows.borrow().clone(),
        partitions: o.partitions.borrow().clone(),
    }
}

/// Worker `worker`'s figures now, as it publishes them to `board`.
pub fn worker_status(
    board: &Board,
    worker: usize,
    records_read: u64,
    operators: &[std::rc::Rc<OperatorFigures>],
    checkpoints: &Checkpoints,
    metrics: &tidewater::exec::MetricResults,
) -> WorkerStatus {
    WorkerStatus {
        worker,
        records_read,
        operators: operators.iter().map(|o| operator_status(o)).collect(),
        checkpoints_completed: checkpoints.completed,
        metrics: metrics.clone(),
        checkpoints: checkpoints
            .history
            .iter()
            .map(|c| CheckpointStatus {
                epoch: c.epoch,
                duration_ms: c.duration_ms,
                bytes: c.bytes,
                parts: c.parts.map(|p| p.0),
                delta_parts: c.parts.map(|p| p.1),
                alignment_ms: c.alignment_ms,
                completed_at_ms: board.since_start(c.at),
            })
            .collect(),
        updated_at_ms: board.since_start(Instant::now()),
    }
}
