//! Fusion: the plan as a graph of stages, decided once for every runner.
//!
//! A stage takes one PCollection and runs the tree of ParDos (and WindowIntos) that
//! consume it, bundle by bundle, without materializing what flows between them. Data
//! leaves a stage only through its **exits**: a keyed exchange into a grouping or a
//! stateful ParDo (after a partial combine where the combine is lifted), a broadcast
//! side input, main input held for a ParDo with side inputs, a Flatten, or a capture.
//! Every PCollection produced by a non-fusable node (a source, a grouping, a stateful
//! ParDo, a Flatten) roots a stage; so does every ParDo with side inputs, over its
//! held main input. Each exit names the consuming node and which of its inputs it is.
//!
//! Whether a combine is lifted is decided here ([`lifts`]), once; [`describe`] renders
//! exactly the graph every runner executes.

use crate::translate::{ExecutablePlan, Node, NodeKind};
use std::fmt::Write;

/// How data leaves a stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExitKind {
    /// Keyed exchange into a grouping or a stateful ParDo, element by element.
    Shuffle,
    /// Combined partially per key and window, then exchanged by key into the
    /// grouping's final half (a lifted combine).
    PartialCombine,
    /// Broadcast to every worker as a side input.
    SideInput,
    /// Main input held by a ParDo with side inputs until they are ready.
    HeldMain,
    /// Into a Flatten.
    Flatten,
    /// Returned in the result under this name.
    Capture(String),
    /// Written into an exactly-once sink, in the current epoch's transaction.
    Sink,
}

/// Where data leaves a stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The PCollection that leaves.
    pub pcollection: usize,
    /// The node it goes to.
    pub node: usize,
    /// Which of that node's inputs it is.
    pub input: usize,
    /// How.
    pub kind: ExitKind,
}

/// A fused stage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    /// The PCollection that feeds it.
    pub input: usize,
    /// The ParDo with side inputs this stage runs over its held main input, if any.
    pub side_input_par_do: Option<usize>,
    /// Its ParDo and WindowInto nodes (the side-input ParDo first), in topological
    /// order.
    pub par_dos: Vec<usize>,
    /// Where data leaves it, in the order it is delivered.
    pub exits: Vec<Exit>,
}

/// The plan's stages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageGraph {
    /// Every stage, in the order of the nodes that root them.
    pub stages: Vec<Stage>,
    /// Per node: a combine whose partial half runs in the producing stage.
    pub lifted: Vec<bool>,
    /// Per PCollection: the stage it feeds, if one is rooted at it.
    fed_by: Vec<Option<usize>>,
    /// Per node: the stage a ParDo with side inputs runs over its held main input.
    run_by: Vec<Option<usize>>,
}

impl StageGraph {
    /// The stage PCollection `pc` feeds (as its root), if any.
    pub fn fed_by(&self, pc: usize) -> Option<usize> {
        self.fed_by.get(pc).copied().flatten()
    }

    /// The stage ParDo-with-side-inputs `node` runs, if it is one.
    pub fn run_by(&self, node: usize) -> Option<usize> {
        self.run_by.get(node).copied().flatten()
    }

    /// The stage the output of head `node` ([`heads`]) feeds: a ParDo with side
    /// inputs' own stage, none for a capture, else the stage its output roots.
    pub fn of_head(&self, plan: &ExecutablePlan, node: usize) -> Option<usize> {
        let n = &plan.nodes[node];
        match &n.kind {
            NodeKind::Capture { .. } => None,
            _ if has_side_inputs(n) => self.run_by(node),
            _ => n.outputs.first().and_then(|&o| self.fed_by(o)),
        }
    }
}

/// The nodes that head a task on an engine, in plan order: the nodes data enters a
/// stage from (sources, groupings, stateful ParDos, Flattens, ParDos with side inputs)
/// and the captures it leaves the graph into. ParDos without side inputs and
/// WindowIntos run inside stages; sinks are written from their producer's stage.
pub fn heads(plan: &ExecutablePlan) -> Vec<usize> {
    plan.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| match &n.kind {
            NodeKind::ParDo { .. } => has_side_inputs(n),
            NodeKind::WindowInto { .. } | NodeKind::Sink { .. } => false,
            _ => true,
        })
        .map(|(i, _)| i)
        .collect()
}

/// Whether grouping node `n` combines partially before the shuffle (combiner lifting):
/// only a liftable combine whose panes do not depend on individual elements (default
/// trigger, non-merging windows, output at the end of the window), and only if the
/// runner lifts at all.
pub fn lifts(plan: &ExecutablePlan, n: &Node, lift_combiners: bool) -> bool {
    let NodeKind::Grouping { ops } = &n.kind else {
        return false;
    };
    let w = &plan.pcollections[n.inputs[0]].windowing;
    lift_combiners
        && ops.liftable()
        && w.trigger == tidewater::Trigger::Default
        && !w.window_fn.is_merging()
        && w.timestamp_combiner == tidewater::TimestampCombiner::EndOfWindow
}

/// Whether `n` is a ParDo with side inputs (which heads its own stage).
pub fn has_side_inputs(n: &Node) -> bool {
    matches!(&n.kind, NodeKind::ParDo { side_inputs, .. } if !side_inputs.is_empty())
}

