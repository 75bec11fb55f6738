//! Cells in an embedded LSM store on local disk (fjall), for keyed state larger than
//! memory: Flink's RocksDB state backend, in pure Rust.
//!
//! One store per process and state directory ([`Store`]), one keyspace (a tree of its
//! own) per operator instance. A cell is one entry, at
//! `[key group: u32 BE][key length: u32 BE][key][window][name]`: a key group's cells are
//! one range (what a restore or rescale by key group reads), a (key, window)'s cells a
//! prefix of it (what expiry removes). The window's encoding is self-delimiting, so the
//! prefix of one (key, window) holds no other's cells. A value is the cell as a snapshot
//! part encodes it.
//!
//! Reads and writes go through a small cache of cells: a write changes the cached cell
//! and marks it dirty; at the end of a bundle ([`StateBackend::flush`]) holding enough
//! dirty cells, or before a snapshot ([`StateBackend::sync`]), they are written in one
//! batch and, once the cache holds more than its capacity ([`CACHE_CELLS`] cells or
//! [`CACHE_BYTES`] bytes), the clean ones forgotten. A read of an uncached cell reads
//! the store (its own block cache in front of the files) and hands over a copy; the
//! cell is cached on its first write.
//!
//! A snapshot is a consistent view of the store ([`fjall::Snapshot`]) taken after a
//! flush: the operator goes on writing while another thread reads the view, whole or
//! the windows a delta asks for, as the in-memory backend gives its cells (a cell's
//! value is its encoding in both), so that a snapshot of one backend restores into
//! the other, at any parallelism.
//!
//! Windows expire from a second keyspace of the store, of entries
//! `[garbage-collection time: u64 BE, sign flipped][group][key length][key][window]`: a
//! window gets one with its first cell (or when the runner keeps it for its timers),
//! and the entries up to the watermark are what [`StateBackend::expire`] clears; the
//! runner keeps nothing per window or key in memory.
//!
//! Bags and maps are one entry each, rewritten whole when a bundle changed them; a
//! bag or map of many entries per key costs its size per bundle that touches it.

#[cfg(test)]
mod cache_tests;
mod filter;
mod frozen;
mod head;
mod store;
pub mod tables;
#[cfg(test)]
mod tables_tests;
mod timers;
mod units;

pub use timers::{restore_timers, timer_range, EmbeddedTimers};
pub use units::{EmbeddedUnits, FrozenUnits, Wakes};

use super::in_memory::{decode_one, decode_part_cells, Cell, SmallValue};
use super::{FrozenState, RestoredWindow, StateBackend};
use crate::windowing::gc_time;
use frozen::{decode_window_prefix, Frozen};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use store::{io_error, wait_for_flushes, Store, KEYSPACES};
use tidewater::exec::{key_group_of, StateCells};
use tidewater::{BoundedWindow, Timestamp};

/// Cells kept in the cache past a write to the store, at most.
pub const CACHE_CELLS: usize = 65_536;

/// Bytes of cells (address and encoding, as last written) kept in the cache past a
/// write to the store, at most: 65,536 cells of 1.2 KB held 78 MB, a third of a
/// 256 MB limit.
pub(crate) const CACHE_BYTES: usize = 16 << 20;

/// Dirty cells are written to the store in batches of at least this many (or all of
/// them before a snapshot).
const WRITE_BATCH_CELLS: usize = 16_384;

/// The address of (key, window) (a cell's or a timer's, up to its name), into `out`:
/// `[key group: u32 BE][key length: u32 BE][key][window]`.
fn window_prefix(max_key_groups: u32, key: &[u8], window: &BoundedWindow, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&key_group_of(key, max_key_groups).to_be_bytes());
    super::window_id(key, window, out);
}

/// A cached cell: `None` once cleared; `dirty` until flushed; `bytes`, its address's
/// and encoding's as last written (counted in [`EmbeddedStateBackend::cache_bytes`]).
struct Cached {
    cell: Option<Cell>,
    dirty: bool,
    bytes: usize,
}

