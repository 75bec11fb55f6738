//! Taking keyed operators apart into snapshot parts and putting them back together
//! for another assignment of key groups: what every runner does at a checkpoint and at
//! recovery, and what the direct runner does at every step to validate both.

use crate::keyed::{instantiate, KeyGroups, KeyedOperator, SnapshotKind};
use crate::side_inputs::SideInputRunner;
use crate::sink_host::SinkHost;
use crate::snapshot::{Part, Scope, Snapshot};
use crate::source_driver::SourceDriver;
use crate::translate::{ExecutablePlan, NodeKind};
use tidewater::exec::{key_groups_of_worker, ExecError};
use tidewater::{Error, Result};

/// The parts of a keyed operator instance, named after its transform, and whether
/// they are a delta over its previous snapshot (see [`SnapshotKind`]).
pub fn keyed_parts(
    transform: &str,
    op: &mut dyn KeyedOperator,
    max_key_groups: u32,
    instance: u32,
    kind: SnapshotKind,
) -> Result<(Vec<Part>, bool)> {
    let snapshot = keyed_parts_later(transform, op, max_key_groups, instance, kind)?;
    let mut parts = match snapshot.later {
        Some(later) => encode_all(later)?,
        None => Vec::new(),
    };
    parts.extend(snapshot.parts);
    Ok((parts, snapshot.delta))
}

/// Where the parts of [`LaterPartsOf`] go as they are encoded (a snapshot file being
/// written); an error stops the encoding and is what the encoding returns.
pub type PartsSink<'a> = dyn FnMut(Part) -> Result<()> + 'a;

/// Parts of a keyed operator instance still to be encoded, from state it froze, each
/// handed to the sink as soon as it is encoded: they go before the instance's other
/// parts.
pub type LaterPartsOf = Box<dyn FnOnce(&mut PartsSink<'_>) -> Result<()> + Send>;

/// Every part `later` encodes, in order.
pub fn encode_all(later: LaterPartsOf) -> Result<Vec<Part>> {
    let mut parts = Vec::new();
    later(&mut |p| {
        parts.push(p);
        Ok(())
    })?;
    Ok(parts)
}

/// A keyed operator instance's snapshot, part of it still to be encoded.
pub struct KeyedParts {
    /// The parts encoded.
    pub parts: Vec<Part>,
    /// The parts to encode, on whichever thread suits the engine; the operator goes
    /// on meanwhile, as they come from a frozen copy of its state.
    pub later: Option<LaterPartsOf>,
    /// A delta over the instance's previous snapshot.
    pub delta: bool,
}

/// What [`keyed_parts`] returns, with the encoding of frozen state left to the
/// caller: an engine runs it off the operator's thread, so that a checkpoint stalls
/// the operator for the freeze, not the encoding.
pub fn keyed_parts_later(
    transform: &str,
    op: &mut dyn KeyedOperator,
    max_key_groups: u32,
    instance: u32,
    kind: SnapshotKind,
) -> Result<KeyedParts> {
    let snapshot = op
        .snapshot(max_key_groups, instance, kind)
        .map_err(|e| exec_error(e, transform))?;
    let named = |parts: Vec<(Scope, Vec<u8>)>, transform: &str| -> Vec<Part> {
        parts
            .into_iter()
            .map(|(scope, bytes)| Part {
                transform: transform.to_string(),
                scope,
                bytes,
            })
            .collect()
    };
    let later = snapshot.later.map(|later| {
        let transform = transform.to_string();
        Box::new(move |sink: &mut PartsSink<'_>| {
            // The sink's own error (the file's) comes back as it was.
            let mut failed = None;
            let encoded = later.encode_each(&mut |scope, bytes| {
                let part = Part {
                    transform: transform.clone(),
                    scope,
                    bytes,
                };
                sink(part).map_err(|e| {
                    let message = e.to_string();
                    failed = Some(e);
                    message
                })
            });
            match failed {
                Some(e) => Err(e),
                None => encoded.map_err(|e| exec_error(e, &transform)),
            }
        }) as LaterPartsOf
    });
    Ok(KeyedParts {
        parts: named(snapshot.parts, transform),
        later,
        delta: snapshot.delta,
    })
}

