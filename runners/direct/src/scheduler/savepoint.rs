//! Savepoints on the direct runner: a job starts from one written by any runner at any
//! parallelism (`--from-savepoint`), and keeps one (`--savepoint-dir`) when it stops
//! or ends, or when asked while it runs, in the store format the engine runners
//! read (core's `store`): one worker's file holding every head's and sink's parts,
//! and a manifest naming the plan's stateful parts by id.
//!
//! A savepoint is taken between rounds, where nothing is in flight: held partial
//! combines go into their groupings first, as at a validation snapshot. The sinks end
//! their epoch, so the savepoint records what they staged, and commit it once the
//! savepoint is durable. Its label is the last epoch the sinks staged; a job resumed
//! from it writes from the next one on.

use super::*;
use std::path::Path;
use tidewater_runners_core::store::is_object_store;

impl Executor<'_> {
    /// Builds every head and sink: new, or from the savepoint `restored`, whose
    /// workers' state the one worker takes over.
    pub(super) fn build_heads_and_sinks(&mut self, restored: Option<&Restored>) -> Result<()> {
        let plan = self.plan;
        let snapshot = restored.map(|r| &r.snapshot);
        let old_workers = restored.map_or(1, |r| r.manifest.workers);
        let at = placement(self.max_key_groups, old_workers, &self.options.state);
        for i in heads(plan) {
            let mut head = Head::build(plan, &self.graph, i, &at, snapshot)?;
            if let (Head::Keyed(_), Some(_), Some(_)) =
                (&head, snapshot, self.options.checkpoint_every)
            {
                // The first validation snapshot is a delta over the restored state.
                let (full, _) = head.parts_now(
                    &plan.nodes[i].name,
                    self.max_key_groups,
                    0,
                    SnapshotKind::Full,
                )?;
                self.snapshot_bases[i] = Some(full);
            }
            if let Head::TestStream { clock, .. } = &head {
                // The script's clock goes on from where it was.
                if clock.processing_time != Timestamp::MAX {
                    self.processing_time = self.processing_time.max(clock.processing_time);
                }
            }
            self.heads[i] = Some(head);
        }
        let resume = start_epoch(restored);
        for (i, n) in plan.nodes.iter().enumerate() {
            if let NodeKind::Sink { .. } = &n.kind {
                let mut host = match snapshot {
                    Some(s) => restore_sink(plan, i, s, 0, 1, &self.job)?,
                    None => SinkHost::new(plan, i, 0, resume, &self.job)?,
                };
                host.resume_at(resume);
                host.recover(1)?;
                self.sinks[i] = Some(host);
            }
        }
        Ok(())
    }

    /// A savepoint was requested while the job runs: keeps one in
    /// `--savepoint-dir/savepoint-<epoch>`, or says why not.
    pub(super) fn keep_savepoint_now(&mut self) -> Result<()> {
        let Some(dir) = self.options.savepoint_dir.clone() else {
            tracing::warn!(
                "a savepoint was requested, but the job has no --savepoint-dir to keep it in: ignored"
            );
            return Ok(());
        };
        // Its directory is named by its label, known once the sinks ended their epoch.
        let staging = dir.join(".savepoint-in-progress");
        Store::remove_all(&staging)?;
        let epoch = self.keep_savepoint(&staging)?;
        let to = dir.join(format!("savepoint-{epoch}"));
        if is_object_store(&dir) {
            // No renames there: its files copied under their name, the manifest last.
            Store::open(&staging)?.copy_checkpoint(epoch, &to)?;
            Store::remove_all(&staging)?;
        } else {
            std::fs::rename(&staging, &to).map_err(|e| Error::Io {
                what: "cannot name the savepoint".into(),
                path: to.clone(),
                cause: e,
            })?;
        }
        if let Some(board) = &self.options.status {
            board.savepoint(epoch, &to);
        }
        tracing::info!(
            "savepoint {epoch} kept in {} (start a job from it with --from-savepoint)",
            to.display()
        );
        Ok(())
    }

    /// Keeps the job's state as a savepoint in `dir` (a store), then commits what the
    /// sinks staged up to it; its label.
    pub(super) fn keep_savepoint(&mut self, dir: &Path) -> Result<u64> {
        self.flush_all_partials()?;
        let plan = self.plan;
        let max = self.max_key_groups;
        self.nothing_in_flight("a savepoint")?;
        let mut parts = Vec::new();
        for (i, n) in plan.nodes.iter().enumerate() {
            if let Some(head) = &mut self.heads[i] {
                let (mine, _) = head.parts_now(&n.name, max, 0, SnapshotKind::Full)?;
                if let Head::Keyed(_) = head {
                    // A validation snapshot next is a delta over this one.
                    self.snapshot_bases[i] = Some(mine.clone());
                }
                parts.extend(mine);
            }
            if let Some(host) = &mut self.sinks[i] {
                host.end_epoch()?;
                parts.extend(host.snapshot().into_iter().map(|(scope, bytes)| Part {
                    transform: n.name.clone(),
                    scope,
                    bytes,
                }));
            }
        }
        // The last epoch the sinks staged (they end theirs together).
        let epoch = self
            .sinks
            .iter()
            .flatten()
            .map(|h| h.epoch().saturating_sub(1))
            .max()
            .unwrap_or(0);
        let snapshot = Snapshot {
            plan_hash: plan.plan_hash,
            max_key_groups: max,
            epoch,
            base: Vec::new(),
            parts,
            stored: Default::default(),
        };
        let store = Store::open(dir)?;
        store.write_part(0, 0, epoch, u64::MAX, &snapshot)?;
        let manifest = store.complete_last(&[0], 1, &self.identity, max)?;
        // Durable: what the sinks staged is committed.
        for host in self.sinks.iter_mut().flatten() {
            host.commit_through(u64::MAX)?;
        }
        Ok(manifest.epoch)
    }
}
