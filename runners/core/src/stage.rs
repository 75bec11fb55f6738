//! A fused stage as an engine hosts it: built once per worker (DoFns decoded and set up
//! once), it processes batches bundle by bundle, combines partially for lifted
//! combines (flushing at the end of each bundle, or early when a table is full), and
//! is torn down at the end or after a failure. What leaves the stage goes through
//! [`StageOutput`], so the direct scheduler and a timely operator host it alike.
//! Panics, the user's or ours, come out as errors naming the transform.

use crate::fusion::{Exit, ExitKind, Stage};
use crate::side_inputs::SideInputs;
use crate::translate::{ExecutablePlan, NodeKind};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use tidewater::exec::{
    AnyBatch, Emit, ErasedDoFn, ExecError, GroupingOps, GroupingPhase, GroupingTable,
    InvokeContext, StepMetrics, BATCH_SIZE,
};
use tidewater::{Error, Result, Timestamp};

/// Where a stage's exits lead; implemented by the engine.
pub trait StageOutput {
    /// A batch leaving through exit `exit` (an index into [`FusedStage::exits`]).
    fn emit(&mut self, exit: usize, batch: Box<dyn AnyBatch>) -> Result<()>;
}

/// How a stage checks what it runs.
#[derive(Clone, Copy, Debug)]
pub struct StageOptions {
    /// Round-trip every element (and lifted accumulator) through its coder, and keep
    /// a copy of each element for error messages.
    pub validate: bool,
    /// A partial-combine table holding more groups than this is flushed early.
    pub partial_flush_groups: usize,
    /// Keep partial-combine tables across bundles, until [`FusedStage::flush_partials`]
    /// (or until full): an engine flushes them before its output watermark moves and
    /// when an epoch ends. Otherwise every bundle flushes them at its end.
    pub hold_partials: bool,
}

/// A stage, instantiated.
pub struct FusedStage {
    input: Targets,
    exits: Vec<Exit>,
    /// Per exit: the partial-combine table of a lifted combine.
    partials: Vec<Option<Partial>>,
    /// The ParDo with side inputs that heads the stage, if any.
    side_input_head: bool,
    options: StageOptions,
    producer: String,
    torn_down: bool,
    /// The watermark the partial combines were last flushed before
    /// ([`FusedStage::watermark_passes`]).
    partials_flushed_before: Timestamp,
}

struct Partial {
    name: String,
    ops: Arc<dyn GroupingOps>,
    table: Option<Box<dyn GroupingTable>>,
}

/// Where a PCollection's batches go inside a stage.
struct Targets {
    list: Vec<Target>,
    element_type: Arc<dyn tidewater::exec::ElementType>,
}

enum Target {
    /// A fused ParDo or WindowInto.
    Op(Box<Operator>),
    /// Leaves the stage through this exit.
    Exit(usize),
}

struct Operator {
    name: String,
    /// `setup` succeeded, so `teardown` is owed.
    set_up: bool,
    dofn: Box<dyn ErasedDoFn>,
    tags: Vec<String>,
    metrics: StepMetrics,
    outputs: Vec<Targets>,
    /// Side inputs, for the ParDo that has them.
    sides: Option<Arc<SideInputs>>,
}

