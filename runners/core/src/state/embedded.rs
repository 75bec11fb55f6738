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
//! batch and, once the cache holds more than its capacity, the clean ones forgotten. A read of an uncached cell reads the store (its own block cache in
//! front of the files) and hands over a copy; the cell is cached on its first write.
//!
//! A snapshot is a consistent view of the store ([`fjall::Snapshot`]) taken after a
//! flush: the operator goes on writing while another thread reads the view into
//! parts, in the same format as the in-memory backend's, so that a snapshot of one
//! backend restores into the other, at any parallelism.
//!
//! Windows expire from a second keyspace of the store, of entries
//! `[garbage-collection time: u64 BE, sign flipped][group][key length][key][window]`: a
//! window gets one with its first cell (or when the runner keeps it for its timers),
//! and the entries up to the watermark are what [`StateBackend::expire`] clears; the
//! runner keeps nothing per window or key in memory.
//!
//! Bags and maps are one entry each, rewritten whole when a bundle changed them; a
//! bag or map of many entries per key costs its size per bundle that touches it.

use super::in_memory::{decode_part_cells, encode_cells, Cell, CellIdRef};
use super::{FrozenState, StateBackend};
use crate::windowing::gc_time;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use tidewater::exec::{key_group_of, StateCells};
use tidewater::{BoundedWindow, Timestamp};

/// Cells kept in the cache past a write to the store, at most.
pub const CACHE_CELLS: usize = 16_384;

/// Dirty cells are written to the store in batches of at least this many (or all of
/// them before a snapshot).
const WRITE_BATCH_CELLS: usize = 4_096;

/// A keyspace's memtable is written out as a file at this size.
const MEMTABLE_BYTES: u64 = 8 << 20;

/// A store's journal, at most (then memtables are written out).
const WRITE_BUFFER_BYTES: u64 = 32 << 20;

/// The store's own cache of file blocks, in bytes.
const BLOCK_CACHE_BYTES: u64 = 16 << 20;

/// A store shared by the operator instances of this process that keep their state
/// in one directory; removed from disk when the last of them is dropped.
struct Store {
    db: fjall::Database,
    dir: PathBuf,
}

impl Drop for Store {
    fn drop(&mut self) {
        // The database is temporary: dropping it removes its files.
        tracing::debug!(dir = %self.dir.display(), "state store closed");
    }
}

/// The open stores, by directory.
static STORES: Mutex<Vec<(PathBuf, Weak<Store>)>> = Mutex::new(Vec::new());

/// A number for the next keyspace of this process.
static KEYSPACES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn io_error(what: &str, dir: &Path, e: impl std::fmt::Display) -> String {
    format!("{what} in the state store at {}: {e}", dir.display())
}

impl Store {
    /// The store of this process under `parent` (opened on first use, in a directory
    /// of its own named after the process).
    fn open(parent: &Path) -> Result<Arc<Store>, String> {
        let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
        stores.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = stores
            .iter()
            .find(|(p, _)| p == parent)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(s);
        }
        let dir = parent.join(format!("tidewater-state-{}", std::process::id()));
        // A directory left by a process of the same id that died: its state is gone
        // with it (checkpoints hold what survives).
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| io_error("cannot remove an old store", &dir, e))?;
        }
        std::fs::create_dir_all(parent)
            .map_err(|e| io_error("cannot create the directory", parent, e))?;
        let db = fjall::Database::builder(&dir)
            .temporary(true)
            // Durability is the checkpoints' job: the journal is never synced.
            .manual_journal_persist(true)
            .cache_size(BLOCK_CACHE_BYTES)
            .max_journaling_size(4 * WRITE_BUFFER_BYTES)
            .worker_threads(1)
            .open()
            .map_err(|e| io_error("cannot open", &dir, e))?;
        let store = Arc::new(Store { db, dir });
        stores.push((parent.to_path_buf(), Arc::downgrade(&store)));
        Ok(store)
    }
}

/// A cached cell: `None` once cleared; `dirty` until flushed.
struct Cached {
    cell: Option<Cell>,
    dirty: bool,
}