/// The keyed operator of plan node `node` for an instance owning `key_groups`, restored
/// from `snapshot`: its own key groups and every union part.
pub fn restore_keyed(
    plan: &ExecutablePlan,
    node: usize,
    lifted: bool,
    snapshot: &Snapshot,
    key_groups: &KeyGroups,
    state: &crate::state::StateChoice,
) -> Result<Box<dyn KeyedOperator>> {
    let name = &plan.nodes[node].name;
    if snapshot.max_key_groups != key_groups.max {
        return Err(Error::Checkpoint {
            message: format!(
                "the snapshot has {} key groups, the job {}: the number of key groups is fixed for the life of a job",
                snapshot.max_key_groups, key_groups.max
            ),
        });
    }
    let mut op = instantiate(plan, node, lifted, key_groups, state)?;
    // Table files the snapshot names are read where it was read from.
    if let Some(from) = snapshot.stored.tables_dir() {
        op.read_tables_in(from);
    }
    // Key groups left in a checkpoint's files are read one at a time.
    let want = |scope| match scope {
        Scope::KeyGroup(g) => key_groups.owned.contains(&g),
        _ => true,
    };
    snapshot.for_each_part_of(name, &want, &mut |scope, bytes| match scope {
        Scope::KeyGroup(_) | Scope::Union(_) | Scope::Files(_) => {
            op.restore(scope, bytes).map_err(|e| exec_error(e, name))
        }
        Scope::KeyGroupDelta(g) => Err(Error::Checkpoint {
            message: format!(
                "a delta of key group {g} of '{name}' reached restore: a delta snapshot is applied to the one it builds on first"
            ),
        }),
        other => Err(Error::Checkpoint {
            message: format!("'{name}' is keyed and has no state of scope {other:?}"),
        }),
    })?;
    Ok(op)
}

/// Restores node `node`'s keyed operator from `snapshot` as `workers` instances, each
/// owning its range of key groups, then snapshots them all and restores the union into
/// one instance owning every key group: a rescale down and back up, which must give
/// back exactly the state it started from.
pub fn rescale_through(
    plan: &ExecutablePlan,
    node: usize,
    lifted: bool,
    snapshot: &Snapshot,
    workers: usize,
    state: &crate::state::StateChoice,
) -> Result<Box<dyn KeyedOperator>> {
    let max = snapshot.max_key_groups;
    let name = &plan.nodes[node].name;
    let mut parts = Vec::new();
    for w in 0..workers {
        let key_groups = KeyGroups {
            max,
            owned: key_groups_of_worker(w, workers, max),
        };
        let mut op = restore_keyed(plan, node, lifted, snapshot, &key_groups, state)?;
        parts.extend(keyed_parts(name, op.as_mut(), max, w as u32, SnapshotKind::Full)?.0);
    }
    let merged = Snapshot {
        parts,
        ..snapshot.clone_header()
    };
    restore_keyed(plan, node, lifted, &merged, &KeyGroups::all(max), state)
}

