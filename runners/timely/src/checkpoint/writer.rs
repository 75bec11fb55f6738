//! The snapshot writer: a thread per worker that encodes a task's snapshot, writes it
//! into the store and syncs it, off the task's thread.
//!
//! At a checkpoint a task takes its state apart into parts on its own thread (the
//! state goes on changing as soon as the task moves on, so this copy cannot wait), or
//! freezes it where its operator can (a stateful ParDo's copy-on-write cells: the
//! parts are then encoded here, see `keyed_parts_later` in runners/core), then
//! hands them here and moves on: its data outputs go to the next epoch at once, so
//! records of the next epoch flow while the file is written. Only its control output,
//! the one the durable probe watches, stays at the epoch of the write until the writer
//! says the file is durable; the task is woken then and lets it go. So the probe
//! passing `e` still means every task's file holding `e` is on disk, as when the task
//! wrote the file itself, and what is left on the hot path is the copy of the state,
//! not the encoding, the write or the `fsync`.
//!
//! The encoding comes here only when a core is spare for this thread
//! ([`spare_core`]): otherwise the writer takes turns with the workers on the same
//! cores, and a worker waiting for its core stalls longer than encoding on it would
//! (native W=2 on 2 cores: p99 5-8 ms encoding on the worker, 6-32 ms here).
//!
//! Files are written in the order they are handed over. A task's delta snapshot builds
//! on the task's previous file: the writer, which wrote that one, names it (and the
//! files it builds on) in the delta's header. A failed write fails the task that wrote
//! it the next time it runs, with the store's message.

use crate::checkpoint::store::Store;
use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tidewater::{Error, Result};
use tidewater_runners_core::checkpoint::LaterPartsOf;
use tidewater_runners_core::snapshot::{BaseRef, Snapshot};
use timely::scheduling::SyncActivator;

/// What a finished write reports: its size in bytes and how long the writer took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteFigures {
    /// The file's length.
    pub bytes: usize,
    /// From the writer taking the job to the file synced.
    pub took: Duration,
}

/// One write handed to the writer, as its task waits for it.
pub struct Written {
    result: Mutex<Option<Result<WriteFigures>>>,
    ready: Condvar,
    wake: SyncActivator,
}

impl Written {
    fn new(wake: SyncActivator) -> Arc<Self> {
        Arc::new(Written {
            result: Mutex::new(None),
            ready: Condvar::new(),
            wake,
        })
    }

    fn set(&self, result: Result<WriteFigures>) {
        *self.result.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
        self.ready.notify_all();
        // The task's worker is gone only when the job is over.
        let _ = self.wake.activate();
    }

    /// The write's outcome, once it is over.
    pub fn try_take(&self) -> Option<Result<WriteFigures>> {
        self.result.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Waits for the write to be over.
    pub fn wait(&self) -> Result<WriteFigures> {
        let mut result = self.result.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = result.take() {
                return r;
            }
            result = self.ready.wait(result).unwrap_or_else(|e| e.into_inner());
        }
    }
}

struct Job {
    node: usize,
    worker: usize,
    first: u64,
    last: u64,
    snapshot: Snapshot,
    /// Parts to encode from frozen state, before the snapshot's others.
    later: Option<LaterPartsOf>,
    /// The snapshot is a delta over the task's previous one.
    delta: bool,
    done: Arc<Written>,
}

