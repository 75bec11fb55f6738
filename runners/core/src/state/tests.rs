//! The backends against each other: the same writes read back the same and snapshot
//! into the same bytes, and a snapshot of either restores into the other.

use super::*;
use proptest::prelude::*;
use std::borrow::Cow;
use std::collections::BTreeMap;
use tidewater::Timestamp;

const GROUPS: u32 = 16;

fn group(key: &[u8]) -> u32 {
    tidewater::exec::key_group_of(key, GROUPS)
}

/// Windows expire this long after their end.
const LATENESS: i64 = 5;

fn embedded(dir: &tempfile::TempDir) -> EmbeddedStateBackend {
    EmbeddedStateBackend::open(dir.path(), GROUPS, LATENESS).expect("opens")
}

fn in_memory() -> InMemoryStateBackend {
    InMemoryStateBackend::new(LATENESS)
}

pub(super) fn window(i: u8) -> BoundedWindow {
    if i == 0 {
        BoundedWindow::Global
    } else {
        BoundedWindow::Interval {
            start: Timestamp(i64::from(i) * 10),
            end: Timestamp(i64::from(i) * 10 + 10),
        }
    }
}

/// One access to a backend.
#[derive(Clone, Debug)]
enum Op {
    Put(u8, u8, u8, u8),
    BagAdd(u8, u8, u8, u8),
    MapPut(u8, u8, u8, u8, u8),
    MapRemove(u8, u8, u8, u8),
    Clear(u8, u8, u8),
    ClearWindow(u8, u8),
    Keep(u8, u8),
    Expire(u8),
    Flush,
    Sync,
}

fn op() -> impl Strategy<Value = Op> {
    // Few keys, windows and names, so that ops meet the same cells.
    let (k, w, n, v) = (0u8..6, 0u8..3, 0u8..3, any::<u8>());
    prop_oneof![
        4 => (k.clone(), w.clone(), n.clone(), v).prop_map(|(k, w, n, v)| Op::Put(k, w, n, v)),
        2 => (k.clone(), w.clone(), n.clone(), v).prop_map(|(k, w, n, v)| Op::BagAdd(k, w, n, v)),
        2 => (k.clone(), w.clone(), n.clone(), 0u8..4, v).prop_map(|(k, w, n, e, v)| Op::MapPut(k, w, n, e, v)),
        1 => (k.clone(), w.clone(), n.clone(), 0u8..4).prop_map(|(k, w, n, e)| Op::MapRemove(k, w, n, e)),
        1 => (k.clone(), w.clone(), n).prop_map(|(k, w, n)| Op::Clear(k, w, n)),
        1 => (k.clone(), w.clone()).prop_map(|(k, w)| Op::ClearWindow(k, w)),
        1 => (k, w).prop_map(|(k, w)| Op::Keep(k, w)),
        1 => (0u8..40).prop_map(Op::Expire),
        1 => Just(Op::Flush),
        1 => Just(Op::Sync),
    ]
}

fn name(n: u8) -> String {
    format!("cell{n}")
}

/// Applies `op`; the windows it expired.
fn apply(s: &mut dyn StateBackend, op: &Op) -> BTreeSet<(Vec<u8>, BoundedWindow)> {
    let mut expired = BTreeSet::new();
    match *op {
        Op::Put(k, w, n, v) => s.put(&[k], &window(w), &name(n), &[v]),
        Op::BagAdd(k, w, n, v) => s.bag_add(&[k], &window(w), &name(n), &[v]),
        Op::MapPut(k, w, n, e, v) => {
            s.map_put(&[k], &window(w), &name(n), &[e], &[v]);
        }
        Op::MapRemove(k, w, n, e) => s.map_remove(&[k], &window(w), &name(n), &[e]),
        Op::Clear(k, w, n) => s.clear(&[k], &window(w), &name(n)),
        Op::ClearWindow(k, w) => s.clear_window(&[k], &window(w)),
        Op::Keep(k, w) => s.keep_window(&[k], &window(w)),
        Op::Expire(t) => s.expire(Timestamp(i64::from(t)), &mut |k, w| {
            expired.insert((k.to_vec(), w.clone()));
        }),
        Op::Flush => s.flush().expect("flushes"),
        Op::Sync => s.sync().expect("syncs"),
    }
    expired
}

type Read = (
    Option<Vec<u8>>,
    Vec<Vec<u8>>,
    Vec<(Vec<u8>, Vec<u8>)>,
    Option<Vec<u8>>,
);