/// Cells in an embedded store; see the module's documentation.
pub struct EmbeddedStateBackend {
    store: Arc<Store>,
    keyspace: fjall::Keyspace,
    /// The windows by garbage-collection time (see the module's documentation).
    expiry: fjall::Keyspace,
    /// Entries of `expiry` not written yet.
    pending_expiry: BTreeSet<Vec<u8>>,
    /// The first entry written to `expiry` (a scan of the store's first key costs a
    /// merge of all its files: asked at every advance, it is kept here).
    first_expiry: Option<Vec<u8>>,
    /// Windows in `expiry`, written or not.
    windows: usize,
    allowed_lateness_ms: i64,
    max_key_groups: u32,
    cache: hashbrown::HashMap<Box<[u8]>, Cached, rustc_hash::FxBuildHasher>,
    /// The `bytes` of the cached cells.
    cache_bytes: usize,
    dirty: usize,
    /// The names of cells written or restored (expiry clears each in the cache).
    names: Vec<Box<str>>,
    /// Cells held, over all windows.
    cells: usize,
    /// The first error reading or writing the store since the last flush, which
    /// reports it: a cell access cannot fail by itself (a read, which takes `&self`,
    /// records it here too).
    failed: std::cell::RefCell<Option<String>>,
    /// Where a cell's address is encoded; reused from call to call.
    scratch: std::cell::Cell<Vec<u8>>,
    /// The last uncached cell read from the store (address, cell): the write that
    /// usually follows a read (read, add, write back) takes it instead of reading again.
    last_read: std::cell::RefCell<Option<(Vec<u8>, Option<Cell>)>>,
}

impl EmbeddedStateBackend {
    /// A backend keeping its cells under directory `dir` (the process's store there,
    /// opened on first use), for keys hashed into `max_key_groups` key groups, whose
    /// windows expire `allowed_lateness_ms` after their end.
    pub fn open(dir: &Path, max_key_groups: u32, allowed_lateness_ms: i64) -> Result<Self, String> {
        let store = Store::open(dir)?;
        let n = KEYSPACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (cells, expiry) = (
            store.keyspace(&format!("cells{n}"))?,
            store.keyspace(&format!("expiry{n}"))?,
        );
        Ok(EmbeddedStateBackend {
            store,
            keyspace: cells,
            expiry,
            pending_expiry: BTreeSet::new(),
            first_expiry: None,
            windows: 0,
            allowed_lateness_ms,
            max_key_groups,
            cache: Default::default(),
            cache_bytes: 0,
            dirty: 0,
            names: Vec::new(),
            cells: 0,
            failed: Default::default(),
            scratch: Default::default(),
            last_read: Default::default(),
        })
    }

    /// The address of (key, window)'s cells, up to the name, into `out`.
    fn window_prefix(&self, key: &[u8], window: &BoundedWindow, out: &mut Vec<u8>) {
        window_prefix(self.max_key_groups, key, window, out)
    }

    /// Records that (key, window) holds cells or timers, so that it expires: an entry in
    /// `expiry` unless it has one.
    /// After a restored key group: its windows' expiry entries written and the store's
    /// memtables written out, as after a bundle, so that a restore of a state larger
    /// than memory holds one key group, not every window's entry and memtable.
    fn restored_out(&mut self) -> Result<(), String> {
        self.write_dirty()?;
        wait_for_flushes(&self.keyspace, &self.store.dir)?;
        wait_for_flushes(&self.expiry, &self.store.dir)
    }

    fn keep(&mut self, key: &[u8], window: &BoundedWindow) {
        let gc = gc_time(window, self.allowed_lateness_ms);
        let mut entry = (gc.millis() as u64 ^ (1 << 63)).to_be_bytes().to_vec();
        let mut prefix = self.scratch.take();
        self.window_prefix(key, window, &mut prefix);
        entry.extend_from_slice(&prefix);
        self.scratch.set(prefix);
        if self.pending_expiry.contains(&entry) {
            return;
        }
        match self.expiry.contains_key(&entry) {
            Ok(true) => {}
            Ok(false) => {
                self.pending_expiry.insert(entry);
                self.windows += 1;
            }
            Err(e) => {
                self.fail(io_error(
                    "cannot read a window's expiry",
                    &self.store.dir,
                    e,
                ));
            }
        }
    }

    /// Whether the cache holds more than it keeps past a write ([`CACHE_CELLS`],
    /// [`CACHE_BYTES`]).
    fn cache_full(&self) -> bool {
        self.cache.len() > CACHE_CELLS || self.cache_bytes > CACHE_BYTES
    }

    /// Forgets every cached cell (the caller wrote the dirty ones or drops them).
    fn forget_cache(&mut self) {
        self.cache.clear();
        self.cache_bytes = 0;
    }

