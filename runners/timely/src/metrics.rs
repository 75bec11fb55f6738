//! The engine's figures of a run: per operator (a task, on each worker), per
//! checkpoint, and the records in flight.
//!
//! A task keeps its figures in an [`OperatorFigures`] of plain cells, counted per batch
//! (never per record). The live progress line reads them; when the worker ends they go
//! into the pipeline result under the operator's step (the transform heading the task):
//!
//! | metric | kind | what |
//! |---|---|---|
//! | `records_in` | counter | elements that reached the task: what a source read, the data batches of the others (a capture's bytes are not decoded, so not counted) |
//! | `records_out` | counter | elements its stage emitted through its exits, into sinks too (a broadcast element once) |
//! | `input_watermark` | distribution, a value per worker | the task's input watermark (a source's own watermark) when the worker ended, in ms: the minimum is the operator's, the maximum its most advanced instance's |
//! | `throttled_ms` | counter | how long a source was held back by the epochs in flight |
//! | `drift_paused_ms` | counter | how long a source waited for its slower instances on other workers (watermark alignment, `max_watermark_drift_ms`) |
//! | `alignment_ms` | counter | how long messages of a later epoch waited for the current one to close |
//! | `queued_max` | distribution, a value per worker | the most messages held back for alignment at once |
//!
//! Under the engine's step ([`ENGINE_STEP`]), per checkpoint: `checkpoint_ms` (on
//! worker 0, from the end of the checkpoint's epoch at its sources to the manifest),
//! `checkpoint_bytes` (on worker 0, the files the manifest names: the full checkpoint)
//! and `checkpoint_alignment_ms` (a value per checkpoint and worker: the longest wait
//! of its tasks for the epochs it closes); and the records in flight: `epoch_records`
//! (a value per epoch and worker that read: the records its sources read in it) and
//! `records_in_flight_max` (a value per worker: the most records its sources had read
//! in epochs not yet durable everywhere, at most `epochs_in_flight` epochs' worth);
//! and on worker 0 per savepoint kept while the job runs: `savepoints` (a counter) and
//! `savepoint_ms` (the copy).

use crate::epochs::FINAL_EPOCH;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tidewater::exec::{MetricResults, StepMetrics};
use tidewater::Timestamp;

/// The step under which the engine's own metrics are reported: checkpoints
/// (per task and epoch range: `snapshot_ms`, the copy of the state on the task's
/// thread; `snapshot_write_ms`, the writer's encoding, write and sync;
/// `snapshot_durable_ms`, from the copy's start to the file durable; `snapshot_bytes`),
/// `alignment_ms`: how long
/// records of a later epoch waited for the earlier one to close), sources
/// (`throttled_ms`: reading held back by the epochs in flight, `records_read`),
/// checkpoints completed (`checkpoints`, `manifest_ms`, and those of
/// this module's `checkpoint_ms`, `checkpoint_bytes`, `checkpoint_alignment_ms`)
/// and the records in flight (`epoch_records`, `records_in_flight_max`). Per-operator
/// figures go under each operator's own step.
pub const ENGINE_STEP: &str = "(engine)";

/// Elements that reached an operator.
pub const RECORDS_IN: &str = "records_in";
/// Elements an operator emitted.
pub const RECORDS_OUT: &str = "records_out";
/// An operator's input watermark, a value per worker.
pub const INPUT_WATERMARK: &str = "input_watermark";
/// A source's time held back by the epochs in flight.
pub const THROTTLED_MS: &str = "throttled_ms";
/// A source's time waiting for its slower instances (watermark alignment).
pub const DRIFT_PAUSED_MS: &str = "drift_paused_ms";
/// An operator's time holding messages of a later epoch.
pub const ALIGNMENT_MS: &str = "alignment_ms";
/// The most messages an operator held back at once, a value per worker.
pub const QUEUED_MAX: &str = "queued_max";

