//! Which state of a snapshot a changed pipeline takes over (issue 36: upgrades with
//! state), as Flink matches operator state by `uid` and Beam's Dataflow update by
//! transform name. A snapshot records, per stateful part, its id (a user's `uid`, or
//! the full transform name), what kind of part it is and a fingerprint of what its
//! bytes mean (type and coder names, the window fn, a source's partitions). Restoring
//! a snapshot into a plan compares the two lists here:
//!
//! - an id in both with the same kind and fingerprint is restored;
//! - an id only in the plan is new: it starts empty;
//! - an id only in the snapshot is dropped: its state would be lost, so the run is
//!   refused unless the user allows it (`--allow-non-restored-state`);
//! - an id in both whose kind or fingerprint changed is incompatible: always refused,
//!   naming what changed, its old and its new value;
//! - a stateful DoFn's cells are matched by name: a new cell starts empty, a cell whose
//!   type changed is incompatible, and a cell gone is refused as dropped state is.
//!
//! Stateless parts (maps, filters, the closures' places, parameters of functions,
//! `--rate`, a sink's `--output` while its identity stays) are not in the lists, so
//! changing them changes nothing here.
//!
//! A snapshot's parts are stored under their transform's name; a part whose id is
//! restored under another name (a transform renamed, its uid pinned) is renamed to
//! the new one before any operator reads it ([`Admitted::apply`]), and a dropped id's
//! parts are left out.

use crate::snapshot::Snapshot;
use crate::translate::{ExecutablePlan, NodeKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a plan's snapshots are checked against: the hash of the whole plan (a
/// snapshot of the very same plan restores without more ado) and its stateful parts.
#[derive(Clone, Debug, Default)]
pub struct PlanIdentity {
    /// [`crate::snapshot::plan_hash`] of the plan.
    pub hash: u64,
    /// Its stateful parts ([`state_ids`]).
    pub state: Vec<StateId>,
    /// Per (state id, cell) of its stateful DoFns: whether stored bytes read as the
    /// cell's types, for a cell whose declared type changed.
    pub readers: BTreeMap<(String, String), tidewater::CellReader>,
}

impl PlanIdentity {
    /// `plan`'s identity.
    pub fn of(plan: &ExecutablePlan) -> PlanIdentity {
        let mut readers = BTreeMap::new();
        for n in &plan.nodes {
            if let (NodeKind::Stateful { .. }, Ok(f)) = (&n.kind, n.instantiate_stateful()) {
                for c in f.state_cells() {
                    readers.insert((n.uid.clone(), c.name.to_string()), c.reads);
                }
            }
        }
        PlanIdentity {
            hash: plan.plan_hash,
            state: state_ids(plan),
            readers,
        }
    }

    /// The state id of the transform named `transform` (its name if it holds no
    /// state).
    pub fn id_of<'a>(&'a self, transform: &'a str) -> &'a str {
        self.state
            .iter()
            .find(|s| s.transform == transform)
            .map_or(transform, |s| s.id.as_str())
    }

    /// What restoring a snapshot of the plan of hash `hash`, holding the stateful
    /// parts `state`, does with each id; `Err` (why) for a snapshot of another plan
    /// written before snapshots recorded their ids, which restores only into the very
    /// same plan.
    pub fn report(
        &self,
        hash: u64,
        state: Option<&[StateId]>,
        what: &str,
    ) -> std::result::Result<Report, String> {
        match state {
            _ if hash == self.hash => Ok(compatibility(&self.state, &self.state)),
            Some(old) => Ok(compatibility(old, &self.state)),
            None => Err(format!(
                "{what} belongs to another pipeline (plan hash {hash:016x}, this one {:016x}) and was written before snapshots recorded their state ids, so it restores only into the very same pipeline",
                self.hash
            )),
        }
    }

    /// Whether a snapshot of the plan of hash `hash`, holding the stateful parts
    /// `state` (`None`: a snapshot written before they were recorded), restores into
    /// this plan, given what restoring does with each id (`report`, from
    /// [`PlanIdentity::report`], its retyped cells checked against the snapshot's
    /// bytes); if not, why (`what` names the snapshot). With `allow_non_restored` the
    /// state of parts gone from the plan is dropped instead of refused.
    pub fn admit(
        &self,
        hash: u64,
        state: Option<&[StateId]>,
        report: &Report,
        allow_non_restored: bool,
        what: &str,
    ) -> std::result::Result<Admitted, String> {
        if hash == self.hash {
            return Ok(Admitted::default());
        }
        let old = state.unwrap_or_default();
        if let Some(why) = report.refusal(allow_non_restored) {
            return Err(format!("{what} does not fit this pipeline: {why}"));
        }
        let new: BTreeMap<&str, &StateId> = self.state.iter().map(|s| (s.id.as_str(), s)).collect();
        let renames = old
            .iter()
            .map(|o| {
                let to = new.get(o.id.as_str()).map(|n| n.transform.clone());
                (o.transform.clone(), to)
            })
            .filter(|(from, to)| to.as_deref() != Some(from.as_str()))
            .collect();
        Ok(Admitted { renames })
    }
}

/// How an admitted snapshot's parts map onto the plan: per old transform name whose
/// parts move, its new name, or `None` when its state is dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Admitted {
    renames: BTreeMap<String, Option<String>>,
}

