use super::{EncodedCells, FrozenState, FrozenWindow, RestoredWindow, StateBackend};
use crate::windowing::gc_time;
use hashbrown::hash_table::{Entry, HashTable};
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use tidewater::exec::{bytes_eq, StateCells};
use tidewater::{BoundedWindow, Timestamp};

/// A cell's address as a snapshot part writes it.
#[derive(Deserialize)]
pub(super) struct CellId {
    pub(super) key: Vec<u8>,
    pub(super) window: BoundedWindow,
    pub(super) name: String,
}

/// [`CellId`] borrowed: the same encoding, written without copying (by tests: parts
/// of this format are no longer written).
#[cfg(test)]
#[derive(Serialize)]
pub(super) struct CellIdRef<'a> {
    pub(super) key: &'a [u8],
    pub(super) window: &'a BoundedWindow,
    pub(super) name: &'a str,
}

/// Values up to this many bytes are held inside their cell (a count, a timestamp, a
/// small struct): no allocation of their own.
pub(super) type SmallValue = SmallVec<[u8; 16]>;

/// What a cell holds, as a snapshot part (and the embedded store) encodes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(super) enum Cell {
    Value(#[serde(with = "super::bytes::one")] SmallValue),
    Bag(#[serde(with = "super::bytes::many")] Vec<Vec<u8>>),
    Map(#[serde(with = "super::bytes::map")] BTreeMap<Vec<u8>, Vec<u8>>),
}

impl Cell {
    /// Writes a value: a cell of another kind becomes a value cell.
    pub(super) fn put(&mut self, value: &[u8]) {
        match self {
            // Mostly a value of the length it had (a count, a sum).
            Cell::Value(v) if v.len() == value.len() => v.copy_from_slice(value),
            Cell::Value(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            other => *other = Cell::Value(SmallValue::from_slice(value)),
        }
    }

    /// Appends to a bag: a cell of another kind becomes a bag.
    pub(super) fn bag_add(&mut self, value: &[u8]) {
        match self {
            Cell::Bag(b) => b.push(value.to_vec()),
            other => *other = Cell::Bag(vec![value.to_vec()]),
        }
    }

    /// Writes a map entry (a cell of another kind becomes a map); whether it was new.
    pub(super) fn map_put(&mut self, entry: &[u8], value: &[u8]) -> bool {
        match self {
            Cell::Map(m) => match m.get_mut(entry) {
                Some(v) => {
                    v.clear();
                    v.extend_from_slice(value);
                    false
                }
                None => {
                    m.insert(entry.to_vec(), value.to_vec());
                    true
                }
            },
            other => {
                *other = Cell::Map(BTreeMap::from([(entry.to_vec(), value.to_vec())]));
                true
            }
        }
    }
}

/// One cell of a state snapshot part, as an offline reader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CellEntry {
    /// The encoded key.
    pub key: Vec<u8>,
    /// The window.
    pub window: BoundedWindow,
    /// The cell's name.
    pub name: String,
    /// What it holds, encoded (values self-describing, map keys in the element coder).
    pub contents: CellContents,
}

/// What a cell holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CellContents {
    /// A value.
    Value(Vec<u8>),
    /// A bag's items.
    Bag(Vec<Vec<u8>>),
    /// A map's (or set's) entries.
    Map(Vec<(Vec<u8>, Vec<u8>)>),
}

/// The cells of a part written before 2026-12 (a group's cells, postcard-encoded in
/// (key, window, name) order).
pub fn decode_cells(bytes: &[u8]) -> Result<Vec<CellEntry>, String> {
    let cells = decode_part_cells(bytes)?;
    Ok(cells
        .into_iter()
        .map(|(id, cell)| CellEntry {
            key: id.key,
            window: id.window,
            name: id.name,
            contents: cell.into(),
        })
        .collect())
}

/// What an encoded cell holds (a cell of [`super::FrozenWindow`]).
pub fn decode_cell(bytes: &[u8]) -> Result<CellContents, String> {
    Ok(decode_one(bytes)?.into())
}

/// An encoded cell, decoded.
pub(super) fn decode_one(bytes: &[u8]) -> Result<Cell, String> {
    postcard::from_bytes(bytes).map_err(|e| format!("a cell does not decode: {e}"))
}

impl From<Cell> for CellContents {
    fn from(cell: Cell) -> Self {
        match cell {
            Cell::Value(v) => CellContents::Value(v.into_vec()),
            Cell::Bag(b) => CellContents::Bag(b),
            Cell::Map(m) => CellContents::Map(m.into_iter().collect()),
        }
    }
}

/// A state name, interned: its index in [`Names`].
type NameId = u32;

/// The state names seen, interned for the backend's lifetime: a DoFn's state names
/// are few and fixed, so a cell keeps a number and a lookup compares numbers.
#[derive(Default)]
struct Names {
    names: Vec<Box<str>>,
    /// By name, once there are too many names to scan.
    index: rustc_hash::FxHashMap<Box<str>, NameId>,
}

/// Up to this many names are found by scanning.
const SCANNED_NAMES: usize = 8;

impl Names {
    #[inline(always)]
    fn find(&self, name: &str) -> Option<NameId> {
        if self.names.len() <= SCANNED_NAMES {
            self.names
                .iter()
                .position(|n| bytes_eq(n.as_bytes(), name.as_bytes()))
                .map(|i| i as NameId)
        } else {
            self.index.get(name).copied()
        }
    }

    fn intern(&mut self, name: &str) -> NameId {
        if let Some(id) = self.find(name) {
            return id;
        }
        let id = NameId::try_from(self.names.len()).expect("fewer than 2^32 state names");
        self.names.push(name.into());
        if self.names.len() > SCANNED_NAMES {
            if self.index.is_empty() {
                for (i, n) in self.names.iter().enumerate() {
                    self.index.insert(n.clone(), i as NameId);
                }
            } else {
                self.index.insert(name.into(), id);
            }
        }
        id
    }
}

/// Keys up to this many bytes are held inside their window's entry.
const INLINE_KEY: usize = 16;

/// The cells of one (key, window), by name. A short key and the first cell are held
/// inline, so the common case (a short key, one cell) is one allocation: a lookup
/// reads the window, the key and the cell from neighbouring bytes instead of
/// following a pointer to each.
#[derive(Clone)]
struct WindowCells {
    window: BoundedWindow,
    key: SmallVec<[u8; INLINE_KEY]>,
    cells: SmallVec<[(NameId, Cell); 1]>,
}

/// A table slot: one (key, window)'s cells, shared with the frozen copies of
/// snapshots in progress until a write copies them ([`Arc::make_mut`]).
struct Slot {
    hash: u64,
    w: Arc<WindowCells>,
}

impl Slot {
    fn is(&self, hash: u64, key: &[u8], window: &BoundedWindow) -> bool {
        self.hash == hash && self.holds(key, window)
    }

    /// Whether it is (key, window)'s, without the hash.
    #[inline(always)]
    fn holds(&self, key: &[u8], window: &BoundedWindow) -> bool {
        self.w.window == *window && bytes_eq(&self.w.key, key)
    }
}

fn hash_of(key: &[u8], window: &BoundedWindow) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(key);
    window.hash(&mut h);
    h.finish()
}