/// The runner of ParDo-with-side-inputs node `node` restored from `snapshot`: one copy
/// of the side data (broadcast) and the held main input of the old instances in
/// `lists` (all of them if `None`).
pub fn restore_side_input_runner(
    plan: &ExecutablePlan,
    node: usize,
    snapshot: &Snapshot,
    lists: Option<&[u32]>,
) -> Result<SideInputRunner> {
    let name = &plan.nodes[node].name;
    let mut runner = SideInputRunner::new(plan, node)?;
    let mut broadcast = false;
    for (scope, parts) in snapshot.parts_of(name) {
        let take: &[&[u8]] = match scope {
            Scope::List(i) if lists.is_none_or(|l| l.contains(&i)) => &parts,
            Scope::List(_) => &[],
            Scope::Broadcast => {
                broadcast = true;
                &parts[..1]
            }
            other => {
                return Err(Error::Checkpoint {
                    message: format!("'{name}' has no state of scope {other:?}"),
                })
            }
        };
        for bytes in take {
            runner
                .restore(scope, bytes)
                .map_err(|e| exec_error(e, name))?;
        }
    }
    if !broadcast {
        return Err(Error::Checkpoint {
            message: format!("the side data of '{name}' is missing from the snapshot"),
        });
    }
    Ok(runner)
}

impl Snapshot {
    /// A snapshot with this one's plan hash, key groups and epoch, and no parts.
    pub fn clone_header(&self) -> Snapshot {
        Snapshot {
            plan_hash: self.plan_hash,
            max_key_groups: self.max_key_groups,
            epoch: self.epoch,
            base: Vec::new(),
            parts: Vec::new(),
            stored: Default::default(),
        }
    }
}

/// Node `node`'s source driver for worker `worker` of `workers`, from the partitions'
/// positions in `snapshot` (each partition goes to the worker owning it now, whichever
/// worker wrote it).
pub fn restore_source(
    plan: &ExecutablePlan,
    node: usize,
    snapshot: &Snapshot,
    worker: usize,
    workers: usize,
) -> Result<SourceDriver> {
    let n = &plan.nodes[node];
    let positions: Vec<(u32, &[u8])> = snapshot
        .parts_of(&n.name)
        .into_iter()
        .flat_map(|(scope, bytes)| match scope {
            Scope::Partition(p) => bytes.into_iter().map(|b| (p, b)).collect(),
            _ => Vec::new(),
        })
        .collect();
    SourceDriver::restore(n.instantiate_source()?, &positions, worker, workers)
        .map_err(|e| exec_error(e, &n.name))
}

/// Node `node`'s sink instance `instance` of `instances`, from `snapshot`: it takes
/// over the transactions of the old instances `i` with `i % instances == instance`
/// (every one, with a single instance), to commit or abort them, for job `job`.
pub fn restore_sink(
    plan: &ExecutablePlan,
    node: usize,
    snapshot: &Snapshot,
    instance: u32,
    instances: u32,
    job: &str,
) -> Result<SinkHost> {
    let n = &plan.nodes[node];
    let lists: Vec<&[u8]> = snapshot
        .parts_of(&n.name)
        .into_iter()
        .filter(|(scope, _)| matches!(scope, Scope::List(i) if i % instances.max(1) == instance))
        .flat_map(|(_, b)| b)
        .collect();
    SinkHost::restore(plan, node, instance, &lists, job)
}

/// The job a snapshot was taken by, as its sinks recorded it (`None`: it has no sink,
/// or was taken before sinks recorded their job).
pub fn restored_job(plan: &ExecutablePlan, snapshot: &Snapshot) -> Result<Option<String>> {
    let mut job: Option<String> = None;
    for n in plan
        .nodes
        .iter()
        .filter(|n| matches!(n.kind, NodeKind::Sink { .. }))
    {
        let lists: Vec<&[u8]> = snapshot
            .parts_of(&n.name)
            .into_iter()
            .filter(|(scope, _)| matches!(scope, Scope::List(_)))
            .flat_map(|(_, b)| b)
            .collect();
        if let Some(j) = crate::sink_host::recorded_job(&lists)? {
            if job.as_ref().is_some_and(|other| *other != j) {
                return Err(Error::Checkpoint {
                    message: format!("the checkpoint's sinks name two jobs, {j} and {job:?}"),
                });
            }
            job = Some(j);
        }
    }
    Ok(job)
}

fn exec_error(e: ExecError, transform: &str) -> Error {
    crate::stage::unwrap_downstream(crate::stage::attribute(e, transform))
}
