//! Fusion: every PCollection produced by a non-ParDo primitive roots a stage holding
//! the chains (trees) of ParDos that consume it, which run together bundle by bundle
//! without materializing what flows between them.

use crate::translate::{ExecutablePlan, NodeKind};
use std::fmt::Write;

/// A fused stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stage {
    /// The PCollection that feeds it.
    pub root: usize,
    /// Its ParDo nodes, in topological order.
    pub par_dos: Vec<usize>,
}

/// Whether grouping node `n` combines partially before the shuffle (combiner lifting):
/// only a liftable combine whose panes do not depend on individual elements (default
/// trigger, non-merging windows, output at the end of the window), and only if the
/// runner lifts at all.
pub fn lifts(plan: &ExecutablePlan, n: &crate::translate::Node, lift_combiners: bool) -> bool {
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

/// Whether PCollection `pc` is materialized: produced by a non-ParDo node.
pub fn is_stage_root(plan: &ExecutablePlan, pc: usize) -> bool {
    !plan.nodes[plan.pcollections[pc].producer].kind.is_fusable()
}

/// The stages of `plan`, in the order their roots are produced.
pub fn fuse(plan: &ExecutablePlan) -> Vec<Stage> {
    let mut stages = Vec::new();
    for node in &plan.nodes {
        if node.kind.is_fusable() {
            continue;
        }
        for &root in &node.outputs {
            let mut par_dos = Vec::new();
            let mut frontier = vec![root];
            while let Some(pc) = frontier.pop() {
                for &c in &plan.pcollections[pc].consumers {
                    if plan.nodes[c].kind.is_fusable() && !par_dos.contains(&c) {
                        par_dos.push(c);
                        frontier.extend(plan.nodes[c].outputs.iter().copied());
                    }
                }
            }
            par_dos.sort_unstable();
            stages.push(Stage { root, par_dos });
        }
    }
    stages
}

/// A readable listing of the stages, for snapshots and `--explain`.
pub fn describe(plan: &ExecutablePlan) -> String {
    let mut s = String::new();
    for (i, stage) in fuse(plan).iter().enumerate() {
        let root = &plan.pcollections[stage.root];
        let _ = writeln!(
            s,
            "stage {i}: from {} (produced by {})",
            root.name, plan.nodes[root.producer].name
        );
        for &n in &stage.par_dos {
            let kind = if matches!(plan.nodes[n].kind, NodeKind::WindowInto { .. }) {
                "WindowInto"
            } else {
                "ParDo"
            };
            let _ = writeln!(s, "  {kind} {}", plan.nodes[n].name);
        }
        let mut sinks = Vec::new();
        let mut pcs = vec![stage.root];
        pcs.extend(
            stage
                .par_dos
                .iter()
                .flat_map(|&n| plan.nodes[n].outputs.iter().copied()),
        );
        for pc in pcs {
            for &c in &plan.pcollections[pc].consumers {
                let kind = match &plan.nodes[c].kind {
                    NodeKind::ParDo { .. } | NodeKind::WindowInto { .. } => continue,
                    NodeKind::Grouping { .. } if lifts(plan, &plan.nodes[c], true) => {
                        "partial combine for"
                    }
                    NodeKind::Grouping { .. } => "shuffle to",
                    NodeKind::Stateful { .. } => "shuffle to stateful",
                    NodeKind::Flatten => "flatten into",
                    NodeKind::Capture { .. } => "capture by",
                    NodeKind::Impulse
                    | NodeKind::Create { .. }
                    | NodeKind::TestStream { .. }
                    | NodeKind::Read { .. } => "?",
                };
                sinks.push(format!("  -> {kind} {}", plan.nodes[c].name));
            }
        }
        for line in sinks {
            let _ = writeln!(s, "{line}");
        }
    }
    s
}
