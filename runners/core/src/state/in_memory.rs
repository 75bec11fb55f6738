use super::StateBackend;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::exec::StateCells;
use tidewater::BoundedWindow;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct CellId {
    key: Vec<u8>,
    window: BoundedWindow,
    name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Cell {
    Value(Vec<u8>),
    Bag(Vec<Vec<u8>>),
    Map(BTreeMap<Vec<u8>, Vec<u8>>),
}

/// Cells in an ordered map in memory; a snapshot part is the postcard encoding of the
/// cells of one group (the snapshot format adds checksums).
///
/// ```
/// use tidewater::BoundedWindow;
/// use tidewater_runners_core::state::{InMemoryStateBackend, StateBackend, StateCells};
/// let mut s = InMemoryStateBackend::default();
/// s.put(b"k", &BoundedWindow::Global, "count", &[3]);
/// s.put(b"l", &BoundedWindow::Global, "count", &[4]);
/// let parts = s.snapshot_by(&mut |key| u32::from(key[0]));
/// assert_eq!(parts.len(), 2);
/// let mut t = InMemoryStateBackend::default();
/// for part in parts.values() {
///     t.restore_add(part).unwrap();
/// }
/// assert_eq!(t.get(b"k", &BoundedWindow::Global, "count"), Some(&[3u8][..]));
/// assert_eq!(t.get(b"l", &BoundedWindow::Global, "count"), Some(&[4u8][..]));
/// let part = &parts[&u32::from(b'k')];
/// assert!(t.restore_add(&part[..part.len() - 1]).is_err());
/// ```
#[derive(Default)]
pub struct InMemoryStateBackend {
    cells: BTreeMap<CellId, Cell>,
}

fn id(key: &[u8], window: &BoundedWindow, name: &str) -> CellId {
    CellId {
        key: key.to_vec(),
        window: *window,
        name: name.to_string(),
    }
}

impl StateCells for InMemoryStateBackend {
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<&[u8]> {
        match self.cells.get(&id(key, window, name)) {
            Some(Cell::Value(v)) => Some(v),
            _ => None,
        }
    }
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        self.cells
            .insert(id(key, window, name), Cell::Value(value.to_vec()));
    }
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<&[u8]> {
        match self.cells.get(&id(key, window, name)) {
            Some(Cell::Bag(b)) => b.iter().map(Vec::as_slice).collect(),
            _ => Vec::new(),
        }
    }
    fn bag_add(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        let value = value.to_vec();
        match self
            .cells
            .entry(id(key, window, name))
            .or_insert_with(|| Cell::Bag(Vec::new()))
        {
            Cell::Bag(b) => b.push(value),
            other => *other = Cell::Bag(vec![value]),
        }
    }
    fn map_get(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
    ) -> Option<&[u8]> {
        match self.cells.get(&id(key, window, name)) {
            Some(Cell::Map(m)) => m.get(entry).map(Vec::as_slice),
            _ => None,
        }
    }
    fn map_put(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
        value: &[u8],
    ) -> bool {
        let (entry, value) = (entry.to_vec(), value.to_vec());
        match self
            .cells
            .entry(id(key, window, name))
            .or_insert_with(|| Cell::Map(BTreeMap::new()))
        {
            Cell::Map(m) => m.insert(entry, value).is_none(),
            other => {
                *other = Cell::Map(BTreeMap::from([(entry, value)]));
                true
            }
        }
    }
    fn map_remove(&mut self, key: &[u8], window: &BoundedWindow, name: &str, entry: &[u8]) {
        if let Some(Cell::Map(m)) = self.cells.get_mut(&id(key, window, name)) {
            m.remove(entry);
        }
    }
    fn map_entries(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<(&[u8], &[u8])> {
        match self.cells.get(&id(key, window, name)) {
            Some(Cell::Map(m)) => m
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_slice()))
                .collect(),
            _ => Vec::new(),
        }
    }
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str) {
        self.cells.remove(&id(key, window, name));
    }
}

impl StateBackend for InMemoryStateBackend {
    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow) {
        let from = CellId {
            key: key.to_vec(),
            window: *window,
            name: String::new(),
        };
        let doomed: Vec<CellId> = self
            .cells
            .range(from..)
            .take_while(|(c, _)| c.key == key && c.window == *window)
            .map(|(c, _)| c.clone())
            .collect();
        for c in doomed {
            self.cells.remove(&c);
        }
    }
    fn len(&self) -> usize {
        self.cells.len()
    }
    fn snapshot_by(&self, group_of: &mut dyn FnMut(&[u8]) -> u32) -> BTreeMap<u32, Vec<u8>> {
        let mut groups: BTreeMap<u32, Vec<(&CellId, &Cell)>> = BTreeMap::new();
        for (id, cell) in &self.cells {
            groups
                .entry(group_of(&id.key))
                .or_default()
                .push((id, cell));
        }
        groups
            .into_iter()
            .map(|(g, cells)| {
                let bytes = postcard::to_allocvec(&cells).expect("cells encode: bytes and windows");
                (g, bytes)
            })
            .collect()
    }
    fn restore_add(&mut self, bytes: &[u8]) -> Result<(), String> {
        let (cells, rest): (Vec<(CellId, Cell)>, _) = postcard::take_from_bytes(bytes)
            .map_err(|e| format!("state snapshot is corrupt: {e}"))?;
        if !rest.is_empty() {
            return Err(format!("state snapshot has {} trailing bytes", rest.len()));
        }
        self.cells.extend(cells);
        Ok(())
    }
}
