//! Keyed operators: the stateful steps an engine hosts after a keyed exchange, behind
//! one interface. An operator takes batches of input, moves forward in event and
//! processing time, emits what fired, tells its output watermark and when it next
//! needs to wake up, and snapshots and restores its state per key group.
//!
//! Two implementations carry the semantics:
//! - [`GroupAlsoByWindow`]: GroupByKey and Combine (whole, or the final half of a
//!   lifted combine) through the reducer, plus Combine.globally's default output;
//! - [`crate::stateful::StatefulRunner`]: a stateful DoFn with its state and timers.
//!
//! Every engine drives them the same way; the direct runner drives one instance per
//! transform, a distributed engine one per worker, each owning a range of key groups.

use crate::reduce::{unexpected_scope, Clocks, Reducer, DROPPED_DUE_TO_LATENESS};
use crate::snapshot::{decode_part, encode_part, Scope};
use crate::translate::{ExecutablePlan, NodeKind};
use crate::windowing::WindowAssigner;
use serde::{Deserialize, Serialize};
use std::ops::Range;
use std::sync::Arc;
use tidewater::exec::{
    key_group_of, AnyBatch, ExecError, GroupingOps, GroupingPhase, StepMetrics, BATCH_SIZE,
};
use tidewater::{Error, Result, Timestamp, WindowFn};

/// A keyed step of a pipeline, as an engine hosts it.
pub trait KeyedOperator: Send {
    /// Adds a batch of input; processing time first moves to `processing_time`, so
    /// that processing-time triggers and timers measure from now.
    fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError>;
    /// Moves time forward: fires due timers and panes, expires windows.
    fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError>;
    /// Whether [`KeyedOperator::advance`] to these times would do anything.
    fn has_due_work(&self, input_watermark: Timestamp, processing_time: Timestamp) -> bool;
    /// The input watermark seen.
    fn input_watermark(&self) -> Timestamp;
    /// The output watermark.
    fn output_watermark(&self) -> Timestamp;
    /// The earliest processing time at which something is due (a processing-time
    /// timer): an idle engine may sleep until then.
    fn next_wakeup(&self) -> Option<Timestamp>;
    /// Everything emitted since the last call.
    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>>;
    /// The keys holding state or timers: a key is forgotten once its last window and
    /// timers are gone, so this follows the live keys, not every key ever seen.
    fn live_keys(&self) -> usize;
    /// Counters since the last call.
    fn take_metrics(&mut self) -> StepMetrics;
    /// The state as snapshot parts: one per key group that holds any (or, for a
    /// delta, that changed), and the instance's clocks as a union part.
    fn snapshot(
        &mut self,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> std::result::Result<KeyedSnapshot, ExecError>;
    /// Adds a snapshot part. Restoring is additive: the parts of key groups written by
    /// several old instances merge into one new instance.
    fn restore(&mut self, scope: Scope, bytes: &[u8]) -> std::result::Result<(), ExecError>;
}

/// What a keyed operator's snapshot holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotKind {
    /// All its state.
    Full,
    /// Only what changed since the instance's previous snapshot, where the operator
    /// can write a delta (see [`crate::delta`]); otherwise all. The caller keeps every
    /// snapshot it takes of the instance, in order, to apply the deltas to.
    Delta,
}

/// A keyed operator's snapshot.
#[derive(Debug)]
pub struct KeyedSnapshot {
    /// The parts.
    pub parts: Vec<(Scope, Vec<u8>)>,
    /// More parts, from a frozen copy of the state that the operator no longer
    /// changes: they come before `parts` once encoded, on whichever thread the engine
    /// picks (see [`crate::checkpoint::keyed_parts_later`]).
    pub later: Option<LaterParts>,
    /// The parts are a delta over the instance's previous snapshot.
    pub delta: bool,
}

/// Encoded snapshot parts, as a keyed operator returns them.
pub type ScopedParts = Vec<(Scope, Vec<u8>)>;

/// Snapshot parts still to be encoded, from state frozen when the snapshot was taken.
pub struct LaterParts(Box<dyn FnOnce() -> std::result::Result<ScopedParts, ExecError> + Send>);

impl LaterParts {
    /// Parts that `encode` makes from the state it holds.
    pub fn new(
        encode: impl FnOnce() -> std::result::Result<Vec<(Scope, Vec<u8>)>, ExecError> + Send + 'static,
    ) -> Self {
        LaterParts(Box::new(encode))
    }