    /// Forgets the cached cell at `address`, if any.
    fn uncache(&mut self, address: &[u8]) {
        if let Some(c) = self.cache.remove(address) {
            self.cache_bytes -= c.bytes;
        }
    }

    /// Records the first error since the last flush.
    fn fail(&self, e: String) {
        self.failed.borrow_mut().get_or_insert(e);
    }

    /// Runs `f` on the address of cell (key, window, name).
    fn with_address<R>(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        f: impl FnOnce(&[u8]) -> R,
    ) -> R {
        let mut buf = self.scratch.take();
        self.window_prefix(key, window, &mut buf);
        buf.extend_from_slice(name.as_bytes());
        let r = f(&buf);
        self.scratch.set(buf);
        r
    }

    /// Reads the cell at `address` from the store; an error is kept for the flush.
    fn read_store(&self, address: &[u8]) -> Result<Option<Cell>, String> {
        let bytes = self
            .keyspace
            .get(address)
            .map_err(|e| io_error("cannot read a cell", &self.store.dir, e))?;
        bytes
            .map(|b| {
                postcard::from_bytes::<Cell>(&b)
                    .map_err(|e| io_error("a cell does not decode", &self.store.dir, e))
            })
            .transpose()
    }

    /// The cell at `address`: cached, or read from the store.
    fn read(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<Cow<'_, Cell>> {
        self.with_address(key, window, name, |a| match self.cache.get(a) {
            Some(c) => c.cell.as_ref().map(Cow::Borrowed),
            None => match self.read_store(a) {
                Ok(c) => {
                    *self.last_read.borrow_mut() = Some((a.to_vec(), c.clone()));
                    c.map(Cow::Owned)
                }
                Err(e) => {
                    // The read gives nothing; the flush at the bundle's end fails it, so
                    // nothing the DoFn did with it is committed.
                    self.fail(e);
                    None
                }
            },
        })
    }

    /// Cell (key, window, name) to change, cached and marked dirty (read from the store
    /// on first use); `None` if it does not exist.
    fn slot(&mut self, key: &[u8], window: &BoundedWindow, name: &str) -> &mut Option<Cell> {
        let mut buf = self.scratch.take();
        self.window_prefix(key, window, &mut buf);
        buf.extend_from_slice(name.as_bytes());
        if !self.cache.contains_key(buf.as_slice()) {
            let read = match self.last_read.get_mut().take() {
                Some((address, cell)) if address == buf => Ok(cell),
                _ => self.read_store(&buf),
            };
            let cell = match read {
                Ok(c) => c,
                Err(e) => {
                    self.fail(e);
                    None
                }
            };
            self.cache.insert(
                buf.clone().into_boxed_slice(),
                Cached {
                    cell,
                    dirty: false,
                    bytes: 0,
                },
            );
            if !self.names.iter().any(|n| **n == *name) {
                self.names.push(name.into());
            }
        }
        let c = self.cache.get_mut(buf.as_slice()).expect("cached above");
        self.scratch.set(buf);
        if !c.dirty {
            c.dirty = true;
            self.dirty += 1;
        }
        &mut c.cell
    }

    /// Cell (key, window, name), made by `make` if absent.
    fn cell_or_insert(
        &mut self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
        make: impl FnOnce() -> Cell,
    ) -> &mut Cell {
        let mut created = false;
        let slot = self.slot(key, window, name);
        if slot.is_none() {
            *slot = Some(make());
            created = true;
        }
        if created {
            self.cells += 1;
            self.keep(key, window);
        }
        self.slot(key, window, name).as_mut().expect("made above")
    }

    /// Writes the dirty cells and the new windows to the store in one batch.
    fn write_dirty(&mut self) -> Result<(), String> {
        *self.last_read.get_mut() = None;
        if self.dirty == 0 && self.pending_expiry.is_empty() {
            return Ok(());
        }
        let mut batch = self.store.db.batch();
        if let Some(first) = self.pending_expiry.first() {
            if self.first_expiry.as_ref().is_none_or(|f| first < f) {
                self.first_expiry = Some(first.clone());
            }
        }
        for entry in std::mem::take(&mut self.pending_expiry) {
            batch.insert(&self.expiry, entry, []);
        }
        for (address, c) in self.cache.iter_mut().filter(|(_, c)| c.dirty) {
            let bytes = match &c.cell {
                Some(cell) => {
                    let encoded = postcard::to_allocvec(cell).expect("a cell encodes");
                    let bytes = address.len() + encoded.len();
                    batch.insert(&self.keyspace, &address[..], encoded);
                    bytes
                }
                None => {
                    batch.remove(&self.keyspace, &address[..]);
                    address.len()
                }
            };
            self.cache_bytes = self.cache_bytes + bytes - c.bytes;
            c.bytes = bytes;
            c.dirty = false;
        }
        self.dirty = 0;
        batch
            .commit()
            .map_err(|e| io_error("cannot write cells", &self.store.dir, e))
    }
}

