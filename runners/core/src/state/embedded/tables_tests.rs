//! A keyspace's files taken at a snapshot read back as the snapshot read them, however
//! the store changed since; corrupt files are refused.

use super::store::Store;
use super::tables::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A [`DirSink`] that counts the files put into it.
struct Counting(DirSink, AtomicUsize);

impl TableSink for Counting {
    fn has(&self, name: &str) -> bool {
        self.0.has(name)
    }
    fn put(&self, name: &str, path: &Path) -> Result<(), String> {
        self.1.fetch_add(1, Ordering::Relaxed);
        self.0.put(name, path)
    }
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = vec![(i % 251) as u8; 300];
    v[..4].copy_from_slice(&round.to_le_bytes());
    v
}

/// Writes round `round`: every key of `0..n` set (a third of them deleted instead,
/// which third depending on the round), a memtable written out every 2,000 entries
/// (tables in the first level and, by compaction, deeper), into `keyspace` and `model`.
fn write_round(
    keyspace: &fjall::Keyspace,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    n: u32,
    round: u32,
) {
    for i in 0..n {
        if (i + round).is_multiple_of(3) {
            keyspace.remove(key(i)).unwrap();
            model.remove(&key(i)[..]);
        } else {
            keyspace.insert(key(i), value(i, round)).unwrap();
            model.insert(key(i).to_vec(), value(i, round));
        }
        if i % 2000 == 1999 {
            keyspace.rotate_memtable_and_wait().unwrap();
        }
    }
}

