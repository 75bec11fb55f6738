//! The embedded store of a process and state directory: its directory (named after the
//! process, removed with it or, left by a process that died, at the next open) and its
//! fjall database, shared by the operator instances that keep their state there.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// A keyspace's memtable is written out as a file at this size.
const MEMTABLE_BYTES: u64 = 4 << 20;

/// A units keyspace's first level is compacted into the next at this many files
/// (fjall's default: 4).
const UNITS_L0_TABLES: u8 = 8;

/// A units keyspace's files are cut at this size (fjall's default: 64 MiB). A
/// compaction holds a hash of every key of the file it writes (for the file's filter),
/// and a wake queue's keys share long prefixes, so that a file of 32 MiB held some
/// millions: the windowed 10x run's anonymous memory went from 150 to 320 MB for
/// seconds at a time while its store emptied (killed under 256 MB), and with files of
/// 8 MiB a 2M-window run under 170 MB stays at 70-96 MB where it was killed before.
const UNITS_TABLE_BYTES: u64 = 8 << 20;

/// A units keyspace's levels grow by this factor (fjall's default: 10).
const UNITS_LEVEL_RATIO: f32 = 4.0;

/// Memtables of a keyspace waiting to be written out, at most, when a bundle ends
/// ([`wait_for_flushes`]).
const SEALED_MEMTABLES: usize = 1;

