//! The direct runner's scheduler: runs a plan in this process, bounded or unbounded,
//! in rounds over core's parts. Each round the sources produce their next data (a
//! TestStream one scripted event), the fused stages run bundle by bundle (in an order
//! and in bundle sizes drawn from the seed), keyed operators take what their exits
//! delivered and move to the new watermarks, and what they fire runs downstream.
//! Every semantic rule it applies lives in `tidewater-runners-core`; this file only
//! decides order, bundles, and when to snapshot and restore (`checkpoint_every`).

use serde::{Deserialize, Serialize};

mod checkpoint;
mod figures;
mod output;
mod savepoint;

use std::collections::BTreeMap;
use tidewater::exec::{
    AnyBatch, ExecError, MetricResults, Phase, SplitMix64, DEFAULT_MAX_KEY_GROUPS,
};
use tidewater::runner::{PipelineResult, PipelineState};
use tidewater::Timestamp;
use tidewater::{Error, Result};
use tidewater_runners_core::checkpoint::{rescale_through, restore_sink, restored_job};
pub use tidewater_runners_core::clock::Clock;
use tidewater_runners_core::compat::PlanIdentity;
use tidewater_runners_core::delta::apply_delta;
use tidewater_runners_core::fusion::{heads, stage_graph, ExitKind, StageGraph};
use tidewater_runners_core::head::{Head, Placement};
use tidewater_runners_core::job::job_id;
use tidewater_runners_core::keyed::{KeyGroups, SnapshotKind};
use tidewater_runners_core::restore::restore_point;
use tidewater_runners_core::sink_host::SinkHost;
use tidewater_runners_core::snapshot::{decode_part, encode_part, Part, Scope, Snapshot};
use tidewater_runners_core::source_driver::SourceDriver;
use tidewater_runners_core::stage::{FusedStage, StageOptions, StageOutput};
use tidewater_runners_core::store::{start_epoch, Restored, Store};
use tidewater_runners_core::test_stream::Replayed;
use tidewater_runners_core::translate::{ExecutablePlan, NodeKind};
use tidewater_runners_core::watermarks;

/// How the executor schedules and checks.
#[derive(Clone, Debug)]
pub struct ExecOptions {
    /// Round-trip every element through its coder, keep copies for error messages.
    pub validate: bool,
    /// Shuffle elements within and across bundles and draw bundle sizes with this seed;
    /// `None` keeps the natural order and fixed bundles.
    pub shuffle_seed: Option<u64>,
    /// Largest bundle.
    pub max_bundle_size: usize,
    /// Lift combiners: combine partially in the producing stage.
    pub lift_combiners: bool,
    /// Added to user-code errors, e.g. how to replay the schedule.
    pub replay_hint: Option<String>,
    /// A partial-combine table holding more groups than this is flushed early.
    pub partial_flush_groups: usize,
    /// The processing-time clock.
    pub clock: Clock,
    /// Stop reading sources after this long and drain.
    pub max_duration: Option<std::time::Duration>,
    /// Every this many rounds, snapshot every operator, source and held input into the
    /// snapshot format, throw the in-memory state away and restore it, with keyed state
    /// redistributed over a number of virtual workers drawn from the seed and merged
    /// back: every step then also tests snapshot and restore.
    pub checkpoint_every: Option<usize>,
    /// The number of key groups keyed state is split into.
    pub max_key_groups: u32,
    /// Without checkpoints, sinks end an epoch and commit it this often (a job's output
    /// then appears as it runs); `None`: one epoch, committed at the end.
    pub commit_interval: Option<std::time::Duration>,
    /// `--job-id`; by default one derived from the pipeline (core's `job.rs`).
    pub job_id: Option<String>,
    /// `--accept-duplicates`: run even over output this job already committed.
    pub accept_duplicates: bool,
    /// With `--status-addr`: the board the job's figures are published to.
    pub status: Option<std::sync::Arc<tidewater_runners_status::Board>>,
    /// `--savepoint-dir`: a stop (drain request, `max_duration`) leaves the sources
    /// where they are and keeps the job's state here, as does the end of a bounded run;
    /// a savepoint request while it runs keeps one in `DIR/savepoint-<epoch>`.
    pub savepoint_dir: Option<std::path::PathBuf>,
    /// `--from-savepoint`: the job starts from the savepoint in this directory (written
    /// by any runner, at any parallelism).
    pub from_savepoint: Option<std::path::PathBuf>,
    /// `--allow-non-restored-state`: a savepoint holding state of steps this plan no
    /// longer has restores without it.
    pub allow_non_restored_state: bool,
    /// `--state-backend`: where stateful DoFns keep their state.
    pub state: tidewater_runners_core::state::StateChoice,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            validate: true,
            shuffle_seed: None,
            max_bundle_size: 1000,
            lift_combiners: true,
            replay_hint: None,
            partial_flush_groups: 100_000,
            clock: Clock::Simulated,
            max_duration: None,
            checkpoint_every: None,
            max_key_groups: DEFAULT_MAX_KEY_GROUPS,
            commit_interval: None,
            job_id: None,
            accept_duplicates: false,
            status: None,
            savepoint_dir: None,
            from_savepoint: None,
            allow_non_restored_state: false,
            state: Default::default(),
        }
    }
}

