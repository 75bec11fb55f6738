//! The direct runner's scheduler: runs a plan in this process, bounded or unbounded,
//! in rounds over core's parts. Each round the sources produce their next data (a
//! TestStream one scripted event), the fused stages run bundle by bundle (in an order
//! and in bundle sizes drawn from the seed), keyed operators take what their exits
//! delivered and move to the new watermarks, and what they fire runs downstream.
//! Every semantic rule it applies lives in `tidewater-runners-core`; this file only
//! decides order, bundles, and when to snapshot and restore (`checkpoint_every`).

use serde::{Deserialize, Serialize};

mod checkpoint;
mod output;

use std::collections::BTreeMap;
use tidewater::exec::{
    AnyBatch, ExecError, MetricResults, Phase, SplitMix64, DEFAULT_MAX_KEY_GROUPS,
};
use tidewater::runner::{PipelineResult, PipelineState};
use tidewater::Timestamp;
use tidewater::{Error, Result};
use tidewater_runners_core::checkpoint::{
    keyed_parts, rescale_through, restore_side_input_runner, restore_sink, restore_source,
};
pub use tidewater_runners_core::clock::Clock;
use tidewater_runners_core::create::InitialBatch;
use tidewater_runners_core::delta::apply_delta;
use tidewater_runners_core::fusion::{stage_graph, ExitKind, StageGraph};
use tidewater_runners_core::keyed::{KeyGroups, KeyedOperator, SnapshotKind};
use tidewater_runners_core::side_inputs::SideInputRunner;
use tidewater_runners_core::sink_host::SinkHost;
use tidewater_runners_core::snapshot::{decode_part, encode_part, Part, Scope, Snapshot};
use tidewater_runners_core::source_driver::SourceDriver;
use tidewater_runners_core::stage::{FusedStage, StageOptions, StageOutput};
use tidewater_runners_core::test_stream::{Replayed, TestStreamClock, TestStreamDriver};
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
        }
    }
}

/// Runs `plan` to completion.
pub fn execute(plan: &ExecutablePlan, options: &ExecOptions) -> Result<PipelineResult> {
    let graph = stage_graph(plan, options.lift_combiners);
    let mut ex = Executor {
        plan,
        options,
        buffers: (0..plan.pcollections.len()).map(|_| Vec::new()).collect(),
        pending: (0..plan.nodes.len()).map(|_| Vec::new()).collect(),
        captures: BTreeMap::new(),
        metrics: MetricResults::default(),
        rng: options.shuffle_seed.map(SplitMix64::new),
        lifted: graph.lifted.clone(),
        stages: (0..graph.stages.len()).map(|_| None).collect(),
        graph,
        keyed: (0..plan.nodes.len()).map(|_| None).collect(),
        snapshot_bases: (0..plan.nodes.len()).map(|_| None).collect(),
        watermarks: vec![Timestamp::MIN; plan.pcollections.len()],
        cursors: vec![0; plan.nodes.len()],
        processing_time: Timestamp(0),
        sources: (0..plan.nodes.len()).map(|_| None).collect(),
        side_runners: (0..plan.nodes.len()).map(|_| None).collect(),
        sinks: (0..plan.nodes.len()).map(|_| None).collect(),
        started: std::time::Instant::now(),
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
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ex.run()));
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
    options: &'p ExecOptions,
    /// Materialized batches per PCollection (stage roots).
    buffers: Vec<Vec<Box<dyn AnyBatch>>>,
    /// Inputs (or lifted accumulators) waiting at each keyed node, and main input held
    /// at each ParDo with side inputs.
    pending: Vec<Vec<Box<dyn AnyBatch>>>,
    captures: BTreeMap<String, (String, Vec<u8>)>,
    metrics: MetricResults,
    rng: Option<SplitMix64>,
    /// Per node: a combine whose partial half runs in the producing stage.
    lifted: Vec<bool>,
    /// The stages, as the stage graph defines them.
    graph: StageGraph,
    /// Per stage: its instance, built once.
    stages: Vec<Option<FusedStage>>,
    /// Per grouping or stateful ParDo node: its keyed operator.
    keyed: Vec<Option<Box<dyn KeyedOperator>>>,
    /// Per keyed node: its parts in the last validation snapshot, which the next one's
    /// delta applies to.
    snapshot_bases: Vec<Option<Vec<Part>>>,
    /// Per PCollection: the output watermark of its producer.
    watermarks: Vec<Timestamp>,
    /// Per source node: how much of it has been produced.
    cursors: Vec<usize>,
    /// The processing-time clock (TestStream advances it when simulated).
    processing_time: Timestamp,
    /// Per Read node: its source driver.
    sources: Vec<Option<SourceDriver>>,
    /// Per ParDo with side inputs: its side data and held main input.
    side_runners: Vec<Option<SideInputRunner>>,
    /// Per sink node: its one instance.
    sinks: Vec<Option<SinkHost>>,
    started: std::time::Instant,
}