impl EmbeddedStateBackend {
    /// Expires the windows due before `watermark`, some thousands at a time (their
    /// cleared cells written between), so that expiring many at once takes no more
    /// memory than the cache.
    fn expire_before(
        &mut self,
        watermark: Timestamp,
        f: &mut dyn FnMut(&[u8], &BoundedWindow),
    ) -> Result<(), String> {
        // Entries whose time is before the watermark's sort before its 8 bytes.
        let bound = (watermark.millis() as u64 ^ (1 << 63)).to_be_bytes();
        loop {
            let mut due = Vec::new();
            for kv in self.expiry.range(..&bound[..]).take(WRITE_BATCH_CELLS) {
                due.push(
                    kv.key()
                        .map_err(|e| io_error("cannot list expired windows", &self.store.dir, e))?,
                );
            }
            if due.is_empty() {
                return Ok(());
            }
            let mut batch = self.store.db.batch();
            for entry in due {
                let (key, window) = self.decode_expiry(&entry)?;
                self.clear_window(key, &window);
                f(key, &window);
                batch.remove(&self.expiry, &entry[..]);
                self.windows -= 1;
            }
            batch
                .commit()
                .map_err(|e| io_error("cannot write expired windows", &self.store.dir, e))?;
            self.write_dirty()?;
        }
    }

    /// The (key, window) of an entry of `expiry`.
    fn decode_expiry<'a>(&self, entry: &'a [u8]) -> Result<(&'a [u8], BoundedWindow), String> {
        entry
            .get(8..)
            .and_then(decode_window_prefix)
            .ok_or_else(|| {
                format!(
                    "a window's expiry entry in {} does not decode",
                    self.store.dir.display()
                )
            })
    }

    /// Expires every window (the watermark reached the end of time): each is handed
    /// to `f` from one scan, then both keyspaces are emptied at once.
    fn expire_all(&mut self, f: &mut dyn FnMut(&[u8], &BoundedWindow)) -> Result<(), String> {
        for kv in self.expiry.iter() {
            let entry = kv
                .key()
                .map_err(|e| io_error("cannot list expired windows", &self.store.dir, e))?;
            let (key, window) = self.decode_expiry(&entry)?;
            f(key, &window);
        }
        for ks in [&self.keyspace, &self.expiry] {
            ks.clear()
                .map_err(|e| io_error("cannot clear expired cells", &self.store.dir, e))?;
        }
        self.forget_cache();
        self.dirty = 0;
        self.cells = 0;
        self.windows = 0;
        *self.last_read.get_mut() = None;
        Ok(())
    }
}

impl Drop for EmbeddedStateBackend {
    fn drop(&mut self) {
        for ks in [self.keyspace.clone(), self.expiry.clone()] {
            if let Err(e) = self.store.db.delete_keyspace(ks) {
                tracing::debug!("cannot drop a state keyspace: {e}");
            }
        }
    }
}

