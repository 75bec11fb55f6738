//! State backends: where stateful DoFns' cells live, runner-neutral and snapshottable.

mod bytes;
mod embedded;
mod in_memory;
#[cfg(test)]
mod tests;
mod timers;
#[cfg(test)]
mod timers_tests;

pub use embedded::tables;
pub use embedded::{
    restore_timers, timer_range, EmbeddedStateBackend, EmbeddedTimers, EmbeddedUnits, FrozenUnits,
    Wakes, CACHE_CELLS,
};
pub use in_memory::{decode_cell, decode_cells, CellContents, CellEntry, InMemoryStateBackend};
use std::path::PathBuf;
pub use tidewater::exec::StateCells;
use tidewater::{BoundedWindow, Timestamp};
pub use timers::{FrozenTimers, KeyTimer, KeyedTimers, TimerStream};

/// The cells of stateful transforms, addressed by (encoded key, window, name), with
/// values as encoded bytes. A backend can snapshot everything to bytes and restore it:
/// the fault-tolerant runners checkpoint through this, and a snapshot taken by one
/// runner restores in another.
pub trait StateBackend: StateCells + Send {
    /// The end of a bundle: an error reading or writing the cells since the last
    /// flush is returned (a cell access cannot fail by itself), and writes held back
    /// go to where the cells live once there are enough of them for one batch.
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }
    /// Writes every write held back: before a snapshot ([`StateBackend::freeze`]).
    fn sync(&mut self) -> Result<(), String> {
        self.flush()
    }
    /// Drops every cell of (key, window): window expiry.
    fn clear_window(&mut self, key: &[u8], window: &BoundedWindow);
    /// Number of cells held.
    fn len(&self) -> usize;
    /// No cells.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Keeps (key, window) until it expires though it may hold no cells (it holds
    /// timers): [`StateBackend::expire`] hands it over with the windows holding cells.
    fn keep_window(&mut self, key: &[u8], window: &BoundedWindow);
    /// Drops the cells of every window (holding cells since it was last expired, or
    /// kept) whose garbage-collection time ([`crate::windowing::gc_time`]: its end plus
    /// the allowed lateness) is before `watermark`, and hands each to `f`, in order of
    /// that time: the runner drops its timers. A window written again after it expired
    /// (a late write the runner let through) expires again.
    fn expire(&mut self, watermark: Timestamp, f: &mut dyn FnMut(&[u8], &BoundedWindow));
    /// The garbage-collection time of the window that expires next.
    fn next_expiry(&self) -> Option<Timestamp>;
    /// Windows held until they expire (with cells, or kept).
    fn windows(&self) -> usize;
    /// The keys of those windows (for tests: it may read every window).
    fn live_keys(&self) -> usize;
    /// The cells as they are now, in a copy that later writes do not change and that
    /// can be read on another thread: the part of a snapshot taken on the operator's
    /// thread. Cheap: no cell is copied or encoded here.
    fn freeze(&self) -> Box<dyn FrozenState>;
    /// [`StateBackend::freeze`] for a copy that is asked for these windows only (a
    /// delta snapshot's): a backend may copy less.
    fn freeze_windows(&self, windows: &[(Vec<u8>, BoundedWindow)]) -> Box<dyn FrozenState> {
        let _ = windows;
        self.freeze()
    }
    /// Adds the cells of windows as [`FrozenState`] gives them (a snapshot's), over
    /// any the backend holds; each window is kept until it expires. A cell that does
    /// not decode is an error, never a panic.
    fn restore_windows(&mut self, windows: &[RestoredWindow<'_>]) -> Result<(), String>;
    /// Adds cells given by their address in the embedded store's layout and their
    /// encoding, in ascending address order (a checkpoint's table files, see
    /// [`tables::restore_cells`]), over any the backend holds; each window is kept
    /// until it expires. A cell or address that does not decode, or an address out of
    /// order, is an error.
    fn restore_addressed(
        &mut self,
        entries: &mut tables::AddressedCells<'_>,
    ) -> Result<(), String> {
        tables::restore_by_windows(entries, self)
    }
    /// The cells frozen as of now as the files of the store that keeps them, for a
    /// checkpoint of those files (see [`embedded::tables`]); `None` where no store
    /// keeps them. The caller synced them ([`StateBackend::sync`]).
    fn freeze_files(&self) -> Option<tables::KeyspaceFreeze> {
        None
    }
    /// Adds the cells of a part written before 2026-12 (the postcard encoding of a
    /// group's cells, as [`decode_cells`] reads it); parts of several groups, from
    /// several backends, can be restored into one. A corrupt part is an error, never
    /// a panic.
    fn restore_add(&mut self, bytes: &[u8]) -> Result<(), String>;
}

/// The cells of one (key, window) of a [`FrozenState`]: (name, the cell encoded), in
/// name order. The encoding is the backend's (both backends share it).
pub type EncodedCells = Vec<(String, Vec<u8>)>;

/// A window holding cells, as of [`StateBackend::freeze`].
#[derive(Debug, PartialEq, Eq)]
pub struct FrozenWindow {
    /// The key group of its key.
    pub group: u32,
    /// Its [`window_id`].
    pub id: Vec<u8>,
    /// The encoded key.
    pub key: Vec<u8>,
    pub window: BoundedWindow,
    pub cells: EncodedCells,
}

impl FrozenWindow {
    /// A window of `cells`, placed among `max_key_groups` key groups.
    pub fn new(
        key: &[u8],
        window: &BoundedWindow,
        cells: EncodedCells,
        max_key_groups: u32,
    ) -> Self {
        let (group, id) = snapshot_place(key, window, max_key_groups);
        FrozenWindow {
            group,
            id,
            key: key.to_vec(),
            window: window.clone(),
            cells,
        }
    }
}

/// A window's cells to restore ([`StateBackend::restore_windows`]).
pub struct RestoredWindow<'a> {
    pub key: &'a [u8],
    pub window: BoundedWindow,
    /// (name, the cell encoded), as in [`EncodedCells`].
    pub cells: Vec<(&'a str, &'a [u8])>,
}