impl Admitted {
    /// The plan's name for the parts of old transform `transform`; `None` if its
    /// state is dropped.
    pub fn name_of(&self, transform: &str) -> Option<String> {
        match self.renames.get(transform) {
            None => Some(transform.to_string()),
            Some(to) => to.clone(),
        }
    }

    /// Renames `snapshot`'s parts to the plan's transform names and leaves out the
    /// parts of dropped state. All renames happen at once, so two transforms that swap
    /// names keep their own state.
    pub fn apply(&self, snapshot: &mut Snapshot) {
        if self.renames.is_empty() {
            return;
        }
        snapshot
            .parts
            .retain_mut(|p| match self.renames.get(&p.transform) {
                None => true,
                Some(None) => false,
                Some(Some(to)) => {
                    p.transform = to.clone();
                    true
                }
            });
    }
}

/// The stateful parts of `plan`, with what their bytes mean. Ids are the nodes'
/// uids (their names unless pinned). A grouping's state depends on its input and
/// output types, its window fn and its trigger (the trigger's state machine is in the
/// bytes); its allowed lateness and the like are not in the bytes.
pub fn state_ids(plan: &ExecutablePlan) -> Vec<StateId> {
    let ty = |pc: usize| short_type(plan.pcollections[pc].element_type.name());
    plan.nodes
        .iter()
        .filter_map(|n| {
            let mut input = n.inputs.first().map(|&i| ty(i));
            let mut cells = BTreeMap::new();
            let (kind, mut fingerprint) = match &n.kind {
                NodeKind::Grouping { .. } => {
                    let w = &plan.pcollections[n.inputs[0]].windowing;
                    let f = BTreeMap::from([
                        ("window fn".to_string(), format!("{:?}", w.window_fn)),
                        ("trigger".to_string(), format!("{:?}", w.trigger)),
                        ("output".to_string(), ty(n.outputs[0])),
                    ]);
                    (StateKind::Grouping, f)
                }
                // What its bytes mean is its key type and its cells' types (the
                // values passing through, and the DoFn's code, are not in them).
                NodeKind::Stateful { .. } => {
                    input = None;
                    let f = n.instantiate_stateful().ok();
                    if let Some(f) = &f {
                        cells = f
                            .state_cells()
                            .into_iter()
                            .map(|c| (c.name.to_string(), short_type(&c.holds)))
                            .collect();
                    }
                    let key = f.map_or_else(|| "?".into(), |f| short_type(f.key_type()));
                    (
                        StateKind::StatefulDoFn,
                        BTreeMap::from([("key".to_string(), key)]),
                    )
                }
                NodeKind::Read { name, .. } => (
                    StateKind::Source,
                    BTreeMap::from([("source".to_string(), name.clone())]),
                ),
                NodeKind::Sink { name, .. } => (
                    StateKind::Sink,
                    BTreeMap::from([("sink".to_string(), name.clone())]),
                ),
                NodeKind::ParDo { side_inputs, .. } if !side_inputs.is_empty() => {
                    (StateKind::SideInput, BTreeMap::new())
                }
                NodeKind::Impulse | NodeKind::Create { .. } => (
                    StateKind::Create,
                    BTreeMap::from([("output".to_string(), ty(n.outputs[0]))]),
                ),
                NodeKind::TestStream { .. } => (
                    StateKind::TestStream,
                    BTreeMap::from([("output".to_string(), ty(n.outputs[0]))]),
                ),
                _ => return None,
            };
            if let Some(input) = input {
                fingerprint.insert("input".into(), input);
            }
            Some(StateId {
                id: n.uid.clone(),
                transform: n.name.clone(),
                kind,
                fingerprint,
                cells,
            })
        })
        .collect()
}

