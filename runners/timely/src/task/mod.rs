//! A task: one timely operator per worker that hosts a head (a source, a keyed
//! operator, a Flatten, a ParDo with side inputs, or a capture) and the fused stage
//! its output feeds, with that stage's exits as the operator's outputs.
//!
//! Epochs (timely time) are checkpoint ids. A task holds a capability at its current
//! epoch `cur`. Messages of `cur` are applied as they arrive; under exactly-once,
//! messages of later epochs wait until every input's frontier has passed `cur` (Flink's
//! barrier alignment, with timely's progress tracking in place of in-band barriers).
//! When the frontier passes `cur`, the task closes the epochs up to the next one it has
//! work for: sinks stage their transactions, the state is taken apart into parts and
//! handed to the worker's snapshot writer ([`crate::checkpoint::writer`]), and the data outputs
//! move on to the next epoch. The control output stays at the closed epoch until the
//! writer says the file is durable: its capability is the acknowledgement that the
//! durable probe after every task observes.
//!
//! Every semantic rule applied here lives in runners/core: the task only moves batches
//! and progress between core's parts.
//!
//! The parts: this module (the task's state, its inputs and the main loop: messages,
//! alignment, progress), `route` (where a stage's output goes), `snapshot` (the
//! task's side of a checkpoint: its parts, closing epochs, the writes), `scripted` (a
//! source's activation: a Read runs its runner's policy, a Create or TestStream its
//! script; the mechanisms both use) and `read` (what a Read task offers its
//! runner's policy, [`crate::policy`]).

use crate::checkpoint::store::Store;
use crate::checkpoint::writer::{PartWriter, WriteFigures, Written};
use crate::epochs::FINAL_EPOCH;
use crate::metrics::{BatchFigures, Checkpoints, InFlight, OperatorFigures, ENGINE_STEP};
use crate::msg::{Body, LocalBatch, Msg};
use crate::policy::{EpochPolicy, ReadPolicy};
use crate::{Clock, Guarantee};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tidewater::exec::{
    key_group, key_group_worker, AnyBatch, ElementType, ExecError, KeyOps, MetricResults,
};
use tidewater::{Error, Result, Timestamp};
use tidewater_runners_core::checkpoint::LaterPartsOf;
use tidewater_runners_core::head::Head;
use tidewater_runners_core::keyed::SnapshotKind;
use tidewater_runners_core::sink_host::SinkHost;
use tidewater_runners_core::snapshot::{Part, Scope, Snapshot};
use tidewater_runners_core::source_driver::{ReadRange, SourceDriver};
use tidewater_runners_core::stage::{FusedStage, StageOutput};
use tidewater_runners_core::test_stream::Replayed;
use tidewater_runners_core::watermarks;
use tidewater_runners_core::watermarks::{InputClock, Senders, SourceView};
use timely::dataflow::channels::pushers::Output;
use timely::dataflow::operators::Capability;
use timely::dataflow::ProbeHandle;
use timely::scheduling::{Activator, SyncActivator};

mod read;
mod route;
mod scripted;
mod snapshot;

use route::{attribute, encode, taken_twice, Router};

