use super::{AnyBatch, ExecError};
use crate::{BoundedWindow, Timestamp};
use std::borrow::Cow;

/// The time domain of a timer.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum TimeDomain {
    /// Fires when the input watermark passes it.
    EventTime,
    /// Fires when processing time passes it.
    ProcessingTime,
}

/// The entries of a map cell: (encoded entry key, encoded value) pairs.
pub type MapEntries<'a> = Vec<(Cow<'a, [u8]>, Cow<'a, [u8]>)>;

/// Named state cells addressed by (encoded key, window, name), with values as encoded
/// bytes: what a stateful DoFn's state is made of, whatever backend holds it. Writes
/// take borrowed bytes, so that a backend can overwrite a cell in place and the caller
/// can encode into a buffer it reuses. Reads return [`Cow`]: a backend in memory lends
/// its bytes, one over a store (whose reads take `&self`) may hand over a copy it read.
pub trait StateCells {
    /// A value cell.
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<Cow<'_, [u8]>>;
    /// Writes a value cell.
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]);
    /// The entries of a bag cell, in insertion order.
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<Cow<'_, [u8]>>;
    /// Appends to a bag cell.
    fn bag_add(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]);
    /// An entry of a map cell (sets are maps to nothing).
    fn map_get(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
    ) -> Option<Cow<'_, [u8]>>;
    /// Writes an entry of a map cell; returns whether it was new.
    fn map_put(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
        value: &[u8],
    ) -> bool;
    /// Removes an entry of a map cell.
    fn map_remove(&mut self, key: &[u8], window: &BoundedWindow, name: &str, entry: &[u8]);
    /// The entries of a map cell, ordered by encoded entry key.
    fn map_entries(&self, key: &[u8], window: &BoundedWindow, name: &str) -> MapEntries<'_>;
    /// Drops a cell of any kind.
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str);
}

/// What a stateful DoFn call sees: its cells plus timers and the clocks. Implemented by
/// the runner, over its state backend.
pub trait StateAccess: StateCells {
    /// Sets (or resets) timer `name`; the error says why it cannot be set (its window
    /// has expired).
    fn set_timer(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        domain: TimeDomain,
        at: Timestamp,
        output: Timestamp,
    ) -> Result<(), String>;
    /// Clears timer `name`.
    fn clear_timer(&mut self, key: &[u8], window: &BoundedWindow, name: &str, domain: TimeDomain);
    /// Current processing time.
    fn processing_time(&self) -> Timestamp;
    /// Current input watermark.
    fn input_watermark(&self) -> Timestamp;
    /// Whether `window` has expired: its state is gone and input for it is dropped.
    fn is_expired(&self, window: &BoundedWindow) -> bool;
    /// Counts an input dropped because its window expired.
    fn drop_late(&mut self, timestamp: Timestamp, window: &BoundedWindow);
}

/// A timer that fired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FiredTimer {
    /// The encoded key.
    pub key: Vec<u8>,
    /// The window.
    pub window: BoundedWindow,
    /// The timer's name.
    pub name: String,
    /// Its domain.
    pub domain: TimeDomain,
    /// When it was set to fire.
    pub at: Timestamp,
    /// The timestamp of its outputs.
    pub output: Timestamp,
}

/// A stateful DoFn behind the erased interface a runner drives.
pub trait ErasedStatefulDoFn: Send {
    /// Name of the input element type (`(K, V)`).
    fn input_type(&self) -> &'static str;
    /// Name of the output element type.
    fn output_type(&self) -> &'static str;
    /// Key hashing and splitting of the `(K, V)` input, for the keyed exchange.
    fn key_ops(&self) -> std::sync::Arc<dyn super::KeyOps>;
    /// Processes a batch of `(K, V)` elements; returns the outputs.
    fn process(
        &mut self,
        input: Box<dyn AnyBatch>,
        state: &mut dyn StateAccess,
    ) -> Result<Box<dyn AnyBatch>, ExecError>;
    /// Runs a fired timer; returns the outputs.
    fn on_timer(
        &mut self,
        timer: &FiredTimer,
        state: &mut dyn StateAccess,
    ) -> Result<Box<dyn AnyBatch>, ExecError>;
    /// An encoded key as its type's `Debug` shows it (for the job's status).
    fn key_debug(&self, key: &[u8]) -> String;
    /// Name of the key type.
    fn key_type(&self) -> &'static str;
    /// The state cells the DoFn declares ([`crate::StatefulDoFn::state_cells`]).
    fn state_cells(&self) -> Vec<crate::StateCell>;
}