/// One task's figures on one worker.
#[derive(Debug)]
pub struct OperatorFigures {
    /// The operator's step: the transform heading the task.
    pub name: String,
    /// Whether it is a source (its watermark is its own, not its inputs').
    pub source: bool,
    /// Elements in.
    pub records_in: Cell<u64>,
    /// Elements out.
    pub records_out: Cell<u64>,
    /// Its input watermark (a source's own), as of its last activation.
    pub watermark: Cell<Timestamp>,
    /// Time held back by the epochs in flight.
    pub throttled: Cell<Duration>,
    /// Time its activations took (measured only while the job serves its status).
    pub busy: Cell<Duration>,
    /// Time waiting for the source's slower instances.
    pub drift_paused: Cell<Duration>,
    /// Time messages of a later epoch waited.
    pub alignment: Cell<Duration>,
    /// Messages held back for alignment now.
    pub queued: Cell<u64>,
    /// The most messages held back at once.
    pub queued_max: Cell<u64>,
    /// For the job's status (when served): a keyed head's windows and a source's
    /// partitions, as of about a second ago, and when they were taken.
    pub windows: std::cell::RefCell<Option<tidewater_runners_core::keyed::reduce::WindowReport>>,
    pub partitions: std::cell::RefCell<Vec<tidewater_runners_core::explain::PartitionReport>>,
    pub reported: Cell<Option<std::time::Instant>>,
}

impl OperatorFigures {
    /// The figures of the task headed by `name`.
    pub fn new(name: &str, source: bool) -> Self {
        OperatorFigures {
            name: name.to_string(),
            source,
            records_in: Cell::new(0),
            records_out: Cell::new(0),
            watermark: Cell::new(Timestamp::MIN),
            throttled: Cell::new(Duration::ZERO),
            busy: Cell::new(Duration::ZERO),
            drift_paused: Cell::new(Duration::ZERO),
            alignment: Cell::new(Duration::ZERO),
            queued: Cell::new(0),
            queued_max: Cell::new(0),
            windows: Default::default(),
            partitions: Default::default(),
            reported: Cell::new(None),
        }
    }

    /// Whether the status reports are due again (about once a second).
    pub fn report_due(&self) -> bool {
        let due = self
            .reported
            .get()
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if due {
            self.reported.set(Some(std::time::Instant::now()));
        }
        due
    }

    /// `n` elements came in.
    pub fn add_in(&self, n: usize) {
        self.records_in.set(self.records_in.get() + n as u64);
    }

    /// `n` elements went out.
    pub fn add_out(&self, n: usize) {
        self.records_out.set(self.records_out.get() + n as u64);
    }

    /// An activation took `d`.
    pub fn add_busy(&self, d: Duration) {
        self.busy.set(self.busy.get() + d);
    }

    /// The source was held back by the epochs in flight for `d`.
    pub fn add_throttled(&self, d: Duration) {
        self.throttled.set(self.throttled.get() + d);
    }

    /// The source waited `d` for its slower instances.
    pub fn add_drift_paused(&self, d: Duration) {
        self.drift_paused.set(self.drift_paused.get() + d);
    }

    /// Messages of a later epoch waited `d` for the current one to close.
    pub fn add_alignment(&self, d: Duration) {
        self.alignment.set(self.alignment.get() + d);
    }

    /// `n` messages are held back for alignment now.
    pub fn set_queued(&self, n: u64) {
        self.queued.set(n);
        self.queued_max.set(self.queued_max.get().max(n));
    }

    /// Adds these figures to `metrics`, under the operator's step.
    pub fn report(&self, metrics: &mut MetricResults) {
        let m = metrics.step_mut(&self.name);
        m.inc_counter(RECORDS_IN, self.records_in.get() as i64);
        m.inc_counter(RECORDS_OUT, self.records_out.get() as i64);
        m.update_distribution(INPUT_WATERMARK, self.watermark.get().millis());
        if self.source {
            m.inc_counter(THROTTLED_MS, self.throttled.get().as_millis() as i64);
            if !self.drift_paused.get().is_zero() {
                m.inc_counter(DRIFT_PAUSED_MS, self.drift_paused.get().as_millis() as i64);
            }
        } else {
            m.inc_counter(ALIGNMENT_MS, self.alignment.get().as_millis() as i64);
            m.update_distribution(QUEUED_MAX, self.queued_max.get() as i64);
        }
    }
}

/// The records a worker's sources read per epoch, until the epoch is durable
/// everywhere.
#[derive(Debug, Default)]
pub struct InFlight {
    by_epoch: BTreeMap<u64, u64>,
    unsettled: u64,
    max: u64,
    metrics: StepMetrics,
}

impl InFlight {
    /// Every epoch before `frontier` (the durable probe's) is durable everywhere.
    pub fn settle(&mut self, frontier: u64) {
        let open = self.by_epoch.split_off(&frontier);
        for n in std::mem::replace(&mut self.by_epoch, open).into_values() {
            self.unsettled -= n;
            self.metrics.update_distribution("epoch_records", n as i64);
        }
    }

    /// The sources read `n` records in `epoch`; `frontier` is the durable probe's.
    pub fn read(&mut self, epoch: u64, n: u64, frontier: u64) {
        self.settle(frontier);
        *self.by_epoch.entry(epoch).or_default() += n;
        self.unsettled += n;
        self.max = self.max.max(self.unsettled);
    }