/// What a worker's tasks share.
pub struct WorkerCtx {
    /// This worker's global index.
    pub me: usize,
    /// The job serves its status: tasks keep their reports for it.
    pub serves_status: bool,
    /// Workers in all.
    pub peers: usize,
    /// The workers of this process (batches for them are not encoded).
    pub local: std::ops::Range<usize>,
    /// Key groups.
    pub max_key_groups: u32,
    /// Largest bundle run through a stage.
    pub bundle_size: usize,
    /// Records one source read takes at most.
    pub read_size: usize,
    /// Where processing time comes from.
    pub clock: Clock,
    /// Exactly-once (align epochs) or at-least-once (apply every epoch on arrival).
    pub guarantee: Guarantee,
    /// How long an epoch lasts at the sources.
    pub epoch_interval: Duration,
    /// The runner's epoch policy.
    pub policy: Arc<dyn EpochPolicy>,
    /// Epochs a source may run ahead of the last complete (committed) checkpoint.
    pub epochs_in_flight: u64,
    /// Epochs per checkpoint span ([`crate::epochs`]): 1, or more with a TestStream.
    pub stride: u64,
    /// A task's snapshot is full at least every this many checkpoints.
    pub full_snapshot_every: u64,
    /// Stop reading sources after this long.
    pub max_duration: Option<Duration>,
    /// When the job started.
    pub started: Instant,
    /// The checkpoint store, if checkpoints are on.
    pub store: Option<Store>,
    /// Writes this worker's snapshot files, if checkpoints are on.
    pub writer: Option<PartWriter>,
    /// Whether a keyed head's frozen state is encoded on the writer's thread (a core
    /// is spare for it) rather than on the worker's, before the task goes on
    /// ([`crate::checkpoint::writer::spare_core`]).
    pub encode_on_writer: bool,
    /// The plan's hash (in every file).
    pub plan_hash: u64,
    /// The plan's stateful parts by id (in every manifest).
    pub identity: std::sync::Arc<tidewater_runners_core::compat::PlanIdentity>,
    /// The durable probe, after every task.
    pub probe: ProbeHandle<u64>,
    /// Captured outputs (filled on worker 0).
    pub captures: RefCell<BTreeMap<String, (String, Vec<u8>)>>,
    /// Metrics of this worker.
    pub metrics: RefCell<MetricResults>,
    /// Whether a source has stopped for good because of a drain or a deadline.
    pub stopping: std::cell::Cell<bool>,
    /// Records this worker's sources have read.
    pub records_read: std::cell::Cell<u64>,
    /// A stop (drain request or deadline) ends the job with a savepoint: sources stop
    /// where they are instead of draining.
    pub savepoint: bool,
    /// Micro-batches this worker's sources started that are not complete yet, with
    /// when they started; the worker records them once the durable probe passes them.
    pub open_batches: RefCell<Vec<(BatchFigures, Instant)>>,
    /// Bytes of state this worker's tasks wrote, by the last epoch of their range.
    pub state_bytes: RefCell<BTreeMap<u64, u64>>,
    /// Every task's figures, for the progress line and the result.
    pub operators: RefCell<Vec<Rc<OperatorFigures>>>,
    /// Records this worker's sources read in epochs not yet durable.
    pub in_flight: RefCell<InFlight>,
    /// The checkpoints in flight and the last complete one.
    pub checkpoints: RefCell<Checkpoints>,
    /// Watermark alignment: a source instance whose watermark is more than this ahead
    /// of the least of its source's instances on all workers pauses (`None`: off).
    pub max_watermark_drift: Option<Duration>,
    /// Per source (its head's plan node): what this worker heard of its instances'
    /// watermarks, from the progress its consumers here received.
    pub source_views: RefCell<HashMap<usize, SourceView>>,
    /// The newest epoch whose checkpoint is complete and committed on this worker
    /// (the coordinator's): sources finalize the positions of checkpoints up to it.
    pub committed: std::cell::Cell<Option<u64>>,
    /// Reads whose operator finished (timely drops it) before the checkpoints they took
    /// part in were committed (the job's last one, always): finalized by the
    /// coordinator as those are.
    pub finished_reads: RefCell<Vec<FinishedRead>>,
}

/// A Read's positions at checkpoints not committed yet, oldest first: (the checkpoint's
/// epoch, its (partition, encoded position) pairs).
pub type ToFinalize = VecDeque<(u64, Vec<(u32, Vec<u8>)>)>;

/// A finished Read's source and the positions it still has to finalize.
pub struct FinishedRead {
    name: String,
    driver: SourceDriver,
    pending: ToFinalize,
}

impl WorkerCtx {
    /// Finalizes the finished Reads' positions of checkpoints up to the committed
    /// one ([`WorkerCtx::committed`]).
    pub fn finalize_finished_reads(&self) -> Result<()> {
        let Some(committed) = self.committed.get() else {
            return Ok(());
        };
        let mut reads = self.finished_reads.borrow_mut();
        for r in reads.iter_mut() {
            while r.pending.front().is_some_and(|(e, _)| *e <= committed) {
                let (_, positions) = r.pending.pop_front().expect("the front");
                r.driver
                    .finalize_at(&positions)
                    .map_err(|e| attribute(e, &r.name))?;
            }
        }
        reads.retain(|r| !r.pending.is_empty());
        Ok(())
    }

    /// The first epoch not yet durable everywhere.
    pub fn durable_frontier(&self) -> u64 {
        self.probe
            .with_frontier(|f| f.first().copied())
            .unwrap_or(u64::MAX)
    }

