//! The task's side of a checkpoint (Flink's `SubtaskCheckpointCoordinator`): the parts
//! of its state, closing epochs (sinks stage, parts go to the writer, outputs move on),
//! and the writes it waits for before acknowledging.

use super::*;
use crate::checkpoint::handoff::{handoff, HANDOFF_BYTES};

impl Task {
    /// The head's and the sinks' state as snapshot parts, the parts a keyed head
    /// left to encode from its frozen state, and whether they are a delta over the
    /// task's previous snapshot (a keyed head may write one).
    pub(super) fn parts(
        &mut self,
        kind: SnapshotKind,
    ) -> Result<(Vec<Part>, Option<LaterPartsOf>, bool)> {
        let me = self.ctx.me as u32;
        let part = |transform: &str, (scope, bytes): (Scope, Vec<u8>)| Part {
            transform: transform.to_string(),
            scope,
            bytes,
        };
        let (mut parts, later, delta) =
            self.head
                .parts(&self.name, self.ctx.max_key_groups, me, kind)?;
        for (route, name) in self
            .routes
            .iter()
            .filter_map(|r| match r {
                Route::Sink(h) => Some(h),
                _ => None,
            })
            .zip(&self.sink_names)
        {
            parts.extend(route.borrow().snapshot().into_iter().map(|p| part(name, p)));
        }
        Ok((parts, later, delta))
    }

    /// Epochs `self.first..=last` are over: held partial combines go out, sinks
    /// stage, and if the range closes a checkpoint the state is written (its file is
    /// for the range: nothing reached the task in it after the last checkpoint
    /// it missed, see [`crate::epochs`]).
    pub(super) fn close(&mut self, last: u64) -> Result<()> {
        self.flush_partials(None)?;
        let cur = self.cur;
        self.flush(cur);
        for route in &self.routes {
            if let Route::Sink(host) = route {
                let mut host = host.borrow_mut();
                host.end_epoch()?;
                host.skip_to(last.saturating_add(1));
            }
        }
        // Epochs within a span are not checkpoints: the state goes to the store when a
        // range closes a span, as of its end.
        let checkpoint = crate::epochs::closes_checkpoint(self.first, last, self.ctx.stride);
        if !checkpoint {
            return Ok(());
        }
        if let (Head::Read(driver), Some(_)) = (&self.head, &self.ctx.writer) {
            self.to_finalize.push_back((last, driver.positions()));
        }
        if self.stateful {
            let ctx = Rc::clone(&self.ctx);
            if let Some(writer) = &ctx.writer {
                let started = Instant::now();
                let kind = self.snapshot_kind();
                let (parts, mut later, delta) = self.parts(kind)?;
                // No core is spare for the writer: a thread encoding beside the workers
                // would take turns with them, and stall them longer than encoding here
                // does. The parts go to the writer as they are encoded.
                let mut encode_here = None;
                if !self.ctx.encode_on_writer {
                    if let Some(frozen) = later.take() {
                        let (feed, relay) = handoff(HANDOFF_BYTES);
                        later = Some(relay);
                        encode_here = Some((frozen, feed));
                    }
                }
                self.deltas = if delta { self.deltas + 1 } else { 0 };
                let snapshot = Snapshot {
                    plan_hash: self.ctx.plan_hash,
                    max_key_groups: self.ctx.max_key_groups,
                    epoch: last,
                    // The writer names the snapshots a delta builds on.
                    base: Vec::new(),
                    parts,
                    stored: Default::default(),
                };
                let done = writer.submit(
                    self.node,
                    self.ctx.me,
                    (self.first, last),
                    (snapshot, later, delta),
                    self.wake.clone(),
                );
                if let Some((frozen, feed)) = encode_here {
                    let encoded = frozen(&mut |part| feed.send(part));
                    feed.finish(encoded.as_ref().map(drop).map_err(|e| match e {
                        Error::Checkpoint { message } => message.clone(),
                        other => other.to_string(),
                    }));
                    encoded?;
                }
                self.ctx
                    .metrics
                    .borrow_mut()
                    .step_mut(ENGINE_STEP)
                    .update_distribution("snapshot_ms", started.elapsed().as_millis() as i64);
                self.writes.push_back(PendingWrite {
                    hold: self.cur,
                    last,
                    started,
                    done,
                    delta,
                });
            }
        }
        self.first = last.saturating_add(1);
        Ok(())
    }