/// Cells in memory: a hash table from (encoded key, window) to that window's few cells,
/// looked up with borrowed keys, so reading or overwriting a cell allocates nothing.
/// A snapshot part is the postcard encoding of the cells of one group, ordered by
/// (key, window, name) whatever the table's order (the snapshot format adds checksums).
///
/// Copy on write, as Flink's `CopyOnWriteStateMap`: each window's cells sit behind a
/// reference count, so [`StateBackend::freeze`] copies only the table's pointers and
/// the walk, sort and encoding of a snapshot can run on another thread while the
/// operator goes on; the first write to a window still held by a frozen copy copies
/// that window's cells, later ones write in place again.
///
/// ```
/// use tidewater::BoundedWindow;
/// use tidewater_runners_core::state::{
///     frozen_windows, restore_frozen, InMemoryStateBackend, StateBackend, StateCells,
/// };
/// let mut s = InMemoryStateBackend::default();
/// s.put(b"k", &BoundedWindow::Global, "count", &[3]);
/// s.put(b"l", &BoundedWindow::Global, "count", &[4]);
/// let windows = frozen_windows(s.freeze(), 16).unwrap();
/// assert_eq!(windows.len(), 2);
/// let mut t = InMemoryStateBackend::default();
/// restore_frozen(&mut t, &windows).unwrap();
/// assert_eq!(t.get(b"k", &BoundedWindow::Global, "count").as_deref(), Some(&[3u8][..]));
/// assert_eq!(t.get(b"l", &BoundedWindow::Global, "count").as_deref(), Some(&[4u8][..]));
/// let mut corrupt = frozen_windows(s.freeze(), 16).unwrap();
/// corrupt[0].cells[0].1 = vec![9];
/// assert!(restore_frozen(&mut t, &corrupt).is_err());
/// ```
#[derive(Default)]
pub struct InMemoryStateBackend {
    windows: HashTable<Slot>,
    names: Names,
    /// Cells held, over all windows.
    cells: usize,
    /// The windows holding cells or kept, by garbage-collection time.
    expiry: BTreeSet<(Timestamp, Box<[u8]>, BoundedWindow)>,
    allowed_lateness_ms: i64,
    /// The bucket of the (key, window) found last: a DoFn reads a cell and then writes
    /// it, and the write finds it there without a probe (checked like any probe, so a
    /// bucket emptied or reused since is simply missed).
    last: std::cell::Cell<usize>,
}

