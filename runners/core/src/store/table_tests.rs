//! A checkpoint's table files (the embedded store's own, named by its `Scope::Files`
//! parts): listed in the manifest, kept while a kept checkpoint names them, checked
//! before a restore, copied with a savepoint.

use super::*;
use crate::snapshot::{Part, Scope};
use crate::state::tables::{encode_files_part, KeyspaceFiles, TableFile};

/// What a checkpoint records of table file `name` holding `bytes`.
fn entry(name: &str, bytes: &[u8]) -> TableFile {
    TableFile {
        name: name.into(),
        len: bytes.len() as u64,
        checksum: xxhash_rust::xxh3::xxh3_128(bytes),
        global_seqno: 0,
        first: vec![0],
        last: vec![9],
    }
}

/// Table file `name` with some bytes of its own, put into `dir`'s tables.
fn table(dir: &Path, name: &str) -> TableFile {
    let bytes = format!("the bytes of {name}").repeat(100).into_bytes();
    std::fs::create_dir_all(dir.join("tables")).unwrap();
    std::fs::write(dir.join("tables").join(name), &bytes).unwrap();
    entry(name, &bytes)
}

/// A task's snapshot whose Files part names `names` (made in `dir`'s tables if new).
fn files_snap(dir: &Path, names: &[&str]) -> Snapshot {
    let tables = names
        .iter()
        .map(|n| match std::fs::read(dir.join("tables").join(n)) {
            Ok(bytes) => entry(n, &bytes),
            Err(_) => table(dir, n),
        })
        .collect();
    let files = KeyspaceFiles { seqno: 5, tables };
    Snapshot {
        plan_hash: 7,
        max_key_groups: 4,
        epoch: 0,
        base: Vec::new(),
        parts: vec![Part {
            transform: "T".into(),
            scope: Scope::Files(0),
            bytes: encode_files_part(&[files]),
        }],
        stored: Default::default(),
    }
}

fn plan() -> PlanIdentity {
    PlanIdentity {
        hash: 7,
        state: vec![crate::compat::StateId {
            id: "T".into(),
            transform: "T".into(),
            kind: crate::compat::StateKind::StatefulDoFn,
            fingerprint: Default::default(),
            cells: Default::default(),
        }],
        readers: Default::default(),
    }
}

fn tables_present(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn a_checkpoints_tables_are_listed_kept_while_named_checked_and_copied() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let store = Store::open(dir).unwrap();
    // Each checkpoint's file names the tables of the store at the time: two, the
    // older going as the store moves on.
    let named = |e: u64| [format!("t{e}"), format!("t{}", e + 1)];
    for e in 0..5u64 {
        let [a, b] = named(e);
        store
            .write_part(1, 0, e, e, &files_snap(dir, &[&a, &b]))
            .unwrap();
        // Every other manifest is written by a store that did not write the file:
        // it reads the file through for the tables it names.
        let writer = if e % 2 == 0 {
            store.clone()
        } else {
            Store::open(dir).unwrap()
        };
        let m = writer.complete(e, &[1], 1, &plan(), 4).unwrap();
        assert_eq!(m.files[0].tables, vec![a, b], "checkpoint {e}'s manifest");
    }
    // Checkpoints 2, 3 and 4 are kept: t2 to t5; t0 and t1 went with 0 and 1.
    assert_eq!(tables_present(dir), ["t2", "t3", "t4", "t5"]);
    let r = store.latest(&plan(), false).unwrap().unwrap();
    assert_eq!(r.manifest.epoch, 4);
    assert_eq!(
        r.snapshot.stored.tables_dir(),
        Some(crate::state::tables::TableDir(dir.join("tables")))
    );

    // A savepoint takes its tables along.
    let to = tempfile::tempdir().unwrap();
    let copy = to.path().join("savepoint");
    store.copy_checkpoint(4, &copy).unwrap();
    assert_eq!(tables_present(&copy), ["t4", "t5"]);
    let restored = Store::open(&copy)
        .unwrap()
        .latest(&plan(), false)
        .unwrap()
        .unwrap();
    assert_eq!(
        restored.snapshot.stored.tables_dir(),
        Some(crate::state::tables::TableDir(copy.join("tables")))
    );

    // A table changed on disk: the newest checkpoint is unusable, the one before it
    // (t3, t4) restores, and the note says why.
    let t5 = dir.join("tables/t5");
    let mut bytes = std::fs::read(&t5).unwrap();
    bytes[10] ^= 1;
    std::fs::write(&t5, bytes).unwrap();
    let r = store.latest(&plan(), false).unwrap().unwrap();
    assert_eq!(r.manifest.epoch, 3);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("t5") && n.contains("checksum")),
        "{:?}",
        r.notes
    );
    // A missing one too.
    std::fs::remove_file(dir.join("tables/t4")).unwrap();
    let r = store.latest(&plan(), false).unwrap().unwrap();
    assert_eq!(r.manifest.epoch, 2);
    assert!(r.notes.iter().any(|n| n.contains("t4")), "{:?}", r.notes);
}

/// A manifest's part naming a table by a path, not a file name, is a corrupt
/// checkpoint, never a file read outside the directory.
#[test]
fn a_table_named_by_a_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let store = Store::open(dir).unwrap();
    let mut snap = files_snap(dir, &["t0"]);
    let outside = dir.join("outside");
    std::fs::write(&outside, b"secret").unwrap();
    let files = KeyspaceFiles {
        seqno: 5,
        tables: vec![TableFile {
            name: "../outside".into(),
            len: 6,
            checksum: xxhash_rust::xxh3::xxh3_128(b"secret"),
            global_seqno: 0,
            first: vec![],
            last: vec![],
        }],
    };
    snap.parts[0].bytes = encode_files_part(&[files]);
    store.write_part(1, 0, 0, 0, &snap).unwrap();
    store.complete(0, &[1], 1, &plan(), 4).unwrap();
    let e = store.latest(&plan(), false).unwrap_err().to_string();
    assert!(e.contains("not a file name"), "{e}");
}

/// Tables no manifest names (put for a checkpoint a stopped run never completed) are
/// removed when a run starts; those a manifest names stay.
#[test]
fn tables_no_manifest_names_are_removed_when_a_run_starts() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let store = Store::open(dir).unwrap();
    store
        .write_part(1, 0, 0, 0, &files_snap(dir, &["t0", "t1"]))
        .unwrap();
    store.complete(0, &[1], 1, &plan(), 4).unwrap();
    // Epoch 1's file and its table were written, its manifest never.
    store
        .write_part(1, 0, 1, 1, &files_snap(dir, &["t1", "t2"]))
        .unwrap();
    table(dir, "t3");
    store.remove_unfinished(1, 1).unwrap();
    assert_eq!(
        tables_present(dir),
        ["t0", "t1", "t2", "t3"],
        "worker 1 leaves them"
    );
    store.remove_unfinished(0, 1).unwrap();
    assert_eq!(tables_present(dir), ["t0", "t1"]);
    let r = store.latest(&plan(), false).unwrap().unwrap();
    assert_eq!(r.manifest.epoch, 0);
}