fn value(c: Cow<'_, Cell>) -> Option<Cow<'_, [u8]>> {
    match c {
        Cow::Borrowed(Cell::Value(v)) => Some(Cow::Borrowed(v.as_slice())),
        Cow::Owned(Cell::Value(v)) => Some(Cow::Owned(v.into_vec())),
        _ => None,
    }
}

impl StateCells for EmbeddedStateBackend {
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<Cow<'_, [u8]>> {
        self.read(key, window, name).and_then(value)
    }
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        self.cell_or_insert(key, window, name, || Cell::Value(SmallValue::new()))
            .put(value);
    }
    fn bag(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Vec<Cow<'_, [u8]>> {
        match self.read(key, window, name) {
            Some(Cow::Borrowed(Cell::Bag(b))) => {
                b.iter().map(|v| Cow::Borrowed(v.as_slice())).collect()
            }
            Some(Cow::Owned(Cell::Bag(b))) => b.into_iter().map(Cow::Owned).collect(),
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
        match self.read(key, window, name)? {
            Cow::Borrowed(Cell::Map(m)) => m.get(entry).map(|v| Cow::Borrowed(v.as_slice())),
            Cow::Owned(Cell::Map(mut m)) => m.remove(entry).map(Cow::Owned),
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
        if let Some(Cell::Map(m)) = self.slot(key, window, name) {
            m.remove(entry);
        }
    }
    fn map_entries(
        &self,
        key: &[u8],
        window: &BoundedWindow,
        name: &str,
    ) -> tidewater::exec::MapEntries<'_> {
        match self.read(key, window, name) {
            Some(Cow::Borrowed(Cell::Map(m))) => m
                .iter()
                .map(|(k, v)| (Cow::Borrowed(k.as_slice()), Cow::Borrowed(v.as_slice())))
                .collect(),
            Some(Cow::Owned(Cell::Map(m))) => m
                .into_iter()
                .map(|(k, v)| (Cow::Owned(k), Cow::Owned(v)))
                .collect(),
            _ => Vec::new(),
        }
    }
    fn clear(&mut self, key: &[u8], window: &BoundedWindow, name: &str) {
        // A cell neither cached nor stored is left alone (not cached as cleared); one
        // stored is read once (`slot` takes the read).
        let absent = self.with_address(key, window, name, |a| {
            if self.cache.contains_key(a) {
                return false;
            }
            match self.read_store(a) {
                Ok(None) => true,
                Ok(found) => {
                    *self.last_read.borrow_mut() = Some((a.to_vec(), found));
                    false
                }
                Err(_) => false,
            }
        });
        if absent {
            return;
        }
        let slot = self.slot(key, window, name);
        if slot.take().is_some() {
            self.cells -= 1;
        }
    }
}