impl InMemoryStateBackend {
    /// A backend whose windows expire `allowed_lateness_ms` after their end (the
    /// default: at their end).
    pub fn new(allowed_lateness_ms: i64) -> Self {
        InMemoryStateBackend {
            allowed_lateness_ms,
            ..Default::default()
        }
    }

    fn keep(&mut self, key: &[u8], window: &BoundedWindow) {
        let gc = gc_time(window, self.allowed_lateness_ms);
        self.expiry.insert((gc, key.into(), window.clone()));
    }

    /// The bucket of the last (key, window) found, if it is this one.
    #[inline]
    fn last_bucket(&self, key: &[u8], window: &BoundedWindow) -> Option<usize> {
        let last = self.last.get();
        self.windows
            .get_bucket(last)
            .is_some_and(|s| s.holds(key, window))
            .then_some(last)
    }

    /// The bucket holding (key, window).
    fn bucket(&self, key: &[u8], window: &BoundedWindow) -> Option<usize> {
        if let Some(last) = self.last_bucket(key, window) {
            return Some(last);
        }
        let hash = hash_of(key, window);
        let found = self
            .windows
            .find_bucket_index(hash, |s| s.is(hash, key, window))?;
        self.last.set(found);
        Some(found)
    }

    fn window(&self, key: &[u8], window: &BoundedWindow) -> Option<&WindowCells> {
        let i = self.bucket(key, window)?;
        self.windows.get_bucket(i).map(|s| &*s.w)
    }