impl FusedStage {
    /// Instantiates `stage` of `plan` and sets up every DoFn in it. If a setup fails,
    /// what was set up is torn down and the error returned.
    pub fn new(plan: &ExecutablePlan, stage: &Stage, options: StageOptions) -> Result<Self> {
        let input = match stage.side_input_par_do {
            Some(n) => Targets {
                list: vec![Target::Op(Box::new(operator(plan, stage, n)?))],
                element_type: plan.pcollections[stage.input].element_type.clone(),
            },
            None => targets(plan, stage, stage.input)?,
        };
        let exits = stage.exits.clone();
        let partials = exits
            .iter()
            .map(|e| match (&e.kind, &plan.nodes[e.node].kind) {
                (ExitKind::PartialCombine, NodeKind::Grouping { ops }) => Some(Partial {
                    name: plan.nodes[e.node].name.clone(),
                    ops: ops.clone(),
                    table: None,
                }),
                _ => None,
            })
            .collect();
        let producer = plan.nodes[plan.pcollections[stage.input].producer]
            .name
            .clone();
        let mut s = FusedStage {
            input,
            exits,
            partials,
            side_input_head: stage.side_input_par_do.is_some(),
            options,
            producer,
            torn_down: false,
            partials_flushed_before: Timestamp::MIN,
        };
        let setup = try_each_op(&mut s.input, &mut |op| {
            op.dofn.setup()?;
            op.set_up = true;
            Ok(())
        });
        if let Err(e) = setup {
            let _ = s.teardown();
            return Err(unwrap_downstream(e));
        }
        Ok(s)
    }

    /// The stage's exits, in the order [`StageOutput::emit`] numbers them.
    pub fn exits(&self) -> &[Exit] {
        &self.exits
    }

    /// Gives the side-input ParDo heading the stage the side inputs of its next bundle.
    pub fn set_side_inputs(&mut self, sides: Arc<SideInputs>) {
        debug_assert!(self.side_input_head);
        if let Some(Target::Op(op)) = self.input.list.first_mut() {
            op.sides = Some(sides);
        }
    }

    /// Runs one bundle: start, every batch of `input` in chunks, finish (which flushes
    /// the partial combines).
    pub fn run_bundle(
        &mut self,
        input: Box<dyn AnyBatch>,
        out: &mut dyn StageOutput,
    ) -> Result<()> {
        guard(&self.producer.clone(), || {
            try_each_op(&mut self.input, &mut |op| op.dofn.start_bundle())
                .map_err(unwrap_downstream)?;
            let mut ctx = Ctx {
                partials: &mut self.partials,
                out,
                options: self.options,
            };
            for chunk in input.into_chunks(&mut std::iter::repeat(BATCH_SIZE)) {
                deliver(&mut self.input, chunk, &mut ctx, &self.producer)
                    .map_err(unwrap_downstream)?;
            }
            finish_all(&mut self.input, &mut ctx).map_err(unwrap_downstream)?;
            if !self.options.hold_partials {
                for (i, p) in ctx.partials.iter_mut().enumerate() {
                    if let Some(p) = p {
                        p.flush(i, ctx.out, self.options)?;
                    }
                }
            }
            Ok(())
        })
    }

    /// Emits what the partial-combine tables hold (with `hold_partials`): when an epoch
    /// ends, or before a checkpoint.
    pub fn flush_partials(&mut self, out: &mut dyn StageOutput) -> Result<()> {
        self.flush_partials_before(Timestamp::MAX, out)
    }

    /// The watermark of what the stage emits moves to `watermark`: the held partial
    /// combines of windows that end before it go out first, once per watermark (the
    /// rule every runner applies: an engine before it sends the watermark on, the
    /// direct runner before a grouping fed by the stage reads it). Returns whether the
    /// watermark moved past the last one.
    pub fn watermark_passes(
        &mut self,
        watermark: Timestamp,
        out: &mut dyn StageOutput,
    ) -> Result<bool> {
        if watermark <= self.partials_flushed_before {
            return Ok(false);
        }
        self.partials_flushed_before = watermark;
        self.flush_partials_before(watermark, out)?;
        Ok(true)
    }

    /// Emits what the partial-combine tables hold for windows that end before
    /// `watermark` (with `hold_partials`): an engine calls it before the watermark of
    /// what the stage emits moves to `watermark`. The groups of later windows stay:
    /// lifting needs the default trigger, non-merging windows and output at the end of
    /// the window, so their panes fire only once the watermark passes their end, and
    /// nothing downstream can tell that their input waited here.
    pub fn flush_partials_before(
        &mut self,
        watermark: Timestamp,
        out: &mut dyn StageOutput,
    ) -> Result<()> {
        let options = self.options;
        guard(&self.producer.clone(), || {
            for (i, p) in self.partials.iter_mut().enumerate() {
                if let Some(p) = p {
                    p.flush_before(watermark, i, out, options)?;
                }
            }
            Ok(())
        })
    }