/// A type's name without module paths (`alloc::vec::Vec<my::Tally>` is
/// `Vec<Tally>`): what its values mean does not change when it moves between modules,
/// and a state type keeps its name when a new version of the job adds a field to it.
///
/// ```
/// use tidewater_runners_core::compat::short_type;
/// assert_eq!(short_type("(alloc::string::String, core::option::Option<my::v2::Tally>)"), "(String, Option<Tally>)");
/// assert_eq!(short_type("u64"), "u64");
/// ```
pub fn short_type(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut word = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(""));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(""));
    out
}

/// What kind of part holds the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKind {
    /// A GroupByKey or Combine.per_key: windows and panes per key.
    Grouping,
    /// A stateful DoFn: its cells and timers per key and window.
    StatefulDoFn,
    /// A source: its partitions' positions.
    Source,
    /// A sink: its staged output and ledger identity.
    Sink,
    /// A ParDo holding main input for its side inputs.
    SideInput,
    /// An Impulse or Create: whether it has emitted.
    Create,
    /// A TestStream: how far its script has gone.
    TestStream,
}

/// One stateful part, as a snapshot records it and a plan declares it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateId {
    /// Its id: the user's `uid`, or its full transform name.
    pub id: String,
    /// The transform its parts are stored under (its full name).
    #[serde(default)]
    pub transform: String,
    /// Its kind.
    pub kind: StateKind,
    /// What its bytes mean, by name: e.g. `("key", "alloc::string::String")`,
    /// `("window fn", "fixed 1000 ms")`, `("partitions", "4")`.
    pub fingerprint: BTreeMap<String, String>,
    /// A stateful DoFn's cells: name and type.
    pub cells: BTreeMap<String, String>,
}

/// What restoring does with one id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Its state is restored; cells new in the plan start empty.
    Restored {
        /// Cells only the plan has.
        new_cells: Vec<String>,
    },
    /// Its state is restored but for cells only the snapshot has.
    CellsDropped(Vec<String>),
    /// It is new in the plan: it starts empty.
    New,
    /// Only the snapshot has it: its state is not restored.
    Dropped,
    /// Both have it, and cells of it hold another declared type: restored if every
    /// value the snapshot holds for them reads as the new type (`readable`, checked
    /// against the bytes), refused otherwise.
    Retyped {
        /// Per cell: its name, its old type and its new one.
        cells: Vec<(String, String, String)>,
        readable: bool,
        /// What becomes of the rest of its cells ([`Verdict::Restored`] or
        /// [`Verdict::CellsDropped`]).
        rest: Box<Verdict>,
    },
    /// Both have it, and what its bytes mean changed.
    Incompatible {
        /// What changed ("kind", or a fingerprint entry's name).
        what: String,
        /// Its value in the snapshot (`-`: absent).
        old: String,
        /// Its value in the plan (`-`: absent).
        new: String,
    },
}

/// Per id, in id order, what restoring does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub entries: Vec<(String, Verdict)>,
}

fn kind_name(k: StateKind) -> String {
    match k {
        StateKind::Grouping => "grouping",
        StateKind::StatefulDoFn => "stateful DoFn",
        StateKind::Source => "source",
        StateKind::Sink => "sink",
        StateKind::SideInput => "side-input ParDo",
        StateKind::Create => "Create",
        StateKind::TestStream => "TestStream",
    }
    .to_string()
}

/// Compares a snapshot's stateful parts (`old`) with a plan's (`new`).
pub fn compatibility(old: &[StateId], new: &[StateId]) -> Report {
    let old: BTreeMap<&str, &StateId> = old.iter().map(|s| (s.id.as_str(), s)).collect();
    let new: BTreeMap<&str, &StateId> = new.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut ids: Vec<&str> = old.keys().chain(new.keys()).copied().collect();
    ids.sort_unstable();
    ids.dedup();
    let entries = ids
        .into_iter()
        .map(|id| {
            let verdict = match (old.get(id), new.get(id)) {
                (Some(o), Some(n)) => changed(o, n).unwrap_or_else(|| match retyped(o, n) {
                    cells_retyped if cells_retyped.is_empty() => cells(o, n),
                    cells_retyped => Verdict::Retyped {
                        cells: cells_retyped,
                        readable: false,
                        rest: Box::new(cells(o, n)),
                    },
                }),
                (None, Some(_)) => Verdict::New,
                (Some(_), None) => Verdict::Dropped,
                (None, None) => unreachable!("every id comes from one side"),
            };
            (id.to_string(), verdict)
        })
        .collect();
    Report { entries }
}