    fn cell(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<&Cell> {
        let id = self.names.find(name)?;
        let w = self.window(key, window)?;
        w.cells.iter().find(|(n, _)| *n == id).map(|(_, c)| c)
    }

    fn cell_mut(&mut self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<&mut Cell> {
        let id = self.names.find(name)?;
        let i = self.bucket(key, window)?;
        let slot = self.windows.get_bucket_mut(i)?;
        Arc::make_mut(&mut slot.w)
            .cells
            .iter_mut()
            .find(|(n, _)| *n == id)
            .map(|(_, c)| c)
    }

    /// Sets cell `name` of (key, window) to `cell`, a restored one.
    fn restore_cell(&mut self, key: &[u8], window: &BoundedWindow, name: &str, cell: Cell) {
        let mut cell = Some(cell);
        let slot = self.cell_or_insert(key, window, name, || cell.take().expect("made once"));
        if let Some(cell) = cell {
            *slot = cell;
        }
    }

    /// Cell `name` of (key, window), made by `make` if absent. A write that gives
    /// (key, window) its first cell records it for [`StateBackend::drain_new_windows`].
    fn cell_or_insert(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        make: impl FnOnce() -> Cell,
    ) -> &mut Cell {
        let id = self.names.intern(name);
        let slot = if let Some(last) = self.last_bucket(key, window) {
            self.windows.get_bucket_mut(last).expect("just found")
        } else {
            let hash = hash_of(key, window);
            let entry = self
                .windows
                .entry(hash, |s| s.is(hash, key, window), |s| s.hash);
            let e = match entry {
                Entry::Occupied(e) => e,
                Entry::Vacant(e) => {
                    let gc = gc_time(window, self.allowed_lateness_ms);
                    self.expiry.insert((gc, key.into(), window.clone()));
                    e.insert(Slot {
                        hash,
                        w: Arc::new(WindowCells {
                            key: SmallVec::from_slice(key),
                            window: window.clone(),
                            cells: SmallVec::new(),
                        }),
                    })
                }
            };
            self.last.set(e.bucket_index());
            e.into_mut()
        };
        let w = Arc::make_mut(&mut slot.w);
        let i = match w.cells.iter().position(|(n, _)| *n == id) {
            Some(i) => i,
            None => {
                self.cells += 1;
                w.cells.push((id, make()));
                w.cells.len() - 1
            }
        };
        &mut w.cells[i].1
    }
}

impl StateCells for InMemoryStateBackend {
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<Cow<'_, [u8]>> {
        match self.cell(key, window, name) {
            Some(Cell::Value(v)) => Some(Cow::Borrowed(v)),
            _ => None,
        }
    }
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        self.cell_or_insert(key, window, name, || Cell::Value(SmallValue::new()))
            .put(value);
    }
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<Cow<'_, [u8]>> {
        match self.cell(key, window, name) {
            Some(Cell::Bag(b)) => b.iter().map(|v| Cow::Borrowed(v.as_slice())).collect(),
            _ => Vec::new(),
        }
    }
    fn bag_add(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        self.cell_or_insert(key, window, name, || Cell::Bag(Vec::new()))
            .bag_add(value);
    }
    fn map_get(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        entry: &[u8],
    ) -> Option<Cow<'_, [u8]>> {
        match self.cell(key, window, name) {
            Some(Cell::Map(m)) => m.get(entry).map(|v| Cow::Borrowed(v.as_slice())),
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
        self.cell_or_insert(key, window, name, || Cell::Map(BTreeMap::new()))
            .map_put(entry, value)
    }
    fn map_remove(&mut self, key: &[u8], window: &BoundedWindow, name: &str, entry: &[u8]) {
        if let Some(Cell::Map(m)) = self.cell_mut(key, window, name) {
            m.remove(entry);
        }
    }
    fn map_entries(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
    ) -> tidewater::exec::MapEntries<'_> {
        match self.cell(key, window, name) {
            Some(Cell::Map(m)) => m
                .iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_slice()), Cow::Borrowed(v.as_slice())))
                .collect(),
            _ => Vec::new(),
        }
    }
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str) {
        let Some(id) = self.names.find(name) else {
            return;
        };
        let hash = hash_of(key, window);
        let Ok(mut e) = self.windows.find_entry(hash, |s| s.is(hash, key, window)) else {
            return;
        };
        let Some(i) = e.get().w.cells.iter().position(|(n, _)| *n == id) else {
            return;
        };
        Arc::make_mut(&mut e.get_mut().w).cells.swap_remove(i);
        self.cells -= 1;
        // A window without cells takes no room.
        if e.get().w.cells.is_empty() {
            e.remove();
        }
    }
}

impl StateBackend for InMemoryStateBackend {
    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow) {
        let hash = hash_of(key, window);
        if let Ok(e) = self.windows.find_entry(hash, |s| s.is(hash, key, window)) {
            let (slot, _) = e.remove();
            self.cells -= slot.w.cells.len();
        }
    }
    fn len(&self) -> usize {
        self.cells
    }
    fn keep_window(&mut self, key: &[u8], window: &BoundedWindow) {
        self.keep(key, window);
    }
    fn expire(&mut self, watermark: Timestamp, f: &mut dyn FnMut(&[u8], &BoundedWindow)) {
        while self
            .expiry
            .first()
            .is_some_and(|(gc, _, _)| *gc < watermark)
        {
            let (_, key, window) = self.expiry.pop_first().expect("looked at");
            self.clear_window(&key, &window);
            f(&key, &window);
        }
    }
    fn next_expiry(&self) -> Option<Timestamp> {
        self.expiry.first().map(|(gc, _, _)| *gc)
    }
    fn windows(&self) -> usize {
        self.expiry.len()
    }
    fn live_keys(&self) -> usize {
        let keys: BTreeSet<&[u8]> = self.expiry.iter().map(|(_, k, _)| &**k).collect();
        keys.len()
    }
    fn freeze(&self) -> Box<dyn FrozenState> {
        Box::new(Frozen {
            windows: self.windows.iter().map(|s| Arc::clone(&s.w)).collect(),
            index: None,
            names: self.names.names.clone(),
        })
    }
    fn freeze_windows(&self, windows: &[(Vec<u8>, BoundedWindow)]) -> Box<dyn FrozenState> {
        let mut frozen = Vec::with_capacity(windows.len());
        let mut index = HashTable::with_capacity(windows.len());
        for (k, w) in windows {
            let hash = hash_of(k, w);
            if let Some(slot) = self.windows.find(hash, |s| s.is(hash, k, w)) {
                index.insert_unique(hash, frozen.len(), |_| hash);
                frozen.push(Arc::clone(&slot.w));
            }
        }
        Box::new(Frozen {
            windows: frozen,
            index: Some(index),
            names: self.names.names.clone(),
        })
    }
    fn restore_windows(&mut self, windows: &[RestoredWindow<'_>]) -> Result<(), String> {
        for w in windows {
            for (name, bytes) in &w.cells {
                self.restore_cell(w.key, &w.window, name, decode_one(bytes)?);
            }
        }
        Ok(())
    }
    fn restore_add(&mut self, bytes: &[u8]) -> Result<(), String> {
        for (id, cell) in decode_part_cells(bytes)? {
            self.restore_cell(&id.key, &id.window, &id.name, cell);
        }
        Ok(())
    }
}

