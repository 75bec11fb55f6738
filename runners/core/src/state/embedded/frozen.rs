//! A snapshot of the embedded store: its consistent view, read on the writer thread
//! into parts of the in-memory backend's format, and the decoding of cell addresses.

use super::store::io_error;
use crate::state::in_memory::{encode_cells, Cell, CellIdRef};
use crate::state::FrozenState;
use std::collections::BTreeMap;
use std::path::PathBuf;
use tidewater::BoundedWindow;

/// The cells as of [`StateBackend::freeze`]: a view of the store.
pub(super) struct Frozen {
    pub(super) snapshot: fjall::Snapshot,
    pub(super) keyspace: fjall::Keyspace,
    pub(super) dir: PathBuf,
}

/// A cell's address decoded: (key, window, name).
fn decode_address(a: &[u8]) -> Option<(&[u8], BoundedWindow, &str)> {
    let (key, window, rest) = split_address(a)?;
    Some((key, window, std::str::from_utf8(rest).ok()?))
}

/// The (key, window) of a window's address (a cell's, up to the name).
pub(super) fn decode_window_prefix(a: &[u8]) -> Option<(&[u8], BoundedWindow)> {
    let (key, window, rest) = split_address(a)?;
    rest.is_empty().then_some((key, window))
}

/// An address split into its key, its window and the rest (a cell's name).
pub(super) fn split_address(a: &[u8]) -> Option<(&[u8], BoundedWindow, &[u8])> {
    let len = u32::from_be_bytes(a.get(4..8)?.try_into().ok()?) as usize;
    let key = a.get(8..8 + len)?;
    let (window, rest) = postcard::take_from_bytes::<BoundedWindow>(a.get(8 + len..)?).ok()?;
    Some((key, window, rest))
}

impl FrozenState for Frozen {
    fn parts_by(
        self: Box<Self>,
        group_of: &mut dyn FnMut(&[u8]) -> u32,
    ) -> Result<BTreeMap<u32, Vec<u8>>, String> {
        use fjall::Readable;
        // Decoded first, then borrowed by the parts' encoding.
        let mut cells: Vec<(Vec<u8>, BoundedWindow, String, Cell)> = Vec::new();
        for kv in self.snapshot.iter(&self.keyspace) {
            let (address, bytes) = kv
                .into_inner()
                .map_err(|e| io_error("cannot read cells for a snapshot", &self.dir, e))?;
            let (key, window, name) = decode_address(&address).ok_or_else(|| {
                format!("a cell's address in {} does not decode", self.dir.display())
            })?;
            let cell: Cell = postcard::from_bytes(&bytes)
                .map_err(|e| io_error("a cell does not decode", &self.dir, e))?;
            cells.push((key.to_vec(), window, name.to_string(), cell));
        }
        let mut groups: BTreeMap<u32, Vec<(CellIdRef<'_>, &Cell)>> = BTreeMap::new();
        for (key, window, name, cell) in &cells {
            groups
                .entry(group_of(key))
                .or_default()
                .push((CellIdRef { key, window, name }, cell));
        }
        Ok(groups
            .into_iter()
            .map(|(g, mut part)| (g, encode_cells(&mut part)))
            .collect())
    }
}