    /// The most records read in epochs not yet durable, so far.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Adds the figures to `metrics` (every epoch is settled: the job is over).
    pub fn report(&mut self, metrics: &mut MetricResults) {
        self.settle(u64::MAX);
        let m = metrics.step_mut(ENGINE_STEP);
        m.merge(&std::mem::take(&mut self.metrics));
        m.update_distribution("records_in_flight_max", self.max as i64);
    }
}

/// How many of the newest checkpoints a worker keeps for the status server.
pub const CHECKPOINTS_KEPT: usize = 20;

/// What a checkpoint's manifest names (known to the worker that wrote it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ManifestSize {
    /// The bytes of its files.
    pub bytes: u64,
    /// Its files (parts).
    pub parts: u64,
    /// The parts that are deltas over an earlier checkpoint's (0: a full checkpoint).
    pub delta_parts: u64,
}

/// A complete checkpoint as this worker saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointFigures {
    /// Its epoch ([`FINAL_EPOCH`] for the job's last).
    pub epoch: u64,
    /// From the end of its epoch at this worker's sources to its manifest (worker 0).
    pub duration_ms: Option<u64>,
    /// The bytes of the files its manifest names (worker 0).
    pub bytes: Option<u64>,
    /// Its parts, and how many are deltas (worker 0).
    pub parts: Option<(u64, u64)>,
    /// The longest time a task of this worker held messages back for its epochs.
    pub alignment_ms: u64,
    /// When this worker saw it complete.
    pub at: Instant,
}

/// What a worker knows of the checkpoints in flight.
#[derive(Debug, Default)]
pub struct Checkpoints {
    /// When this worker's sources ended each checkpoint's epoch (the first of them).
    ended: BTreeMap<u64, Instant>,
    /// The longest alignment wait per closed epoch.
    alignment: BTreeMap<u64, u64>,
    /// The newest complete checkpoint.
    pub last: Option<CheckpointFigures>,
    /// The newest complete checkpoints, oldest first (at most [`CHECKPOINTS_KEPT`]),
    /// for the status server.
    pub history: std::collections::VecDeque<CheckpointFigures>,
    /// Checkpoints completed in all.
    pub completed: u64,
}

impl Checkpoints {
    /// A source of this worker ended checkpoint epoch `epoch` (the job's last:
    /// [`FINAL_EPOCH`], whose latest source counts).
    pub fn source_ended(&mut self, epoch: u64) {
        if epoch == FINAL_EPOCH {
            self.ended.insert(epoch, Instant::now());
        } else {
            self.ended.entry(epoch).or_insert_with(Instant::now);
        }
    }

    /// A task of this worker held messages of a later epoch for `waited` before it
    /// closed the epochs up to `epoch`.
    pub fn aligned(&mut self, epoch: u64, waited: Duration) {
        let ms = waited.as_millis() as u64;
        let slot = self.alignment.entry(epoch).or_default();
        *slot = (*slot).max(ms);
    }

    /// Checkpoint `epoch` is complete; `manifest` says what it holds if this worker
    /// wrote its manifest. Its figures go to `m` (the engine's step) and become the
    /// last.
    pub fn complete(&mut self, epoch: u64, manifest: Option<ManifestSize>, m: &mut StepMetrics) {
        let bytes = manifest.map(|s| s.bytes);
        let duration_ms = bytes
            .and_then(|_| self.ended.get(&epoch))
            .map(|at| at.elapsed().as_millis() as u64);
        let kept = self.ended.split_off(&epoch.saturating_add(1));
        self.ended = kept;
        let kept = self.alignment.split_off(&epoch.saturating_add(1));
        let alignment_ms = std::mem::replace(&mut self.alignment, kept)
            .into_values()
            .max()
            .unwrap_or(0);
        if epoch == FINAL_EPOCH {
            self.ended.clear();
            self.alignment.clear();
        }
        if let Some(ms) = duration_ms {
            m.update_distribution("checkpoint_ms", ms as i64);
        }
        if let Some(b) = bytes {
            m.update_distribution("checkpoint_bytes", b as i64);
        }
        m.update_distribution("checkpoint_alignment_ms", alignment_ms as i64);
        let figures = CheckpointFigures {
            epoch,
            duration_ms,
            bytes,
            parts: manifest.map(|s| (s.parts, s.delta_parts)),
            alignment_ms,
            at: Instant::now(),
        };
        self.last = Some(figures);
        if epoch != FINAL_EPOCH {
            self.completed += 1;
            if self.history.len() == CHECKPOINTS_KEPT {
                self.history.pop_front();
            }
            self.history.push_back(figures);
        }
    }
}

