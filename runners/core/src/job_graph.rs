//! The job as the engine runners run it, for the status page: one task per head
//! ([`crate::fusion::heads`]: sources, groupings, stateful ParDos, Flattens, ParDos with
//! side inputs, captures), the primitives fused into each, and how data travels
//! between tasks (by key, broadcast, to the same worker, gathered). Built from the same
//! stage graph as `--dump-plan-dot` ([`crate::dot`]), which draws every primitive.
//!
//! A task's `name` is its head's transform name: the name the status figures of its
//! operator carry.

use crate::dot::kind_of;
use crate::fusion::{heads, stage_graph, ExitKind};
use crate::translate::{translate, ExecutablePlan};
use serde::{Deserialize, Serialize};
use tidewater::plan::Plan;
use tidewater::Result;

/// The tasks of a job and the channels between them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobGraph {
    /// Every task, in plan order.
    pub tasks: Vec<GraphTask>,
    /// Every channel between two tasks.
    pub edges: Vec<GraphEdge>,
}

/// A task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphTask {
    /// Its head's transform name.
    pub name: String,
    /// What its head is (`Read`, `Combine`, `GroupByKey`, `stateful ParDo`, ...).
    pub kind: String,
    /// The primitives fused after its head, in plan order.
    pub fused: Vec<String>,
    /// The sinks it writes.
    pub sinks: Vec<String>,
}

/// A channel from one task into another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEdge {
    /// The sending task's index.
    pub from: usize,
    /// The receiving task's index.
    pub to: usize,
    /// How: `by key`, `by key, combined first` (a lifted combine), `broadcast` (a
    /// side input), `same worker` (into a Flatten, or a ParDo's main input held for
    /// its side inputs), `gathered` (into a capture).
    pub how: String,
}

/// The job graph of `plan`, with combiners lifted as `lift_combiners` says (the
/// engine's option).
pub fn job_graph(plan: &Plan, lift_combiners: bool) -> Result<JobGraph> {
    Ok(of_exec(&translate(plan)?, lift_combiners))
}

/// The job graph of a translated plan.
pub fn of_exec(exec: &ExecutablePlan, lift_combiners: bool) -> JobGraph {
    let graph = stage_graph(exec, lift_combiners);
    let heads = heads(exec);
    let task_of = |node: usize| heads.iter().position(|&h| h == node);
    let mut tasks = Vec::new();
    let mut edges = Vec::new();
    for (i, &head) in heads.iter().enumerate() {
        let n = &exec.nodes[head];
        let mut task = GraphTask {
            name: n.name.clone(),
            kind: kind_of(n).to_string(),
            fused: Vec::new(),
            sinks: Vec::new(),
        };
        if let Some(stage) = graph.of_head(exec, head).map(|s| &graph.stages[s]) {
            task.fused = stage
                .par_dos
                .iter()
                .filter(|&&p| p != head)
                .map(|&p| exec.nodes[p].name.clone())
                .collect();
            for exit in &stage.exits {
                let how = match &exit.kind {
                    ExitKind::Shuffle => "by key",
                    ExitKind::PartialCombine => "by key, combined first",
                    ExitKind::SideInput => "broadcast",
                    ExitKind::HeldMain | ExitKind::Flatten => "same worker",
                    ExitKind::Capture(_) => "gathered",
                    ExitKind::Sink => {
                        task.sinks.push(exec.nodes[exit.node].name.clone());
                        continue;
                    }
                };
                if let Some(to) = task_of(exit.node) {
                    let edge = GraphEdge {
                        from: i,
                        to,
                        how: how.to_string(),
                    };
                    if !edges.contains(&edge) {
                        edges.push(edge);
                    }
                }
            }
        }
        tasks.push(task);
    }
    JobGraph { tasks, edges }
}
