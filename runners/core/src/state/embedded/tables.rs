//! A keyspace's state at a snapshot as files: the store's own table files, which never
//! change once written, and one table of what its memtables held. What Flink's
//! incremental RocksDB checkpoints are: a checkpoint takes the files new since the last
//! one (a hard link on the same file system) and refers to the others, so that what a
//! checkpoint costs does not grow with the state.
//!
//! [`capture`] puts a keyspace's files as of a snapshot into a [`TableSink`] (the
//! checkpoint's store of tables) and says which they are ([`KeyspaceFiles`]);
//! [`TableReader`] reads them back, a range of keys at a time (a task's key groups),
//! as the snapshot read them: the newest entry of each key below the snapshot's
//! sequence number, deletions applied.
//!
//! Everything a reader opens is untrusted: a file's length and checksum (lsm-tree's,
//! the XXH3-128 of its bytes) are checked against what the capture recorded before it
//! is read, and a table that does not parse is an error naming it, never a panic.

use super::store::{io_error, Store};
use lsm_tree::{InternalValue, Memtable, SeqNo, Table, UserKey, UserValue};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One table file of a [`KeyspaceFiles`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableFile {
    /// Its name in the [`TableSink`]: unique to its contents (the store's id, the
    /// keyspace's name, the table's id in it).
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// lsm-tree's checksum of its bytes (XXH3-128).
    pub checksum: u128,
    /// The sequence number of every entry, for a table that holds one (lsm-tree's
    /// ingested tables), else 0.
    pub global_seqno: SeqNo,
    /// Its least and greatest key.
    pub first: Vec<u8>,
    pub last: Vec<u8>,
}

/// A keyspace's entries as of a snapshot: those of `tables` below `seqno`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyspaceFiles {
    pub seqno: SeqNo,
    pub tables: Vec<TableFile>,
}

/// Where a checkpoint's table files go.
pub trait TableSink {
    /// Whether a file of this name is there (a table an earlier checkpoint took: a
    /// name's contents never change).
    fn has(&self, name: &str) -> bool;
    /// Puts the file at `path` there as `name` (a hard link where it can be one).
    fn put(&self, name: &str, path: &Path) -> Result<(), String>;
}

/// A [`TableSink`] in a local directory: a hard link to the store's file where both
/// are on one file system, a copy otherwise.
pub struct DirSink(pub PathBuf);

impl TableSink for DirSink {
    fn has(&self, name: &str) -> bool {
        self.0.join(name).exists()
    }

    fn put(&self, name: &str, path: &Path) -> Result<(), String> {
        let to = self.0.join(name);
        let fail =
            |e: std::io::Error| format!("cannot put {} at {}: {e}", path.display(), to.display());
        if std::fs::hard_link(path, &to).is_ok() {
            return Ok(());
        }
        let tmp = self.0.join(format!(".{name}.tmp"));
        std::fs::copy(path, &tmp).map_err(fail)?;
        std::fs::File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(fail)?;
        std::fs::rename(&tmp, &to).map_err(fail)
    }
}

/// A checkpoint store's directory of table files (`DIR/tables` of a local checkpoint
/// directory): where a job's keyspaces put their files at each checkpoint, and where a
/// restore reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDir(pub PathBuf);