/// A watermark for people: the beginning or end of time, or its milliseconds.
pub fn show_watermark(ms: i64) -> String {
    if ms <= Timestamp::MIN.millis() {
        "-".to_string()
    } else if ms >= Timestamp::MAX.millis() {
        "end of time".to_string()
    } else {
        format!("{ms} ms")
    }
}

/// What one micro-batch cost, as one source task of one worker saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchFigures {
    /// The batch id (its epoch).
    pub batch: u64,
    /// Records the task read for it.
    pub records: u64,
    /// From its start until it was complete everywhere (and durable, with checkpoints).
    pub processing_ms: u64,
    /// How late it started against its interval.
    pub delay_ms: u64,
    /// Bytes of state this worker wrote for it (with checkpoints on).
    pub state_bytes: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_in_flight_are_those_of_epochs_not_yet_durable() {
        let mut f = InFlight::default();
        f.read(0, 10, 0);
        f.read(1, 5, 0);
        f.read(1, 5, 0);
        assert_eq!(f.max(), 20);
        // Epoch 0 is durable: its 10 records are no longer in flight.
        f.read(2, 7, 1);
        assert_eq!(f.max(), 20);
        f.read(2, 20, 2);
        assert_eq!(f.max(), 27, "epoch 2's 27 records");
        let mut m = MetricResults::default();
        f.report(&mut m);
        let d = m.distribution(ENGINE_STEP, "epoch_records").unwrap();
        assert_eq!((d.count, d.sum, d.min, d.max), (3, 47, 10, 27));
        let d = m
            .distribution(ENGINE_STEP, "records_in_flight_max")
            .unwrap();
        assert_eq!((d.count, d.max), (1, 27));
    }

    #[test]
    fn a_checkpoint_takes_the_alignment_of_the_epochs_it_closes() {
        let mut c = Checkpoints::default();
        c.source_ended(3);
        c.aligned(2, Duration::from_millis(4));
        c.aligned(3, Duration::from_millis(9));
        c.aligned(3, Duration::from_millis(1));
        c.aligned(5, Duration::from_millis(30));
        let mut m = StepMetrics::default();
        c.complete(
            3,
            Some(ManifestSize {
                bytes: 1000,
                parts: 4,
                delta_parts: 1,
            }),
            &mut m,
        );
        let last = c.last.unwrap();
        assert_eq!(
            (last.epoch, last.bytes, last.parts, last.alignment_ms),
            (3, Some(1000), Some((4, 1)), 9)
        );
        assert!(last.duration_ms.is_some());
        // Another worker's view: no manifest written, so no duration or size.
        c.complete(5, None, &mut m);
        let last = c.last.unwrap();
        assert_eq!(
            (last.duration_ms, last.bytes, last.alignment_ms),
            (None, None, 30)
        );
        c.complete(7, None, &mut m);
        assert_eq!(c.last.unwrap().alignment_ms, 0);
        let mut r = MetricResults::default();
        r.step_mut(ENGINE_STEP).merge(&m);
        let d = r
            .distribution(ENGINE_STEP, "checkpoint_alignment_ms")
            .unwrap();
        assert_eq!((d.count, d.sum, d.max), (3, 39, 30));
        assert_eq!(
            r.distribution(ENGINE_STEP, "checkpoint_bytes").unwrap().sum,
            1000
        );
        assert_eq!(
            r.distribution(ENGINE_STEP, "checkpoint_ms").unwrap().count,
            1
        );
    }

    #[test]
    fn an_operator_reports_under_its_step() {
        let f = OperatorFigures::new("Count", false);
        f.add_in(3);
        f.add_in(4);
        f.add_out(2);
        f.set_queued(5);
        f.set_queued(1);
        f.watermark.set(Timestamp(42));
        let mut m = MetricResults::default();
        f.report(&mut m);
        f.report(&mut m);
        assert_eq!(m.counter("Count", RECORDS_IN), Some(14));
        assert_eq!(m.counter("Count", RECORDS_OUT), Some(4));
        assert_eq!(m.distribution("Count", QUEUED_MAX).unwrap().max, 5);
        let wm = m.distribution("Count", INPUT_WATERMARK).unwrap();
        assert_eq!((wm.count, wm.min, wm.max), (2, 42, 42));
        assert_eq!(m.counter("Count", THROTTLED_MS), None);
    }
}