fn read_all(reader: &TableReader, from: &[u8], to: Option<&[u8]>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    reader
        .range(from, to)
        .map(|kv| {
            let (k, v) = kv.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect()
}

/// Files taken at a snapshot, with memtables not yet written out, read back exactly as
/// the snapshot, after the store overwrote, deleted and compacted everything (its own
/// files gone); a second capture puts only the files new since the first.
#[test]
fn a_keyspace_taken_at_a_snapshot_reads_back_as_the_snapshot() {
    let parent = tempfile::tempdir().unwrap();
    let store = Store::open(parent.path()).unwrap();
    let keyspace = store.keyspace("tables").unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let sink = Counting(
        DirSink(checkpoints.path().to_path_buf()),
        AtomicUsize::new(0),
    );
    let take = |snapshot: &fjall::Snapshot| {
        let scratch = parent.path().join("scratch");
        capture(&keyspace, snapshot.seqno(), "s1-tables", &scratch, &sink).unwrap()
    };
    let mut model = BTreeMap::new();
    let n = 30_000;
    write_round(&keyspace, &mut model, n, 0);
    write_round(&keyspace, &mut model, n, 1);
    // Some entries only in the memtable, some keys there overwritten and deleted.
    for i in 0..500 {
        keyspace.insert(key(i), value(i, 2)).unwrap();
        model.insert(key(i).to_vec(), value(i, 2));
    }
    keyspace.remove(key(7)).unwrap();
    model.remove(&key(7)[..]);
    let snapshot = store.db.snapshot();
    let first = take(&snapshot);
    assert!(
        first.tables.len() > 2,
        "tables and the memtables' table: {first:?}"
    );
    assert!(first.tables.iter().any(|t| t.name.contains("-m")));
    let puts = sink.1.load(Ordering::Relaxed);
    assert_eq!(puts, first.tables.len());
    let at_first = model.clone();
    let in_store = |t: &TableFile| {
        let id = t
            .name
            .trim_start_matches("s1-tables-")
            .trim_end_matches(".table");
        keyspace.path().join("tables").join(id).exists()
    };
    let taken: Vec<_> = first
        .tables
        .iter()
        .filter(|t| !t.name.contains("-m"))
        .collect();
    assert!(!taken.is_empty() && taken.iter().all(|t| in_store(t)));

    // The store goes on: every key rewritten, a new third deleted, compacted whole.
    write_round(&keyspace, &mut model, n, 3);
    drop(snapshot);
    keyspace.major_compact().unwrap();
    // The store's own copies of the first capture's tables are gone.
    assert!(!taken.iter().any(|t| in_store(t)));

    let reader = TableReader::open(checkpoints.path(), &first).unwrap();
    assert_eq!(read_all(&reader, &[], None), at_first);
    // A range of keys: a task's key groups.
    let (lo, hi) = (key(10_000), key(20_000));
    let part: BTreeMap<_, _> = at_first
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(read_all(&reader, &lo, Some(&hi)), part);
    assert_eq!(read_all(&reader, &key(n), None), BTreeMap::new());

    // A second capture shares the files the store still has.
    let snapshot = store.db.snapshot();
    let second = take(&snapshot);
    let before = sink.1.load(Ordering::Relaxed);
    let third = take(&snapshot);
    assert_eq!(second, third);
    assert_eq!(sink.1.load(Ordering::Relaxed), before, "nothing new to put");
    let reader = TableReader::open(checkpoints.path(), &second).unwrap();
    assert_eq!(read_all(&reader, &[], None), model);
    // The first checkpoint's files still read as they did.
    let reader = TableReader::open(checkpoints.path(), &first).unwrap();
    assert_eq!(read_all(&reader, &[], None), at_first);
}

/// An empty keyspace takes no file and reads back empty.
#[test]
fn an_empty_keyspace_takes_no_file() {
    let parent = tempfile::tempdir().unwrap();
    let store = Store::open(parent.path()).unwrap();
    let keyspace = store.keyspace("empty").unwrap();
    let checkpoints = tempfile::tempdir().unwrap();
    let sink = DirSink(checkpoints.path().to_path_buf());
    let snapshot = store.db.snapshot();
    let files = capture(&keyspace, snapshot.seqno(), "e", parent.path(), &sink).unwrap();
    assert_eq!(files.tables, vec![]);
    let reader = TableReader::open(checkpoints.path(), &files).unwrap();
    assert_eq!(read_all(&reader, &[], None), BTreeMap::new());
}

/// A table file that is shorter, changed, missing or not a table at all is an error
/// naming it, never a panic.
#[test]
fn corrupt_table_files_are_refused() {
    let parent = tempfile::tempdir().unwrap();
    let store = Store::open(parent.path()).unwrap();
    let keyspace = store.keyspace("corrupt").unwrap();
    let mut model = BTreeMap::new();
    write_round(&keyspace, &mut model, 5_000, 0);
    let checkpoints = tempfile::tempdir().unwrap();
    let sink = DirSink(checkpoints.path().to_path_buf());
    let snapshot = store.db.snapshot();
    let files = capture(&keyspace, snapshot.seqno(), "c", parent.path(), &sink).unwrap();
    drop(snapshot);
    let name = files.tables[0].name.clone();
    let path = checkpoints.path().join(&name);
    let good = std::fs::read(&path).unwrap();
    let refused = |bytes: &[u8], files: &KeyspaceFiles| {
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, bytes).unwrap();
        match TableReader::open(checkpoints.path(), files) {
            Ok(_) => panic!("a corrupt table was opened"),
            Err(e) => e,
        }
    };
    let e = refused(&good[..good.len() - 1], &files);
    assert!(e.contains(&name) && e.contains("bytes"), "{e}");
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 1;
    let e = refused(&flipped, &files);
    assert!(e.contains(&name) && e.contains("checksum"), "{e}");
    // Bytes that are no table, with a checkpoint that records their checksum.
    let garbage = vec![0x5a; 4096];
    let mut forged = files.clone();
    forged.tables[0].len = garbage.len() as u64;
    forged.tables[0].checksum = xxhash_rust::xxh3::xxh3_128(&garbage);
    let e = refused(&garbage, &forged);
    assert!(e.contains(&name) && e.contains("does not open"), "{e}");
    std::fs::remove_file(&path).unwrap();
    let e = TableReader::open(checkpoints.path(), &files)
        .err()
        .expect("a missing table");
    assert!(e.contains(&name), "{e}");
}