    /// Counters since the last call, per transform.
    pub fn take_metrics(&mut self) -> Vec<(String, StepMetrics)> {
        let mut out = Vec::new();
        for_each_op(&mut self.input, &mut |op| {
            if !op.metrics.is_empty() {
                out.push((op.name.clone(), std::mem::take(&mut op.metrics)));
            }
        });
        out
    }

    /// Tears down every DoFn that was set up (once); the first error is returned.
    pub fn teardown(&mut self) -> Result<()> {
        if std::mem::replace(&mut self.torn_down, true) {
            return Ok(());
        }
        let mut first = None;
        for_each_op(&mut self.input, &mut |op| {
            if std::mem::take(&mut op.set_up) {
                let name = op.name.clone();
                let r = tidewater::exec::catch_user(AssertUnwindSafe(|| op.dofn.teardown()))
                    .unwrap_or_else(|p| Err(internal_panic(&name, p)));
                if let Err(e) = r {
                    first.get_or_insert(unwrap_downstream(attribute(e, &op.name)));
                }
            }
        });
        first.map_or(Ok(()), Err)
    }
}

impl Drop for FusedStage {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Accumulators per batch when a partial combine flushes: a flush of a micro-batch's
/// every (key, window) sends them downstream a batch at a time, so they are never all
/// copied into one.
const PARTIAL_FLUSH_BATCH: usize = 4096;

impl Partial {
    fn add(
        &mut self,
        batch: Box<dyn AnyBatch>,
        exit: usize,
        out: &mut dyn StageOutput,
        options: StageOptions,
    ) -> Result<()> {
        let ops = &self.ops;
        let table = self
            .table
            .get_or_insert_with(|| ops.new_table(GroupingPhase::Partial));
        table
            .add(batch)
            .map_err(|e| unwrap_downstream(attribute(e, &self.name)))?;
        if table.groups() > options.partial_flush_groups {
            self.flush(exit, out, options)?;
        }
        Ok(())
    }

    fn flush(
        &mut self,
        exit: usize,
        out: &mut dyn StageOutput,
        options: StageOptions,
    ) -> Result<()> {
        self.flush_before(Timestamp::MAX, exit, out, options)
    }

    /// Emits the groups of windows that end before `watermark` (all of them at
    /// `Timestamp::MAX`).
    fn flush_before(
        &mut self,
        watermark: Timestamp,
        exit: usize,
        out: &mut dyn StageOutput,
        options: StageOptions,
    ) -> Result<()> {
        let Some(table) = self.table.as_mut() else {
            return Ok(());
        };
        if table.groups() == 0 {
            return Ok(());
        }
        let name = &self.name;
        table
            .finish_in_batches(watermark, PARTIAL_FLUSH_BATCH, &mut |acc| {
                check_accumulators(acc, name, options)
                    .and_then(|acc| out.emit(exit, acc))
                    .map_err(|e| ExecError::Downstream(Box::new(e)))
            })
            .map_err(|e| unwrap_downstream(attribute(e, name)))
    }
}

fn operator(plan: &ExecutablePlan, stage: &Stage, n: usize) -> Result<Operator> {
    let node = &plan.nodes[n];
    Ok(Operator {
        name: node.name.clone(),
        set_up: false,
        dofn: node.instantiate(&plan.pcollections)?,
        tags: node.kind.output_tags(),
        metrics: StepMetrics::default(),
        sides: None,
        outputs: node
            .outputs
            .iter()
            .map(|&o| targets(plan, stage, o))
            .collect::<Result<_>>()?,
    })
}

/// The targets of `pc` inside `stage`: its fused consumers, and its exits with the
/// stage graph's numbering.
fn targets(plan: &ExecutablePlan, stage: &Stage, pc: usize) -> Result<Targets> {
    let mut list = Vec::new();
    let mut placed = Vec::new();
    for &c in &plan.pcollections[pc].consumers {
        if stage.par_dos.contains(&c) && Some(c) != stage.side_input_par_do {
            list.push(Target::Op(Box::new(operator(plan, stage, c)?)));
            continue;
        }
        // One exit per occurrence in the consumer list; a ParDo with side inputs takes
        // all of its exits (main and side inputs) at its first occurrence.
        let take = if crate::fusion::has_side_inputs(&plan.nodes[c]) {
            usize::MAX
        } else {
            1
        };
        let mine: Vec<usize> = stage
            .exits
            .iter()
            .enumerate()
            .filter(|(i, e)| e.pcollection == pc && e.node == c && !placed.contains(i))
            .map(|(i, _)| i)
            .take(take)
            .collect();
        for i in mine {
            placed.push(i);
            list.push(Target::Exit(i));
        }
    }
    Ok(Targets {
        list,
        element_type: plan.pcollections[pc].element_type.clone(),
    })
}

/// Everything outside the operator tree that a stage writes to.
struct Ctx<'a> {
    partials: &'a mut [Option<Partial>],
    out: &'a mut dyn StageOutput,
    options: StageOptions,
}