/// The cells as of [`StateBackend::freeze`]: the windows' shared cells (of every
/// window, or of those asked for) and the names.
struct Frozen {
    windows: Vec<Arc<WindowCells>>,
    /// Where each window is in `windows` by [`hash_of`], for a copy of some windows
    /// (a full copy is walked, not searched).
    index: Option<HashTable<usize>>,
    names: Vec<Box<str>>,
}

impl Frozen {
    /// A window's cells encoded, in name order (windows whose cells were all cleared
    /// have none).
    fn encode(&self, w: &WindowCells) -> EncodedCells {
        let mut cells: EncodedCells = w
            .cells
            .iter()
            .map(|(name, cell)| {
                (
                    self.names[*name as usize].to_string(),
                    postcard::to_allocvec(cell).expect("a cell encodes"),
                )
            })
            .collect();
        cells.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        cells
    }
}

impl FrozenState for Frozen {
    fn for_each_window(
        self: Box<Self>,
        max_key_groups: u32,
        f: &mut dyn FnMut(FrozenWindow) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut placed: Vec<(u32, Vec<u8>, usize)> = self
            .windows
            .iter()
            .enumerate()
            .filter(|(_, w)| !w.cells.is_empty())
            .map(|(i, w)| {
                let (g, id) = super::snapshot_place(&w.key, &w.window, max_key_groups);
                (g, id, i)
            })
            .collect();
        placed.sort_unstable();
        for (group, id, i) in placed {
            let w = &self.windows[i];
            f(FrozenWindow {
                group,
                id,
                key: w.key.to_vec(),
                window: w.window.clone(),
                cells: self.encode(w),
            })?;
        }
        Ok(())
    }
    fn window(&self, key: &[u8], window: &BoundedWindow) -> Result<EncodedCells, String> {
        let is = |w: &WindowCells| *w.key == *key && w.window == *window;
        let found = match &self.index {
            Some(index) => {
                let hash = hash_of(key, window);
                index
                    .find(hash, |i| is(&self.windows[*i]))
                    .map(|i| &self.windows[*i])
            }
            None => self.windows.iter().find(|w| is(w)),
        };
        Ok(found.map(|w| self.encode(w)).unwrap_or_default())
    }
}

/// A snapshot part of `cells`: in address order (key, window, name), whatever order a
/// backend holds them in: the format of parts written before 2026-12, which tests write.
#[cfg(test)]
pub(super) fn encode_cells(cells: &mut [(CellIdRef<'_>, &Cell)]) -> Vec<u8> {
    cells.sort_unstable_by(|(a, _), (b, _)| {
        (a.key, a.window, a.name).cmp(&(b.key, b.window, b.name))
    });
    crate::snapshot::encode_part(&cells)
}

/// The cells of a snapshot part ([`encode_cells`]).
pub(super) fn decode_part_cells(bytes: &[u8]) -> Result<Vec<(CellId, Cell)>, String> {
    crate::snapshot::decode_part_or_message(bytes, "state snapshot")
}

#[cfg(test)]
#[path = "in_memory_tests.rs"]
mod tests;
