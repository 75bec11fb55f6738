//! Scratch directories for cases that read or write files; the harness removes them
//! when the run that created them is over.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static DIRS: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
}

/// A new, empty directory, removed after the current run (build, run and check of one
/// case happen on one thread).
pub fn dir(label: &str) -> std::io::Result<PathBuf> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!(
        "tidewater-conformance-{}-{n}-{label}",
        std::process::id()
    ));
    std::fs::create_dir_all(&d)?;
    DIRS.with(|dirs| dirs.borrow_mut().push(d.clone()));
    Ok(d)
}

/// Removes this thread's scratch directories when dropped.
pub(crate) struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        for d in DIRS.with(|dirs| std::mem::take(&mut *dirs.borrow_mut())) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
