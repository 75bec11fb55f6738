//! What keyed operators' snapshots are made of: their kind (full or delta), their
//! parts (some encoded later, off the operator's thread), the clocks every operator
//! keeps, and the error for a part of a scope an operator does not have.

use crate::snapshot::Scope;
use serde::{Deserialize, Serialize};
use tidewater::exec::ExecError;
use tidewater::Timestamp;

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

/// Where parts go as they are encoded, one at a time: a snapshot file being written
/// (a large state is never encoded whole in memory). An error stops the encoding.
pub type PartSink<'a> = dyn FnMut(Scope, Vec<u8>) -> std::result::Result<(), String> + 'a;

type Encode = dyn FnOnce(&mut PartSink<'_>) -> std::result::Result<(), ExecError> + Send;

/// Snapshot parts still to be encoded, from state frozen when the snapshot was taken.
pub struct LaterParts(Box<Encode>);

impl LaterParts {
    /// Parts that `encode` makes from the state it holds, handing each to its sink.
    pub fn new(
        encode: impl FnOnce(&mut PartSink<'_>) -> std::result::Result<(), ExecError> + Send + 'static,
    ) -> Self {
        LaterParts(Box::new(encode))
    }

    /// Encodes the parts, each to `sink` as soon as it is encoded.
    pub fn encode_each(self, sink: &mut PartSink<'_>) -> std::result::Result<(), ExecError> {
        (self.0)(sink)
    }

    /// Encodes the parts, all of them.
    pub fn encode(self) -> std::result::Result<ScopedParts, ExecError> {
        let mut parts = Vec::new();
        self.encode_each(&mut |scope, bytes| {
            parts.push((scope, bytes));
            Ok(())
        })?;
        Ok(parts)
    }
}

impl std::fmt::Debug for LaterParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LaterParts")
    }
}

/// An operator's clocks in a snapshot.
#[derive(Serialize, Deserialize)]
pub(crate) struct Clocks {
    pub(crate) input_watermark: Timestamp,
    pub(crate) output_watermark: Timestamp,
    pub(crate) processing_time: Timestamp,
}

impl Clocks {
    /// Restores clocks from a union part: the first part sets them; every later one
    /// (from another old instance) lowers the watermarks to the earliest and raises
    /// processing time to the latest.
    pub(crate) fn restore(
        self,
        restored: &mut bool,
        input_watermark: &mut Timestamp,
        output_watermark: &mut Timestamp,
        processing_time: &mut Timestamp,
    ) {
        if std::mem::replace(restored, true) {
            *input_watermark = (*input_watermark).min(self.input_watermark);
            *output_watermark = (*output_watermark).min(self.output_watermark);
            *processing_time = (*processing_time).max(self.processing_time);
        } else {
            *input_watermark = self.input_watermark;
            *output_watermark = self.output_watermark;
            *processing_time = self.processing_time;
        }
    }
}

pub(crate) fn unexpected_scope(scope: Scope, of: &str) -> ExecError {
    ExecError::Downstream(Box::new(tidewater::Error::Checkpoint {
        message: format!("{of} has no state of scope {scope:?}"),
    }))
}
