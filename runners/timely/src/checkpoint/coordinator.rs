//! The checkpoint coordinator (Flink's `CheckpointCoordinator`), one per worker: it
//! watches the durable probe, and once a checkpoint is durable on every worker, worker
//! 0 writes its manifest (off the worker's thread, one at a time), which completes it;
//! the other workers learn of it from worker 0 (in this process) or the directory
//! (other processes). Then this worker's sinks commit it: while the job runs, sinks
//! commit here and nowhere else (a restored sink commits what its checkpoint staged).
//! A savepoint asked for while the job runs keeps a copy of the next checkpoint to
//! complete.

use super::store::{Manifest, Store};
use crate::epochs::FINAL_EPOCH;
use crate::task::WorkerCtx;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tidewater::{Error, Result};
use tidewater_runners_core::compat::PlanIdentity;
use tidewater_runners_core::sink_host::SinkHost;

/// One worker's coordinator.
pub(crate) struct Coordinator {
    /// The checkpoint store, if checkpoints are on (without, sinks commit every epoch
    /// the probe passes).
    store: Option<Store>,
    /// The plan nodes of this job's tasks that write checkpoint files.
    stateful: Vec<usize>,
    /// This worker's sinks.
    sinks: Vec<Rc<RefCell<SinkHost>>>,
    /// The last epoch the sinks committed (the restored checkpoint's at the start).
    committed: Option<u64>,
    /// Worker 0's manifest being written.
    manifests: Manifests,
    /// A savepoint was requested: the next checkpoint to complete is kept.
    savepoint_wanted: bool,
    /// When a worker of another process than worker 0's last read the directory.
    last_poll: Instant,
}

impl Coordinator {
    /// The coordinator of a worker whose tasks `stateful` write checkpoint files and
    /// whose sinks are `sinks`, starting after checkpoint `restored`.
    pub(crate) fn new(
        store: Option<Store>,
        stateful: Vec<usize>,
        sinks: Vec<Rc<RefCell<SinkHost>>>,
        restored: Option<u64>,
    ) -> Self {
        Coordinator {
            store,
            stateful,
            sinks,
            committed: restored,
            manifests: Manifests::default(),
            savepoint_wanted: false,
            last_poll: Instant::now(),
        }
    }

    /// The last epoch the sinks committed.
    pub(crate) fn committed(&self) -> Option<u64> {
        self.committed
    }

    /// Takes a savepoint request (SIGUSR1, `tidewater::runner::request_savepoint`):
    /// worker 0 keeps the next checkpoint to complete; the first worker of another
    /// process says where to ask instead.
    pub(crate) fn take_savepoint_request(&mut self, ctx: &WorkerCtx, config: &crate::EngineConfig) {
        if ctx.me == 0 && tidewater::runner::take_savepoint_request() {
            match (&config.savepoint_dir, &self.store) {
                (Some(_), Some(_)) => {
                    tracing::info!("savepoint requested: the next checkpoint to complete is kept");
                    self.savepoint_wanted = true;
                }
                _ => tracing::warn!(
                    "a savepoint was requested, but the job has no --savepoint-dir to keep it in: ignored"
                ),
            }
        } else if ctx.me != 0
            && ctx.me == ctx.local.start
            && tidewater::runner::take_savepoint_request()
        {
            tracing::warn!(
                "a savepoint was requested of process {}: ask process 0 (or the local cluster's supervisor), which writes the checkpoints' manifests",
                config.process_id
            );
        }
    }

    /// Every epoch up to `passed` is durable on every worker (the probe passed it):
    /// completes the newest checkpoint among them (or, without checkpoints, the epoch)
    /// as far as it can without waiting, and commits the sinks through it. `durable`
    /// is where worker 0 publishes the checkpoints it completed to this process's
    /// other workers. Returns whether the last epoch is committed: the job is over.
    pub(crate) fn advance(
        &mut self,
        passed: Option<u64>,
        ctx: &WorkerCtx,
        config: &crate::EngineConfig,
        durable: &Mutex<Option<u64>>,
    ) -> Result<bool> {
        let target = match &self.store {
            None => passed,
            Some(_) => passed.and_then(|p| crate::epochs::checkpoint_through(p, ctx.stride)),
        };
        let Some(target) = target.filter(|e| self.committed.is_none_or(|c| c < *e)) else {
            return Ok(self.committed == Some(FINAL_EPOCH));
        };
        let (complete, manifest_bytes) = match self.store.clone() {
            None => (Some(target), None),
            Some(store) if ctx.me == 0 => self.complete(&store, target, ctx, config, durable)?,
            Some(store) => (
                self.completed_elsewhere(&store, target, ctx, config, durable)?,
                None,
            ),
        };
        let Some(e) = complete else {
            return Ok(false);
        };
        if self.store.is_some() {
            let mut metrics = ctx.metrics.borrow_mut();
            ctx.checkpoints.borrow_mut().complete(
                e,
                manifest_bytes,
                metrics.step_mut(crate::metrics::ENGINE_STEP),
            );
        }
        if !self.sinks.is_empty() {
            crate::fault::point("staged");
        }
        for sink in &self.sinks {
            sink.borrow_mut().commit_through(e)?;
            crate::fault::point("committed");
        }
        self.committed = Some(e);
        ctx.committed.set(Some(e));
        ctx.finalize_finished_reads()?;
        Ok(e == FINAL_EPOCH)
    }