fn deliver(
    targets: &mut Targets,
    mut batch: Box<dyn AnyBatch>,
    ctx: &mut Ctx<'_>,
    producer: &str,
) -> std::result::Result<(), ExecError> {
    if batch.is_empty() {
        return Ok(());
    }
    if ctx.options.validate {
        if let Err((i, e)) = batch.round_trip() {
            return Err(ExecError::Downstream(Box::new(Error::Coder {
                transform: producer.to_string(),
                element: batch.debug_element(i),
                message: e.to_string(),
            })));
        }
    }
    let n = targets.list.len();
    let mut batch = Some(batch);
    for (i, target) in targets.list.iter_mut().enumerate() {
        let b = if i + 1 == n {
            batch.take().expect("last target takes the batch")
        } else {
            batch
                .as_ref()
                .expect("batch kept for later targets")
                .clone_batch()
        };
        match target {
            Target::Op(op) => op.process(b, ctx)?,
            Target::Exit(e) => {
                let e = *e;
                let r = match &mut ctx.partials[e] {
                    Some(p) => p.add(b, e, ctx.out, ctx.options),
                    None => ctx.out.emit(e, b),
                };
                r.map_err(|e| ExecError::Downstream(Box::new(e)))?;
            }
        }
    }
    Ok(())
}

/// With validation on, accumulators round-trip through their coder as they would
/// crossing a real shuffle.
fn check_accumulators(
    mut batch: Box<dyn AnyBatch>,
    transform: &str,
    options: StageOptions,
) -> Result<Box<dyn AnyBatch>> {
    if options.validate {
        if let Err((i, e)) = batch.round_trip() {
            return Err(Error::Coder {
                transform: format!("{transform} (accumulator)"),
                element: batch.debug_element(i),
                message: e.to_string(),
            });
        }
    }
    Ok(batch)
}

struct OpEmit<'o, 'c, 'a> {
    outputs: &'o mut [Targets],
    ctx: &'c mut Ctx<'a>,
    name: &'o str,
}

impl Emit for OpEmit<'_, '_, '_> {
    fn emit(
        &mut self,
        output: usize,
        batch: Box<dyn AnyBatch>,
    ) -> std::result::Result<(), ExecError> {
        deliver(&mut self.outputs[output], batch, self.ctx, self.name)
    }

    fn empty_batch(&self, output: usize) -> Box<dyn AnyBatch> {
        self.outputs[output].element_type.new_batch()
    }
}