impl StateBackend for EmbeddedStateBackend {
    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow) {
        // Every name written or restored is in `names`: a point read per name (a
        // filter in front of each file) rather than a scan of the window's prefix
        // (an iterator merging every file).
        for i in 0..self.names.len() {
            let name = self.names[i].clone();
            self.clear(key, window, &name);
        }
    }
    fn len(&self) -> usize {
        self.cells
    }
    fn keep_window(&mut self, key: &[u8], window: &BoundedWindow) {
        self.keep(key, window);
    }
    fn expire(&mut self, watermark: Timestamp, f: &mut dyn FnMut(&[u8], &BoundedWindow)) {
        if self.next_expiry().is_none_or(|t| t >= watermark) {
            return;
        }
        if let Err(e) = self.write_dirty() {
            self.fail(e);
            return;
        }
        if let Err(e) = if watermark == Timestamp::MAX {
            self.expire_all(f)
        } else {
            self.expire_before(watermark, f)
        } {
            self.fail(e);
        }
        self.first_expiry = self
            .expiry
            .first_key_value()
            .and_then(|kv| kv.key().ok().map(|k| k.to_vec()));
    }
    fn next_expiry(&self) -> Option<Timestamp> {
        let first = match (self.pending_expiry.first(), &self.first_expiry) {
            (Some(p), Some(s)) => p.min(s),
            (Some(p), None) => p,
            (None, s) => s.as_ref()?,
        };
        let t = u64::from_be_bytes(first.get(..8)?.try_into().ok()?) ^ (1 << 63);
        Some(Timestamp(t as i64))
    }
    fn windows(&self) -> usize {
        self.windows
    }
    fn live_keys(&self) -> usize {
        let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
        let stored = self
            .expiry
            .iter()
            .filter_map(|kv| kv.key().ok().map(|k| k.to_vec()));
        for entry in stored.chain(self.pending_expiry.iter().cloned()) {
            if let Some((key, _)) = entry.get(8..).and_then(decode_window_prefix) {
                keys.insert(key.to_vec());
            }
        }
        keys.len()
    }
    fn flush(&mut self) -> Result<(), String> {
        if let Some(e) = self.failed.get_mut().take() {
            return Err(e);
        }
        if self.dirty >= WRITE_BATCH_CELLS || self.cache_full() {
            self.sync()?;
            wait_for_flushes(&self.keyspace, &self.store.dir)?;
            wait_for_flushes(&self.expiry, &self.store.dir)?;
        }
        Ok(())
    }
    fn sync(&mut self) -> Result<(), String> {
        if let Some(e) = self.failed.get_mut().take() {
            return Err(e);
        }
        self.write_dirty()?;
        if self.cache_full() {
            self.forget_cache();
        }
        Ok(())
    }
    fn freeze_files(&self) -> Option<tables::KeyspaceFreeze> {
        debug_assert_eq!(self.dirty, 0, "a snapshot of unsynced cells");
        Some(tables::freeze(&self.store, &self.keyspace))
    }
    fn freeze(&self) -> Box<dyn FrozenState> {
        // The caller synced ([`StateBackend::sync`]): the store holds every cell.
        debug_assert_eq!(self.dirty, 0, "a snapshot of unsynced cells");
        Box::new(Frozen {
            snapshot: self.store.db.snapshot(),
            keyspace: self.keyspace.clone(),
            dir: self.store.dir.clone(),
            max_key_groups: self.max_key_groups,
            names: self.names.clone(),
        })
    }
    fn restore_windows(&mut self, windows: &[RestoredWindow<'_>]) -> Result<(), String> {
        *self.last_read.get_mut() = None;
        let mut buf = Vec::new();
        let mut batch = self.store.db.batch();
        for w in windows {
            for (name, cell) in &w.cells {
                decode_one(cell)?;
                self.window_prefix(w.key, &w.window, &mut buf);
                buf.extend_from_slice(name.as_bytes());
                self.uncache(&buf);
                if !self.names.iter().any(|n| **n == **name) {
                    self.names.push((*name).into());
                }
                batch.insert(&self.keyspace, buf.as_slice(), *cell);
                self.cells += 1;
            }
            if !w.cells.is_empty() {
                self.keep(w.key, &w.window);
            }
        }
        batch
            .commit()
            .map_err(|e| io_error("cannot write restored cells", &self.store.dir, e))?;
        self.restored_out()
    }
    /// Written straight into the store's files (fjall's ingestion: ascending keys into
    /// new tables, no memtable, no compaction of them into the first level).
    fn restore_addressed(
        &mut self,
        entries: &mut tables::AddressedCells<'_>,
    ) -> Result<(), String> {
        *self.last_read.get_mut() = None;
        self.write_dirty()?;
        let failed = |e| io_error("cannot restore cells", &self.store.dir, e);
        let keyspace = self.keyspace.clone();
        let mut ingestion = keyspace.start_ingestion().map_err(failed)?;
        let (mut last, mut window) = (None::<fjall::Slice>, Vec::new());
        let mut windows = 0usize;
        for kv in entries {
            let (address, cell) = kv?;
            if last.as_ref().is_some_and(|l| address <= *l) {
                return Err(format!(
                    "cells to restore into the state store at {} are out of order",
                    self.store.dir.display()
                ));
            }
            decode_one(&cell)?;
            let (key, w, name) = tables::split_cell_address(&address, "a checkpoint's tables")?;
            if !self.names.iter().any(|n| **n == *name) {
                self.names.push(name.into());
            }
            self.uncache(&address);
            let prefix = &address[..address.len() - name.len()];
            if window.as_slice() != prefix {
                window = prefix.to_vec();
                self.keep(key, &w);
                windows += 1;
                // The windows' expiry entries go out as they come, not all at the end.
                if windows.is_multiple_of(WRITE_BATCH_CELLS) {
                    self.write_dirty()?;
                    wait_for_flushes(&self.expiry, &self.store.dir)?;
                }
            }
            ingestion
                .write(address.clone(), cell)
                .map_err(|e| io_error("cannot restore cells", &self.store.dir, e))?;
            self.cells += 1;
            last = Some(address);
        }
        ingestion
            .finish()
            .map_err(|e| io_error("cannot restore cells", &self.store.dir, e))?;
        self.restored_out()
    }
    fn restore_add(&mut self, bytes: &[u8]) -> Result<(), String> {
        *self.last_read.get_mut() = None;
        let mut buf = Vec::new();
        let mut batch = self.store.db.batch();
        for (id, cell) in decode_part_cells(bytes)? {
            self.window_prefix(&id.key, &id.window, &mut buf);
            buf.extend_from_slice(id.name.as_bytes());
            self.uncache(&buf);
            if !self.names.iter().any(|n| **n == *id.name) {
                self.names.push(id.name.as_str().into());
            }
            batch.insert(
                &self.keyspace,
                buf.as_slice(),
                postcard::to_allocvec(&cell).expect("a cell encodes"),
            );
            self.cells += 1;
            self.keep(&id.key, &id.window);
        }
        batch
            .commit()
            .map_err(|e| io_error("cannot write restored cells", &self.store.dir, e))?;
        self.restored_out()
    }
}