/// Cells in an embedded store; see the module's documentation.
pub struct EmbeddedStateBackend {
    store: Arc<Store>,
    keyspace: fjall::Keyspace,
    /// The windows by garbage-collection time (see the module's documentation).
    expiry: fjall::Keyspace,
    /// Entries of `expiry` not written yet.
    pending_expiry: BTreeSet<Vec<u8>>,
    /// Windows in `expiry`, written or not.
    windows: usize,
    allowed_lateness_ms: i64,
    max_key_groups: u32,
    cache: hashbrown::HashMap<Box<[u8]>, Cached, rustc_hash::FxBuildHasher>,
    dirty: usize,
    /// The names of cells written or restored (expiry clears each in the cache).
    names: Vec<Box<str>>,
    /// Cells held, over all windows.
    cells: usize,
    /// The first error reading or writing the store since the last flush, which
    /// reports it: a cell access cannot fail by itself.
    failed: Option<String>,
    /// Where a cell's address is encoded; reused from call to call.
    scratch: std::cell::Cell<Vec<u8>>,
}

impl EmbeddedStateBackend {
    /// A backend keeping its cells under directory `dir` (the process's store there,
    /// opened on first use), for keys hashed into `max_key_groups` key groups, whose
    /// windows expire `allowed_lateness_ms` after their end.
    pub fn open(dir: &Path, max_key_groups: u32, allowed_lateness_ms: i64) -> Result<Self, String> {
        let store = Store::open(dir)?;
        let n = KEYSPACES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let keyspace = |name: String| {
            store
                .db
                .keyspace(&name, || {
                    fjall::KeyspaceCreateOptions::default().max_memtable_size(MEMTABLE_BYTES)
                })
                .map_err(|e| io_error("cannot open a keyspace", &store.dir, e))
        };
        let (cells, expiry) = (
            keyspace(format!("cells{n}"))?,
            keyspace(format!("expiry{n}"))?,
        );
        Ok(EmbeddedStateBackend {
            store,
            keyspace: cells,
            expiry,
            pending_expiry: BTreeSet::new(),
            windows: 0,
            allowed_lateness_ms,
            max_key_groups,
            cache: Default::default(),
            dirty: 0,
            names: Vec::new(),
            cells: 0,
            failed: None,
            scratch: Default::default(),
        })
    }

    /// The address of (key, window)'s cells, up to the name, into `out`.
    fn window_prefix(&self, key: &[u8], window: &BoundedWindow, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&key_group_of(key, self.max_key_groups).to_be_bytes());
        out.extend_from_slice(&(key.len() as u32).to_be_bytes());
        out.extend_from_slice(key);
        postcard::to_io(window, &mut *out).expect("a window encodes");
    }

    /// Records that (key, window) holds cells or timers, so that it expires: an entry in
    /// `expiry` unless it has one.
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
                self.failed.get_or_insert(io_error(
                    "cannot read a window's expiry",
                    &self.store.dir,
                    e,
                ));
            }
        }
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
                Ok(c) => c.map(Cow::Owned),
                Err(e) => {
                    // Reads take `&self`: the flush at the bundle's end fails instead.
                    tracing::error!("{e}");
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
            let cell = match self.read_store(&buf) {
                Ok(c) => c,
                Err(e) => {
                    self.failed.get_or_insert(e);
                    None
                }
            };
            self.cache.insert(
                buf.clone().into_boxed_slice(),
                Cached { cell, dirty: false },
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
        if self.dirty == 0 && self.pending_expiry.is_empty() {
            return Ok(());
        }
        let mut batch = self.store.db.batch();
        for entry in std::mem::take(&mut self.pending_expiry) {
            batch.insert(&self.expiry, entry, []);
        }
        for (address, c) in self.cache.iter_mut().filter(|(_, c)| c.dirty) {
            match &c.cell {
                Some(cell) => batch.insert(
                    &self.keyspace,
                    &address[..],
                    postcard::to_allocvec(cell).expect("a cell encodes"),
                ),
                None => batch.remove(&self.keyspace, &address[..]),
            }
            c.dirty = false;
        }
        self.dirty = 0;
        batch
            .commit()
            .map_err(|e| io_error("cannot write cells", &self.store.dir, e))
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
        Cow::Borrowed(Cell::Value(v)) => Some(Cow::Borrowed(v)),
        Cow::Owned(Cell::Value(v)) => Some(Cow::Owned(v)),
        _ => None,
    }
}

