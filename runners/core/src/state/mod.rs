//! State backends: where stateful DoFns' cells live, runner-neutral and snapshottable.

mod in_memory;

pub use in_memory::InMemoryStateBackend;
pub use tidewater::exec::StateCells;
use tidewater::BoundedWindow;

/// The cells of stateful transforms, addressed by (encoded key, window, name), with
/// values as encoded bytes. A backend can snapshot everything to bytes and restore it:
/// the fault-tolerant runners checkpoint through this, and a snapshot taken by one
/// runner restores in another.
pub trait StateBackend: StateCells + Send {
    /// Drops every cell of (key, window): window expiry.
    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow);
    /// Number of cells held.
    fn len(&self) -> usize;
    /// No cells.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Everything, as bytes.
    fn snapshot(&self) -> Vec<u8>;
    /// Replaces everything with a snapshot; a corrupt snapshot is an error, never a panic.
    fn restore(&mut self, bytes: &[u8]) -> Result<(), String>;
}
