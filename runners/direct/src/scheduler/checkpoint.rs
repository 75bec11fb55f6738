//! Validation by snapshot: every `checkpoint_every` rounds the scheduler snapshots
//! everything that holds state between rounds, throws it away and restores it from the
//! bytes, with keyed state rescaled through virtual workers. Keyed operators write
//! deltas, as on an engine: each is applied to the previous round's parts and checked
//! against a full snapshot of the operator it came from.

use super::*;

/// The transform name of the direct scheduler's own part of a snapshot (no transform
/// has an empty name).
const SCHEDULER: &str = "";

/// What the scheduler keeps between rounds.
#[derive(Serialize, Deserialize)]
struct SchedulerState {
    processing_time: Timestamp,
    /// Per node: how far a Create, Impulse or TestStream got.
    cursors: Vec<usize>,
    /// Per PCollection: its producer's output watermark.
    watermarks: Vec<Timestamp>,
}

impl Executor<'_> {
    /// Snapshots everything that holds state between rounds (keyed operators, sources,
    /// main input held for side inputs and the side data, the scheduler's clocks and
    /// cursors) in the snapshot format, throws it away, and restores it from the bytes;
    /// keyed state goes through a rescale to a number of virtual workers and back.
    pub(super) fn checkpoint_and_restore(&mut self, round: u64) -> Result<()> {
        // Partial combines held in stages are not state: they go into their groupings.
        self.flush_all_partials()?;
        let plan = self.plan;
        let max = self.options.max_key_groups;
        let mut snapshot = Snapshot {
            plan_hash: plan.plan_hash,
            max_key_groups: max,
            epoch: round,
            base: Vec::new(),
            parts: Vec::new(),
        };
        // Between rounds nothing is in flight: every stage has run, every keyed input
        // was processed. Only main input held for side inputs waits.
        if let Some(pc) = self.buffers.iter().position(|b| !b.is_empty()) {
            return Err(Error::Internal(format!(
                "data of '{}' in flight at a checkpoint",
                plan.pcollections[pc].name
            )));
        }
        let part = |n: &tidewater_runners_core::translate::Node, scope, bytes| Part {
            transform: n.name.clone(),
            scope,
            bytes,
        };
        // Per keyed node: its full parts, and whether it wrote a delta.
        let mut full: Vec<Option<(Vec<Part>, bool)>> =
            (0..plan.nodes.len()).map(|_| None).collect();
        for (i, n) in plan.nodes.iter().enumerate() {
            match &n.kind {
                NodeKind::Grouping { .. } | NodeKind::Stateful { .. } => {
                    if !self.pending[i].is_empty() {
                        return Err(Error::Internal(format!(
                            "input of '{}' in flight at a checkpoint",
                            n.name
                        )));
                    }
                    let op = self.keyed[i].as_deref_mut().expect("keyed operator");
                    let (parts, delta) = keyed_parts(&n.name, op, max, 0, SnapshotKind::Delta)?;
                    snapshot.parts.extend(parts);
                    // The operator is thrown away: a full snapshot of it next does not
                    // disturb a chain.
                    let (all, _) = keyed_parts(&n.name, op, max, 0, SnapshotKind::Full)?;
                    full[i] = Some((all, delta));
                }
                NodeKind::Read { .. } => {
                    let driver = self.sources[i].as_ref().expect("source driver");
                    for (scope, bytes) in driver.snapshot() {
                        snapshot.parts.push(part(n, scope, bytes));
                    }
                }
                NodeKind::Sink { .. } => {
                    let host = self.sinks[i].as_mut().expect("sink instance");
                    host.end_epoch()?;
                    for (scope, bytes) in host.snapshot() {
                        snapshot.parts.push(part(n, scope, bytes));
                    }
                }
                NodeKind::ParDo { side_inputs, .. } if !side_inputs.is_empty() => {
                    let runner = self.side_runners[i].as_ref().expect("side-input runner");
                    for (scope, bytes) in runner.snapshot(0)? {
                        snapshot.parts.push(part(n, scope, bytes));
                    }
                }
                _ => {}
            }
        }
        let scheduler = SchedulerState {
            processing_time: self.processing_time,
            cursors: self.cursors.clone(),
            watermarks: self.watermarks.clone(),
        };
        snapshot.parts.push(Part {
            transform: SCHEDULER.into(),
            scope: Scope::Union(0),
            bytes: encode_part(&scheduler),
        });

        // Everything goes; only the bytes remain.
        let bytes = snapshot.encode();
        drop(snapshot);
        let mut snapshot = Snapshot::decode(&bytes, plan.plan_hash)?;
        // Deltas go onto the previous round's parts, and must give the full state.
        for (i, n) in plan.nodes.iter().enumerate() {
            let Some((all, delta)) = full[i].take() else {
                continue;
            };
            let (mine, rest): (Vec<Part>, Vec<Part>) = std::mem::take(&mut snapshot.parts)
                .into_iter()
                .partition(|p| p.transform == n.name);
            let rebuilt = if delta {
                let base = self.snapshot_bases[i].take().ok_or_else(|| {
                    Error::Internal(format!("'{}' wrote a delta at its first snapshot", n.name))
                })?;
                apply_delta(base, mine)?
            } else {
                mine
            };
            if rebuilt != all {
                return Err(Error::Internal(format!(
                    "the delta snapshot of '{}' does not give its state: applied to the previous snapshot it gives {} parts, a full snapshot {}",
                    n.name,
                    rebuilt.len(),
                    all.len()
                )));
            }
            snapshot.parts = rest;
            snapshot.parts.extend(rebuilt);
        }
        let workers = 1 + match &mut self.rng {
            Some(rng) => rng.below(4) as usize,
            None => (round % 4) as usize,
        };
        for (i, n) in plan.nodes.iter().enumerate() {
            match &n.kind {
                NodeKind::Grouping { .. } | NodeKind::Stateful { .. } => {
                    let mut op = rescale_through(plan, i, self.lifted[i], &snapshot, workers)?;
                    // Restored, it gives back the same parts. Snapshotting it also
                    // makes the next round's snapshot a delta over them (and a full
                    // one copy the bytes it keeps of what did not change in between,
                    // checked against a fresh encoding under debug assertions), as an
                    // engine's live operator does.
                    let (again, _) = keyed_parts(&n.name, op.as_mut(), max, 0, SnapshotKind::Full)?;
                    let before: Vec<&Part> = snapshot
                        .parts
                        .iter()
                        .filter(|p| p.transform == n.name)
                        .collect();
                    if again.len() != before.len()
                        || again
                            .iter()
                            .zip(&before)
                            .any(|(a, b)| a.scope != b.scope || a.bytes != b.bytes)
                    {
                        return Err(Error::Internal(format!(
                            "'{}' restored does not give back the state it was restored from",
                            n.name
                        )));
                    }
                    self.snapshot_bases[i] = Some(again);
                    self.keyed[i] = Some(op);
                }
                NodeKind::Read { .. } => {
                    self.sources[i] = Some(restore_source(plan, i, &snapshot, 0, 1)?);
                    // The snapshot holding these positions is durable.
                    let driver = self.sources[i].as_mut().expect("restored");
                    driver
                        .finalize()
                        .map_err(|e| unwrap_downstream(attribute(e, &n.name)))?;
                }
                NodeKind::ParDo { side_inputs, .. } if !side_inputs.is_empty() => {
                    self.side_runners[i] =
                        Some(restore_side_input_runner(plan, i, &snapshot, None)?);
                }
                NodeKind::Sink { .. } => {
                    // The snapshot is durable: restoring commits what it staged.
                    let mut host = restore_sink(plan, i, &snapshot, 0, 1)?;
                    host.recover(1)?;
                    self.sinks[i] = Some(host);
                }
                _ => {}
            }
        }
        let scheduler = snapshot
            .parts_of(SCHEDULER)
            .get(&Scope::Union(0))
            .and_then(|p| p.first().copied())
            .ok_or_else(|| Error::Checkpoint {
                message: "the scheduler's part is missing".into(),
            })?;
        let scheduler: SchedulerState =
            decode_part(scheduler, "the scheduler's part").map_err(unwrap_downstream)?;
        self.processing_time = scheduler.processing_time;
        self.cursors = scheduler.cursors;
        self.watermarks = scheduler.watermarks;
        Ok(())
    }
}