/// Everything a DoFn could read, over every cell the ops can reach.
fn read_all(s: &dyn StateBackend) -> Vec<Read> {
    let own = |c: Cow<'_, [u8]>| c.into_owned();
    let mut out = Vec::new();
    for k in 0u8..6 {
        for w in 0u8..3 {
            for n in 0u8..3 {
                let (key, win, name) = ([k], window(w), name(n));
                out.push((
                    s.get(&key, &win, &name).map(own),
                    s.bag(&key, &win, &name).into_iter().map(own).collect(),
                    s.map_entries(&key, &win, &name)
                        .into_iter()
                        .map(|(a, b)| (own(a), own(b)))
                        .collect(),
                    s.map_get(&key, &win, &name, &[1]).map(own),
                ));
            }
        }
    }
    out
}

use std::collections::BTreeSet;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any sequence of accesses and expiries reads back the same from both backends,
    /// expires the same windows, holds as many cells and windows, and snapshots into
    /// the same bytes; each snapshot restores into the other backend as the same state.
    #[test]
    fn the_embedded_backend_behaves_as_the_one_in_memory(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut m = in_memory();
        let mut e = embedded(&dir);
        for op in &ops {
            prop_assert_eq!(apply(&mut m, op), apply(&mut e, op), "expired by {:?}", op);
            if matches!(op, Op::Flush | Op::Sync | Op::Expire(_)) {
                prop_assert_eq!(read_all(&m), read_all(&e));
                prop_assert_eq!(m.next_expiry(), e.next_expiry());
                prop_assert_eq!(m.windows(), e.windows());
            }
        }
        e.sync().unwrap();
        prop_assert_eq!(read_all(&m), read_all(&e));
        prop_assert_eq!(m.len(), e.len());
        prop_assert_eq!(m.live_keys(), e.live_keys());
        let windows = frozen_windows(m.freeze(), GROUPS).unwrap();
        prop_assert_eq!(&windows, &frozen_windows(e.freeze(), GROUPS).unwrap());
        // Each window alone reads as in the whole.
        let (mf, ef) = (m.freeze(), e.freeze());
        for w in &windows {
            prop_assert_eq!(&mf.window(&w.key, &w.window).unwrap(), &w.cells);
            prop_assert_eq!(&ef.window(&w.key, &w.window).unwrap(), &w.cells);
        }
        prop_assert!(ef.window(b"absent", &window(0)).unwrap().is_empty());
        // Across: the embedded snapshot into memory, the in-memory one into the store.
        let mut m2 = in_memory();
        let dir2 = tempfile::tempdir().unwrap();
        let mut e2 = embedded(&dir2);
        restore_frozen(&mut m2, &windows).unwrap();
        restore_frozen(&mut e2, &windows).unwrap();
        prop_assert_eq!(read_all(&m2), read_all(&e));
        prop_assert_eq!(read_all(&e2), read_all(&m));
        prop_assert_eq!(e2.len(), m.len());
        // Restored, the windows with cells expire (kept windows without cells are
        // the runner's to keep again, from its timers).
        let (mut me, mut ee) = (BTreeSet::new(), BTreeSet::new());
        m2.expire(Timestamp::MAX, &mut |k, w| { me.insert((k.to_vec(), w.clone())); });
        e2.expire(Timestamp::MAX, &mut |k, w| { ee.insert((k.to_vec(), w.clone())); });
        prop_assert_eq!(me, ee);
        prop_assert_eq!(m2.len(), 0);
        e2.sync().unwrap();
        prop_assert_eq!(e2.len(), 0);
        prop_assert!(read_all(&e2).iter().all(|r| *r == (None, vec![], vec![], None)));
    }
}

/// More cells than the cache holds: all of them read back after the cache let them
/// go, a window expired from the store is gone, and the snapshot holds them all.
#[test]
fn cells_beyond_the_cache_live_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = embedded(&dir);
    let n = (CACHE_CELLS * 3) as u32;
    for i in 0..n {
        e.put(
            &i.to_be_bytes(),
            &BoundedWindow::Global,
            "count",
            &i.to_le_bytes(),
        );
        if i % 1000 == 999 {
            e.flush().unwrap();
        }
    }
    e.sync().unwrap();
    assert_eq!(e.len(), n as usize);
    for i in (0..n).step_by(97) {
        let got = e.get(&i.to_be_bytes(), &BoundedWindow::Global, "count");
        assert_eq!(got.as_deref(), Some(&i.to_le_bytes()[..]), "cell {i}");
    }
    e.clear_window(&7u32.to_be_bytes(), &BoundedWindow::Global);
    e.sync().unwrap();
    assert_eq!(
        e.get(&7u32.to_be_bytes(), &BoundedWindow::Global, "count"),
        None
    );
    assert_eq!(e.len(), n as usize - 1);
    let windows = frozen_windows(e.freeze(), GROUPS).unwrap();
    let mut m = in_memory();
    restore_frozen(&mut m, &windows).unwrap();
    assert_eq!(m.len(), n as usize - 1);
    assert_eq!(
        m.get(&9u32.to_be_bytes(), &BoundedWindow::Global, "count")
            .as_deref(),
        Some(&9u32.to_le_bytes()[..])
    );
}

