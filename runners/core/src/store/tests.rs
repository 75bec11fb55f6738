//! Tests of `store.rs`: each runs on a local directory and on an object store (the
//! in-memory one, through the same client code as S3's; `examples/tests/object_store.rs`
//! runs jobs against an S3 server).

use super::*;
use crate::checkpoint::LaterPartsOf;
use crate::snapshot::{Part, Scope};

/// Runs `test` on a store in a new local directory, then in a new prefix of the
/// in-memory object store.
fn each_place(test: impl Fn(&Path)) {
    static PREFIX: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = tempfile::tempdir().unwrap();
    test(dir.path());
    let n = PREFIX.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    test(Path::new(&format!("memory:///store-tests/{n}/ck")));
}

/// A plan of hash `hash` whose one stateful part is `T` (hash 7) or `U` (another).
fn plan(hash: u64) -> PlanIdentity {
    let id = if hash == 7 { "T" } else { "U" };
    PlanIdentity {
        hash,
        state: vec![StateId {
            id: id.into(),
            transform: id.into(),
            kind: crate::compat::StateKind::Grouping,
            fingerprint: Default::default(),
            cells: Default::default(),
        }],
        readers: Default::default(),
    }
}

fn snap(bytes: &[u8]) -> Snapshot {
    Snapshot {
        plan_hash: 7,
        max_key_groups: 4,
        epoch: 0,
        base: Vec::new(),
        parts: vec![Part {
            transform: "T".into(),
            scope: Scope::List(0),
            bytes: bytes.to_vec(),
        }],
        stored: Default::default(),
    }
}

#[test]
fn a_checkpoint_names_the_file_whose_range_holds_its_epoch_and_reads_back() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        store.write_part(1, 0, 0, 2, &snap(b"a")).unwrap();
        store.write_part(1, 1, 0, 0, &snap(b"b")).unwrap();
        store.write_part(1, 1, 1, 3, &snap(b"c")).unwrap();
        let m = store.complete(2, &[1], 2, &plan(7), 4).unwrap();
        let names: Vec<&str> = m.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["n1-w0-0-2.snap", "n1-w1-1-3.snap"]);
        let r = store.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.manifest.epoch, 2);
        let bytes: Vec<&[u8]> = r.snapshot.parts.iter().map(|p| &p.bytes[..]).collect();
        assert_eq!(bytes, [b"a", b"c"]);
        assert!(
            store.complete(4, &[1], 2, &plan(7), 4).is_err(),
            "worker 0 has no file for 4"
        );
    });
}

#[test]
fn a_corrupt_file_falls_back_to_the_previous_checkpoint_and_says_so() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        store.write_part(1, 0, 0, 0, &snap(b"old")).unwrap();
        store.complete(0, &[1], 1, &plan(7), 4).unwrap();
        store.write_part(1, 0, 1, 1, &snap(b"new")).unwrap();
        store.complete(1, &[1], 1, &plan(7), 4).unwrap();
        flip_last_byte(&store, "parts/n1-w0-1-1.snap");
        let r = store.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.manifest.epoch, 0);
        assert_eq!(r.snapshot.parts[0].bytes, b"old");
        assert_eq!(r.notes.len(), 1);
        assert!(
            r.notes[0].contains("checkpoint 1 is unusable")
                && r.notes[0].contains("does not match its checksum"),
            "{}",
            r.notes[0]
        );
        let e = store.latest(&plan(8), false).unwrap_err().to_string();
        assert!(
        e.contains("does not fit this pipeline: 'T' holds state in the snapshot and is not in the pipeline"),
        "{e}"
    );
        // Allowed to drop it, the other pipeline restores none of it.
        let r = store.latest(&plan(8), true).unwrap().unwrap();
        assert_eq!((r.manifest.epoch, r.snapshot.parts.len()), (0, 0));
    });
}

