//! Worker 0's side of a checkpoint (Flink's `CheckpointCoordinator`): once a checkpoint
//! is durable on every worker, its manifest is written (off the worker's thread, one at
//! a time), which completes it; the sinks commit it after that; a savepoint asked for
//! while the job runs keeps a copy of it.

use super::store::{Manifest, Store};
use crate::epochs::FINAL_EPOCH;
use crate::task::WorkerCtx;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tidewater::{Error, Result};

/// Keeps complete checkpoint `epoch` as a savepoint under `--savepoint-dir` while the
/// job goes on (worker 0, right after writing its manifest: no later checkpoint can
/// have pruned its files yet).
pub(crate) fn keep_savepoint(
    store: &Store,
    epoch: u64,
    config: &crate::EngineConfig,
    ctx: &WorkerCtx,
) -> Result<()> {
    let Some(dir) = &config.savepoint_dir else {
        return Ok(());
    };
    let started = Instant::now();
    let to = dir.join(format!("savepoint-{epoch}"));
    store.copy_checkpoint(epoch, &to)?;
    let mut metrics = ctx.metrics.borrow_mut();
    let m = metrics.step_mut(crate::metrics::ENGINE_STEP);
    m.inc_counter("savepoints", 1);
    m.update_distribution("savepoint_ms", started.elapsed().as_millis() as i64);
    eprintln!(
        "savepoint of checkpoint {epoch} kept in {} (start a job from it with --from-savepoint)",
        to.display()
    );
    Ok(())
}

/// Worker 0 writes each checkpoint's manifest off its own thread, one at a time: writing
/// it re-reads every part for its checksum, syncs it and collects old checkpoints, tens
/// of milliseconds on a slow disk during which records would wait. The sinks commit
/// the checkpoint once its manifest is written.
#[derive(Default)]
pub(crate) struct Manifests {
    /// The checkpoint whose manifest is being written, since when, and its outcome.
    pending: Option<(u64, Instant, mpsc::Receiver<Result<Manifest>>)>,
}

impl Manifests {
    /// Checkpoint `durable` is durable on every worker: starts writing its manifest
    /// unless one is being written (then `durable` waits for the next call); returns
    /// the manifest written, if one is done: its checkpoint, itself and how long it
    /// took. The thread wakes this one when it is done.
    pub(crate) fn poll(
        &mut self,
        store: &Store,
        durable: u64,
        tasks: &[usize],
        workers: usize,
        plan_hash: u64,
        max_key_groups: u32,
    ) -> Result<Option<(u64, Manifest, Duration)>> {
        if self.pending.is_none() {
            let (tx, rx) = mpsc::channel();
            let (store, tasks) = (store.clone(), tasks.to_vec());
            let worker = std::thread::current();
            std::thread::Builder::new()
                .name("tidewater-manifest".into())
                .spawn(move || {
                    let written = if durable == FINAL_EPOCH {
                        store.complete_last(&tasks, workers, plan_hash, max_key_groups)
                    } else {
                        store.complete(durable, &tasks, workers, plan_hash, max_key_groups)
                    };
                    let _ = tx.send(written);
                    worker.unpark();
                })
                .map_err(|e| Error::Internal(format!("cannot start the manifest writer: {e}")))?;
            self.pending = Some((durable, Instant::now(), rx));
        }
        let Some((epoch, started, rx)) = self.pending.take() else {
            unreachable!("a manifest is being written")
        };
        match rx.try_recv() {
            Ok(written) => Ok(Some((epoch, written?, started.elapsed()))),
            Err(mpsc::TryRecvError::Empty) => {
                self.pending = Some((epoch, started, rx));
                Ok(None)
            }
            Err(mpsc::TryRecvError::Disconnected) => Err(Error::Internal(format!(
                "the manifest writer of checkpoint {epoch} stopped"
            ))),
        }
    }
}