impl TableDir {
    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl TableSink for TableDir {
    fn has(&self, name: &str) -> bool {
        DirSink(self.0.clone()).has(name)
    }

    fn put(&self, name: &str, path: &Path) -> Result<(), String> {
        std::fs::create_dir_all(&self.0).map_err(|e| io_error("cannot create", &self.0, e))?;
        DirSink(self.0.clone()).put(name, path)
    }
}

/// A keyspace frozen for [`capture`]: a snapshot of its store held open (which keeps
/// the snapshot's tables on disk) until the capture is done.
pub struct KeyspaceFreeze {
    pub(super) snapshot: fjall::Snapshot,
    pub(super) keyspace: fjall::Keyspace,
    /// Names the keyspace among every store's (see [`capture`]).
    pub(super) prefix: String,
    /// Where its memtables' table is written before it goes into the sink.
    pub(super) scratch: PathBuf,
}

/// `keyspace` of `store` frozen as of now, for a checkpoint of its files.
pub(super) fn freeze(store: &Store, keyspace: &fjall::Keyspace) -> KeyspaceFreeze {
    KeyspaceFreeze {
        snapshot: store.db.snapshot(),
        keyspace: keyspace.clone(),
        prefix: format!("{}-{}", store.uid, keyspace.name()),
        scratch: store.dir.join("checkpoint-scratch"),
    }
}

impl KeyspaceFreeze {
    /// [`capture`] of the frozen keyspace into `sink`.
    pub fn capture(self, sink: &dyn TableSink) -> Result<KeyspaceFiles, String> {
        capture(
            &self.keyspace,
            self.snapshot.seqno(),
            &self.prefix,
            &self.scratch,
            sink,
        )
    }
}

/// A [`crate::snapshot::Scope::Files`] part: the files of each of an instance's
/// keyspaces, in an order its operator knows.
pub fn encode_files_part(keyspaces: &[KeyspaceFiles]) -> Vec<u8> {
    crate::snapshot::encode_part(&keyspaces)
}

/// The keyspaces' files of a [`crate::snapshot::Scope::Files`] part.
pub fn decode_files_part(bytes: &[u8]) -> Result<Vec<KeyspaceFiles>, String> {
    crate::snapshot::decode_part_or_message(bytes, "a part naming table files")
}

/// Checks the table file `f` in `dir` (its length, then its checksum), as a restore
/// would before reading it.
pub fn check_table(dir: &Path, f: &TableFile) -> Result<(), String> {
    if !valid_table_name(&f.name) {
        return Err(format!(
            "a checkpoint names table file {:?} in {}: not a file name",
            f.name,
            dir.display()
        ));
    }
    check(&dir.join(&f.name), f)
}

/// Whether `name` may name a table file of a checkpoint: a plain file name (letters,
/// digits, `-`, `_` and `.`, not first), never a path.
pub fn valid_table_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// Puts `keyspace`'s entries as of the snapshot at `seqno` into `sink`: its tables
/// the sink does not have yet, and a table of the entries of its memtables below
/// `seqno` (the newest of each key; deletions kept, since they hide older entries of
/// the tables), written under `scratch` first. `prefix` names the keyspace uniquely
/// among every store whose files the sink holds.
///
/// Call with a snapshot at `seqno` open: it keeps the tables' files on disk.
pub fn capture(
    keyspace: &fjall::Keyspace,
    seqno: SeqNo,
    prefix: &str,
    scratch: &Path,
    sink: &dyn TableSink,
) -> Result<KeyspaceFiles, String> {
    let (tables, memtables) = keyspace.checkpoint_view(seqno).ok_or_else(|| {
        format!("keyspace {prefix} separates its values: its files cannot be checkpointed")
    })?;
    let mut files = Vec::with_capacity(tables.len() + 1);
    for t in &tables {
        let file = table_file(format!("{prefix}-{}.table", t.id()), t)?;
        if !sink.has(&file.name) {
            sink.put(&file.name, &t.path)?;
        }
        files.push(file);
    }
    if let Some(file) = dump_memtables(&memtables, seqno, prefix, scratch, sink)? {
        files.push(file);
    }
    Ok(KeyspaceFiles {
        seqno,
        tables: files,
    })
}

/// What a [`KeyspaceFiles`] records of table `t`, named `name`.
fn table_file(name: String, t: &Table) -> Result<TableFile, String> {
    let len = std::fs::metadata(&*t.path)
        .map_err(|e| format!("cannot read table file {}: {e}", t.path.display()))?
        .len();
    Ok(TableFile {
        name,
        len,
        checksum: t.checksum().into_u128(),
        global_seqno: t.global_seqno(),
        first: t.metadata.key_range.min().to_vec(),
        last: t.metadata.key_range.max().to_vec(),
    })
}

/// The entries of `memtables` below `seqno` as one table put into `sink` (none if they
/// hold none).
fn dump_memtables(
    memtables: &[Arc<Memtable>],
    seqno: SeqNo,
    prefix: &str,
    scratch: &Path,
    sink: &dyn TableSink,
) -> Result<Option<TableFile>, String> {
    let iters: Vec<lsm_tree::BoxedIterator<'_>> = memtables
        .iter()
        .map(|m| Box::new(m.iter().map(Ok)) as lsm_tree::BoxedIterator<'_>)
        .collect();
    let visible = lsm_tree::merge::Merger::new(iters).filter(|v| match v {
        Ok(v) => v.key.seqno < seqno,
        Err(_) => true,
    });
    let mut newest = lsm_tree::mvcc_stream::MvccStream::new(visible).peekable();
    if newest.peek().is_none() {
        return Ok(None);
    }
    std::fs::create_dir_all(scratch).map_err(|e| io_error("cannot create", scratch, e))?;
    let name = format!("{prefix}-m{seqno}.table");
    let path = scratch.join(&name);
    let _ = std::fs::remove_file(&path);
    let fail = |e: lsm_tree::Error| io_error("cannot write a table of the memtables", scratch, e);
    let mut writer = lsm_tree::table::Writer::new(path.clone(), 0, 0).map_err(fail)?;
    for v in newest {
        writer.write(v.map_err(fail)?).map_err(fail)?;
    }
    let (_, checksum) = writer
        .finish()
        .map_err(fail)?
        .expect("a table of at least one entry");
    let table = recover(&path, checksum.into_u128(), 0, 0, &reader_caches())?;
    let file = table_file(name.clone(), &table)?;
    drop(table);
    let put = sink.put(&name, &path);
    let _ = std::fs::remove_file(&path);
    put.map(|()| Some(file))
}

/// The block cache and file descriptors a reader's tables share.
struct Caches {
    cache: Arc<lsm_tree::Cache>,
    descriptors: Arc<lsm_tree::DescriptorTable>,
}

fn reader_caches() -> Caches {
    Caches {
        cache: Arc::new(lsm_tree::Cache::with_capacity_bytes(8 << 20)),
        descriptors: Arc::new(lsm_tree::DescriptorTable::new(64)),
    }
}

/// Opens the table at `path` (an id of its own in `tree`, for the block cache).
fn recover(
    path: &Path,
    checksum: u128,
    global_seqno: SeqNo,
    tree: u64,
    caches: &Caches,
) -> Result<Table, String> {
    Table::recover(
        path.to_path_buf(),
        lsm_tree::Checksum::from_raw(checksum),
        global_seqno,
        tree,
        caches.cache.clone(),
        Some(caches.descriptors.clone()),
        false,
        false,
    )
    .map_err(|e| format!("table file {} does not open: {e:?}", path.display()))
}

/// The tables of a [`KeyspaceFiles`], opened from a directory for reading.
pub struct TableReader {
    tables: Vec<Table>,
    seqno: SeqNo,
    dir: PathBuf,
}

impl TableReader {
    /// The directory its tables are in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Opens the tables of `files` in `dir`, each checked first: its length and its
    /// checksum as recorded, and that it parses.
    pub fn open(dir: &Path, files: &KeyspaceFiles) -> Result<Self, String> {
        Self::open_range(dir, files, &[], None)
    }

    /// [`TableReader::open`] of the tables that may hold keys in `from..to` (to the
    /// end if `to` is `None`), by the least and greatest key recorded: the others are
    /// neither checked nor read.
    pub fn open_range(
        dir: &Path,
        files: &KeyspaceFiles,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> Result<Self, String> {
        let caches = reader_caches();
        let mut tables = Vec::with_capacity(files.tables.len());
        let overlapping = files
            .tables
            .iter()
            .filter(|f| f.last.as_slice() >= from && to.is_none_or(|to| f.first.as_slice() < to));
        for (i, f) in overlapping.enumerate() {
            check_table(dir, f)?;
            let path = dir.join(&f.name);
            tables.push(recover(
                &path,
                f.checksum,
                f.global_seqno,
                i as u64,
                &caches,
            )?);
        }
        Ok(TableReader {
            tables,
            seqno: files.seqno,
            dir: dir.to_path_buf(),
        })
    }

    /// The entries with keys in `from..to` (to the end if `to` is `None`), in key
    /// order: the newest of each key below the snapshot's sequence number, deleted
    /// ones left out.
    pub fn range<'a>(
        &'a self,
        from: &[u8],
        to: Option<&[u8]>,
    ) -> impl Iterator<Item = Result<(UserKey, UserValue), String>> + 'a {
        use std::ops::Bound;
        let lo = UserKey::from(from);
        let hi = to.map(UserKey::from);
        let bounds = (
            Bound::Included(lo.clone()),
            hi.clone().map_or(Bound::Unbounded, Bound::Excluded),
        );
        let iters: Vec<lsm_tree::BoxedIterator<'a>> = self
            .tables
            .iter()
            .filter(|t| {
                let range = &t.metadata.key_range;
                **range.max() >= *lo && hi.as_ref().is_none_or(|hi| **range.min() < **hi)
            })
            .map(|t| Box::new(t.range(bounds.clone())) as lsm_tree::BoxedIterator<'a>)
            .collect();
        let seqno = self.seqno;
        let visible = lsm_tree::merge::Merger::new(iters).filter(move |v| match v {
            Ok(v) => v.key.seqno < seqno,
            Err(_) => true,
        });
        lsm_tree::mvcc_stream::MvccStream::new(visible).filter_map(move |v| match v {
            Ok(v) if v.key.is_tombstone() => None,
            Ok(InternalValue { key, value }) => Some(Ok((key.user_key, value))),
            Err(e) => Some(Err(format!(
                "a checkpoint's table in {} does not read: {e:?}",
                self.dir.display()
            ))),
        })
    }
}

/// A table file read through and found to match its checksum in this process.
type Verified = (PathBuf, u64, Option<std::time::SystemTime>, u128);

/// The table files checked in this process (see [`check`]).
static VERIFIED: std::sync::Mutex<std::collections::BTreeSet<Verified>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// Checks the file at `path` against what `f` recorded: its length, then the
/// checksum of its bytes.
fn check(path: &Path, f: &TableFile) -> Result<(), String> {
    use std::io::Read;
    let fail = |e: std::io::Error| format!("cannot read table file {}: {e}", path.display());
    let mut file = std::fs::File::open(path).map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    let len = meta.len();
    if len != f.len {
        return Err(format!(
            "table file {} is {len} bytes, its checkpoint says {}",
            path.display(),
            f.len
        ));
    }
    // A restore checks the tables at recovery and again as it opens them: the same
    // file (inode, time of its last change) is read through once per process.
    let seen = {
        use std::os::unix::fs::MetadataExt;
        (
            path.to_path_buf(),
            meta.ino(),
            meta.modified().ok(),
            f.checksum,
        )
    };
    let verified = || VERIFIED.lock().unwrap_or_else(|p| p.into_inner());
    if verified().contains(&seen) {
        return Ok(());
    }
    let mut hasher = xxhash_rust::xxh3::Xxh3Default::new();
    let mut buf = vec![0; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(fail)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    if hasher.digest128() != f.checksum {
        return Err(format!(
            "table file {} does not match its checksum: it is corrupt",
            path.display()
        ));
    }
    verified().insert(seen);
    Ok(())
}

/// The addresses of the cells of key groups `groups`: `from..to`.
pub fn group_range(groups: &std::ops::Range<u32>) -> (Vec<u8>, Vec<u8>) {
    (
        groups.start.to_be_bytes().to_vec(),
        groups.end.to_be_bytes().to_vec(),
    )
}

/// Windows restored in one [`crate::state::StateBackend::restore_windows`] call, at
/// most (and at most [`RESTORE_BATCH_BYTES`] of cells): a restore from table files holds
/// one batch, not a key group.
const RESTORE_BATCH_WINDOWS: usize = 4096;
const RESTORE_BATCH_BYTES: usize = 16 << 20;

/// A window's cells read from table files, owned: (key, window, [(name, cell)]).
type OwnedWindow = (Vec<u8>, tidewater::BoundedWindow, Vec<(String, Vec<u8>)>);

/// Cells by their address in the embedded store (see [`super`]) with their encoding,
/// in ascending address order: what a checkpoint's cells keyspace holds.
pub type AddressedCells<'a> = dyn Iterator<Item = Result<(UserKey, UserValue), String>> + 'a;

/// Restores into `state` the cells of key groups `groups` that `reader` holds (a
/// checkpoint of a cells keyspace: entries at cell addresses, see [`super`]).
pub fn restore_cells(
    reader: &TableReader,
    groups: &std::ops::Range<u32>,
    state: &mut dyn crate::state::StateBackend,
) -> Result<(), String> {
    let (from, to) = group_range(groups);
    state.restore_addressed(&mut reader.range(&from, Some(&to)))
}

/// The parts of a cell's address: its key, window and name; an error naming `what`
/// if it does not decode.
pub(super) fn split_cell_address<'a>(
    address: &'a [u8],
    what: &str,
) -> Result<(&'a [u8], tidewater::BoundedWindow, &'a str), String> {
    super::frozen::split_address(address)
        .and_then(|(k, w, n)| Some((k, w, std::str::from_utf8(n).ok()?)))
        .ok_or_else(|| format!("a cell's address in {what} does not decode"))
}

/// [`crate::state::StateBackend::restore_addressed`] by windows: the cells of each
/// window gathered and restored a batch of windows at a time.
pub fn restore_by_windows<S: crate::state::StateBackend + ?Sized>(
    entries: &mut AddressedCells<'_>,
    state: &mut S,
) -> Result<(), String> {
    let mut batch: Vec<OwnedWindow> = Vec::new();
    let mut bytes = 0;
    let flush = |batch: &mut Vec<OwnedWindow>, state: &mut S| {
        let restored: Vec<crate::state::RestoredWindow<'_>> = batch
            .iter()
            .map(|(key, window, cells)| crate::state::RestoredWindow {
                key,
                window: window.clone(),
                cells: cells
                    .iter()
                    .map(|(n, c)| (n.as_str(), c.as_slice()))
                    .collect(),
            })
            .collect();
        let r = state.restore_windows(&restored);
        batch.clear();
        r
    };
    for kv in entries {
        let (address, cell) = kv?;
        let (key, window, name) = split_cell_address(&address, "a checkpoint's tables")?;
        let same = batch
            .last()
            .is_some_and(|(k, w, _)| k.as_slice() == key && *w == window);
        if !same {
            if batch.len() >= RESTORE_BATCH_WINDOWS || bytes >= RESTORE_BATCH_BYTES {
                flush(&mut batch, state)?;
                bytes = 0;
            }
            batch.push((key.to_vec(), window, Vec::new()));
        }
        bytes += address.len() + cell.len();
        let cells = &mut batch.last_mut().expect("a window").2;
        cells.push((name.to_string(), cell.to_vec()));
    }
    if !batch.is_empty() {
        flush(&mut batch, state)?;
    }
    Ok(())
}