#[test]
fn only_the_last_checkpoints_and_their_files_are_kept() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        for e in 0..6u64 {
            store.write_part(1, 0, e, e, &snap(b"x")).unwrap();
            store.complete(e, &[1], 1, &plan(7), 4).unwrap();
        }
        assert_eq!(store.manifests().unwrap(), [3, 4, 5]);
        assert_eq!(
            file_names(&store),
            ["n1-w0-3-3.snap", "n1-w0-4-4.snap", "n1-w0-5-5.snap"]
        );
    });
}

/// Corrupts the store's file `key`: its byte `from_end` places before the end flipped
/// with `mask`.
fn flip(store: &Store, key: &str, from_end: usize, mask: u8) {
    let mut bytes = store.blobs.get(key, u64::MAX).unwrap().unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= mask;
    store.blobs.put(key, &mut |w| w.write_all(&bytes)).unwrap();
}

/// Corrupts the store's file `key`: its last byte flipped.
fn flip_last_byte(store: &Store, key: &str) {
    flip(store, key, 1, 0xff)
}

/// The part files present, sorted.
fn file_names(store: &Store) -> Vec<String> {
    let mut files: Vec<String> = store
        .part_files()
        .unwrap()
        .into_iter()
        .map(|f| f.0)
        .collect();
    files.sort();
    files
}

/// A key group table of `entries` (id, value).
fn table(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    crate::delta::encode_table(entries.iter().copied())
}

/// A snapshot of key group 0 of "G" (a table, or a delta over `base`) and a list
/// part `list`.
fn keyed(epoch: u64, group: (Scope, Vec<u8>), list: &[u8], base: Vec<BaseRef>) -> Snapshot {
    Snapshot {
        plan_hash: 7,
        max_key_groups: 4,
        epoch,
        base,
        parts: vec![
            Part {
                transform: "G".into(),
                scope: group.0,
                bytes: group.1,
            },
            Part {
                transform: "Sink".into(),
                scope: Scope::List(0),
                bytes: list.to_vec(),
            },
        ],
        stored: Default::default(),
    }
}

/// Writes epochs `epochs` of task 1 on worker 0, a full snapshot where `full` says
/// so and a delta over the previous file otherwise (each adds the entry of its
/// epoch), and completes each epoch.
fn write_chains(store: &Store, epochs: std::ops::Range<u64>, full: impl Fn(u64) -> bool) {
    use crate::delta::{encode_delta, encode_entry};
    let mut chain: Vec<BaseRef> = Vec::new();
    for e in epochs {
        let id = [e as u8];
        let snapshot = if full(e) || chain.is_empty() {
            chain.clear();
            keyed(
                e,
                (Scope::KeyGroup(0), table(&[(&id, b"v")])),
                &id,
                Vec::new(),
            )
        } else {
            let mut entry = Vec::new();
            encode_entry(&id, b"v", &mut entry);
            let delta = encode_delta(&[], &[&entry]);
            keyed(e, (Scope::KeyGroupDelta(0), delta), &id, chain.clone())
        };
        chain.push(store.write_part(1, 0, e, e, &snapshot).unwrap());
        store.complete(e, &[1], 1, &plan(7), 4).unwrap();
    }
}

#[test]
fn a_delta_reads_back_applied_to_the_files_it_builds_on() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        write_chains(&store, 0..3, |e| e == 0);
        let r = store.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.manifest.epoch, 2);
        let f = &r.manifest.files[0];
        assert_eq!(f.name, "n1-w0-2-2.snap");
        let bases: Vec<&str> = f.base.iter().map(|b| b.name.as_str()).collect();
        assert_eq!(bases, ["n1-w0-0-0.snap", "n1-w0-1-1.snap"]);
        // Key group 0 holds every epoch's entry; the sink's list is the newest file's.
        let parts = r.snapshot.materialized().unwrap().parts;
        assert_eq!(
            parts,
            vec![
                Part {
                    transform: "G".into(),
                    scope: Scope::KeyGroup(0),
                    bytes: table(&[(&[0], b"v"), (&[1], b"v"), (&[2], b"v")]),
                },
                Part {
                    transform: "Sink".into(),
                    scope: Scope::List(0),
                    bytes: vec![2],
                },
            ]
        );
        // A savepoint copies the files the checkpoint builds on too.
        let copy = dir.join("savepoint-2");
        store.copy_checkpoint(2, &copy).unwrap();
        let again = Store::open(&copy)
            .unwrap()
            .latest(&plan(7), false)
            .unwrap()
            .unwrap();
        assert_eq!(again.snapshot.materialized().unwrap().parts, parts);
    });
}