impl StateCells for EmbeddedStateBackend {
    fn get(&self, key: &[u8], window: &BoundedWindow, name: &str) -> Option<Cow<'_, [u8]>> {
        self.read(key, window, name).and_then(value)
    }
    fn put(&mut self, key: &[u8], window: &BoundedWindow, name: &str, value: &[u8]) {
        match self.cell_or_insert(key, window, name, || Cell::Value(Vec::new())) {
            Cell::Value(v) => {
                v.clear();
                v.extend_from_slice(value);
            }
            other => *other = Cell::Value(value.to_vec()),
        }
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
        match self.cell_or_insert(key, window, name, || Cell::Bag(Vec::new())) {
            Cell::Bag(b) => b.push(value.to_vec()),
            other => *other = Cell::Bag(vec![value.to_vec()]),
        }
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
        match self.cell_or_insert(key, window, name, || Cell::Map(BTreeMap::new())) {
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
        let slot = self.slot(key, window, name);
        if slot.take().is_some() {
            self.cells -= 1;
        }
    }
}

impl StateBackend for EmbeddedStateBackend {
    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow) {
        let mut prefix = Vec::new();
        self.window_prefix(key, window, &mut prefix);
        // The cells in the store, and those cached that may not be there yet.
        let mut names: Vec<Vec<u8>> = Vec::new();
        for kv in self.keyspace.prefix(&prefix) {
            match kv.key() {
                Ok(k) => names.push(k[prefix.len()..].to_vec()),
                Err(e) => {
                    self.failed
                        .get_or_insert(io_error("cannot list cells", &self.store.dir, e));
                    return;
                }
            }
        }
        for n in &self.names {
            if !names.iter().any(|m| m.as_slice() == n.as_bytes()) {
                names.push(n.as_bytes().to_vec());
            }
        }
        for n in names {
            let Ok(name) = std::str::from_utf8(&n) else {
                continue;
            };
            let name = name.to_string();
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
            self.failed.get_or_insert(e);
            return;
        }
        // Entries whose time is before the watermark's sort before its 8 bytes.
        let bound = (watermark.millis() as u64 ^ (1 << 63)).to_be_bytes();
        let mut due = Vec::new();
        for kv in self.expiry.range(..&bound[..]) {
            match kv.key() {
                Ok(k) => due.push(k),
                Err(e) => {
                    self.failed.get_or_insert(io_error(
                        "cannot list expired windows",
                        &self.store.dir,
                        e,
                    ));
                    return;
                }
            }
        }
        let mut batch = self.store.db.batch();
        for entry in due {
            let Some((key, window)) = entry.get(8..).and_then(decode_window_prefix) else {
                self.failed.get_or_insert(format!(
                    "a window's expiry entry in {} does not decode",
                    self.store.dir.display()
                ));
                return;
            };
            self.clear_window(key, &window);
            f(key, &window);
            batch.remove(&self.expiry, &entry[..]);
            self.windows -= 1;
        }
        if let Err(e) = batch.commit() {
            self.failed
                .get_or_insert(io_error("cannot write expired windows", &self.store.dir, e));
        }
    }
    fn next_expiry(&self) -> Option<Timestamp> {
        let stored = match self.expiry.first_key_value() {
            Some(kv) => kv.key().ok().map(|k| k.to_vec()),
            None => None,
        };
        let first = match (self.pending_expiry.first(), stored) {
            (Some(p), Some(s)) => p.clone().min(s),
            (Some(p), None) => p.clone(),
            (None, s) => s?,
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
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if self.dirty >= WRITE_BATCH_CELLS || self.cache.len() > CACHE_CELLS {
            self.sync()?;
        }
        Ok(())
    }
    fn sync(&mut self) -> Result<(), String> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.write_dirty()?;
        if self.cache.len() > CACHE_CELLS {
            self.cache.clear();
        }
        Ok(())
    }
    fn freeze(&self) -> Box<dyn FrozenState> {
        // The caller synced ([`StateBackend::sync`]): the store holds every cell.
        debug_assert_eq!(self.dirty, 0, "a snapshot of unsynced cells");
        Box::new(Frozen {
            snapshot: self.store.db.snapshot(),
            keyspace: self.keyspace.clone(),
            dir: self.store.dir.clone(),
        })
    }
    fn restore_add(&mut self, bytes: &[u8]) -> Result<(), String> {
        let mut buf = Vec::new();
        let mut batch = self.store.db.batch();
        for (id, cell) in decode_part_cells(bytes)? {
            self.window_prefix(&id.key, &id.window, &mut buf);
            buf.extend_from_slice(id.name.as_bytes());
            self.cache.remove(buf.as_slice());
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
            .map_err(|e| io_error("cannot write restored cells", &self.store.dir, e))
    }
}