/// The stages of `plan`.
pub fn stage_graph(plan: &ExecutablePlan, lift_combiners: bool) -> StageGraph {
    let lifted: Vec<bool> = plan
        .nodes
        .iter()
        .map(|n| lifts(plan, n, lift_combiners))
        .collect();
    let mut stages = Vec::new();
    for (i, node) in plan.nodes.iter().enumerate() {
        if has_side_inputs(node) {
            let mut stage = Stage {
                input: node.inputs[0],
                side_input_par_do: Some(i),
                par_dos: vec![i],
                exits: Vec::new(),
            };
            for &o in &node.outputs {
                walk(plan, &lifted, o, &mut stage);
            }
            stage.par_dos.sort_unstable();
            stages.push(stage);
        } else if !node.kind.is_fusable() {
            for &root in &node.outputs {
                let mut stage = Stage {
                    input: root,
                    side_input_par_do: None,
                    par_dos: Vec::new(),
                    exits: Vec::new(),
                };
                walk(plan, &lifted, root, &mut stage);
                stage.par_dos.sort_unstable();
                stages.push(stage);
            }
        }
    }
    let mut fed_by = vec![None; plan.pcollections.len()];
    let mut run_by = vec![None; plan.nodes.len()];
    for (i, s) in stages.iter().enumerate() {
        match s.side_input_par_do {
            Some(n) => run_by[n] = Some(i),
            None => fed_by[s.input] = Some(i),
        }
    }
    StageGraph {
        stages,
        lifted,
        fed_by,
        run_by,
    }
}

/// Adds what consumes `pc` inside the stage: fused ParDos (recursively) and exits.
fn walk(plan: &ExecutablePlan, lifted: &[bool], pc: usize, stage: &mut Stage) {
    let mut side_input_par_dos = Vec::new();
    for &c in &plan.pcollections[pc].consumers {
        let node = &plan.nodes[c];
        // A ParDo with side inputs holds its main input and collects each side input;
        // the consumer list names it once per input it takes.
        if has_side_inputs(node) {
            if !side_input_par_dos.contains(&c) {
                side_input_par_dos.push(c);
                for (j, &input) in node.inputs.iter().enumerate() {
                    if input == pc {
                        let kind = if j == 0 {
                            ExitKind::HeldMain
                        } else {
                            ExitKind::SideInput
                        };
                        stage.exits.push(Exit {
                            pcollection: pc,
                            node: c,
                            input: j,
                            kind,
                        });
                    }
                }
            }
            continue;
        }
        let kind = match &node.kind {
            NodeKind::ParDo { .. } | NodeKind::WindowInto { .. } => {
                stage.par_dos.push(c);
                for &o in &node.outputs {
                    walk(plan, lifted, o, stage);
                }
                continue;
            }
            NodeKind::Grouping { .. } if lifted[c] => ExitKind::PartialCombine,
            NodeKind::Grouping { .. } | NodeKind::Stateful { .. } => ExitKind::Shuffle,
            NodeKind::Flatten => ExitKind::Flatten,
            NodeKind::Capture { name } => ExitKind::Capture(name.clone()),
            NodeKind::Sink { .. } => ExitKind::Sink,
            NodeKind::Impulse
            | NodeKind::Create { .. }
            | NodeKind::TestStream { .. }
            | NodeKind::Read { .. } => unreachable!("'{}' consumes no input", node.name),
        };
        // A Flatten may take one PCollection twice: the consumer list names it once per
        // input, and each occurrence is its own exit.
        let seen = stage
            .exits
            .iter()
            .filter(|e| e.pcollection == pc && e.node == c)
            .count();
        let input = node
            .inputs
            .iter()
            .enumerate()
            .filter(|(_, &i)| i == pc)
            .nth(seen)
            .map_or(0, |(j, _)| j);
        stage.exits.push(Exit {
            pcollection: pc,
            node: c,
            input,
            kind,
        });
    }
}

/// A readable listing of the stages, for snapshots and `--explain`: exactly what runs.
pub fn describe(plan: &ExecutablePlan) -> String {
    let graph = stage_graph(plan, true);
    let mut s = String::new();
    for (i, stage) in graph.stages.iter().enumerate() {
        let input = &plan.pcollections[stage.input];
        match stage.side_input_par_do {
            Some(n) => {
                let _ = writeln!(
                    s,
                    "stage {i}: held {} with side inputs, at {}",
                    input.name, plan.nodes[n].name
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "stage {i}: from {} (produced by {})",
                    input.name, plan.nodes[input.producer].name
                );
            }
        }
        for &n in &stage.par_dos {
            let kind = match plan.nodes[n].kind {
                NodeKind::WindowInto { .. } => "WindowInto",
                _ if has_side_inputs(&plan.nodes[n]) => "ParDo with side inputs",
                _ => "ParDo",
            };
            let _ = writeln!(s, "  {kind} {}", plan.nodes[n].name);
        }
        for e in &stage.exits {
            let kind = match &e.kind {
                ExitKind::Shuffle => match plan.nodes[e.node].kind {
                    NodeKind::Stateful { .. } => "shuffle to stateful",
                    _ => "shuffle to",
                },
                ExitKind::PartialCombine => "partial combine for",
                ExitKind::SideInput => "broadcast side input to",
                ExitKind::HeldMain => "held main input of",
                ExitKind::Flatten => "flatten into",
                ExitKind::Capture(_) => "capture by",
                ExitKind::Sink => "write to sink",
            };
            let _ = writeln!(s, "  -> {kind} {}", plan.nodes[e.node].name);
        }
    }
    s
}