/// A snapshot is the state at `freeze`: writes after it, flushed while the frozen copy
/// waits, are not in it.
#[test]
fn a_frozen_snapshot_does_not_see_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = embedded(&dir);
    e.put(b"a", &BoundedWindow::Global, "v", &[1]);
    e.sync().unwrap();
    let frozen = e.freeze();
    e.put(b"a", &BoundedWindow::Global, "v", &[2]);
    e.put(b"b", &BoundedWindow::Global, "v", &[3]);
    e.sync().unwrap();
    let mut m = in_memory();
    restore_frozen(&mut m, &frozen_windows(frozen, GROUPS).unwrap()).unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(
        m.get(b"a", &BoundedWindow::Global, "v").as_deref(),
        Some(&[1u8][..])
    );
}

/// Two backends of one process in one directory share a store and not their cells;
/// the store's directory goes when the last of them does.
#[test]
fn backends_share_the_store_of_their_directory_and_not_their_cells() {
    let dir = tempfile::tempdir().unwrap();
    let mut a = embedded(&dir);
    let mut b = embedded(&dir);
    a.put(b"k", &BoundedWindow::Global, "v", &[1]);
    b.put(b"k", &BoundedWindow::Global, "v", &[2]);
    a.flush().unwrap();
    b.flush().unwrap();
    assert_eq!(
        a.get(b"k", &BoundedWindow::Global, "v").as_deref(),
        Some(&[1u8][..])
    );
    assert_eq!(
        b.get(b"k", &BoundedWindow::Global, "v").as_deref(),
        Some(&[2u8][..])
    );
    let stores: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(stores.len(), 1, "one store directory per process");
    drop(a);
    drop(b);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "the store is removed"
    );
}

/// A state directory that cannot be made is an error naming it, not a panic.
#[test]
fn a_state_directory_that_cannot_be_made_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = StateChoice::Embedded {
        dir: file.join("state"),
        hot_windows: 1,
        tables: None,
    }
    .backend(GROUPS, 0)
    .err()
    .expect("refused")
    .to_string();
    assert!(err.contains("a-file"), "{err}");
}

/// A part of the format written before 2026-12 (a group's cells, encoded whole)
/// restores into either backend as the cells it held.
#[test]
fn a_part_of_the_format_before_tables_restores_into_either_backend() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = in_memory();
    for k in 0u8..20 {
        m.put(&[k], &window(1), "v", &[k]);
        m.bag_add(&[k], &window(0), "bag", &[k, k]);
    }
    let windows = frozen_windows(m.freeze(), GROUPS).unwrap();
    // Written as that format was: every cell of a group, ordered by address.
    type OldCell = (Vec<u8>, BoundedWindow, String, in_memory::Cell);
    let mut parts: BTreeMap<u32, Vec<OldCell>> = BTreeMap::new();
    for w in &windows {
        for (name, cell) in &w.cells {
            let cell = in_memory::decode_one(cell).unwrap();
            parts.entry(group(&w.key)).or_default().push((
                w.key.clone(),
                w.window.clone(),
                name.clone(),
                cell,
            ));
        }
    }
    let (mut m2, mut e2) = (in_memory(), embedded(&dir));
    for cells in parts.values() {
        let mut refs: Vec<(in_memory::CellIdRef<'_>, &in_memory::Cell)> = cells
            .iter()
            .map(|(key, window, name, cell)| (in_memory::CellIdRef { key, window, name }, cell))
            .collect();
        let part = in_memory::encode_cells(&mut refs);
        m2.restore_add(&part).unwrap();
        e2.restore_add(&part).unwrap();
    }
    assert_eq!(frozen_windows(m2.freeze(), GROUPS).unwrap(), windows);
    e2.sync().unwrap();
    assert_eq!(frozen_windows(e2.freeze(), GROUPS).unwrap(), windows);
    assert_eq!((m2.windows(), e2.windows()), (40, 40));
}
