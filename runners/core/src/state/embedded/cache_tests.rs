//! The cache of the embedded backend keeps at most [`CACHE_BYTES`] past a write.

use super::*;
use tidewater::exec::StateCells;

/// Cells of 1.2 KB, 30 MB of them: the cache forgets them by their bytes (65,536 of
/// them held 78 MB), and every one is read back from the store.
#[test]
fn the_cache_keeps_at_most_its_bytes_of_large_cells() {
    let dir = tempfile::tempdir().unwrap();
    let mut e = EmbeddedStateBackend::open(dir.path(), 128, 0).unwrap();
    let value = |i: u32| {
        let mut v = vec![(i % 251) as u8; 1200];
        v[..4].copy_from_slice(&i.to_le_bytes());
        v
    };
    let n = 25_000u32;
    let mut most = 0;
    for i in 0..n {
        e.put(&i.to_be_bytes(), &BoundedWindow::Global, "state", &value(i));
        if i % 1000 == 999 {
            StateBackend::flush(&mut e).unwrap();
            assert!(
                e.cache_bytes <= CACHE_BYTES,
                "{} bytes cached after a flush",
                e.cache_bytes
            );
            assert_eq!(
                e.cache_bytes,
                e.cache.values().map(|c| c.bytes).sum::<usize>()
            );
            most = most.max(e.cache.len());
        }
    }
    StateBackend::sync(&mut e).unwrap();
    // Held past a write: at most the bytes' worth, and the dirty cells of a batch.
    assert!(
        most <= CACHE_BYTES / 1200 + WRITE_BATCH_CELLS,
        "{most} cells cached"
    );
    for i in (0..n).step_by(7) {
        let got = e.get(&i.to_be_bytes(), &BoundedWindow::Global, "state");
        assert_eq!(got.as_deref(), Some(&value(i)[..]), "cell {i}");
    }
}
