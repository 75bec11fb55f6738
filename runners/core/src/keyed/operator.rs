//! The interface every keyed operator offers an engine, and the key groups an instance
//! owns.

use crate::keyed::snapshot::{KeyedSnapshot, SnapshotKind};
use crate::snapshot::Scope;
use std::ops::Range;
use tidewater::exec::{AnyBatch, ExecError, StepMetrics};
use tidewater::Timestamp;

pub use crate::timers::ADVANCE_SLICE;

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
    /// Its windows and timers, for "why hasn't my window fired?"; `max_key_groups`
    /// places keys in their key groups. `None` for an operator with nothing to report.
    fn report(&mut self, _max_key_groups: u32) -> Option<crate::keyed::reduce::WindowReport> {
        None
    }
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
    /// The table files a restored checkpoint's [`Scope::Files`] parts name are in
    /// `dir` (where the checkpoint was read from); an operator that writes none
    /// ignores it.
    fn read_tables_in(&mut self, _dir: crate::state::tables::TableDir) {}
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