/// Waits while `keyspace` has more than [`SEALED_MEMTABLES`] memtables waiting to be
/// written out as files. fjall lets a keyspace queue four (and stalls its writes
/// then), each of [`MEMTABLE_BYTES`] and in memory some three times that for entries
/// as small as cells and timers: a job whose writes outrun the store's flush threads
/// (a timer per key writes three entries per timer set and fired) held over 250 MB in
/// memtables; waiting at the end of a bundle bounds them.
/// A store whose flushes make no progress for this long (its disk full, its flush
/// threads failed) fails the bundle rather than hanging it.
pub(super) fn wait_for_flushes(keyspace: &fjall::Keyspace, dir: &Path) -> Result<(), String> {
    const PATIENCE: std::time::Duration = std::time::Duration::from_secs(120);
    let started = std::time::Instant::now();
    while keyspace.sealed_memtable_count() > SEALED_MEMTABLES {
        if started.elapsed() > PATIENCE {
            return Err(io_error(
                "memtables are not being written out",
                dir,
                format!(
                    "{} waiting after {PATIENCE:?}",
                    keyspace.sealed_memtable_count()
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Ok(())
}

/// A store's journals, at most (fjall's least): memtables not yet written out as files
/// are bounded by it, so it bounds the store's memory beyond the caches.
const JOURNAL_BYTES: u64 = 64 << 20;

/// The store's own cache of file blocks, in bytes.
const BLOCK_CACHE_BYTES: u64 = 16 << 20;

/// A store shared by the operator instances of this process that keep their state
/// in one directory; removed from disk when the last of them is dropped.
pub(super) struct Store {
    pub(super) db: fjall::Database,
    pub(super) dir: PathBuf,
    /// Unique to this store among every store of every run (its process's id and the
    /// time it opened): names its table files in checkpoints (`tables.rs`).
    pub(super) uid: String,
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
pub(super) static KEYSPACES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub(super) fn io_error(what: &str, dir: &Path, e: impl std::fmt::Display) -> String {
    format!("{what} in the state store at {}: {e}", dir.display())
}

/// A store's directory is this followed by its process's id.
const STORE_PREFIX: &str = "tidewater-state-";

/// Removes the stores under `parent` left by processes that died (killed, their
/// state is gone with them: checkpoints hold what survives), and one at `ours` (a
/// process of the same id before).
fn remove_stores_of_dead_processes(parent: &Path, ours: &Path) -> Result<(), String> {
    let entries =
        std::fs::read_dir(parent).map_err(|e| io_error("cannot list the directory", parent, e))?;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(STORE_PREFIX))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let alive = Path::new(&format!("/proc/{pid}")).exists();
        if path == ours || !alive {
            std::fs::remove_dir_all(&path)
                .map_err(|e| io_error("cannot remove an old store", &path, e))?;
        }
    }
    Ok(())
}

impl Store {
    /// A keyspace of this store, made if new (names are per operator instance: see
    /// [`KEYSPACES`]).
    pub(super) fn keyspace(&self, name: &str) -> Result<fjall::Keyspace, String> {
        self.db
            .keyspace(name, || {
                // Every file's filter and index pinned in memory (some 10 bits a key):
                // a point read of an entry not in a cache reads one data block. (By
                // default only the first levels' are, and a read deeper loads a whole
                // filter block into the block cache, evicting the others.)
                fjall::KeyspaceCreateOptions::default()
                    // Durability is the checkpoints' job: a write is not flushed to
                    // the journal's file (a system call per write otherwise).
                    .manual_journal_persist(true)
                    .max_memtable_size(MEMTABLE_BYTES)
                    // Files of the units' size: a timer queue's keys share long
                    // prefixes too (see UNITS_TABLE_BYTES).
                    .compaction_strategy(Arc::new(
                        fjall::compaction::Leveled::default()
                            .with_table_target_size(UNITS_TABLE_BYTES),
                    ))
                    .filter_block_pinning_policy(fjall::config::PinningPolicy::all(true))
                    .index_block_pinning_policy(fjall::config::PinningPolicy::all(true))
            })
            .map_err(|e| io_error("cannot open a keyspace", &self.dir, e))
    }

    /// A keyspace of a reducer's units (`units.rs`): read by point reads that find
    /// their entry (the units' own filter in memory answers for those not there), so
    /// its last level has no filters; compacted with a larger first batch and a
    /// smaller growth between levels than fjall's defaults, since its keys (hashed key
    /// groups) come in no order and each compaction rewrites every file it overlaps.
    pub(super) fn units_keyspace(&self, name: &str) -> Result<fjall::Keyspace, String> {
        let leveled = fjall::compaction::Leveled::default()
            .with_l0_threshold(UNITS_L0_TABLES)
            .with_table_target_size(UNITS_TABLE_BYTES)
            .with_level_ratio_policy(vec![UNITS_LEVEL_RATIO]);
        self.db
            .keyspace(name, || {
                fjall::KeyspaceCreateOptions::default()
                    .manual_journal_persist(true)
                    .max_memtable_size(MEMTABLE_BYTES)
                    .expect_point_read_hits(true)
                    .compaction_strategy(Arc::new(leveled))
                    .filter_block_pinning_policy(fjall::config::PinningPolicy::all(true))
                    .index_block_pinning_policy(fjall::config::PinningPolicy::all(true))
            })
            .map_err(|e| io_error("cannot open a keyspace", &self.dir, e))
    }

    /// The store of this process under `parent` (opened on first use, in a directory
    /// of its own named after the process).
    pub(super) fn open(parent: &Path) -> Result<Arc<Store>, String> {
        let mut stores = STORES.lock().unwrap_or_else(|p| p.into_inner());
        stores.retain(|(_, w)| w.strong_count() > 0);
        if let Some(s) = stores
            .iter()
            .find(|(p, _)| p == parent)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(s);
        }
        let dir = parent.join(format!("{STORE_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(parent)
            .map_err(|e| io_error("cannot create the directory", parent, e))?;
        remove_stores_of_dead_processes(parent, &dir)?;
        let db = fjall::Database::builder(&dir)
            .temporary(true)
            // Durability is the checkpoints' job: the journal is never synced.
            .manual_journal_persist(true)
            .cache_size(BLOCK_CACHE_BYTES)
            .max_journaling_size(JOURNAL_BYTES)
            .worker_threads(2)
            .open()
            .map_err(|e| io_error("cannot open", &dir, e))?;
        let opened = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let uid = format!("{}-{opened:x}", std::process::id());
        let store = Arc::new(Store { db, dir, uid });
        stores.push((parent.to_path_buf(), Arc::downgrade(&store)));
        Ok(store)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot held open while the store is written keeps the memtables of its
    /// instant, not every memtable written out meanwhile (vendor/README.md, lsm-tree):
    /// a checkpoint reads its frozen view for as long as its encoding takes.
    #[test]
    fn an_open_snapshot_keeps_only_the_memtables_it_reads() {
        use fjall::Readable;
        let parent = tempfile::tempdir().unwrap();
        let store = Store::open(parent.path()).unwrap();
        let keyspace = store.keyspace("memtables").unwrap();
        let value = vec![7u8; 1000];
        keyspace.insert(b"before", b"frozen").unwrap();
        keyspace.rotate_memtable_and_wait().unwrap();
        let snapshot = store.db.snapshot();
        // 100 MB written while the snapshot is open, a memtable of 1 MB written out
        // after each 1,000 entries (by hand, so that each is that size).
        let mut held = Vec::new();
        for i in 0u32..100_000 {
            keyspace.insert(i.to_be_bytes(), &value).unwrap();
            if i % 1000 == 999 {
                held.push(keyspace.memtable_bytes_held_for_snapshots());
                keyspace.rotate_memtable_and_wait().unwrap();
            }
        }
        keyspace.insert(b"before", b"changed").unwrap();
        assert_eq!(
            snapshot.get(&keyspace, b"before").unwrap().as_deref(),
            Some(&b"frozen"[..])
        );
        assert_eq!(snapshot.get(&keyspace, 5u32.to_be_bytes()).unwrap(), None);
        assert_eq!(
            keyspace.get(b"before").unwrap().as_deref(),
            Some(&b"changed"[..])
        );
        assert_eq!(
            keyspace.get(99_999u32.to_be_bytes()).unwrap().as_deref(),
            Some(&value[..])
        );
        // The snapshot's version holds the memtable sealed while it was the newest
        // (fjall seals into the newest version in place); a version a flush made goes
        // when the next flush ends (one more, if this reads before it goes). Without
        // the fix every memtable stays: 100 MB.
        let most = held.iter().max().copied().unwrap_or(0);
        assert!(
            most <= 4 << 20,
            "memtables held for a snapshot, after each megabyte written: {held:?}"
        );
        drop(snapshot);
    }
}