    /// A source of this worker read `n` records in `epoch`.
    fn read(&self, figures: &OperatorFigures, epoch: u64, n: usize) {
        if n == 0 {
            return;
        }
        figures.add_in(n);
        self.records_read.set(self.records_read.get() + n as u64);
        self.in_flight
            .borrow_mut()
            .read(epoch, n as u64, self.durable_frontier());
    }
}

/// A snapshot handed to the writer, holding the task's control capability at `hold`
/// until it is durable.
pub struct PendingWrite {
    /// The epoch the task was at when it closed the range: the probe must not pass it.
    pub hold: u64,
    /// The range's last epoch.
    pub last: u64,
    /// When the task began taking the state apart.
    pub started: Instant,
    /// The writer's answer.
    pub done: Arc<Written>,
    /// Whether the file is a delta over the task's previous one.
    pub delta: bool,
}

/// The sizes that decide whether a task's next snapshot is full.
#[derive(Default)]
pub struct ChainBytes {
    /// The last full snapshot's file.
    pub full: u64,
    /// The delta files durable since.
    pub deltas: u64,
}

/// How a stage exit leaves the task.
pub enum Route {
    /// Split by the worker owning each key's key group.
    Keyed {
        /// Output port.
        port: usize,
        /// Key hashing of what goes out.
        key_ops: Arc<dyn KeyOps>,
    },
    /// A copy to every worker.
    Broadcast {
        /// Output port.
        port: usize,
    },
    /// To this worker.
    Local {
        /// Output port.
        port: usize,
    },
    /// Everything to worker 0 (captures).
    Gather {
        /// Output port.
        port: usize,
    },
    /// Into a sink instance of this worker.
    Sink(Rc<RefCell<SinkHost>>),
}

/// How an input's batches are decoded.
pub enum Decoder {
    /// As the PCollection's element type.
    Type(Arc<dyn ElementType>),
    /// As what a keyed exchange carries (accumulators of a lifted combine).
    Keyed(Arc<dyn KeyOps>),
    /// Not decoded: a capture keeps the bytes.
    Raw,
}

/// One input port.
pub struct Input {
    /// Progress of its senders.
    pub clock: InputClock,
    /// The source (its head's plan node) that sends into this port, if a source's
    /// task does: its progress feeds the worker's view of that source.
    pub from_source: Option<usize>,
    /// How its data is decoded.
    pub decoder: Decoder,
}

impl Input {
    /// An input of this worker expecting progress from `senders`.
    pub fn new(ctx: &WorkerCtx, senders: Senders, decoder: Decoder) -> Self {
        Input {
            clock: InputClock::new(senders, ctx.me, ctx.peers),
            from_source: None,
            decoder,
        }
    }
}

/// One task on one worker.
pub struct Task {
    /// The head's plan node (names its files).
    pub node: usize,
    /// The head's transform name.
    pub name: String,
    /// Transform names of the head's state and of each sink it writes, for parts.
    pub sink_names: Vec<String>,
    /// The head.
    pub head: Head,
    /// A Read head's policy (taken out while it runs).
    pub reader: Option<Box<dyn ReadPolicy>>,
    /// The stage the head's output feeds.
    pub stage: Option<FusedStage>,
    /// Per stage exit: where it goes.
    pub routes: Vec<Route>,
    /// Per input port.
    pub inputs: Vec<Input>,
    /// Whether the task writes files at checkpoints.
    pub stateful: bool,
    /// The current epoch.
    pub cur: u64,
    /// The first epoch of the range not yet written.
    pub first: u64,
    /// Delta snapshots written since the last full one.
    pub deltas: u64,
    /// The bytes of the last full snapshot written, and of the deltas durable since
    /// (see [`Task::snapshot_kind`]).
    pub chain_bytes: ChainBytes,
    /// Messages waiting for their epoch, in arrival order.
    pub pending: BTreeMap<u64, Vec<(usize, Msg)>>,
    /// Since when messages of a later epoch have waited (alignment).
    pub waiting_since: Option<Instant>,
    /// Since when a source has been held back by the epochs in flight.
    pub throttled_since: Option<Instant>,
    /// Since when a source has waited for its slower instances (watermark alignment).
    pub drift_paused_since: Option<Instant>,
    /// Whether a source has read (or tried to) in its current epoch, which may then
    /// end (true at the start: a TestStream's first event follows the first epoch).
    pub read_in_epoch: bool,
    /// The last progress sent: watermark, processing time, idle.
    pub sent: Option<(Timestamp, Timestamp, bool)>,
    /// Per output port: messages to send.
    pub outbox: Vec<Vec<Msg>>,
    /// Capabilities, one per output port (port 0 is the control output the durable
    /// probe watches: it stays at the epoch of the oldest snapshot not yet durable);
    /// empty once the task is done.
    pub caps: Vec<Capability<u64>>,
    /// Snapshots handed to the writer and not yet durable, oldest first.
    pub writes: VecDeque<PendingWrite>,
    /// A Read's positions at each checkpoint it took part in that is not committed
    /// yet, oldest first: finalized ([`tidewater::Source::finalize`]) once it is.
    pub to_finalize: ToFinalize,
    /// Wakes this operator from the writer's thread.
    pub wake: SyncActivator,
    /// The outputs.
    pub outputs: Vec<Output<u64, Vec<Msg>>>,
    /// Reschedules this operator.
    pub activator: Activator,
    /// A Create or TestStream: when the current span ends (at the next multiple of
    /// the interval on the wall clock, the same on every worker, see
    /// [`crate::epochs::epoch_end`]).
    pub epoch_due: Instant,
    /// A Read's processing time, where its policy gives its epochs one that travels
    /// in-band to every task ([`EpochPolicy::time_at_close`]).
    pub in_band_time: Timestamp,