/// What becomes of `o`'s cells in `n` (their types being equal where both have them).
fn cells(o: &StateId, n: &StateId) -> Verdict {
    let gone: Vec<String> = o
        .cells
        .keys()
        .filter(|c| !n.cells.contains_key(*c))
        .cloned()
        .collect();
    if gone.is_empty() {
        Verdict::Restored {
            new_cells: n
                .cells
                .keys()
                .filter(|c| !o.cells.contains_key(*c))
                .cloned()
                .collect(),
        }
    } else {
        Verdict::CellsDropped(gone)
    }
}

/// The first difference between what `o`'s and `n`'s bytes mean, if any.
fn changed(o: &StateId, n: &StateId) -> Option<Verdict> {
    if o.kind != n.kind {
        return Some(Verdict::Incompatible {
            what: "kind".into(),
            old: kind_name(o.kind),
            new: kind_name(n.kind),
        });
    }
    let mut names: Vec<&String> = o.fingerprint.keys().chain(n.fingerprint.keys()).collect();
    names.sort_unstable();
    names.dedup();
    let differs = |what: String, a: Option<&String>, b: Option<&String>| {
        (a != b).then(|| Verdict::Incompatible {
            what,
            old: a.cloned().unwrap_or_else(|| "-".into()),
            new: b.cloned().unwrap_or_else(|| "-".into()),
        })
    };
    names.into_iter().find_map(|name| {
        differs(
            name.clone(),
            o.fingerprint.get(name),
            n.fingerprint.get(name),
        )
    })
}

/// The cells both `o` and `n` have whose declared types differ: name, old, new.
fn retyped(o: &StateId, n: &StateId) -> Vec<(String, String, String)> {
    o.cells
        .iter()
        .filter_map(|(cell, t)| {
            let now = n.cells.get(cell)?;
            (now != t).then(|| (cell.clone(), t.clone(), now.clone()))
        })
        .collect()
}

/// `cell 'a': old -> new; cell 'b': ...`
fn retyped_text(cells: &[(String, String, String)], arrow: &str) -> String {
    cells
        .iter()
        .map(|(c, old, new)| format!("cell '{c}'{arrow}{old} -> {new}"))
        .collect::<Vec<_>>()
        .join("; ")
}