/// The cells of a [`StateBackend`] as of [`StateBackend::freeze`].
pub trait FrozenState: Send {
    /// Every window holding cells, with its cells, to `f` in snapshot order: by key
    /// group (of `max_key_groups`), then by [`window_id`]. An error reading the cells
    /// (the embedded store's files), or of `f`, fails the snapshot.
    fn for_each_window(
        self: Box<Self>,
        max_key_groups: u32,
        f: &mut dyn FnMut(FrozenWindow) -> Result<(), String>,
    ) -> Result<(), String>;
    /// The cells of (key, window) (none if it holds none).
    fn window(&self, key: &[u8], window: &BoundedWindow) -> Result<EncodedCells, String>;
}

/// Every window of `frozen` holding cells, in snapshot order (see
/// [`FrozenState::for_each_window`]): the same from either backend for the same cells.
pub fn frozen_windows(
    frozen: Box<dyn FrozenState>,
    max_key_groups: u32,
) -> Result<Vec<FrozenWindow>, String> {
    let mut windows = Vec::new();
    frozen.for_each_window(max_key_groups, &mut |w| {
        windows.push(w);
        Ok(())
    })?;
    Ok(windows)
}

/// Restores `windows` (as [`FrozenState::windows`] gives them) into `state`.
pub fn restore_frozen(
    state: &mut dyn StateBackend,
    windows: &[FrozenWindow],
) -> Result<(), String> {
    let restored: Vec<RestoredWindow<'_>> = windows
        .iter()
        .map(|w| RestoredWindow {
            key: &w.key,
            window: w.window.clone(),
            cells: w
                .cells
                .iter()
                .map(|(n, c)| (n.as_str(), c.as_slice()))
                .collect(),
        })
        .collect();
    state.restore_windows(&restored)
}

/// The id of (key, window) in a snapshot's key group table (see
/// [`crate::keyed::stateful`]) and, after the key group, in the embedded store:
/// `[key length: u32 BE][key][window]`, appended to `out`. The window's encoding is
/// self-delimiting, so one window's id is no prefix of another's.
pub fn window_id(key: &[u8], window: &BoundedWindow, out: &mut Vec<u8>) {
    let len = u32::try_from(key.len()).expect("a key shorter than 4 GiB");
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(key);
    postcard::to_io(window, &mut *out).expect("a window encodes");
}

/// Where (key, window) goes in a snapshot: its key group (of `max_key_groups`) and its
/// [`window_id`]; snapshot order is this pair's.
pub fn snapshot_place(key: &[u8], window: &BoundedWindow, max_key_groups: u32) -> (u32, Vec<u8>) {
    let mut id = Vec::with_capacity(key.len() + 16);
    window_id(key, window, &mut id);
    (tidewater::exec::key_group_of(key, max_key_groups), id)
}

