//! Tests of the in-memory state backend (`in_memory.rs`).

use super::*;
use tidewater::Timestamp;

fn w(start: i64) -> BoundedWindow {
    BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(start + 10),
    }
}

/// Cells of several keys, windows and kinds, written in the order of `keys`.
fn filled(keys: &[&[u8]]) -> InMemoryStateBackend {
    let mut s = InMemoryStateBackend::default();
    for k in keys {
        for win in [w(10), BoundedWindow::Global, w(0)] {
            s.put(k, &win, "v", k);
            s.bag_add(k, &win, "bag", &[1]);
            s.map_put(k, &win, "map", &[2], &[3]);
        }
    }
    s
}

#[test]
fn a_frozen_window_holds_its_cells_encoded_by_name_whatever_the_write_order() {
    let keys: Vec<Vec<u8>> = (0u32..200).map(|i| i.to_be_bytes().to_vec()).collect();
    let forward: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let backward: Vec<&[u8]> = forward.iter().rev().copied().collect();
    let windows = crate::state::frozen_windows(filled(&forward).freeze(), 16).unwrap();
    assert_eq!(
        windows,
        crate::state::frozen_windows(filled(&backward).freeze(), 16).unwrap()
    );
    assert_eq!(windows.len(), 600);
    let k = &keys[7];
    let encoded = |c: Cell| postcard::to_allocvec(&c).unwrap();
    let first = windows
        .iter()
        .find(|f| f.key == *k && f.window == BoundedWindow::Global)
        .unwrap();
    assert_eq!(
        first.cells,
        vec![
            ("bag".to_string(), encoded(Cell::Bag(vec![vec![1]]))),
            (
                "map".to_string(),
                encoded(Cell::Map(BTreeMap::from([(vec![2], vec![3])])))
            ),
            ("v".to_string(), encoded(Cell::Value(k.as_slice().into()))),
        ]
    );
    // A copy of some windows has those only.
    let s = filled(&forward);
    let some = s.freeze_windows(&[(k.clone(), w(0)), (b"absent".to_vec(), w(0))]);
    assert_eq!(some.window(k, &w(0)).unwrap().len(), 3);
    assert!(some.window(k, &w(10)).unwrap().is_empty());
    assert!(some.window(b"absent", &w(0)).unwrap().is_empty());
    assert_eq!(crate::state::frozen_windows(some, 16).unwrap().len(), 1);
}

#[test]
fn cells_are_counted_cleared_and_expired() {
    let mut s = filled(&[b"a", b"b"]);
    assert_eq!(s.len(), 18);
    s.clear(b"a", &w(0), "bag");
    s.clear(b"a", &w(0), "bag");
    s.clear(b"a", &w(0), "never written");
    assert_eq!(s.len(), 17);
    assert!(s.bag(b"a", &w(0), "bag").is_empty());
    assert_eq!(s.get(b"a", &w(0), "v").as_deref(), Some(&b"a"[..]));
    s.clear_window(b"a", &w(0));
    assert_eq!(s.len(), 15);
    assert_eq!(s.get(b"a", &w(0), "v"), None);
    assert_eq!(s.get(b"a", &w(10), "v").as_deref(), Some(&b"a"[..]));
    assert_eq!(s.get(b"b", &w(0), "v").as_deref(), Some(&b"b"[..]));
    s.clear(b"b", &w(0), "v");
    s.clear(b"b", &w(0), "bag");
    s.clear(b"b", &w(0), "map");
    assert_eq!(s.len(), 12);
    assert!(
        s.window(b"b", &w(0)).is_none(),
        "an emptied window is dropped"
    );
}

#[test]
fn a_cell_changes_kind_when_written_as_another() {
    let mut s = InMemoryStateBackend::default();
    let g = BoundedWindow::Global;
    s.put(b"k", &g, "x", &[1, 2, 3]);
    s.put(b"k", &g, "x", &[4]);
    assert_eq!(s.get(b"k", &g, "x").as_deref(), Some(&[4u8][..]));
    s.bag_add(b"k", &g, "x", &[5]);
    assert_eq!(s.get(b"k", &g, "x"), None);
    assert_eq!(s.bag(b"k", &g, "x"), vec![&[5u8][..]]);
    assert!(s.map_put(b"k", &g, "x", &[6], &[7]));
    assert!(!s.map_put(b"k", &g, "x", &[6], &[8]));
    assert_eq!(s.map_get(b"k", &g, "x", &[6]).as_deref(), Some(&[8u8][..]));
    assert_eq!(s.len(), 1);
}