/// A worker's snapshot writer thread; dropping it lets the thread finish what it was
/// given and waits for it.
pub struct PartWriter {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl PartWriter {
    /// A writer into `store` for worker `worker`'s tasks.
    pub fn new(store: Store, worker: usize) -> Result<Self> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(format!("tidewater-snapshots-w{worker}"))
            .spawn(move || {
                // Per task (plan node): its last file and the files that one builds on.
                let mut chains: HashMap<usize, Vec<BaseRef>> = HashMap::new();
                for mut job in rx {
                    let started = Instant::now();
                    crate::fault::delay("snapshot-write");
                    // A panic here must still answer the task, which would otherwise
                    // wait for this file for ever.
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let chain = chains.remove(&job.node).unwrap_or_default();
                        if job.delta {
                            if chain.is_empty() {
                                return Err(Error::Internal(format!(
                                    "task {} wrote a delta snapshot with no snapshot before it",
                                    job.node
                                )));
                            }
                            job.snapshot.base = chain;
                        }
                        // Parts from frozen state are written as they are encoded.
                        let file = store.write_part_streamed(
                            job.node,
                            job.worker,
                            job.first,
                            job.last,
                            &job.snapshot,
                            job.later.take(),
                        )?;
                        let bytes = file.len as usize;
                        let mut chain = std::mem::take(&mut job.snapshot.base);
                        chain.push(file);
                        chains.insert(job.node, chain);
                        Ok(bytes)
                    }))
                    .unwrap_or_else(|_| {
                        Err(Error::Internal(
                            "the snapshot writer panicked while writing a file".to_string(),
                        ))
                    })
                    .map(|bytes| WriteFigures {
                        bytes,
                        took: started.elapsed(),
                    });
                    if result.is_ok() {
                        crate::fault::point("snapshot");
                    }
                    job.done.set(result);
                }
            })
            .map_err(|e| Error::Internal(format!("cannot start the snapshot writer: {e}")))?;
        Ok(PartWriter {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Hands over task `node`'s snapshot for epochs `first..=last` of worker `worker`,
    /// with the parts still to encode from frozen state (they go first), a delta over
    /// the task's previous one if `delta`; `wake` activates the task when the file is
    /// durable (or the write or the encoding failed).
    pub fn submit(
        &self,
        node: usize,
        worker: usize,
        (first, last): (u64, u64),
        (snapshot, later, delta): (Snapshot, Option<LaterPartsOf>, bool),
        wake: SyncActivator,
    ) -> Arc<Written> {
        let done = Written::new(wake);
        let job = Job {
            node,
            worker,
            first,
            last,
            snapshot,
            later,
            delta,
            done: Arc::clone(&done),
        };
        let sent = self.jobs.as_ref().is_some_and(|j| j.send(job).is_ok());
        if !sent {
            done.set(Err(Error::Internal(
                "the snapshot writer has stopped".to_string(),
            )));
        }
        done
    }
}

/// Whether this host has a core beyond the worker threads of every process of the
/// job it runs (processes whose address names the same host as this one's), which a
/// snapshot writer may take without making a worker wait for one.
pub fn spare_core(workers: usize, addresses: &[String], process_id: usize) -> bool {
    let host = |address: &str| {
        address
            .rsplit_once(':')
            .map_or(address, |(host, _)| host)
            .to_string()
    };
    let here = match addresses.get(process_id) {
        Some(own) => {
            let own = host(own);
            addresses.iter().filter(|a| host(a) == own).count()
        }
        None => 1,
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    workers.max(1) * here.max(1) < cores
}

impl Drop for PartWriter {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::spare_core;

    #[test]
    fn a_core_is_spare_only_beyond_the_workers_of_every_process_on_this_host() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spare = |workers: usize, addresses: &[&str], process_id: usize| {
            let addresses: Vec<String> = addresses.iter().map(|a| a.to_string()).collect();
            spare_core(workers, &addresses, process_id)
        };
        assert!(!spare(cores, &[], 0));
        assert_eq!(spare(cores - 1, &[], 0), cores > 1);
        // Two processes on this host take twice the threads; one on another host none.
        let local = ["127.0.0.1:2101", "127.0.0.1:2102"];
        assert_eq!(spare(1, &local, 1), cores > 2);
        let apart = ["10.0.0.1:2101", "127.0.0.1:2102"];
        assert_eq!(spare(1, &apart, 1), cores > 1);
        assert!(!spare(cores, &apart, 1));
    }
}