#[test]
fn a_corrupt_full_file_falls_back_to_a_checkpoint_that_does_not_build_on_it() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        // Full snapshots at 0 and 3, deltas in between and after.
        write_chains(&store, 0..7, |e| e == 0 || e == 3);
        // The last KEEP, and back to 2: the newest that does not build on the full
        // file of 3.
        assert_eq!(store.manifests().unwrap(), [2, 3, 4, 5, 6]);
        assert_eq!(
            file_names(&store),
            (0..7)
                .map(|e| format!("n1-w0-{e}-{e}.snap"))
                .collect::<Vec<_>>()
        );
        flip_last_byte(&store, "parts/n1-w0-3-3.snap");
        let r = store.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.manifest.epoch, 2);
        assert_eq!(
            r.snapshot.materialized().unwrap().parts[0].bytes,
            table(&[(&[0], b"v"), (&[1], b"v"), (&[2], b"v")])
        );
        assert_eq!(r.notes.len(), 4, "{:?}", r.notes);
        assert!(
            r.notes[0].contains("checkpoint 6 is unusable"),
            "{}",
            r.notes[0]
        );
        assert!(
            r.notes[0].contains("n1-w0-3-3.snap does not match its checksum"),
            "{}",
            r.notes[0]
        );
        // The first full file has nothing before it: no checkpoint is usable, and
        // the run stops with the reason rather than start again from nothing.
        flip_last_byte(&store, "parts/n1-w0-0-0.snap");
        let e = store.latest(&plan(7), false).unwrap_err().to_string();
        assert!(e.contains("no usable checkpoint"), "{e}");
    });
}

#[test]
fn a_resumed_run_removes_only_its_workers_files_of_the_epochs_it_writes_anew() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        store.write_part(1, 0, 0, 2, &snap(b"a")).unwrap();
        store
            .write_part(1, 0, 3, 9, &snap(b"left by a run that stopped"))
            .unwrap();
        store
            .write_part(1, 1, 3, 3, &snap(b"another worker's"))
            .unwrap();
        store
            .write_part(2, 0, 4, 4, &snap(b"another task's, left by that run"))
            .unwrap();
        store.remove_unfinished(0, 3).unwrap();
        assert_eq!(file_names(&store), ["n1-w0-0-2.snap", "n1-w1-3-3.snap"]);
    });
}

#[test]
fn the_offset_log_reads_back_every_workers_ranges_checks_them_and_is_pruned() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        let range = |p: u32, count: u64| ReadRange {
            partition: p,
            start: vec![p as u8],
            count,
            left: (p == 0).then_some(count + 4),
        };
        assert_eq!(store.read_offsets(2, "S").unwrap(), None);
        store
            .write_offsets(2, "S", 0, &[range(0, 5), range(2, 0)])
            .unwrap();
        store.write_offsets(2, "S", 1, &[range(1, 3)]).unwrap();
        store.write_offsets(3, "S", 0, &[range(0, 9)]).unwrap();
        let mut got = store.read_offsets(2, "S").unwrap().unwrap();
        got.sort_by_key(|r| r.partition);
        assert_eq!(got, vec![range(0, 5), range(1, 3), range(2, 0)]);
        // A file is checked to be the source's it is named for.
        let file = |batch, source| format!("offsets/{}0.offsets", offsets_prefix(batch, source));
        let copied = store.blobs.get(&file(2, "S"), u64::MAX).unwrap().unwrap();
        store
            .blobs
            .put(&file(2, "R"), &mut |w| w.write_all(&copied))
            .unwrap();
        let e = store.read_offsets(2, "R").unwrap_err().to_string();
        assert!(
            e.contains("holds the ranges of source 'S' in batch 2, not of 'R'"),
            "{e}"
        );
        store.blobs.delete(&file(2, "R")).unwrap();
        // A flipped byte is found by the checksum.
        flip(&store, &file(3, "S"), 3, 1);
        let e = store.read_offsets(3, "S").unwrap_err().to_string();
        assert!(e.contains("does not match its checksum"), "{e}");
        // Batches up to the oldest kept checkpoint go with it.
        for e in 0..6u64 {
            store.write_part(1, 0, e, e, &snap(b"x")).unwrap();
            store.complete(e, &[1], 1, &plan(7), 4).unwrap();
        }
        assert_eq!(store.read_offsets(2, "S").unwrap(), None);
        assert_eq!(store.read_offsets(3, "S").unwrap(), None);
    });
}

