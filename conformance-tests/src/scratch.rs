//! Scratch directories for cases that read or write files; the harness removes them
//! when the run that created them is over.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

thread_local! {
    static DIRS: RefCell<Vec<PathBuf>> = const { RefCell::new(Vec::new()) };
    /// The current run's name and how many directories it made.
    static RUN: RefCell<Option<(String, u64)>> = const { RefCell::new(None) };
}

/// A fresh name for a run: this process and a counter.
pub fn new_run_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The run on this thread is `name`: its directories are named after it, so that the
/// processes of a local cluster that run the same case find the same directories.
pub fn set_run(name: String) {
    RUN.with(|r| *r.borrow_mut() = Some((name, 0)));
}

/// The current run's name (shared by the processes of a local cluster that run it):
/// what a case names the things it makes outside the process after.
pub fn run_name() -> String {
    RUN.with(|r| {
        r.borrow_mut()
            .get_or_insert_with(|| (new_run_name(), 0))
            .0
            .clone()
    })
}

/// A new, empty directory, removed after the current run (build, run and check of one
/// case happen on one thread).
pub fn dir(label: &str) -> std::io::Result<PathBuf> {
    let (run, n) = RUN.with(|r| {
        let mut r = r.borrow_mut();
        let (name, n) = r.get_or_insert_with(|| (new_run_name(), 0));
        *n += 1;
        (name.clone(), *n - 1)
    });
    let d = std::env::temp_dir().join(format!("tidewater-conformance-{run}-{n}-{label}"));
    std::fs::create_dir_all(&d)?;
    DIRS.with(|dirs| dirs.borrow_mut().push(d.clone()));
    Ok(d)
}

/// Removes this thread's scratch directories when dropped.
pub(crate) struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        RUN.with(|r| *r.borrow_mut() = None);
        for d in DIRS.with(|dirs| std::mem::take(&mut *dirs.borrow_mut())) {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
