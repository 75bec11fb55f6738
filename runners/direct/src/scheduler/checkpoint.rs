//! Validation by snapshot: every `checkpoint_every` rounds the scheduler snapshots
//! everything that holds state between rounds, throws it away and restores it from the
//! bytes, with keyed state rescaled through virtual workers. Keyed operators write
//! deltas, as on an engine: each is applied to the previous round's parts and checked
//! against a full snapshot of the operator it came from.

use super::*;

/// The transform name of the direct scheduler's own part of a snapshot (no transform
/// has an empty name).
const SCHEDULER: &str = "";

/// What the scheduler keeps between rounds besides its heads' state (a Create's or a
/// TestStream's progress is the head's, as on an engine).
#[derive(Serialize, Deserialize)]
struct SchedulerState {
    processing_time: Timestamp,
    /// Per PCollection: its producer's output watermark.
    watermarks: Vec<Timestamp>,
}

impl Executor<'_> {
    /// Between rounds nothing is in flight: every stage has run, every keyed input was
    /// processed; only main input held for side inputs waits. Says what is, at `at`
    /// (a snapshot being taken), if something is.
    pub(super) fn nothing_in_flight(&self, at: &str) -> Result<()> {
        if let Some(pc) = self.buffers.iter().position(|b| !b.is_empty()) {
            return Err(Error::Internal(format!(
                "data of '{}' in flight at {at}",
                self.plan.pcollections[pc].name
            )));
        }
        if let Some(n) = (0..self.plan.nodes.len())
            .find(|&i| self.heads[i].is_some() && !self.pending[i].is_empty())
        {
            return Err(Error::Internal(format!(
                "input of '{}' in flight at {at}",
                self.plan.nodes[n].name
            )));
        }
        Ok(())
    }

    /// Snapshots everything that holds state between rounds (every head — keyed
    /// operators, sources, main input held for side inputs and the side data, Creates
    /// and TestStreams — the sinks, and the scheduler's clocks) in the snapshot format,
    /// throws it away, and restores it from the bytes, as an engine restores its heads
    /// (`Head::build`); keyed state goes through a rescale to a number of virtual
    /// workers and back.
    pub(super) fn checkpoint_and_restore(&mut self, round: u64) -> Result<()> {
        // Partial combines held in stages are not state: they go into their groupings.
        self.flush_all_partials()?;
        let plan = self.plan;
        let max = self.max_key_groups;
        let mut snapshot = Snapshot {
            plan_hash: plan.plan_hash,
            max_key_groups: max,
            epoch: round,
            base: Vec::new(),
            parts: Vec::new(),
            stored: Default::default(),
        };
        self.nothing_in_flight("a checkpoint")?;
        // Per keyed node: its full parts, and whether it wrote a delta.
        let mut full: Vec<Option<(Vec<Part>, bool)>> =
            (0..plan.nodes.len()).map(|_| None).collect();
        for (i, n) in plan.nodes.iter().enumerate() {
            if let Some(head) = &mut self.heads[i] {
                let (parts, delta) = head.parts_now(&n.name, max, 0, SnapshotKind::Delta)?;
                snapshot.parts.extend(parts);
                if let Head::Keyed(_) = head {
                    // The operator is thrown away: a full snapshot of it next does not
                    // disturb a chain.
                    let (all, _) = head.parts_now(&n.name, max, 0, SnapshotKind::Full)?;
                    full[i] = Some((all, delta));
                }
            }
            if let Some(host) = &mut self.sinks[i] {
                host.end_epoch()?;
                for (scope, bytes) in host.snapshot() {
                    snapshot.parts.push(Part {
                        transform: n.name.clone(),
                        scope,
                        bytes,
                    });
                }
            }
        }
        let scheduler = SchedulerState {
            processing_time: self.processing_time,
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
        let at = placement(max, 1, &self.options.state);
        for (i, n) in plan.nodes.iter().enumerate() {
            if let NodeKind::Sink { .. } = &n.kind {
                // The snapshot is durable: restoring commits what it staged.
                let mut host = restore_sink(plan, i, &snapshot, 0, 1, &self.job)?;
                host.recover(1)?;
                self.sinks[i] = Some(host);
            }
            let Some(head) = &self.heads[i] else {
                continue;
            };
            let mut head = match head {
                Head::Keyed(_) => {
                    let op = rescale_through(
                        plan,
                        i,
                        self.lifted[i],
                        &snapshot,
                        workers,
                        &self.options.state,
                    )?;
                    let mut head = Head::Keyed(op);
                    // Restored, it gives back the same parts. Snapshotting it also
                    // makes the next round's snapshot a delta over them (and a full
                    // one copy the bytes it keeps of what did not change in between,
                    // checked against a fresh encoding under debug assertions), as an
                    // engine's live operator does.
                    let (again, _) = head.parts_now(&n.name, max, 0, SnapshotKind::Full)?;
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
                    head
                }
                _ => Head::build(plan, &self.graph, i, &at, Some(&snapshot))?,
            };
            if let Head::Read(driver) = &mut head {
                // The snapshot holding these positions is durable.
                driver
                    .finalize()
                    .map_err(|e| unwrap_downstream(attribute(e, &n.name)))?;
            }
            self.heads[i] = Some(head);
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
        self.watermarks = scheduler.watermarks;
        Ok(())
    }
}