    /// Encodes the parts.
    pub fn encode(self) -> std::result::Result<ScopedParts, ExecError> {
        (self.0)()
    }
}

impl std::fmt::Debug for LaterParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaterParts")
    }
}

/// The key groups an operator instance owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyGroups {
    /// The total number of key groups.
    pub max: u32,
    /// This instance's range.
    pub owned: Range<u32>,
}

impl KeyGroups {
    /// All key groups, for a single instance.
    pub fn all(max: u32) -> Self {
        KeyGroups { max, owned: 0..max }
    }
}

/// Builds the keyed operator of plan node `node` (a grouping or a stateful ParDo).
/// `lifted`: the node's combine was lifted, so its input is accumulators.
pub fn instantiate(
    plan: &ExecutablePlan,
    node: usize,
    lifted: bool,
    key_groups: &KeyGroups,
) -> Result<Box<dyn KeyedOperator>> {
    let n = &plan.nodes[node];
    let windowing = plan.pcollections[n.inputs[0]].windowing.clone();
    match &n.kind {
        NodeKind::Grouping { ops } => {
            let assigner = WindowAssigner::new(&windowing.window_fn, &n.name)?;
            let phase = if lifted {
                GroupingPhase::Final
            } else {
                GroupingPhase::Full
            };
            // Combine.globally's single key is `()`, whose encoding is empty: the
            // instance owning its key group emits the default.
            let owns_default = key_groups
                .owned
                .contains(&key_group_of(&[], key_groups.max));
            Ok(Box::new(GroupAlsoByWindow {
                global: windowing.window_fn == WindowFn::Global,
                reducer: Reducer::new(windowing, assigner, ops.new_reduce_state(phase)),
                ops: ops.clone(),
                owns_default,
                flags: DefaultFlags::default(),
                metrics: StepMetrics::default(),
                output: Vec::new(),
            }))
        }
        NodeKind::Stateful { .. } => Ok(Box::new(crate::stateful::StatefulRunner::new(
            n.instantiate_stateful()?,
            Box::new(crate::state::InMemoryStateBackend::default()),
            windowing.allowed_lateness_ms,
        ))),
        _ => Err(Error::Internal(format!(
            "'{}' is not a keyed transform",
            n.name
        ))),
    }
}

/// How the input of keyed node `node` (a grouping, or a stateful ParDo) is hashed and
/// split by key for the exchange in front of its operator; `lifted`: the exchange
/// carries the accumulators of a lifted combine.
pub fn key_ops(
    plan: &ExecutablePlan,
    node: usize,
    lifted: bool,
) -> Result<Arc<dyn tidewater::exec::KeyOps>> {
    let n = &plan.nodes[node];
    match &n.kind {
        NodeKind::Grouping { ops } => Ok(ops.key_ops(if lifted {
            GroupingPhase::Final
        } else {
            GroupingPhase::Full
        })),
        NodeKind::Stateful { .. } => Ok(n.instantiate_stateful()?.key_ops()),
        _ => Err(Error::Internal(format!(
            "'{}' is not a keyed transform",
            n.name
        ))),
    }
}

/// GroupByKey and Combine: the reducer, and Combine.globally's default output.
pub struct GroupAlsoByWindow {
    reducer: Reducer,
    ops: Arc<dyn GroupingOps>,
    /// The input is in the global window (where Combine.globally has a default).
    global: bool,
    /// This instance owns the key group of Combine.globally's key.
    owns_default: bool,
    flags: DefaultFlags,
    metrics: StepMetrics,
    output: Vec<Box<dyn AnyBatch>>,
}

/// Whether any input arrived, and whether Combine.globally's default went out.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct DefaultFlags {
    received: bool,
    defaulted: bool,
}

