use super::{AnyBatch, ExecError};
use crate::{BoundedWindow, PaneInfo, Timestamp};

/// A key's number in a [`ReduceFnState`], given by the encoding of the key.
pub type KeyId = u32;

/// What [`ReduceFnState::add`] asks of each input: (its key's number, its encoded
/// key, its window, its timestamp) to what to do with it.
pub type AcceptFn<'a> = dyn FnMut(KeyId, &[u8], BoundedWindow, Timestamp) -> Accept + 'a;

/// What [`ReduceFnState::add`] does with an input.
#[derive(Debug, PartialEq, Eq)]
pub enum Accept {
    /// Drops it (late, or its window closed).
    Drop,
    /// Adds it to its window's contents.
    Take,
    /// Sets the window's contents from these bytes (as
    /// [`ReduceFnState::encode_contents`] wrote them), then adds it.
    Restore(Vec<u8>),
}

/// What a grouping keeps per key and window between firings: buffered values (for a
/// GroupByKey) or an accumulator (for a Combine). Typed; the runner's reducer in
/// `tidewater-runners-core` decides when to fire, what pane and timestamp a firing gets,
/// and how windows merge, through this interface.
pub trait ReduceFnState: Send {
    /// Adds a batch of inputs. For each (element, window) `accept(key, encoded key,
    /// window, timestamp)` is asked first: an input it drops (late data) is not stored;
    /// one it takes with [`Accept::Restore`] is added to the window's contents as
    /// [`ReduceFnState::encode_contents`] wrote them (a window paged back in from a
    /// store, whose contents this state does not hold).
    fn add(&mut self, batch: Box<dyn AnyBatch>, accept: &mut AcceptFn<'_>)
    -> Result<(), ExecError>;
    /// Moves the contents of the `from` windows of `key` into window `into`.
    fn merge(
        &mut self,
        key: KeyId,
        from: &[BoundedWindow],
        into: BoundedWindow,
    ) -> Result<(), ExecError>;
    /// Whether (key, window) holds anything.
    fn is_empty(&self, key: KeyId, window: BoundedWindow) -> bool;
    /// Appends the pane's output for (key, window) to the output; with `clear` the
    /// contents are then dropped (discarding mode).
    fn emit(
        &mut self,
        key: KeyId,
        window: BoundedWindow,
        timestamp: Timestamp,
        pane: PaneInfo,
        clear: bool,
    ) -> Result<(), ExecError>;
    /// Drops (key, window).
    fn clear(&mut self, key: KeyId, window: BoundedWindow);
    /// Everything emitted since the last call, in batches (a watermark that passes
    /// many windows fires them all: their panes do not sit in one batch).
    fn take_output(&mut self) -> Vec<Box<dyn AnyBatch>>;
    /// The key's debug form, for error messages.
    fn key_debug(&self, key: KeyId) -> String;
    /// The canonical encoding of the key (see [`super::encode_key`]): what key groups
    /// and snapshots are computed from.
    fn key_bytes(&self, key: KeyId) -> &[u8];
    /// The encoded contents of (key, window) (buffered values or accumulator), if any:
    /// what a snapshot keeps.
    fn encode_contents(
        &self,
        key: KeyId,
        window: BoundedWindow,
    ) -> Result<Option<Vec<u8>>, ExecError>;
    /// The contents of (key, window) as JSON (buffered values or accumulator), if any
    /// and if they have a JSON form: what an offline reader of a savepoint shows.
    fn contents_json(&self, key: KeyId, window: BoundedWindow) -> Option<serde_json::Value>;
    /// Forgets `key`, which holds no window any more: its number may be reused, so a
    /// long run keeps only the keys that are alive.
    fn forget_key(&mut self, key: KeyId);
    /// The keys known (not forgotten).
    fn live_keys(&self) -> usize;
    /// The number of the key with canonical encoding `key` (decoded and added if new).
    fn intern_key(&mut self, key: &[u8]) -> Result<KeyId, ExecError>;
    /// Sets the contents of (key, window) from what [`ReduceFnState::encode_contents`]
    /// wrote: restoring a snapshot.
    fn restore_contents(
        &mut self,
        key: KeyId,
        window: BoundedWindow,
        contents: &[u8],
    ) -> Result<(), ExecError>;
}