    /// Whether the next snapshot is full: at least every `full_snapshot_every`
    /// checkpoints, and sooner once the deltas written since the last full snapshot
    /// outweigh it (a restore reads the full file and every delta after it: at most
    /// about twice the state, however often checkpoints come). Deltas still being
    /// written count from when they are durable.
    fn snapshot_kind(&self) -> SnapshotKind {
        let chain = &self.chain_bytes;
        if self.deltas + 1 >= self.ctx.full_snapshot_every || chain.deltas > chain.full {
            SnapshotKind::Full
        } else {
            SnapshotKind::Delta
        }
    }

    /// Moves the current epoch to `next`, downgrading the capabilities (the control
    /// one as far as the snapshots in flight let it).
    pub(super) fn move_to(&mut self, next: u64) {
        self.cur = next;
        let control = self.writes.front().map_or(next, |w| w.hold.min(next));
        for (port, cap) in self.caps.iter_mut().enumerate() {
            cap.downgrade(if port == 0 { &control } else { &next });
        }
    }

    /// Takes the writer's answers for the snapshots that are durable, in order, and
    /// lets the control capability follow; a failed write fails the task.
    pub(super) fn poll_writes(&mut self) -> Result<()> {
        self.finalize_committed()?;
        while let Some(w) = self.writes.front() {
            let Some(result) = w.done.try_take() else {
                break;
            };
            let w = self.writes.pop_front().expect("the front");
            self.written(&w, result?);
        }
        if let Some(cap) = self.caps.first_mut() {
            let control = self
                .writes
                .front()
                .map_or(self.cur, |w| w.hold.min(self.cur));
            if *cap.time() < control {
                cap.downgrade(&control);
            }
        }
        Ok(())
    }

    /// A Read finalizes the positions of the checkpoints committed since
    /// ([`tidewater::Source::finalize`]): the source may release what comes before
    /// them, and is never asked to read before them again.
    pub(super) fn finalize_committed(&mut self) -> Result<()> {
        let Some(committed) = self.ctx.committed.get() else {
            return Ok(());
        };
        let Head::Read(driver) = &mut self.head else {
            return Ok(());
        };
        while self
            .to_finalize
            .front()
            .is_some_and(|(e, _)| *e <= committed)
        {
            let (_, positions) = self.to_finalize.pop_front().expect("the front");
            driver
                .finalize_at(&positions)
                .map_err(|e| attribute(e, &self.name))?;
        }
        Ok(())
    }

    /// Waits for every snapshot in flight to be durable.
    pub(super) fn wait_writes(&mut self) -> Result<()> {
        while let Some(w) = self.writes.pop_front() {
            let figures = w.done.wait()?;
            self.written(&w, figures);
        }
        Ok(())
    }

    /// Records a durable snapshot's figures.
    pub(super) fn written(&mut self, w: &PendingWrite, figures: WriteFigures) {
        let bytes = figures.bytes as u64;
        if w.delta {
            self.chain_bytes.deltas += bytes;
        } else {
            self.chain_bytes = ChainBytes {
                full: bytes,
                deltas: 0,
            };
        }
        let mut metrics = self.ctx.metrics.borrow_mut();
        let m = metrics.step_mut(ENGINE_STEP);
        m.update_distribution("snapshot_write_ms", figures.took.as_millis() as i64);
        m.update_distribution(
            "snapshot_durable_ms",
            w.started.elapsed().as_millis() as i64,
        );
        m.update_distribution("snapshot_bytes", figures.bytes as i64);
        drop(metrics);
        *self.ctx.state_bytes.borrow_mut().entry(w.last).or_default() += figures.bytes as u64;
    }

    /// Finishes: the last range runs to [`FINAL_EPOCH`], capabilities are dropped.
    pub(super) fn finish(&mut self) -> Result<()> {
        self.send_progress()?;
        let cur = self.cur;
        self.flush(cur);
        self.close(FINAL_EPOCH)?;
        self.wait_writes()?;
        if self.inputs.is_empty() && self.ctx.store.is_some() {
            self.ctx.checkpoints.borrow_mut().source_ended(FINAL_EPOCH);
        }
        self.caps.clear();
        Ok(())
    }
}

impl Drop for Task {
    /// timely drops a finished operator; the job's last checkpoint (and perhaps others)
    /// is committed after that: a Read hands its source and the positions it has yet
    /// to finalize to the worker, whose coordinator finalizes them as it commits.
    fn drop(&mut self) {
        if let Err(e) = self.finalize_committed() {
            tracing::warn!("{e}");
        }
        if self.to_finalize.is_empty() {
            return;
        }
        if let Head::Read(driver) = std::mem::replace(&mut self.head, Head::Flatten) {
            self.ctx.finished_reads.borrow_mut().push(FinishedRead {
                name: self.name.clone(),
                driver,
                pending: std::mem::take(&mut self.to_finalize),
            });
        }
    }
}