impl Report {
    /// Why the restore is refused, if it is: every incompatible id, and (unless
    /// `allow_non_restored`) every dropped one, each named.
    pub fn refusal(&self, allow_non_restored: bool) -> Option<String> {
        let mut why = Vec::new();
        for (id, v) in &self.entries {
            let v = match v {
                Verdict::Retyped {
                    cells,
                    readable: false,
                    ..
                } => {
                    for (cell, old, new) in cells {
                        why.push(format!(
                            "'{id}' changed its cell '{cell}' from {old} to {new}: its state cannot be read (a value it holds does not read as the new type)"
                        ));
                    }
                    continue;
                }
                Verdict::Retyped { rest, .. } => rest,
                v => v,
            };
            match v {
                Verdict::Incompatible { what, old, new } => why.push(format!(
                    "'{id}' changed its {what} from {old} to {new}: its state cannot be read"
                )),
                Verdict::Dropped if !allow_non_restored => why.push(format!(
                    "'{id}' holds state in the snapshot and is not in the pipeline (keep its name, or pin the id of the step that takes its place with .with_uid; or run with --allow-non-restored-state to drop its state)"
                )),
                Verdict::CellsDropped(cells) if !allow_non_restored => why.push(format!(
                    "'{id}' no longer has the state cells {} that the snapshot holds (run with --allow-non-restored-state to drop them)",
                    cells.join(", ")
                )),
                _ => {}
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// One line per id: `restored`, `new`, `dropped` or `incompatible: ...`.
    pub fn render(&self) -> String {
        self.entries
            .iter()
            .map(|(id, v)| match v {
                Verdict::Retyped {
                    cells,
                    readable: false,
                    ..
                } => format!("{id}: incompatible ({})\n", retyped_text(cells, ": ")),
                Verdict::Retyped { cells, rest, .. } => {
                    let rest = Report {
                        entries: vec![(id.clone(), (**rest).clone())],
                    }
                    .render();
                    format!(
                        "{}, its values read as their new types ({})\n",
                        rest.trim_end(),
                        retyped_text(cells, " ")
                    )
                }
                Verdict::Restored { new_cells } if new_cells.is_empty() => {
                    format!("{id}: restored\n")
                }
                Verdict::Restored { new_cells } => format!(
                    "{id}: restored (new cells start empty: {})\n",
                    new_cells.join(", ")
                ),
                Verdict::CellsDropped(cells) => {
                    format!("{id}: restored, but for the cells {}\n", cells.join(", "))
                }
                Verdict::New => format!("{id}: new (starts empty)\n"),
                Verdict::Dropped => format!("{id}: dropped (its state is not restored)\n"),
                Verdict::Incompatible { what, old, new } => {
                    format!("{id}: incompatible ({what}: {old} -> {new})\n")
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(
        id: &str,
        kind: StateKind,
        fingerprint: &[(&str, &str)],
        cells: &[(&str, &str)],
    ) -> StateId {
        let map = |m: &[(&str, &str)]| {
            m.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        StateId {
            id: id.into(),
            transform: id.into(),
            kind,
            fingerprint: map(fingerprint),
            cells: map(cells),
        }
    }

    #[test]
    fn restored_new_dropped_and_incompatible_parts_are_told_apart() {
        let count = part(
            "Count/GroupByKey",
            StateKind::Grouping,
            &[("key", "String"), ("window fn", "fixed 1000 ms")],
            &[],
        );
        let key = [("key", "String")];
        let old = [
            count.clone(),
            part(
                "Running",
                StateKind::StatefulDoFn,
                &key,
                &[("count", "u64")],
            ),
            part("Gone", StateKind::StatefulDoFn, &key, &[("seen", "bool")]),
            part("Read", StateKind::Source, &[("partitions", "4")], &[]),
        ];
        let new = [
            count,
            part(
                "Running",
                StateKind::StatefulDoFn,
                &key,
                &[("count", "i64")],
            ),
            part("Fresh", StateKind::StatefulDoFn, &key, &[("n", "u64")]),
            part("Read", StateKind::Grouping, &[("partitions", "4")], &[]),
        ];
        let report = compatibility(&old, &new);
        assert_eq!(
            report.render(),
            "Count/GroupByKey: restored\n\
             Fresh: new (starts empty)\n\
             Gone: dropped (its state is not restored)\n\
             Read: incompatible (kind: source -> grouping)\n\
             Running: incompatible (cell 'count': u64 -> i64)\n"
        );
        assert_eq!(
            report.refusal(true).unwrap(),
            "'Read' changed its kind from source to grouping: its state cannot be read; \
             'Running' changed its cell 'count' from u64 to i64: its state cannot be read (a value it holds does not read as the new type)"
        );
        assert!(report
            .refusal(false)
            .unwrap()
            .contains("'Gone' holds state in the snapshot and is not in the pipeline"));
    }

    #[test]
    fn new_cells_start_empty_and_cells_gone_are_refused_unless_allowed() {
        let key = [("key", "String")];
        let old = [part(
            "A",
            StateKind::StatefulDoFn,
            &key,
            &[("count", "u64"), ("last", "i64")],
        )];
        let grown = [part(
            "A",
            StateKind::StatefulDoFn,
            &key,
            &[("count", "u64"), ("last", "i64"), ("max", "u64")],
        )];
        let report = compatibility(&old, &grown);
        assert_eq!(report.refusal(false), None);
        assert_eq!(
            report.render(),
            "A: restored (new cells start empty: max)\n"
        );
        let shrunk = [part(
            "A",
            StateKind::StatefulDoFn,
            &key,
            &[("count", "u64")],
        )];
        let report = compatibility(&old, &shrunk);
        assert_eq!(
            report.entries[0].1,
            Verdict::CellsDropped(vec!["last".into()])
        );
        assert_eq!(
            report.refusal(false).unwrap(),
            "'A' no longer has the state cells last that the snapshot holds (run with --allow-non-restored-state to drop them)"
        );
        assert_eq!(report.refusal(true), None);
        // A changed key type is a change of what every cell's bytes mean.
        let rekeyed = [part(
            "A",
            StateKind::StatefulDoFn,
            &[("key", "u64")],
            &[("count", "u64")],
        )];
        assert_eq!(
            compatibility(&old, &rekeyed).entries[0].1,
            Verdict::Incompatible {
                what: "key".into(),
                old: "String".into(),
                new: "u64".into()
            }
        );
    }
}