/// Runs `plan` to completion.
pub fn execute(plan: &ExecutablePlan, options: &ExecOptions) -> Result<PipelineResult> {
    let graph = stage_graph(plan, options.lift_combiners);
    let identity = PlanIdentity::of(plan);
    let (restored, origin) = restore_point(
        &identity,
        None,
        options.from_savepoint.as_deref(),
        options.allow_non_restored_state,
    )?;
    if let Some(r) = &restored {
        tracing::info!("direct runner: {origin}");
        for note in &r.notes {
            tracing::warn!("direct runner: {note}");
        }
    }
    let recorded = match &restored {
        Some(r) => restored_job(plan, &r.snapshot)?,
        None => None,
    };
    let job = job_id(
        options.job_id.as_deref(),
        recorded,
        plan.plan_hash,
        "direct",
    )?;
    let start_epoch = start_epoch(restored.as_ref());
    tidewater_runners_core::sink_host::refuse_replay(
        plan,
        &tidewater_runners_core::sink_host::RunStart {
            job: &job,
            derived: options.job_id.is_none() && restored.is_none(),
            resume_epoch: start_epoch,
            origin: &origin,
            accept_duplicates: options.accept_duplicates,
        },
    )?;
    let mut ex = Executor {
        job,
        plan,
        options,
        buffers: (0..plan.pcollections.len()).map(|_| Vec::new()).collect(),
        pending: (0..plan.nodes.len()).map(|_| Vec::new()).collect(),
        captures: BTreeMap::new(),
        metrics: MetricResults::default(),
        rng: options.shuffle_seed.map(SplitMix64::new),
        max_key_groups: restored
            .as_ref()
            .map_or(options.max_key_groups, |r| r.manifest.max_key_groups),
        identity,
        stopping: false,
        lifted: graph.lifted.clone(),
        stages: (0..graph.stages.len()).map(|_| None).collect(),
        heads: (0..plan.nodes.len()).map(|_| None).collect(),
        snapshot_bases: (0..plan.nodes.len()).map(|_| None).collect(),
        watermarks: vec![Timestamp::MIN; plan.pcollections.len()],
        processing_time: Timestamp(0),
        sinks: (0..plan.nodes.len()).map(|_| None).collect(),
        started: std::time::Instant::now(),
        figures: vec![figures::TaskFigures::default(); plan.nodes.len()],
        stage_heads: figures::stage_heads(plan, &graph),
        published: None,
        graph,
    };
    // Every capture is in the result, even one that received nothing.
    for node in &plan.nodes {
        if let NodeKind::Capture { name } = &node.kind {
            let ty = plan.pcollections[node.inputs[0]]
                .element_type
                .name()
                .to_string();
            ex.captures.entry(name.clone()).or_insert((ty, Vec::new()));
        }
    }
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ex.run(restored.as_ref())));
    // Every DoFn that was set up is torn down, after a failure too; a teardown error
    // counts only if the run succeeded.
    if !matches!(result, Ok(Ok(()))) {
        for host in ex.sinks.iter_mut().flatten() {
            let _ = host.abort_open();
        }
    }
    let teardown = ex.teardown();
    let result = match result {
        Ok(Ok(())) => Ok(teardown),
        other => other,
    };
    match result {
        Ok(Ok(())) => Ok(PipelineResult {
            state: PipelineState::Done,
            metrics: ex.metrics,
            captured: ex.captures,
            holds_captures: true,
        }),
        Ok(Err(e)) => Err(add_hint(e, options)),
        Err(p) => Err(Error::Internal(format!(
            "the executor panicked: {}",
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        ))),
    }
}