#[test]
fn a_manifest_is_written_only_where_none_is_and_a_resumed_run_replaces_skipped_ones() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        store.write_part(1, 0, 0, 0, &snap(b"a")).unwrap();
        // Another run on the same store (a job that should not be there) completes
        // checkpoint 0 first: this run's manifest does not replace it.
        Store::open(dir)
            .unwrap()
            .complete(0, &[1], 1, &plan(7), 4)
            .unwrap();
        let e = store
            .complete(0, &[1], 1, &plan(7), 4)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("checkpoint-00000000000000000000.manifest was written by another run while this one completed checkpoint 0: is another job using"),
            "{e}"
        );
        // Checkpoint 1's file is corrupt: a run resumed from 0 writes epoch 1 anew and
        // completes it in place of the skipped one.
        store.write_part(1, 0, 1, 1, &snap(b"b")).unwrap();
        store.complete(1, &[1], 1, &plan(7), 4).unwrap();
        flip_last_byte(&store, "parts/n1-w0-1-1.snap");
        let resumed = Store::open(dir).unwrap();
        let r = resumed.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.manifest.epoch, 0);
        resumed.remove_unfinished(0, start_epoch(Some(&r))).unwrap();
        assert_eq!(resumed.manifests().unwrap(), [0]);
        resumed.write_part(1, 0, 1, 1, &snap(b"c")).unwrap();
        resumed.complete(1, &[1], 1, &plan(7), 4).unwrap();
        let r = resumed.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(
            (r.manifest.epoch, &r.snapshot.parts[0].bytes[..]),
            (1, &b"c"[..])
        );
    });
}

/// Parts from frozen state are written as they are encoded, before the snapshot's
/// own; an error encoding them is the error of the write, and no file is left in its
/// name.
#[test]
fn parts_encoded_as_they_are_written_come_first_and_their_error_is_the_writes() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        let later: LaterPartsOf = Box::new(|sink| {
            for b in [b"x", b"y"] {
                sink(Part {
                    transform: "T".into(),
                    scope: Scope::KeyGroup(u32::from(b[0])),
                    bytes: b.to_vec(),
                })?;
            }
            Ok(())
        });
        store
            .write_part_streamed(1, 0, 0, 0, &snap(b"own"), Some(later))
            .unwrap();
        store.complete(0, &[1], 1, &plan(7), 4).unwrap();
        let file = store.blobs.get("parts/n1-w0-0-0.snap", u64::MAX).unwrap();
        let written = Snapshot::decode(&file.unwrap(), 7).unwrap();
        let bytes: Vec<&[u8]> = written.parts.iter().map(|p| &p.bytes[..]).collect();
        assert_eq!(bytes, [&b"x"[..], b"y", b"own"]);
        let r = store.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.snapshot.materialized().unwrap(), written);

        let failing: LaterPartsOf = Box::new(|sink| {
            sink(Part {
                transform: "T".into(),
                scope: Scope::KeyGroup(0),
                bytes: b"half".to_vec(),
            })?;
            Err(Error::Checkpoint {
                message: "the frozen state does not decode".into(),
            })
        });
        let e = store
            .write_part_streamed(1, 0, 1, 1, &snap(b"own"), Some(failing))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "checkpoint cannot be restored: the frozen state does not decode"
        );
        assert!(!store
            .part_files()
            .unwrap()
            .iter()
            .any(|(name, _)| name == "n1-w0-1-1.snap"));
    });
}

