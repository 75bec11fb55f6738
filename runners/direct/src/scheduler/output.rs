//! Where the direct runner's stages deliver.

use super::*;
use tidewater::Timestamp;

impl Executor<'_> {
    /// Where stages deliver. Without validation, keyed input goes straight into its
    /// operator and what that emits runs downstream at once, so that no step holds a
    /// whole bundle's worth of data in front of a keyed step or behind it; with
    /// validation it waits at the node, to be shuffled as a whole.
    pub(super) fn output(&mut self) -> DirectOutput<'_> {
        let Executor {
            plan,
            options,
            stages,
            graph,
            heads,
            pending,
            buffers,
            sinks,
            captures,
            metrics,
            processing_time,
            figures,
            stage_heads,
            ..
        } = self;
        DirectOutput {
            plan,
            graph,
            stages,
            heads,
            push: !options.validate,
            max_bundle_size: options.max_bundle_size.max(1),
            processing_time: *processing_time,
            metrics,
            pending,
            buffers,
            sinks,
            captures,
            figures,
            stage_heads,
        }
    }
}

/// Where the direct runner's stages deliver: keyed input waits at its node, side
/// inputs and held main input go into their ParDo's head, Flatten's input into its
/// buffer, captures are encoded into the result.
pub(super) struct DirectOutput<'a> {
    plan: &'a ExecutablePlan,
    graph: &'a StageGraph,
    /// Every stage but those running (taken out while they run).
    stages: &'a mut Vec<Option<FusedStage>>,
    /// Every head but the one stepping (taken out while it steps).
    heads: &'a mut Vec<Option<Head>>,
    /// Keyed input goes straight into its operator.
    push: bool,
    max_bundle_size: usize,
    processing_time: Timestamp,
    metrics: &'a mut MetricResults,
    pending: &'a mut Vec<Vec<Box<dyn AnyBatch>>>,
    buffers: &'a mut Vec<Vec<Box<dyn AnyBatch>>>,
    sinks: &'a mut Vec<Option<SinkHost>>,
    captures: &'a mut BTreeMap<String, (String, Vec<u8>)>,
    /// Per node heading a task: its counts.
    figures: &'a mut Vec<super::figures::TaskFigures>,
    stage_heads: &'a [Option<usize>],
}

impl DirectOutput<'_> {
    /// Runs one bundle through `stage`, delivering to this output.
    pub(super) fn run(&mut self, stage: usize, bundle: Box<dyn AnyBatch>) -> Result<()> {
        let mut s = self.stages[stage]
            .take()
            .expect("every stage is built before it runs, and runs once at a time");
        let result = s.run_bundle(bundle, &mut StageDelivery { out: self, stage });
        for (name, m) in s.take_metrics() {
            self.metrics.step_mut(&name).merge(&m);
        }
        self.stages[stage] = Some(s);
        result
    }

    /// Emits what `stage`'s partial combines hold for windows that end before
    /// `watermark` as it passes them (core's `FusedStage::watermark_passes`), or all
    /// of it (`None`, before a checkpoint).
    pub(super) fn flush_partials(
        &mut self,
        stage: usize,
        watermark: Option<Timestamp>,
    ) -> Result<()> {
        let mut s = self.stages[stage]
            .take()
            .expect("every stage is built before it runs, and runs once at a time");
        let mut out = StageDelivery { out: self, stage };
        let result = match watermark {
            Some(w) => s.watermark_passes(w, &mut out).map(|_| ()),
            None => s.flush_partials(&mut out),
        };
        self.stages[stage] = Some(s);
        result
    }

    /// Input on `port` into head `node` (a keyed operator or a ParDo holding main
    /// input for its side inputs); what it emits runs downstream now.
    fn deliver_to_head(
        &mut self,
        node: usize,
        port: usize,
        batch: Box<dyn AnyBatch>,
    ) -> Result<()> {
        let n = &self.plan.nodes[node];
        self.figures[node].records_in += batch.len() as u64;
        let head = self.heads[node]
            .as_mut()
            .expect("a stage delivers only into a head that is not stepping");
        let outputs = head.process(port, batch, self.processing_time, &n.name)?;
        if let Some(m) = head.take_metrics() {
            self.metrics.step_mut(&n.name).merge(&m);
        }
        if outputs.is_empty() {
            return Ok(());
        }
        let Some(stage) = self.graph.fed_by(n.outputs[0]) else {
            return Ok(());
        };
        for out in outputs {
            let size = self.max_bundle_size;
            for bundle in out.into_chunks(&mut std::iter::repeat(size)) {
                self.run(stage, bundle)?;
            }
        }
        Ok(())
    }

    fn emit(&mut self, stage: usize, exit: usize, batch: Box<dyn AnyBatch>) -> Result<()> {
        if let Some(head) = self.stage_heads[stage] {
            self.figures[head].records_out += batch.len() as u64;
        }
        let e = &self.graph.stages[stage].exits[exit];
        match &e.kind {
            ExitKind::Shuffle if self.push => self.deliver_to_head(e.node, 0, batch)?,
            ExitKind::Shuffle | ExitKind::PartialCombine => self.pending[e.node].push(batch),
            ExitKind::HeldMain => self.deliver_to_head(e.node, 0, batch)?,
            ExitKind::SideInput => self.deliver_to_head(e.node, e.input, batch)?,
            ExitKind::Flatten => self.buffers[self.plan.nodes[e.node].outputs[0]].push(batch),
            ExitKind::Sink => self.sinks[e.node]
                .as_mut()
                .expect("every sink has an instance")
                .write(batch)?,
            ExitKind::Capture(name) => {
                let entry = self
                    .captures
                    .entry(name.clone())
                    .or_insert_with(|| (batch.element_type().to_string(), Vec::new()));
                batch.encode(&mut entry.1).map_err(|err| Error::Coder {
                    transform: format!("Capture[{name}]"),
                    element: "?".into(),
                    message: err.to_string(),
                })?;
            }
        }
        Ok(())
    }
}

/// The output of one running stage.
struct StageDelivery<'o, 'a> {
    out: &'o mut DirectOutput<'a>,
    stage: usize,
}

impl StageOutput for StageDelivery<'_, '_> {
    fn emit(&mut self, exit: usize, batch: Box<dyn AnyBatch>) -> Result<()> {
        self.out.emit(self.stage, exit, batch)
    }
}
