use super::{AnyBatch, ExecError};

/// Which half of a lifted combine a table computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupingPhase {
    /// The whole grouping: inputs in, grouped or combined outputs out (GroupByKey, or a
    /// combine that is not lifted).
    Full,
    /// Before the shuffle: inputs in, one accumulator per key and window out.
    Partial,
    /// After the shuffle: accumulators in, outputs out.
    Final,
}

/// The typed operations of a GroupByKey or Combine, behind a name in the plan.
pub trait GroupingOps: Send + Sync {
    /// Name of the input element type.
    fn input_type(&self) -> &'static str;
    /// Name of the output element type.
    fn output_type(&self) -> &'static str;
    /// A table for one phase.
    fn new_table(&self, phase: GroupingPhase) -> Box<dyn GroupingTable>;
    /// The per-(key, window) state the reducer fires panes from: in the `Full` phase it
    /// takes inputs, in the `Final` phase (after lifting) accumulators.
    fn new_reduce_state(&self, phase: GroupingPhase) -> Box<dyn super::ReduceFnState>;
    /// Whether the transform can be split into partial and final phases (a combine).
    fn liftable(&self) -> bool;
    /// Key hashing and splitting of the input of `phase` (`Final`: the accumulators a
    /// lifted combine exchanges), for the keyed exchange in front of the operator.
    fn key_ops(&self, phase: GroupingPhase) -> std::sync::Arc<dyn super::KeyOps>;
    /// What to output when the input is empty (Combine.globally's default value in
    /// the global window), if anything.
    fn empty_output(&self) -> Result<Option<Box<dyn AnyBatch>>, ExecError>;
}

/// Groups (or combines) elements by the encoding of their key and window.
pub trait GroupingTable: Send {
    /// Adds a batch of inputs (or accumulators, in the final phase).
    fn add(&mut self, batch: Box<dyn AnyBatch>) -> Result<(), ExecError>;
    /// Number of distinct (key, window) groups held.
    fn groups(&self) -> usize;
    /// Emits one output per group and empties the table.
    fn finish(&mut self) -> Result<Box<dyn AnyBatch>, ExecError>;
    /// Emits one output per group whose window ends before `watermark` (its max
    /// timestamp is earlier) and keeps the others: what must go out before a watermark
    /// that passes those windows. A table that cannot tell emits every group.
    fn finish_ended_before(
        &mut self,
        watermark: crate::Timestamp,
    ) -> Result<Box<dyn AnyBatch>, ExecError> {
        let _ = watermark;
        self.finish()
    }
    /// What [`GroupingTable::finish_ended_before`] emits (everything at
    /// [`Timestamp::MAX`](crate::Timestamp::MAX)), handed to `emit` in batches of at
    /// most `chunk` outputs where the table can: the groups of a whole micro-batch
    /// then never sit in one batch, with the table, at once.
    fn finish_in_batches(
        &mut self,
        watermark: crate::Timestamp,
        chunk: usize,
        emit: &mut dyn FnMut(Box<dyn AnyBatch>) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let _ = chunk;
        let batch = if watermark == crate::Timestamp::MAX {
            self.finish()?
        } else {
            self.finish_ended_before(watermark)?
        };
        if batch.is_empty() {
            return Ok(());
        }
        emit(batch)
    }
}