/// Adds how to replay the schedule to a failure where the order of elements can matter:
/// a DoFn's `process` or `finish_bundle` (not setup, teardown or a sink's IO).
fn add_hint(mut e: Error, options: &ExecOptions) -> Error {
    if let Error::UserCode {
        phase,
        replay: replay @ None,
        ..
    } = &mut e
    {
        if *phase == Phase::Process.name() || *phase == Phase::FinishBundle.name() {
            replay.clone_from(&options.replay_hint);
        }
    }
    e
}

struct Executor<'p> {
    plan: &'p ExecutablePlan,
    /// The job's id, which its sinks are told.
    job: String,
    options: &'p ExecOptions,
    /// Materialized batches per PCollection (stage roots).
    buffers: Vec<Vec<Box<dyn AnyBatch>>>,
    /// Inputs (or lifted accumulators) waiting at each keyed node.
    pending: Vec<Vec<Box<dyn AnyBatch>>>,
    captures: BTreeMap<String, (String, Vec<u8>)>,
    metrics: MetricResults,
    rng: Option<SplitMix64>,
    /// The number of key groups: a restored savepoint's, else the option's.
    max_key_groups: u32,
    /// The plan's stateful parts by id, which a savepoint records.
    identity: PlanIdentity,
    /// The job is stopping with a savepoint: the sources stay where they are.
    stopping: bool,
    /// Per node: a combine whose partial half runs in the producing stage.
    lifted: Vec<bool>,
    /// The stages, as the stage graph defines them.
    graph: StageGraph,
    /// Per stage: its instance, built once.
    stages: Vec<Option<FusedStage>>,
    /// Per node that heads a stage or ends the graph (core's `fusion::heads`): its
    /// head, as on an engine — a source, a keyed operator, a side-input runner, ...
    heads: Vec<Option<Head>>,
    /// Per keyed node: its parts in the last validation snapshot, which the next one's
    /// delta applies to.
    snapshot_bases: Vec<Option<Vec<Part>>>,
    /// Per PCollection: the output watermark of its producer.
    watermarks: Vec<Timestamp>,
    /// The processing-time clock (TestStream advances it when simulated).
    processing_time: Timestamp,
    /// Per sink node: its one instance.
    sinks: Vec<Option<SinkHost>>,
    started: std::time::Instant,
    /// Per node heading a task: its counts, for the status.
    figures: Vec<figures::TaskFigures>,
    /// Per stage, the node heading it.
    stage_heads: Vec<Option<usize>>,
    /// When the figures were last published to the status board.
    published: Option<std::time::Instant>,
}

/// Where the direct runner's heads run: one worker, owning every key group, reading
/// each source as one partition; taking over what `old_workers` held.
fn placement(
    max_key_groups: u32,
    old_workers: usize,
    state: &tidewater_runners_core::state::StateChoice,
) -> Placement {
    Placement {
        state: state.clone(),
        worker: 0,
        workers: 1,
        old_workers,
        key_groups: KeyGroups::all(max_key_groups),
        source_partitions: 1,
    }
}