/// A manifest written by another store than the one that wrote a file (another
/// process's, or after a restart) reads the file a piece at a time: its length,
/// checksum and header come out as the writer's.
#[test]
fn a_file_written_elsewhere_is_listed_as_written() {
    each_place(|dir| {
        // Larger than an object store's upload part and read range: written in two
        // parts, read in five ranges.
        let big: Vec<u8> = (0..36_000_000u32).map(|i| (i % 251) as u8).collect();
        let writer = Store::open(dir).unwrap();
        let written = writer.write_part(1, 0, 0, 0, &snap(&big)).unwrap();
        let other = Store::open(dir).unwrap();
        let m = other.complete(0, &[1], 1, &plan(7), 4).unwrap();
        assert_eq!(
            (m.files[0].name.as_str(), m.files[0].len, m.files[0].crc),
            (written.name.as_str(), written.len, written.crc)
        );
        let r = other.latest(&plan(7), false).unwrap().unwrap();
        assert_eq!(r.snapshot.parts[0].bytes, big);
    });
}

/// A restore leaves key groups in the checkpoint's files: the snapshot it gives holds
/// the other parts, and each key group is read when a task asks for it (its deltas
/// applied), so that a restore holds one key group, not the state. A file changed
/// after the checkpoint was checked is refused where the key group is read, naming it.
#[test]
fn a_restore_reads_each_key_group_from_the_files_when_it_is_asked_for() {
    each_place(|dir| {
        let store = Store::open(dir).unwrap();
        let group = |g: u32| table(&[(&[g as u8], b"value"), (&[g as u8, 1], b"more")]);
        let mut full = snap(b"list");
        for g in 0..4 {
            full.parts.push(Part {
                transform: "G".into(),
                scope: Scope::KeyGroup(g),
                bytes: group(g),
            });
        }
        store.write_part(1, 0, 0, 0, &full).unwrap();
        store.complete(0, &[1], 1, &plan(7), 4).unwrap();
        let r = store.latest(&plan(7), false).unwrap().unwrap();
        let in_memory: Vec<(&str, Scope)> = r
            .snapshot
            .parts
            .iter()
            .map(|p| (p.transform.as_str(), p.scope))
            .collect();
        assert_eq!(in_memory, [("T", Scope::List(0))]);
        let mut read = Vec::new();
        let wanted = |s| matches!(s, Scope::KeyGroup(1 | 2));
        r.snapshot
            .for_each_part_of("G", &wanted, &mut |scope, bytes| {
                read.push((scope, bytes.to_vec()));
                Ok(())
            })
            .unwrap();
        assert_eq!(
            read,
            [
                (Scope::KeyGroup(1), group(1)),
                (Scope::KeyGroup(2), group(2))
            ]
        );
        // Key group 3's bytes changed after the check.
        let key = "parts/n1-w0-0-0.snap";
        let bytes = store.blobs.get(key, u64::MAX).unwrap().unwrap();
        let mut reader = crate::snapshot::SnapshotReader::new(&bytes[..], 7).unwrap();
        let mut third = None;
        while let Some((info, _)) = reader.next_part(&|_, _| false).unwrap() {
            if info.scope == Scope::KeyGroup(3) {
                third = Some(info);
            }
        }
        let third = third.unwrap();
        flip(&store, key, bytes.len() - third.offset as usize, 0x01);
        let e = r
            .snapshot
            .for_each_part_of("G", &|s| s == Scope::KeyGroup(3), &mut |_, _| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("n1-w0-0-0.snap (checkpoint 0): key group 3 of 'G': part KeyGroup(3) of 'G' is corrupt: its checksum does not match"),
            "{e}"
        );
    });
}