/// A [`window_id`] taken apart: the key, the window and the bytes after them.
pub fn split_window_id(id: &[u8]) -> Option<(&[u8], BoundedWindow, &[u8])> {
    let len = u32::from_be_bytes(id.get(..4)?.try_into().ok()?) as usize;
    let key = id.get(4..4usize.checked_add(len)?)?;
    let (window, rest) = postcard::take_from_bytes::<BoundedWindow>(id.get(4 + len..)?).ok()?;
    Some((key, window, rest))
}

/// Where a job keeps the keyed state of its stateful DoFns (`--state-backend`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum StateChoice {
    /// In memory ([`InMemoryStateBackend`]).
    #[default]
    Memory,
    /// In an embedded store on local disk under `dir` ([`EmbeddedStateBackend`]); a
    /// grouping keeps `hot_windows` windows in memory, the others in the store. With
    /// `tables`, a stateful ParDo's checkpoints are the store's own files, put there
    /// ([`tables`]; Flink's incremental RocksDB checkpoints), and restored from there.
    Embedded {
        dir: PathBuf,
        hot_windows: usize,
        tables: Option<tables::TableDir>,
    },
}

impl StateChoice {
    /// The choice of a job's options: `--state-backend`, `--state-dir` (by default
    /// the system's temporary directory) and `--state-hot-windows`.
    pub fn of(options: &tidewater::PipelineOptions) -> StateChoice {
        match options.state_backend {
            tidewater::StateBackendKind::Memory => StateChoice::Memory,
            tidewater::StateBackendKind::Fjall => StateChoice::Embedded {
                dir: options.state_dir.clone().unwrap_or_else(std::env::temp_dir),
                hot_windows: options
                    .state_hot_windows
                    .map_or(crate::keyed::reduce::HOT_WINDOWS, |n| {
                        usize::try_from(n).unwrap_or(usize::MAX)
                    }),
                tables: None,
            },
        }
    }

    /// This choice with checkpoints of the embedded store's files put into and
    /// restored from `tables` (see [`StateChoice::Embedded`]); in memory, unchanged.
    pub fn with_tables(mut self, to: tables::TableDir) -> StateChoice {
        if let StateChoice::Embedded { tables, .. } = &mut self {
            *tables = Some(to);
        }
        self
    }

    /// Where checkpoints of the embedded store's files go, if they are taken.
    pub fn tables(&self) -> Option<&tables::TableDir> {
        match self {
            StateChoice::Embedded { tables, .. } => tables.as_ref(),
            StateChoice::Memory => None,
        }
    }

    /// A backend of this kind, for keys hashed into `max_key_groups` key groups, whose
    /// windows expire `allowed_lateness_ms` after their end.
    pub fn backend(
        &self,
        max_key_groups: u32,
        allowed_lateness_ms: i64,
    ) -> tidewater::Result<Box<dyn StateBackend>> {
        Ok(match self {
            StateChoice::Memory => Box::new(InMemoryStateBackend::new(allowed_lateness_ms)),
            StateChoice::Embedded { dir, .. } => Box::new(
                EmbeddedStateBackend::open(dir, max_key_groups, allowed_lateness_ms)
                    .map_err(|message| open_failed(dir, message))?,
            ),
        })
    }

    /// Timers of this kind (beside the cells of [`StateChoice::backend`]), for keys
    /// hashed into `max_key_groups` key groups.
    pub fn timers(&self, max_key_groups: u32) -> tidewater::Result<Box<dyn KeyedTimers>> {
        Ok(match self {
            StateChoice::Memory => {
                Box::new(crate::timers::TimerService::<Vec<u8>, String>::default())
            }
            StateChoice::Embedded { dir, .. } => Box::new(
                EmbeddedTimers::open(dir, max_key_groups)
                    .map_err(|message| open_failed(dir, message))?,
            ),
        })
    }

    /// A store of a reducer's windows beyond memory, if this kind has one (for keys
    /// hashed into `max_key_groups` key groups).
    pub fn units(&self, max_key_groups: u32) -> tidewater::Result<Option<EmbeddedUnits>> {
        Ok(match self {
            StateChoice::Memory => None,
            StateChoice::Embedded { dir, .. } => Some(
                EmbeddedUnits::open(dir, max_key_groups)
                    .map_err(|message| open_failed(dir, message))?,
            ),
        })
    }
}

fn open_failed(dir: &std::path::Path, message: String) -> tidewater::Error {
    tidewater::Error::Io {
        what: "cannot open the embedded state store".into(),
        path: dir.to_path_buf(),
        cause: std::io::Error::other(message),
    }
}
