//! State backends: where stateful DoFns' cells live, runner-neutral and snapshottable.

mod in_memory;

pub use in_memory::InMemoryStateBackend;
use tidewater::BoundedWindow;

/// The cells of stateful transforms, addressed by (encoded key, window, name), with
/// values as encoded bytes. A backend can snapshot everything to bytes and restore it:
/// the fault-tolerant runners checkpoint through this, and a snapshot taken by one
/// runner restores in another.
pub trait StateBackend: Send {
    /// A value cell.
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<&[u8]>;
    /// Writes a value cell.
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: Vec<u8>);
    /// A bag cell's entries in insertion order.
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<&[u8]>;
    /// Appends to a bag cell.
    fn bag_add(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: Vec<u8>);
    /// An entry of a map cell.
    fn map_get(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
    ) -> Option<&[u8]>;
    /// Writes an entry of a map cell; whether it was new.
    fn map_put(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: Vec<u8>,
        value: Vec<u8>,
    ) -> bool;
    /// Removes an entry of a map cell.
    fn map_remove(&mut self, key: &[u8], window: &BoundedWindow, name: &str, entry: &[u8]);
    /// A map cell's entries ordered by encoded entry key.
    fn map_entries(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<(&[u8], &[u8])>;
    /// Drops a cell.
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str);
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