impl Operator {
    fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        ctx: &mut Ctx<'_>,
    ) -> std::result::Result<(), ExecError> {
        let keep = ctx.options.validate;
        self.invoke(ctx, keep, |dofn, ictx| dofn.process(batch, ictx))
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) -> std::result::Result<(), ExecError> {
        self.invoke(ctx, false, |dofn, ictx| dofn.finish_bundle(ictx))
    }

    /// Calls the DoFn with a context whose outputs go to this operator's targets.
    fn invoke(
        &mut self,
        ctx: &mut Ctx<'_>,
        keep_failed_element: bool,
        call: impl FnOnce(
            &mut dyn ErasedDoFn,
            &mut InvokeContext<'_>,
        ) -> std::result::Result<(), ExecError>,
    ) -> std::result::Result<(), ExecError> {
        let Operator {
            name,
            dofn,
            tags,
            metrics,
            outputs,
            sides,
            ..
        } = self;
        let side_inputs: &dyn tidewater::SideInputReader = match sides.as_deref() {
            Some(s) => s,
            None => &tidewater::NoSideInputs,
        };
        let mut emit = OpEmit { outputs, ctx, name };
        let mut ictx = InvokeContext {
            emit: &mut emit,
            metrics,
            tags,
            keep_failed_element,
            side_inputs,
        };
        call(dofn.as_mut(), &mut ictx).map_err(|e| attribute(e, name))
    }
}

fn for_each_op(t: &mut Targets, f: &mut dyn FnMut(&mut Operator)) {
    for target in &mut t.list {
        if let Target::Op(op) = target {
            f(op);
            for o in &mut op.outputs {
                for_each_op(o, f);
            }
        }
    }
}

fn try_each_op(
    t: &mut Targets,
    f: &mut dyn FnMut(&mut Operator) -> std::result::Result<(), ExecError>,
) -> std::result::Result<(), ExecError> {
    for target in &mut t.list {
        if let Target::Op(op) = target {
            f(op).map_err(|e| attribute(e, &op.name))?;
            for o in &mut op.outputs {
                try_each_op(o, f)?;
            }
        }
    }
    Ok(())
}

/// finish_bundle in topological (pre-order) order, so what an upstream step emits from
/// finish_bundle reaches downstream steps before they finish.
fn finish_all(t: &mut Targets, ctx: &mut Ctx<'_>) -> std::result::Result<(), ExecError> {
    for target in &mut t.list {
        if let Target::Op(op) = target {
            op.finish(ctx)?;
            for o in &mut op.outputs {
                finish_all(o, ctx)?;
            }
        }
    }
    Ok(())
}

/// Runs `f`, turning a panic that escaped every user-code guard (a runner bug) into an
/// error naming the stage, so that one worker's panic never goes unreported.
fn guard<T>(stage: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        Err(Error::Internal(format!(
            "the stage fed by '{stage}' panicked: {}",
            panic_text(p)
        )))
    })
}

fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

fn internal_panic(transform: &str, p: Box<dyn std::any::Any + Send>) -> ExecError {
    ExecError::Downstream(Box::new(Error::Internal(format!(
        "'{transform}' panicked: {}",
        panic_text(p)
    ))))
}

/// Names the transform in a user-code error.
pub fn attribute(e: ExecError, transform: &str) -> ExecError {
    match e {
        ExecError::User {
            phase,
            element,
            message,
        } => ExecError::Downstream(Box::new(Error::UserCode {
            transform: transform.to_string(),
            phase: phase.name(),
            element,
            message,
            replay: None,
        })),
        ExecError::Unavailable { phase, message } => {
            ExecError::Downstream(Box::new(Error::Unavailable {
                transform: transform.to_string(),
                phase: phase.name(),
                message,
            }))
        }
        other => other,
    }
}

/// The error inside an [`ExecError`].
pub fn unwrap_downstream(e: ExecError) -> Error {
    match e {
        ExecError::Downstream(e) => *e,
        ExecError::User {
            phase,
            element,
            message,
        } => Error::UserCode {
            transform: "?".into(),
            phase: phase.name(),
            element,
            message,
            replay: None,
        },
        ExecError::Unavailable { phase, message } => Error::Unavailable {
            transform: "?".into(),
            phase: phase.name(),
            message,
        },
    }
}