    /// Worker 0: writes checkpoint `target`'s manifest (or goes on with the one being
    /// written); returns the checkpoint completed, if one is, and its size.
    fn complete(
        &mut self,
        store: &Store,
        target: u64,
        ctx: &WorkerCtx,
        config: &crate::EngineConfig,
        durable: &Mutex<Option<u64>>,
    ) -> Result<(Option<u64>, Option<crate::metrics::ManifestSize>)> {
        let Some((epoch, manifest, took)) = self.manifests.poll(
            store,
            target,
            &self.stateful,
            ctx.peers,
            &ctx.identity,
            ctx.max_key_groups,
        )?
        else {
            return Ok((None, None));
        };
        if self.savepoint_wanted && epoch != FINAL_EPOCH {
            keep_savepoint(store, epoch, config, ctx)?;
            self.savepoint_wanted = false;
        }
        {
            let mut metrics = ctx.metrics.borrow_mut();
            let m = metrics.step_mut(crate::metrics::ENGINE_STEP);
            m.inc_counter("checkpoints", 1);
            m.update_distribution("manifest_ms", took.as_millis() as i64);
        }
        let mut published = durable.lock().unwrap_or_else(|e| e.into_inner());
        *published = Some(published.map_or(epoch, |p| p.max(epoch)));
        Ok((
            Some(epoch),
            Some(crate::metrics::ManifestSize {
                bytes: manifest.files.iter().map(|f| f.len).sum(),
                parts: manifest.files.len() as u64,
                delta_parts: manifest.files.iter().filter(|f| !f.base.is_empty()).count() as u64,
            }),
        ))
    }

    /// Another worker: the newest checkpoint (up to `target`) worker 0 completed that
    /// this worker has not committed, as worker 0 says in this process through
    /// `durable`, or (another process) as the store shows: its first worker lists the
    /// store's manifests and publishes the newest in `durable` to the others. The
    /// newest, not only `target`: on a slow store the manifests trail the epochs that
    /// are durable, and waiting for `target` itself would commit nothing until the end.
    fn completed_elsewhere(
        &mut self,
        store: &Store,
        target: u64,
        ctx: &WorkerCtx,
        config: &crate::EngineConfig,
        durable: &Mutex<Option<u64>>,
    ) -> Result<Option<u64>> {
        let mut newest = *durable.lock().unwrap_or_else(|e| e.into_inner());
        // A store's listing costs a request on an object store: a few a second.
        let every = match &config.checkpoint_dir {
            Some(d) if tidewater_runners_core::store::is_object_store(d) => {
                Duration::from_millis(100)
            }
            _ => Duration::from_millis(10),
        };
        if config.processes > 1
            && ctx.me == ctx.local.start
            && newest.is_none_or(|p| p < target)
            && self.last_poll.elapsed() >= every
        {
            self.last_poll = Instant::now();
            let listed = store.newest_checkpoint()?.map(|(e, last)| {
                // The job's last checkpoint completes the final epoch.
                if last {
                    FINAL_EPOCH
                } else {
                    e
                }
            });
            if listed > newest {
                newest = listed;
                let mut published = durable.lock().unwrap_or_else(|e| e.into_inner());
                *published = (*published).max(listed);
            }
        }
        Ok(newest
            .map(|m| m.min(target))
            .filter(|e| self.committed.is_none_or(|c| c < *e)))
    }
}

/// Keeps complete checkpoint `epoch` as a savepoint under `--savepoint-dir` while the
/// job goes on (worker 0, right after writing its manifest: no later checkpoint can
/// have pruned its files yet).
fn keep_savepoint(
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
    if let Some(board) = &config.status {
        board.savepoint(epoch, &to);
    }
    let mut metrics = ctx.metrics.borrow_mut();
    let m = metrics.step_mut(crate::metrics::ENGINE_STEP);
    m.inc_counter("savepoints", 1);
    m.update_distribution("savepoint_ms", started.elapsed().as_millis() as i64);
    tracing::info!(
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
struct Manifests {
    /// The checkpoint whose manifest is being written, since when, and its outcome.
    pending: Option<(u64, Instant, mpsc::Receiver<Result<Manifest>>)>,
}

impl Manifests {
    /// Checkpoint `durable` is durable on every worker: starts writing its manifest
    /// unless one is being written (then `durable` waits for the next call); returns
    /// the manifest written, if one is done: its checkpoint, itself and how long it
    /// took. The thread wakes this one when it is done.
    fn poll(
        &mut self,
        store: &Store,
        durable: u64,
        tasks: &[usize],
        workers: usize,
        plan: &Arc<PlanIdentity>,
        max_key_groups: u32,
    ) -> Result<Option<(u64, Manifest, Duration)>> {
        if self.pending.is_none() {
            let (tx, rx) = mpsc::channel();
            let (store, tasks, plan) = (store.clone(), tasks.to_vec(), plan.clone());
            let worker = std::thread::current();
            std::thread::Builder::new()
                .name("tidewater-manifest".into())
                .spawn(move || {
                    let written = if durable == FINAL_EPOCH {
                        store.complete_last(&tasks, workers, &plan, max_key_groups)
                    } else {
                        store.complete(durable, &tasks, workers, &plan, max_key_groups)
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