    /// Its figures (also in the worker's list).
    pub figures: Rc<OperatorFigures>,
    /// Shared with the worker.
    pub ctx: Rc<WorkerCtx>,
}

impl Task {
    /// Whether time advances only when an epoch closes (micro-batches).
    fn batches(&self) -> bool {
        self.ctx.policy.time_at_close()
    }

    /// Whether processing time travels in-band (a simulated clock, or micro-batches,
    /// whose processing time is the batch's) rather than being read from the wall
    /// clock by every task.
    fn time_in_band(&self) -> bool {
        self.ctx.clock == Clock::Simulated || self.batches()
    }

    fn now(&self) -> Timestamp {
        if !self.time_in_band() {
            return Timestamp::wall_clock();
        }
        match (&self.head, self.ctx.clock) {
            (Head::TestStream { clock, .. }, _) => clock.processing_time,
            (Head::Read(_) | Head::Create(_), Clock::Wall) => self.in_band_time,
            _ => self
                .inputs
                .iter()
                .map(|i| i.clock.processing_time())
                .min()
                .unwrap_or(Timestamp::MAX),
        }
    }

    /// The stage, if the task has one, and a router to its exits.
    fn stage_and_router(&mut self) -> Option<(&mut FusedStage, Router<'_>)> {
        let Task {
            stage,
            routes,
            outbox,
            ctx,
            name,
            figures,
            ..
        } = self;
        let router = Router {
            routes,
            outbox,
            ctx,
            transform: name,
            figures,
        };
        Some((stage.as_mut()?, router))
    }

    /// Runs `batch` through the stage, in bundles.
    fn run_stage(&mut self, batch: Box<dyn AnyBatch>) -> Result<()> {
        let size = self.ctx.bundle_size.max(1);
        let Some((stage, mut router)) = self.stage_and_router() else {
            return Ok(());
        };
        for bundle in batch.into_chunks(&mut std::iter::repeat(size)) {
            stage.run_bundle(bundle, &mut router)?;
        }
        Ok(())
    }

    /// Sends what the outbox holds, at epoch `t`.
    fn flush(&mut self, t: u64) {
        for (port, msgs) in self.outbox.iter_mut().enumerate() {
            if msgs.is_empty() {
                continue;
            }
            let cap = &self.caps[port];
            if *cap.time() == t {
                self.outputs[port].activate().give(cap, msgs);
            } else {
                let delayed = cap.delayed(&t);
                self.outputs[port].activate().give(&delayed, msgs);
            }
            msgs.clear();
        }
    }

    /// The head's output watermark.
    fn output_watermark(&self) -> Timestamp {
        self.head
            .output_watermark(self.inputs.iter().map(|i| i.clock.watermark()))
    }

    /// Whether the head's output is idle ([`Head::output_idle`]).
    fn output_idle(&self) -> bool {
        self.head
            .output_idle(self.inputs.iter().map(|i| i.clock.idle()))
    }