impl Executor<'_> {
    fn run(&mut self, restored: Option<&Restored>) -> Result<()> {
        // On the fast path partial combines are held across bundles and rounds, and
        // flushed before their grouping sees its input watermark move (or a
        // checkpoint); with validation every bundle flushes them.
        let stage_options = StageOptions {
            hold_partials: !self.options.validate,
            validate: self.options.validate,
            partial_flush_groups: self.options.partial_flush_groups,
        };
        for (i, stage) in self.graph.stages.iter().enumerate() {
            self.stages[i] = Some(FusedStage::new(self.plan, stage, stage_options)?);
        }
        self.build_heads_and_sinks(restored)?;
        if self.options.clock == Clock::Wall {
            self.processing_time = self.processing_time.max(Timestamp::wall_clock());
        }
        // Rounds until nothing moves: sources exhausted, every reducer quiet.
        let mut round = 0u64;
        let mut idle = std::time::Duration::ZERO;
        let mut last_commit = std::time::Instant::now();
        loop {
            round += 1;
            if self
                .options
                .checkpoint_every
                .is_some_and(|n| round.is_multiple_of(n as u64))
            {
                self.checkpoint_and_restore(round)?;
            }
            if self
                .options
                .commit_interval
                .is_some_and(|d| last_commit.elapsed() >= d)
            {
                last_commit = std::time::Instant::now();
                // No checkpoint to wait for: an epoch's output is committed as it ends.
                for host in self.sinks.iter_mut().flatten() {
                    host.end_epoch()?;
                    host.commit_through(u64::MAX)?;
                }
            }
            if self.options.clock == Clock::Wall {
                self.processing_time = self.processing_time.max(Timestamp::wall_clock());
            }
            if tidewater::runner::take_savepoint_request() {
                self.keep_savepoint_now()?;
            }
            if tidewater::runner::drain_requested()
                || self
                    .options
                    .max_duration
                    .is_some_and(|d| self.started.elapsed() >= d)
            {
                if self.options.savepoint_dir.is_some() {
                    // Stop with a savepoint: the sources keep their positions, so that
                    // a job resumed from it reads on from there.
                    self.stopping = true;
                } else {
                    self.sources().for_each(SourceDriver::finish);
                }
            }
            let mut progress = false;
            for i in 0..self.plan.nodes.len() {
                progress |= self.step(i)?;
            }
            self.publish_status(false);
            if progress {
                idle = std::time::Duration::ZERO;
            }
            if !progress {
                if !self.reading() {
                    // The job's last epoch ends and, nothing being left to fail, is
                    // committed; with --savepoint-dir, after its state is kept there.
                    if let Some(dir) = &self.options.savepoint_dir {
                        self.keep_savepoint(dir)?;
                    }
                    for host in self.sinks.iter_mut().flatten() {
                        host.end_epoch()?;
                        host.commit_through(u64::MAX)?;
                    }
                    self.publish_status(true);
                    return Ok(());
                }
                match self.options.clock {
                    // An idle source may have more later on the wall clock.
                    Clock::Wall => {
                        idle = self.sleep_while_idle(idle);
                        continue;
                    }
                    // On the simulated clock an idle source stays idle: drain it, so its
                    // watermark reaches the end and its windows fire, rather than stop
                    // with their data unemitted.
                    Clock::Simulated => self.sources().for_each(SourceDriver::finish),
                }
            }
        }
    }

    /// Nothing moved and a source may have more later: sleeps, longer the longer the
    /// runner stays idle (1 ms doubling to 50 ms, to poll sources without spinning),
    /// never past the next processing-time timer. Returns the sleep taken.
    fn sleep_while_idle(&self, previous: std::time::Duration) -> std::time::Duration {
        const FIRST: std::time::Duration = std::time::Duration::from_millis(1);
        const LONGEST: std::time::Duration = std::time::Duration::from_millis(50);
        let mut sleep = (previous * 2).clamp(FIRST, LONGEST);
        let next_timer = self
            .heads
            .iter()
            .flatten()
            .filter_map(Head::next_wakeup)
            .min();
        if let Some(t) = next_timer {
            let until = t
                .millis()
                .saturating_sub(Timestamp::wall_clock().millis())
                .max(0) as u64;
            sleep = sleep.min(std::time::Duration::from_millis(until.max(1)));
        }
        if let Some(d) = self.options.max_duration {
            sleep = sleep.min(d.saturating_sub(self.started.elapsed()).max(FIRST));
        }
        std::thread::sleep(sleep);
        sleep
    }

    /// The source drivers of the Reads.
    fn sources(&mut self) -> impl Iterator<Item = &mut SourceDriver> {
        self.heads.iter_mut().filter_map(|h| match h {
            Some(Head::Read(driver)) => Some(driver),
            _ => None,
        })
    }

    /// Whether some Read is not done (and the job is not stopping).
    fn reading(&self) -> bool {
        !self.stopping
            && self
                .heads
                .iter()
                .any(|h| matches!(h, Some(Head::Read(driver)) if !driver.is_done()))
    }

    /// One node's part of a round; whether anything happened.
    fn step(&mut self, i: usize) -> Result<bool> {
        let node = &self.plan.nodes[i];
        let Some(mut head) = self.heads[i].take() else {
            // A ParDo without side inputs or a WindowInto runs inside a stage: its
            // output watermark follows its input's. A sink is written by its stage.
            if let NodeKind::ParDo { .. } | NodeKind::WindowInto { .. } = &node.kind {
                let wm = watermarks::par_do_output(self.watermarks[node.inputs[0]]);
                for &o in &node.outputs {
                    self.watermarks[o] = wm;
                }
            }
            return Ok(false);
        };
        let result = self.step_head(i, &mut head);
        self.heads[i] = Some(head);
        let progress = result?;
        // What the head released has run through its stage; the stage's held partial
        // combines for windows its new watermark passes go out now, before the
        // grouping they feed reads that watermark (core's `watermark_passes`).
        if let (Some(stage), Some(&out)) = (
            self.graph.of_head(self.plan, i),
            self.plan.nodes[i].outputs.first(),
        ) {
            let wm = self.watermarks[out];
            self.output().flush_partials(stage, Some(wm))?;
        }
        Ok(progress)
    }

    /// Head `i`'s part of a round (taken out of `self.heads` meanwhile).
    fn step_head(&mut self, i: usize, head: &mut Head) -> Result<bool> {
        let node = &self.plan.nodes[i];
        match head {
            Head::Create(create) => {
                let Some(batch) = create.take() else {
                    return Ok(false);
                };
                let out = node.outputs[0];
                self.count_in(i, batch.len());
                self.buffers[out].push(batch);
                self.watermarks[out] = create.watermark();
                self.run_stage(out)?;
                Ok(true)
            }
            Head::TestStream { driver, clock } => {
                // The script starts once every Read beside it is read out (core's
                // clock.rs).
                if self.options.clock == Clock::Simulated && self.reading() {
                    return Ok(false);
                }
                // A job stopping with a savepoint keeps the script where it is.
                if self.stopping {
                    return Ok(false);
                }
                let driver = driver.as_mut().expect("worker 0 runs the script");
                // The script moves the one processing-time clock the scheduler keeps.
                clock.processing_time = self.processing_time;
                let before = *clock;
                let replayed = driver.replay_next(clock)?;
                let out = node.outputs[0];
                self.watermarks[out] = clock.watermark;
                self.processing_time = clock.processing_time;
                match replayed {
                    Replayed::Elements(batch) => {
                        self.count_in(i, batch.len());
                        self.buffers[out].push(batch);
                        self.run_stage(out)?;
                        Ok(true)
                    }
                    Replayed::Clock => Ok(true),
                    Replayed::End => Ok(before.watermark != Timestamp::MAX),
                }
            }
            // A job stopping with a savepoint reads no more.
            Head::Read(_) if self.stopping => Ok(false),
            Head::Read(driver) => {
                let out = node.outputs[0];
                let max = self.options.max_bundle_size.max(1);
                // On the simulated clock a Read reads at the clock's start (core's
                // clock.rs).
                let clock = self.options.clock;
                let now = clock.read_time(self.processing_time);
                let read = driver
                    .read(max, now, &mut self.buffers[out])
                    .map_err(|e| unwrap_downstream(attribute(e, &node.name)))?;
                let mut progress = read || driver.drain_if_idle(read, clock);
                self.count_in(i, self.buffered(out));
                let wm = driver.watermark();
                if wm > self.watermarks[out] {
                    self.watermarks[out] = wm;
                    progress = true;
                }
                if !self.buffers[out].is_empty() {
                    self.run_stage(out)?;
                }
                Ok(progress)
            }
            Head::Flatten => {
                let out = node.outputs[0];
                self.watermarks[out] =
                    head.output_watermark(node.inputs.iter().map(|&p| self.watermarks[p]));
                if self.buffers[out].is_empty() {
                    return Ok(false);
                }
                self.count_in(i, self.buffered(out));
                self.run_stage(out)?;
                Ok(true)
            }
            Head::SideInput(_) => self.step_side_input_pardo(i, head),
            Head::Keyed(_) => self.step_keyed(i, head),
            Head::Capture { .. } => Ok(false),
        }
    }

    /// A ParDo with side inputs: runs the held main input whose side inputs are ready,
    /// and holds back its output watermark for the rest.
    fn step_side_input_pardo(&mut self, node: usize, head: &mut Head) -> Result<bool> {
        let n = &self.plan.nodes[node];
        let inputs: Vec<Timestamp> = n.inputs.iter().map(|&pc| self.watermarks[pc]).collect();
        let advanced = head.advance(&inputs, self.processing_time, &n.name)?;
        let mut progress = false;
        if let Some(sides) = advanced.side_inputs {
            let stage = self
                .graph
                .run_by(node)
                .expect("a ParDo with side inputs heads a stage");
            self.stages[stage]
                .as_mut()
                .expect("every stage is built before it runs")
                .set_side_inputs(sides);
            for mut ready in advanced.out {
                progress = true;
                if let Some(rng) = &mut self.rng {
                    ready.shuffle(rng);
                }
                self.run_bundles(stage, ready)?;
            }
        }
        let wm = head.output_watermark(std::iter::empty());
        for &o in &n.outputs {
            self.watermarks[o] = self.watermarks[o].max(wm);
        }
        Ok(progress)
    }

    /// A grouping or stateful ParDo: its keyed operator takes the waiting input, moves
    /// to the input watermark and the processing time, and what fired runs downstream.
    fn step_keyed(&mut self, node: usize, head: &mut Head) -> Result<bool> {
        let n = &self.plan.nodes[node];
        let result = (|| -> Result<bool> {
            let (mut progress, mut out) = self.feed_keyed(node, head)?;
            let now = self.processing_time;
            let advanced = head.advance(&[self.watermarks[n.inputs[0]]], now, &n.name)?;
            progress |= advanced.moved;
            out.extend(advanced.out);
            let o = n.outputs[0];
            self.watermarks[o] = head.output_watermark(std::iter::empty());
            progress |= !out.is_empty();
            self.run_released(o, out)?;
            Ok(progress)
        })();
        if let Some(metrics) = head.take_metrics() {
            self.metrics.step_mut(&n.name).merge(&metrics);
        }
        result
    }

    /// Keyed head `node` processes the input waiting for it, as one batch shuffled if
    /// the schedule says so: whether there was any, and what it emitted.
    fn feed_keyed(
        &mut self,
        node: usize,
        head: &mut Head,
    ) -> Result<(bool, Vec<Box<dyn AnyBatch>>)> {
        let pending = std::mem::take(&mut self.pending[node]);
        let mut iter = pending.into_iter();
        let Some(mut all) = iter.next() else {
            return Ok((false, Vec::new()));
        };
        // Lifted accumulators are batches of (K, Acc), not of the input type;
        // concatenate by appending to the first batch.
        for b in iter {
            all.append(b);
        }
        if let Some(rng) = &mut self.rng {
            all.shuffle(rng);
        }
        self.count_in(node, all.len());
        let name = &self.plan.nodes[node].name;
        Ok((true, head.process(0, all, self.processing_time, name)?))
    }

    /// Runs what a head released into PCollection `pc` downstream.
    fn run_released(&mut self, pc: usize, mut out: Vec<Box<dyn AnyBatch>>) -> Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        self.buffers[pc].append(&mut out);
        self.run_stage(pc)
    }

    /// Flushes every held partial combine into its grouping, which processes it
    /// (before a checkpoint: a stage's partial combines are not state).
    pub(super) fn flush_all_partials(&mut self) -> Result<()> {
        for stage in 0..self.graph.stages.len() {
            self.output().flush_partials(stage, None)?;
        }
        for node in 0..self.plan.nodes.len() {
            if !self.lifted[node] {
                continue;
            }
            let mut head = self.heads[node].take().expect("every grouping has a head");
            let result = self.feed_keyed(node, &mut head);
            self.heads[node] = Some(head);
            let (_, out) = result?;
            self.run_released(self.plan.nodes[node].outputs[0], out)?;
        }
        Ok(())
    }

    /// All of PCollection `pc`'s buffered batches as one batch, shuffled if the
    /// schedule says so.
    fn take_all(&mut self, pc: usize) -> Box<dyn AnyBatch> {
        let batches = std::mem::take(&mut self.buffers[pc]);
        self.concat(batches, pc)
    }

    fn concat(&mut self, batches: Vec<Box<dyn AnyBatch>>, pc: usize) -> Box<dyn AnyBatch> {
        let mut all = self.plan.pcollections[pc].element_type.new_batch();
        for b in batches {
            all.append(b);
        }
        if let Some(rng) = &mut self.rng {
            all.shuffle(rng);
        }
        all
    }

    fn bundle_sizes(&mut self, n: usize) -> Vec<usize> {
        let max = self.options.max_bundle_size.max(1);
        let mut sizes = Vec::new();
        let mut left = n;
        while left > 0 {
            let s = match &mut self.rng {
                Some(rng) => 1 + rng.below(max as u64) as usize,
                None => max,
            }
            .min(left);
            sizes.push(s);
            left -= s;
        }
        sizes
    }

    /// Runs the stage fed by PCollection `pc` over everything buffered for it.
    fn run_stage(&mut self, pc: usize) -> Result<()> {
        let Some(stage) = self.graph.fed_by(pc) else {
            // Nothing consumes it inside a stage (an unconsumed output).
            self.buffers[pc].clear();
            return Ok(());
        };
        let input = self.take_all(pc);
        self.run_bundles(stage, input)
    }

    /// Runs `input` through stage `stage` in bundles of the schedule's sizes.
    fn run_bundles(&mut self, stage: usize, input: Box<dyn AnyBatch>) -> Result<()> {
        let sizes = self.bundle_sizes(input.len());
        for bundle in input.into_chunks(&mut sizes.into_iter()) {
            self.output().run(stage, bundle)?;
        }
        Ok(())
    }

    /// Tears down every stage; the first error.
    fn teardown(&mut self) -> Result<()> {
        let mut first = Ok(());
        for s in self.stages.iter_mut().flatten() {
            if let Err(e) = s.teardown() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

fn attribute(e: ExecError, transform: &str) -> ExecError {
    tidewater_runners_core::stage::attribute(e, transform)
}

fn unwrap_downstream(e: ExecError) -> Error {
    tidewater_runners_core::stage::unwrap_downstream(e)
}