/// The cells as of [`StateBackend::freeze`]: a view of the store.
struct Frozen {
    snapshot: fjall::Snapshot,
    keyspace: fjall::Keyspace,
    dir: PathBuf,
}

/// A cell's address decoded: (key, window, name).
fn decode_address(a: &[u8]) -> Option<(&[u8], BoundedWindow, &str)> {
    let (key, window, rest) = split_address(a)?;
    Some((key, window, std::str::from_utf8(rest).ok()?))
}

/// The (key, window) of a window's address (a cell's, up to the name).
fn decode_window_prefix(a: &[u8]) -> Option<(&[u8], BoundedWindow)> {
    let (key, window, rest) = split_address(a)?;
    rest.is_empty().then_some((key, window))
}

/// An address split into its key, its window and the rest (a cell's name).
fn split_address(a: &[u8]) -> Option<(&[u8], BoundedWindow, &[u8])> {
    let len = u32::from_be_bytes(a.get(4..8)?.try_into().ok()?) as usize;
    let key = a.get(8..8 + len)?;
    let (window, rest) = postcard::take_from_bytes::<BoundedWindow>(a.get(8 + len..)?).ok()?;
    Some((key, window, rest))
}

impl FrozenState for Frozen {
    fn parts_by(self: Box<Self>, group_of: &mut dyn FnMut(&[u8]) -> u32) -> BTreeMap<u32, Vec<u8>> {
        use fjall::Readable;
        // Decoded first, then borrowed by the parts' encoding.
        let mut cells: Vec<(Vec<u8>, BoundedWindow, String, Cell)> = Vec::new();
        for kv in self.snapshot.iter(&self.keyspace) {
            let (address, bytes) = kv.into_inner().unwrap_or_else(|e| {
                // A snapshot must not leave a cell out: fail the checkpoint loudly.
                panic!(
                    "{}",
                    io_error("cannot read cells for a snapshot", &self.dir, e)
                )
            });
            let (key, window, name) = decode_address(&address).unwrap_or_else(|| {
                panic!("a cell address in {} does not decode", self.dir.display())
            });
            let cell: Cell = postcard::from_bytes(&bytes)
                .unwrap_or_else(|e| panic!("{}", io_error("a cell does not decode", &self.dir, e)));
            cells.push((key.to_vec(), window, name.to_string(), cell));
        }
        let mut groups: BTreeMap<u32, Vec<(CellIdRef<'_>, &Cell)>> = BTreeMap::new();
        for (key, window, name, cell) in &cells {
            groups
                .entry(group_of(key))
                .or_default()
                .push((CellIdRef { key, window, name }, cell));
        }
        groups
            .into_iter()
            .map(|(g, mut part)| (g, encode_cells(&mut part)))
            .collect()
    }
}
