//! A snapshot of the embedded store: its consistent view, read on the writer thread
//! window by window, and the decoding of cell addresses.

use super::store::io_error;
use crate::state::{split_window_id, EncodedCells, FrozenState, FrozenWindow};
use std::path::PathBuf;
use tidewater::BoundedWindow;

/// The cells as of [`StateBackend::freeze`]: a view of the store.
pub(super) struct Frozen {
    pub(super) snapshot: fjall::Snapshot,
    pub(super) keyspace: fjall::Keyspace,
    pub(super) dir: PathBuf,
    pub(super) max_key_groups: u32,
    /// Every name a cell was written or restored under: a window's cells are read by a
    /// point read per name (a filter in front of each file), not a scan of its prefix
    /// (an iterator over every file).
    pub(super) names: Vec<Box<str>>,
}

/// The (key, window) of a window's address (a cell's, up to the name).
pub(super) fn decode_window_prefix(a: &[u8]) -> Option<(&[u8], BoundedWindow)> {
    let (key, window, rest) = split_address(a)?;
    rest.is_empty().then_some((key, window))
}

/// An address (`[key group: u32 BE]` then a [`crate::state::window_id`]) split into
/// its key, its window and the rest (a cell's name).
pub(super) fn split_address(a: &[u8]) -> Option<(&[u8], BoundedWindow, &[u8])> {
    split_window_id(a.get(4..)?)
}

impl Frozen {
    /// The cells of entries `kvs` (address, cell), grouped by window in address order:
    /// each window's cells come one after another, by name.
    fn read(
        &self,
        kvs: impl Iterator<Item = fjall::Guard>,
        mut f: impl FnMut(&[u8], BoundedWindow, String, Vec<u8>) -> Result<(), String>,
    ) -> Result<(), String> {
        for kv in kvs {
            let (address, bytes) = kv
                .into_inner()
                .map_err(|e| io_error("cannot read cells for a snapshot", &self.dir, e))?;
            let (key, window, name) = split_address(&address)
                .and_then(|(k, w, n)| Some((k, w, std::str::from_utf8(n).ok()?)))
                .ok_or_else(|| {
                    format!("a cell's address in {} does not decode", self.dir.display())
                })?;
            f(key, window, name.to_string(), bytes.to_vec())?;
        }
        Ok(())
    }
}

impl FrozenState for Frozen {
    fn for_each_window(
        self: Box<Self>,
        max_key_groups: u32,
        f: &mut dyn FnMut(FrozenWindow) -> Result<(), String>,
    ) -> Result<(), String> {
        use fjall::Readable;
        debug_assert_eq!(max_key_groups, self.max_key_groups);
        // The store's order is the snapshot's: a window's cells come one after another.
        let mut current: Option<FrozenWindow> = None;
        self.read(
            self.snapshot.iter(&self.keyspace),
            |key, window, name, cell| {
                if let Some(w) = &mut current {
                    if w.key == key && w.window == window {
                        w.cells.push((name, cell));
                        return Ok(());
                    }
                }
                let next = FrozenWindow::new(key, &window, vec![(name, cell)], self.max_key_groups);
                match current.replace(next) {
                    Some(done) => f(done),
                    None => Ok(()),
                }
            },
        )?;
        current.map_or(Ok(()), f)
    }

    fn window(&self, key: &[u8], window: &BoundedWindow) -> Result<EncodedCells, String> {
        use fjall::Readable;
        let mut address = Vec::new();
        super::window_prefix(self.max_key_groups, key, window, &mut address);
        let prefix = address.len();
        let mut cells = Vec::new();
        for name in &self.names {
            address.truncate(prefix);
            address.extend_from_slice(name.as_bytes());
            let cell = self
                .snapshot
                .get(&self.keyspace, &address)
                .map_err(|e| io_error("cannot read a cell for a snapshot", &self.dir, e))?;
            if let Some(cell) = cell {
                cells.push((name.to_string(), cell.to_vec()));
            }
        }
        cells.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(cells)
    }
}