    /// Runs the stage's held partial combines for windows that end before `watermark`
    /// out through its exits (all of them at `Timestamp::MAX`).
    fn flush_partials(&mut self, watermark: Option<Timestamp>) -> Result<()> {
        let Some((stage, mut router)) = self.stage_and_router() else {
            return Ok(());
        };
        match watermark {
            Some(w) => stage.watermark_passes(w, &mut router).map(|_| ()),
            None => stage.flush_partials(&mut router),
        }
    }

    /// Sends the head's output progress to every consumer, if it changed.
    fn send_progress(&mut self) -> Result<()> {
        let progress = (
            watermarks::par_do_output(self.output_watermark()),
            if self.time_in_band() {
                self.now()
            } else {
                Timestamp(0)
            },
            self.output_idle(),
        );
        if self.sent == Some(progress) {
            return Ok(());
        }
        // Partial combines held in the stage go out before the watermark passes them.
        self.flush_partials(Some(progress.0))?;
        self.sent = Some(progress);
        let me = self.ctx.me as u32;
        let msg = |to: usize| Msg {
            to: to as u32,
            from: me,
            body: Body::Progress {
                watermark: progress.0,
                processing_time: progress.1,
                idle: progress.2,
            },
        };
        for route in &self.routes {
            match route {
                Route::Keyed { port, .. } | Route::Broadcast { port } => {
                    for to in 0..self.ctx.peers {
                        self.outbox[*port].push(msg(to));
                    }
                }
                Route::Local { port } => self.outbox[*port].push(msg(self.ctx.me)),
                Route::Gather { .. } | Route::Sink(_) => {}
            }
        }
        Ok(())
    }

    fn input_watermarks(&self) -> Vec<Timestamp> {
        self.inputs.iter().map(|i| i.clock.watermark()).collect()
    }

    /// One message at epoch `t`.
    fn handle(&mut self, port: usize, msg: Msg) -> Result<()> {
        match msg.body {
            Body::Progress {
                watermark,
                processing_time,
                idle,
            } => {
                self.inputs[port]
                    .clock
                    .update(msg.from, watermark, processing_time, idle);
                // With micro-batches time moves when the batch closes.
                if self.batches() {
                    Ok(())
                } else {
                    self.advance()
                }
            }
            Body::Data(_) | Body::Local(_) => {
                let batch = match (msg.body, &self.inputs[port].decoder) {
                    (body, Decoder::Raw) => {
                        let bytes = match body {
                            Body::Local(b) => {
                                let batch = b.take().ok_or_else(taken_twice)?;
                                encode(batch.as_ref(), &self.name)?
                            }
                            Body::Data(bytes) => bytes,
                            Body::Progress { .. } => unreachable!("matched above"),
                        };
                        if let Head::Capture { name, element_type } = &self.head {
                            let mut captures = self.ctx.captures.borrow_mut();
                            let entry = captures
                                .entry(name.clone())
                                .or_insert_with(|| (element_type.clone(), Vec::new()));
                            entry.1.extend_from_slice(&bytes);
                        }
                        return Ok(());
                    }
                    (Body::Local(b), _) => b.take().ok_or_else(taken_twice)?,
                    (Body::Data(bytes), Decoder::Type(ty)) => {
                        ty.decode_batch(&bytes).map_err(|e| Error::Coder {
                            transform: self.name.clone(),
                            element: "?".into(),
                            message: e.to_string(),
                        })?
                    }
                    (Body::Data(bytes), Decoder::Keyed(ops)) => ops
                        .decode_batch(&bytes)
                        .map_err(|e| attribute(e, &self.name))?,
                    (Body::Progress { .. }, _) => unreachable!("matched above"),
                };
                self.figures.add_in(batch.len());
                let now = self.now();
                for out in self.head.process(port, batch, now, &self.name)? {
                    self.run_stage(out)?;
                }
                Ok(())
            }
        }
    }

    /// Moves the head to its inputs' watermarks and the processing time.
    fn advance(&mut self) -> Result<()> {
        let now = self.now();
        let wms = self.input_watermarks();
        loop {
            let advanced = self.head.advance(&wms, now, &self.name)?;
            if let (Some(sides), Some(stage)) = (advanced.side_inputs, self.stage.as_mut()) {
                stage.set_side_inputs(sides);
            }
            for out in advanced.out {
                self.run_stage(out)?;
            }
            // What fired in one slice went downstream before the next fires.
            if !advanced.more {
                return Ok(());
            }
        }
    }

