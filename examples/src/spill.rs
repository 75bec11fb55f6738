//! What the sinks of a local cluster's processes saw, handed to its supervisor in files.
//!
//! A process of a `--local-cluster` ends inside its run (it hands the pipeline result
//! to the supervisor and exits), so figures a sink keeps in its process's memory, as
//! the bench's [`LatencySink`](crate::latency::LatencySink) and
//! [`CountingSink`](crate::CountingSink) do, never reach the supervisor. Such a sink,
//! given a spill path `P` (the same in every process: it is part of the plan), appends
//! what it commits to the file `P-<process id>`; the supervisor reads every such file
//! after the run with [`take`].

use std::io::Write;
use std::path::{Path, PathBuf};

/// The file of this process for spill path `spill`.
fn file_of(spill: &Path, process: u32) -> PathBuf {
    let mut name = spill.as_os_str().to_owned();
    name.push(format!("-{process}"));
    name.into()
}

/// Appends `bytes` to this process's file of `spill`, in one write: the workers of a
/// process append to the same file (`O_APPEND`) without interleaving inside a call.
pub fn append(spill: &Path, bytes: &[u8]) -> Result<(), tidewater::UserError> {
    let path = file_of(spill, std::process::id());
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| format!("cannot append to {}: {e}", path.display()).into())
}

/// The contents of every process's file of `spill` (one entry per process that
/// appended, in the order of their process ids' names), removing them.
pub fn take(spill: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let dir = match spill.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = format!(
        "{}-",
        spill.file_name().unwrap_or_default().to_string_lossy()
    );
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if name
            .strip_prefix(&prefix)
            .is_some_and(|pid| pid.parse::<u32>().is_ok())
        {
            files.push(path);
        }
    }
    files.sort();
    let mut all = Vec::new();
    for path in files {
        all.push(std::fs::read(&path)?);
        std::fs::remove_file(&path)?;
    }
    Ok(all)
}

/// Removes what an earlier run left at `spill` (a run that failed before [`take`]).
pub fn clear(spill: &Path) -> std::io::Result<()> {
    take(spill).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_each_process_appended_is_taken_once_per_process_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("counts");
        // Another spill path's file and a name that only starts alike are not taken.
        std::fs::write(dir.path().join("counts-x"), b"no").unwrap();
        std::fs::write(dir.path().join("other-1"), b"no").unwrap();
        std::fs::write(file_of(&spill, 7), b"ab").unwrap();
        append(&spill, b"cd").unwrap();
        append(&spill, b"ef").unwrap();
        let mut taken = take(&spill).unwrap();
        taken.sort();
        assert_eq!(taken, vec![b"ab".to_vec(), b"cdef".to_vec()]);
        assert!(take(&spill).unwrap().is_empty());
        assert!(dir.path().join("counts-x").exists());
    }
}