/// Partitions a source is split into by the in-process executor.
const SOURCE_PARTITIONS: usize = 1;

impl Executor<'_> {
    fn run(&mut self) -> Result<()> {
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
            if let Some(n) = stage.side_input_par_do {
                self.side_runners[n] = Some(SideInputRunner::new(self.plan, n)?);
            }
        }
        for (i, n) in self.plan.nodes.iter().enumerate() {
            if let NodeKind::Grouping { .. } | NodeKind::Stateful { .. } = &n.kind {
                self.keyed[i] = Some(tidewater_runners_core::keyed::instantiate(
                    self.plan,
                    i,
                    self.lifted[i],
                    &KeyGroups::all(self.options.max_key_groups),
                )?);
            }
        }
        for (i, n) in self.plan.nodes.iter().enumerate() {
            if let NodeKind::Read { .. } = &n.kind {
                let source = n.instantiate_source()?;
                self.sources[i] = Some(
                    SourceDriver::start(source, SOURCE_PARTITIONS, 0, 1)
                        .map_err(|e| unwrap_downstream(attribute(e, &n.name)))?,
                );
            }
        }
        for (i, n) in self.plan.nodes.iter().enumerate() {
            if let NodeKind::Sink { .. } = &n.kind {
                let mut host = SinkHost::new(self.plan, i, 0, 0)?;
                host.recover(1)?;
                self.sinks[i] = Some(host);
            }
        }
        if self.options.clock == Clock::Wall {
            self.processing_time = Timestamp::wall_clock();
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
            if tidewater::runner::drain_requested()
                || self
                    .options
                    .max_duration
                    .is_some_and(|d| self.started.elapsed() >= d)
            {
                self.sources
                    .iter_mut()
                    .flatten()
                    .for_each(SourceDriver::finish);
            }
            let mut progress = false;
            for i in 0..self.plan.nodes.len() {
                progress |= self.step(i)?;
            }
            if progress {
                idle = std::time::Duration::ZERO;
            }
            if !progress {
                let unfinished = self.sources.iter().flatten().any(|s| !s.is_done());
                if !unfinished {
                    // The job's last epoch ends and, nothing being left to fail, is
                    // committed.
                    for host in self.sinks.iter_mut().flatten() {
                        host.end_epoch()?;
                        host.commit_through(u64::MAX)?;
                    }
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
                    Clock::Simulated => self
                        .sources
                        .iter_mut()
                        .flatten()
                        .for_each(SourceDriver::finish),
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
            .keyed
            .iter()
            .flatten()
            .filter_map(|op| op.next_wakeup())
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

    fn step_read(&mut self, i: usize) -> Result<bool> {
        let node = &self.plan.nodes[i];
        let out = node.outputs[0];
        let max = self.options.max_bundle_size.max(1);
        // On the simulated clock a Read reads at the clock's start (core's clock.rs).
        let clock = self.options.clock;
        let now = clock.read_time(self.processing_time);
        let driver = self.sources[i].as_mut().expect("every Read has a driver");
        let read = driver
            .read(max, now, &mut self.buffers[out])
            .map_err(|e| unwrap_downstream(attribute(e, &node.name)))?;
        let mut progress = read || driver.drain_if_idle(read, clock);
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

    /// One node's part of a round; whether anything happened.
    fn step(&mut self, i: usize) -> Result<bool> {
        let node = &self.plan.nodes[i];
        match &node.kind {
            NodeKind::Impulse | NodeKind::Create { .. } => {
                let mut create = InitialBatch::new(self.plan, i, self.cursors[i] > 0)?;
                let Some(batch) = create.take() else {
                    return Ok(false);
                };
                self.cursors[i] = 1;
                let out = node.outputs[0];
                self.buffers[out].push(batch);
                self.watermarks[out] = create.watermark();
                self.run_stage(out)?;
                Ok(true)
            }
            NodeKind::TestStream { .. } => {
                // The script starts once every Read beside it is read out (core's
                // clock.rs).
                if self.options.clock == Clock::Simulated
                    && self.sources.iter().flatten().any(|s| !s.is_done())
                {
                    return Ok(false);
                }
                let out = node.outputs[0];
                let mut driver = TestStreamDriver::new(self.plan, i)?;
                driver.position = self.cursors[i];
                let before = TestStreamClock {
                    watermark: self.watermarks[out],
                    processing_time: self.processing_time,
                };
                let mut clock = before;
                let replayed = driver.replay_next(&mut clock)?;
                self.cursors[i] = driver.position;
                self.watermarks[out] = clock.watermark;
                self.processing_time = clock.processing_time;
                match replayed {
                    Replayed::Elements(batch) => {
                        self.buffers[out].push(batch);
                        self.run_stage(out)?;
                        Ok(true)
                    }
                    Replayed::Clock => Ok(true),
                    Replayed::End => Ok(before.watermark != Timestamp::MAX),
                }
            }
            NodeKind::ParDo { side_inputs, .. } if !side_inputs.is_empty() => {
                self.step_side_input_pardo(i)
            }
            NodeKind::ParDo { .. } | NodeKind::WindowInto { .. } => {
                let wm = watermarks::par_do_output(self.watermarks[node.inputs[0]]);
                for &o in &node.outputs {
                    self.watermarks[o] = wm;
                }
                Ok(false)
            }
            NodeKind::Flatten => {
                let out = node.outputs[0];
                self.watermarks[out] =
                    watermarks::flatten_output(node.inputs.iter().map(|&p| self.watermarks[p]));
                if self.buffers[out].is_empty() {
                    return Ok(false);
                }
                self.run_stage(out)?;
                Ok(true)
            }
            NodeKind::Grouping { .. } | NodeKind::Stateful { .. } => self.step_keyed(i),
            NodeKind::Read { .. } => self.step_read(i),
            NodeKind::Capture { .. } | NodeKind::Sink { .. } => Ok(false),
        }
    }

    /// A ParDo with side inputs: runs the held main input whose side inputs are ready,
    /// and holds back its output watermark for the rest.
    fn step_side_input_pardo(&mut self, node: usize) -> Result<bool> {
        let n = &self.plan.nodes[node];
        let main_wm = self.watermarks[n.inputs[0]];
        let side_wms: Vec<Timestamp> = n.inputs[1..]
            .iter()
            .map(|&pc| self.watermarks[pc])
            .collect();
        let runner = side_runner(&mut self.side_runners, node);
        let ready = runner.advance(main_wm, &side_wms);
        let mut progress = false;
        if let Some((mut ready, sides)) = ready {
            progress = true;
            if let Some(rng) = &mut self.rng {
                ready.shuffle(rng);
            }
            let stage = self
                .graph
                .run_by(node)
                .expect("a ParDo with side inputs heads a stage");
            self.stages[stage]
                .as_mut()
                .expect("every stage is built before it runs")
                .set_side_inputs(sides);
            self.run_bundles(stage, ready)?;
        }
        let wm = side_runner(&mut self.side_runners, node).output_watermark();
        for &o in &n.outputs {
            self.watermarks[o] = self.watermarks[o].max(wm);
        }
        Ok(progress)
    }

    /// A grouping or stateful ParDo: its keyed operator takes the waiting input, moves
    /// to the input watermark and the processing time, and what fired runs downstream.
    fn step_keyed(&mut self, node: usize) -> Result<bool> {
        let n = &self.plan.nodes[node];
        let attribute = |e: ExecError| unwrap_downstream(attribute(e, &n.name));
        let mut op = self.keyed[node]
            .take()
            .expect("every keyed node has an operator");
        let mut progress = false;
        let result = (|| -> Result<()> {
            let pending = std::mem::take(&mut self.pending[node]);
            if !pending.is_empty() {
                progress = true;
                // Lifted accumulators are batches of (K, Acc), not of the input type;
                // concatenate by appending to the first batch.
                let mut iter = pending.into_iter();
                let mut all = iter.next().expect("not empty");
                for b in iter {
                    all.append(b);
                }
                if let Some(rng) = &mut self.rng {
                    all.shuffle(rng);
                }
                op.process(all, self.processing_time).map_err(attribute)?;
            }
            let wm = self.watermarks[n.inputs[0]];
            if wm > op.input_watermark() && self.flush_partials_into(node, &mut op, Some(wm))? {
                progress = true;
            }
            if op.has_due_work(wm, self.processing_time) {
                progress = true;
            }
            op.advance(wm, self.processing_time).map_err(attribute)?;
            let o = n.outputs[0];
            self.watermarks[o] = op.output_watermark();
            let outputs = op.take_output();
            if !outputs.is_empty() {
                progress = true;
                self.buffers[o].extend(outputs);
                self.run_stage(o)?;
            }
            Ok(())
        })();
        let metrics = op.take_metrics();
        if !metrics.is_empty() {
            self.metrics.step_mut(&n.name).merge(&metrics);
        }
        self.keyed[node] = Some(op);
        result.map(|()| progress)
    }

    /// Flushes the partial combines of every stage that exits into grouping `node`
    /// (taken out of `self.keyed` as `op`) for windows that end before `watermark` as
    /// it passes them (all of them: `None`), and processes what waits for it; whether
    /// anything did.
    fn flush_partials_into(
        &mut self,
        node: usize,
        op: &mut Box<dyn KeyedOperator>,
        watermark: Option<Timestamp>,
    ) -> Result<bool> {
        if !self.lifted[node] {
            return Ok(false);
        }
        for stage in 0..self.graph.stages.len() {
            if self.graph.stages[stage]
                .exits
                .iter()
                .any(|e| e.node == node && e.kind == ExitKind::PartialCombine)
            {
                self.output().flush_partials(stage, watermark)?;
            }
        }
        let n = &self.plan.nodes[node];
        let pending = std::mem::take(&mut self.pending[node]);
        let any = !pending.is_empty();
        for b in pending {
            op.process(b, self.processing_time)
                .map_err(|e| unwrap_downstream(attribute(e, &n.name)))?;
        }
        Ok(any)
    }

    /// Flushes every held partial combine into its grouping (before a checkpoint).
    pub(super) fn flush_all_partials(&mut self) -> Result<()> {
        for node in 0..self.plan.nodes.len() {
            if self.lifted[node] {
                let mut op = self.keyed[node]
                    .take()
                    .expect("every keyed node has an operator");
                let r = self.flush_partials_into(node, &mut op, None);
                self.keyed[node] = Some(op);
                r?;
            }
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

fn side_runner(runners: &mut [Option<SideInputRunner>], node: usize) -> &mut SideInputRunner {
    runners[node]
        .as_mut()
        .expect("every ParDo with side inputs has a runner")
}

fn attribute(e: ExecError, transform: &str) -> ExecError {
    tidewater_runners_core::stage::attribute(e, transform)
}

fn unwrap_downstream(e: ExecError) -> Error {
    tidewater_runners_core::stage::unwrap_downstream(e)
}