#[test]
fn windows_expire_in_order_of_their_end_plus_the_lateness_also_after_a_restore() {
    let mut s = InMemoryStateBackend::new(5);
    s.put(b"a", &w(0), "v", &[1]);
    s.put(b"a", &w(0), "v", &[2]);
    s.bag_add(b"a", &w(0), "bag", &[2]);
    s.map_put(b"a", &w(10), "map", &[2], &[3]);
    s.put(b"b", &w(0), "v", &[1]);
    s.keep_window(b"c", &w(20));
    assert_eq!((s.windows(), s.live_keys()), (4, 3));
    // [0, 10) is collected after 9 + 5.
    assert_eq!(s.next_expiry(), Some(Timestamp(14)));
    let mut t = InMemoryStateBackend::new(5);
    crate::state::restore_frozen(
        &mut t,
        &crate::state::frozen_windows(s.freeze(), 16).unwrap(),
    )
    .unwrap();
    for s in [&mut s, &mut t] {
        let mut expired = Vec::new();
        s.expire(Timestamp(15), &mut |k, win| {
            expired.push((k.to_vec(), win.clone()))
        });
        assert_eq!(expired, vec![(b"a".to_vec(), w(0)), (b"b".to_vec(), w(0))]);
        assert_eq!(s.len(), 1, "a's map in [10, 20) holds");
        assert_eq!(s.next_expiry(), Some(Timestamp(24)));
    }
    // A kept window holds no cells and is not in a snapshot: the runner keeps it
    // again from its timers.
    assert_eq!((s.windows(), t.windows()), (2, 1));
}

#[test]
fn a_frozen_copy_keeps_the_cells_as_they_were_whatever_is_written_after() {
    let keys: Vec<Vec<u8>> = (0u32..50).map(|i| i.to_be_bytes().to_vec()).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let mut s = filled(&refs);
    let all = |s: &InMemoryStateBackend| crate::state::frozen_windows(s.freeze(), 16).unwrap();
    let before = all(&s);
    let frozen = s.freeze();
    // Every kind of write, to windows the copy holds and to new ones.
    for k in &refs {
        s.put(k, &w(0), "v", b"changed");
        s.bag_add(k, &w(10), "bag", &[9]);
        s.map_put(k, &BoundedWindow::Global, "map", &[2], &[9]);
        s.map_remove(k, &w(0), "map", &[2]);
        s.clear(k, &w(10), "v");
        s.put(k, &w(20), "v", b"new");
    }
    s.clear_window(refs[0], &BoundedWindow::Global);
    let after = all(&s);
    assert_ne!(after, before);
    assert_eq!(crate::state::frozen_windows(frozen, 16).unwrap(), before);
    // The live table was copied where written, not changed under the copy.
    assert_eq!(all(&s), after);
    assert_eq!(s.get(refs[1], &w(0), "v").as_deref(), Some(&b"changed"[..]));
    assert_eq!(s.bag(refs[1], &w(10), "bag"), vec![&[1u8][..], &[9u8][..]]);
}

#[test]
fn a_read_then_a_write_elsewhere_find_their_own_cells() {
    // The last bucket found is tried first: it must not answer for another key.
    let mut s = InMemoryStateBackend::default();
    let g = BoundedWindow::Global;
    for i in 0..1000u32 {
        let k = i.to_le_bytes();
        assert_eq!(s.get(&k, &g, "v"), None);
        s.put(&k, &g, "v", &k);
        assert_eq!(
            s.get(&(i / 2).to_le_bytes(), &g, "v").as_deref(),
            Some(&(i / 2).to_le_bytes()[..])
        );
        s.put(&k, &w(0), "v", &[1]);
        if i % 3 == 0 {
            s.clear_window(&k, &w(0));
        }
    }
    for i in 0..1000u32 {
        let k = i.to_le_bytes();
        assert_eq!(s.get(&k, &g, "v").as_deref(), Some(&k[..]));
        let in_w0 = s.get(&k, &w(0), "v");
        assert_eq!(in_w0.as_deref(), (i % 3 != 0).then_some(&[1u8][..]));
    }
}

#[test]
fn many_names_are_found_through_the_index() {
    let mut s = InMemoryStateBackend::default();
    let g = BoundedWindow::Global;
    for i in 0..3 * SCANNED_NAMES as u8 {
        s.put(b"k", &g, &format!("n{i}"), &[i]);
    }
    for i in 0..3 * SCANNED_NAMES as u8 {
        assert_eq!(s.get(b"k", &g, &format!("n{i}")).as_deref(), Some(&[i][..]));
    }
    assert_eq!(s.get(b"k", &g, "n99"), None);
    assert_eq!(s.len(), 3 * SCANNED_NAMES);
}