impl KeyedOperator for GroupAlsoByWindow {
    fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        self.flags.received = true;
        self.reducer.set_processing_time(processing_time);
        for chunk in batch.into_chunks(&mut std::iter::repeat(BATCH_SIZE)) {
            self.reducer.process(chunk, &mut self.metrics)?;
        }
        self.collect();
        Ok(())
    }

    fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        self.reducer.advance(input_watermark, processing_time)?;
        self.collect();
        // Combine.globally of an empty input outputs the combine of nothing, once the
        // input is complete (Beam's `insertDefault`).
        if input_watermark == Timestamp::MAX
            && self.global
            && self.owns_default
            && !self.flags.received
            && !self.flags.defaulted
        {
            self.flags.defaulted = true;
            if let Some(default) = self.ops.empty_output()? {
                self.output.push(default);
            }
        }
        Ok(())
    }

    fn has_due_work(&self, input_watermark: Timestamp, processing_time: Timestamp) -> bool {
        input_watermark > self.reducer.input_watermark()
            || self
                .reducer
                .has_due_timers(input_watermark, processing_time)
    }

    fn input_watermark(&self) -> Timestamp {
        self.reducer.input_watermark()
    }

    fn output_watermark(&self) -> Timestamp {
        self.reducer.output_watermark()
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        self.reducer.next_processing_timer()
    }

    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>> {
        std::mem::take(&mut self.output)
    }

    fn live_keys(&self) -> usize {
        self.reducer.live_keys()
    }

    fn take_metrics(&mut self) -> StepMetrics {
        std::mem::take(&mut self.metrics)
    }

    fn snapshot(
        &mut self,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> std::result::Result<KeyedSnapshot, ExecError> {
        let mut snapshot = self.reducer.snapshot_key_groups(max_key_groups, kind)?;
        snapshot.parts.push((
            Scope::Union(instance),
            encode_part(&(self.reducer.clocks(), self.flags)),
        ));
        Ok(snapshot)
    }

    fn restore(&mut self, scope: Scope, bytes: &[u8]) -> std::result::Result<(), ExecError> {
        match scope {
            Scope::KeyGroup(_) => self.reducer.restore_key_group(bytes),
            Scope::Union(_) => {
                let (clocks, flags): (Clocks, DefaultFlags) =
                    decode_part(bytes, "grouping clocks")?;
                self.reducer.restore_clocks(clocks);
                // Whether input arrived or the default went out anywhere.
                self.flags.received |= flags.received;
                self.flags.defaulted |= flags.defaulted;
                Ok(())
            }
            other => Err(unexpected_scope(other, "a grouping")),
        }
    }
}

impl GroupAlsoByWindow {
    fn collect(&mut self) {
        let out = self.reducer.take_output();
        if !out.is_empty() {
            self.output.push(out);
        }
    }
}

impl KeyedOperator for crate::stateful::StatefulRunner {
    fn process(
        &mut self,
        batch: Box<dyn AnyBatch>,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        self.set_processing_time(processing_time);
        for chunk in batch.into_chunks(&mut std::iter::repeat(BATCH_SIZE)) {
            let out = crate::stateful::StatefulRunner::process(self, chunk)?;
            self.push_output(out);
        }
        Ok(())
    }

    fn advance(
        &mut self,
        input_watermark: Timestamp,
        processing_time: Timestamp,
    ) -> std::result::Result<(), ExecError> {
        let mut outputs = Vec::new();
        crate::stateful::StatefulRunner::advance(
            self,
            input_watermark,
            processing_time,
            &mut outputs,
        )?;
        for out in outputs {
            self.push_output(out);
        }
        Ok(())
    }

    fn has_due_work(&self, input_watermark: Timestamp, processing_time: Timestamp) -> bool {
        input_watermark > crate::stateful::StatefulRunner::input_watermark(self)
            || crate::stateful::StatefulRunner::has_due_work(self, input_watermark, processing_time)
    }

    fn input_watermark(&self) -> Timestamp {
        crate::stateful::StatefulRunner::input_watermark(self)
    }

    fn output_watermark(&self) -> Timestamp {
        crate::stateful::StatefulRunner::output_watermark(self)
    }

    fn next_wakeup(&self) -> Option<Timestamp> {
        self.next_processing_timer()
    }

    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>> {
        self.take_outputs()
    }

    fn live_keys(&self) -> usize {
        crate::stateful::StatefulRunner::live_keys(self)
    }

    fn take_metrics(&mut self) -> StepMetrics {
        let mut m = StepMetrics::default();
        let dropped = self.take_dropped();
        if dropped > 0 {
            m.inc_counter(DROPPED_DUE_TO_LATENESS, dropped);
        }
        m
    }

    fn snapshot(
        &mut self,
        max_key_groups: u32,
        instance: u32,
        _kind: SnapshotKind,
    ) -> std::result::Result<KeyedSnapshot, ExecError> {
        // Its key groups are written whole every time.
        let (later, parts) =
            crate::stateful::StatefulRunner::snapshot(self, max_key_groups, instance)?;
        Ok(KeyedSnapshot {
            parts,
            later: Some(later),
            delta: false,
        })
    }

    fn restore(&mut self, scope: Scope, bytes: &[u8]) -> std::result::Result<(), ExecError> {
        crate::stateful::StatefulRunner::restore(self, scope, bytes)
    }
}
