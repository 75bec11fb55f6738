//! One job per checkpoint directory: whoever runs a job on the directory holds an
//! exclusive lock on its `lock` file for the job's life (a local cluster's supervisor,
//! or the process of a single-process job, or process 0 of a `--processes` job). A
//! second job on the same directory is refused at start, naming the holder, instead of
//! both writing manifests and renaming each other's files. The lock is the operating
//! system's (`flock`), so it goes with its holder however that ends, a SIGKILL included.
//! On an object store, where there is no such lock, it is a lease (runners-core's
//! `store::lease`): renewed while held, let go when dropped, run out
//! [`LEASE`](tidewater_runners_core::store::lease::LEASE) after a holder that died.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;
use tidewater::{Error, Result};
use tidewater_runners_core::store::is_object_store;
use tidewater_runners_core::store::lease::Lease;

/// The lock on a checkpoint directory, held until dropped.
#[derive(Debug)]
pub enum DirLock {
    /// A local directory's lock file.
    File(File),
    /// An object store's lease.
    Lease(Lease),
}

fn in_use(dir: &Path, holder: String) -> Error {
    Error::InvalidOption {
        option: format!("--checkpoint-dir {}", dir.display()),
        message: format!(
            "it is in use by another job ({holder}): one job per checkpoint directory; wait for that one to end, or give this one another --checkpoint-dir"
        ),
    }
}

/// Takes the lock on checkpoint directory `dir` (created if missing), or says which
/// process holds it.
pub fn lock(dir: &Path) -> Result<DirLock> {
    if is_object_store(dir) {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let me = format!("process {} on {}", std::process::id(), host.trim());
        return match Lease::acquire(&dir.to_string_lossy(), &me)? {
            Ok(lease) => Ok(DirLock::Lease(lease)),
            Err(held) => Err(in_use(
                dir,
                format!(
                    "{} holds its lease for {} s more unless it renews it",
                    held.holder,
                    held.left.as_secs().max(1)
                ),
            )),
        };
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::Io {
        what: "cannot create the checkpoint directory".into(),
        path: dir.to_path_buf(),
        cause: e,
    })?;
    let path = dir.join("lock");
    let io = |what: &str, e| Error::Io {
        what: what.into(),
        path: path.clone(),
        cause: e,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io("cannot open the checkpoint directory's lock", e))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
            return Err(in_use(
                dir,
                if holder.is_empty() {
                    "its lock is held".to_string()
                } else {
                    format!("process {holder} holds its lock")
                },
            ));
        }
        Err(TryLockError::Error(e)) => {
            return Err(io("cannot lock the checkpoint directory", e));
        }
    }
    // Who holds it, for the next one's message.
    let pid = std::process::id().to_string();
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(pid.as_bytes()))
        .map_err(|e| io("cannot write the checkpoint directory's lock", e))?;
    Ok(DirLock::File(file))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let e = lock(dir.path()).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "invalid option --checkpoint-dir {}: it is in use by another job (process {} holds its lock): one job per checkpoint directory; wait for that one to end, or give this one another --checkpoint-dir",
                dir.path().display(),
                std::process::id()
            )
        );
        drop(first);
        lock(dir.path()).unwrap();
    }
}