    /// Takes the stage's and the head's metrics into the worker's.
    fn collect_metrics(&mut self) {
        self.figures.watermark.set(if self.inputs.is_empty() {
            self.output_watermark()
        } else {
            self.inputs
                .iter()
                .map(|i| i.clock.watermark())
                .min()
                .unwrap_or(Timestamp::MAX)
        });
        if self.ctx.serves_status && self.figures.report_due() {
            *self.figures.windows.borrow_mut() = self.head.window_report(self.ctx.max_key_groups);
            *self.figures.partitions.borrow_mut() = self.head.partition_report();
        }
        let mut metrics = self.ctx.metrics.borrow_mut();
        if let Some(stage) = self.stage.as_mut() {
            for (name, m) in stage.take_metrics() {
                metrics.step_mut(&name).merge(&m);
            }
        }
        if let Some(m) = self.head.take_metrics() {
            metrics.step_mut(&self.name).merge(&m);
        }
    }

    /// One activation of a task with inputs; `frontier` is the least epoch any input
    /// may still receive ([`u64::MAX`] once every input is done).
    pub fn run(&mut self, incoming: Vec<(u64, usize, Msg)>, frontier: u64) -> Result<()> {
        if self.caps.is_empty() {
            return Ok(());
        }
        self.poll_writes()?;
        let cur = self.cur;
        let mut held = false;
        for (t, port, msg) in incoming {
            if let (
                Some(source),
                Body::Progress {
                    watermark, idle, ..
                },
            ) = (self.inputs[port].from_source, &msg.body)
            {
                if self.ctx.max_watermark_drift.is_some() {
                    self.ctx
                        .source_views
                        .borrow_mut()
                        .entry(source)
                        .or_insert_with(|| SourceView::new(self.ctx.peers))
                        .update(msg.from, *watermark, *idle);
                }
            }
            if t > cur {
                held = true;
                if self.waiting_since.is_none() {
                    self.waiting_since = Some(Instant::now());
                }
            }
            self.pending.entry(t).or_default().push((port, msg));
        }
        if held && self.ctx.guarantee == Guarantee::ExactlyOnce {
            let queued = self
                .pending
                .range(cur + 1..)
                .map(|(_, m)| m.len())
                .sum::<usize>();
            self.figures.set_queued(queued as u64);
        }
        loop {
            let cur = self.cur;
            let due: Vec<u64> = match self.ctx.guarantee {
                Guarantee::ExactlyOnce => self
                    .pending
                    .keys()
                    .take_while(|t| **t <= cur)
                    .copied()
                    .collect(),
                Guarantee::AtLeastOnce => self.pending.keys().copied().collect(),
            };
            let batches = self.batches();
            for t in due {
                for (port, msg) in self.pending.remove(&t).unwrap_or_default() {
                    self.handle(port, msg)?;
                    self.send_progress()?;
                    self.flush(t);
                }
                if !batches {
                    self.advance()?;
                    self.send_progress()?;
                    self.flush(t);
                }
            }
            // Processing time moves on its own on the wall clock.
            if !batches {
                self.advance()?;
                self.send_progress()?;
                self.flush(cur);
            }
            if frontier <= cur {
                break;
            }
            // A micro-batch is complete here: watermarks and processing time move to
            // where its inputs left them, and what that fires is part of the batch.
            if batches {
                self.advance()?;
                self.send_progress()?;
                self.flush(cur);
            }
            let next = frontier.min(self.pending.keys().next().copied().unwrap_or(u64::MAX));
            if next == u64::MAX {
                self.collect_metrics();
                return self.finish();
            }
            self.close(next - 1)?;
            self.move_to(next);
            if let Some(since) = self.waiting_since.take() {
                let waited = since.elapsed();
                self.ctx
                    .metrics
                    .borrow_mut()
                    .step_mut(ENGINE_STEP)
                    .update_distribution("alignment_ms", waited.as_millis() as i64);
                self.figures.add_alignment(waited);
                if self.ctx.store.is_some() {
                    self.ctx.checkpoints.borrow_mut().aligned(next - 1, waited);
                }
                if self.pending.keys().any(|t| *t > next) {
                    self.waiting_since = Some(Instant::now());
                }
            }
        }
        self.collect_metrics();
        self.schedule_wakeup();
        Ok(())
    }
}
