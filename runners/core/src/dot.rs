//! The pipeline as a Graphviz graph (`--dump-plan-dot`): composites as clusters,
//! primitives as boxes, PCollections as edges, and the fused stages the plan runs as —
//! every primitive in one stage shares a colour and says which stage it is in.

use crate::fusion::stage_graph;
use crate::translate::{translate, NodeKind};
use std::collections::BTreeMap;
use std::fmt::Write;
use tidewater::plan::Plan;
use tidewater::Result;

/// Light fill colours, one per stage (cycled).
const PALETTE: [&str; 8] = [
    "#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#cffafe", "#f3f4f6",
];

/// `s` escaped for a quoted DOT string.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn quote(s: &str) -> String {
    format!("\"{}\"", esc(s))
}

/// The last segment of a hierarchical name.
fn short(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// What a primitive is, in a word or three.
pub fn kind_of(n: &crate::translate::Node) -> &'static str {
    match &n.kind {
        NodeKind::ParDo { side_inputs, .. } if !side_inputs.is_empty() => "ParDo with side inputs",
        NodeKind::ParDo { .. } => "ParDo",
        NodeKind::WindowInto { .. } => "WindowInto",
        NodeKind::Grouping { ops } if ops.liftable() => "Combine",
        NodeKind::Grouping { .. } => "GroupByKey",
        NodeKind::Stateful { .. } => "stateful ParDo",
        NodeKind::Flatten => "Flatten",
        NodeKind::Impulse => "Impulse",
        NodeKind::Create { .. } => "Create",
        NodeKind::Read { .. } => "Read",
        NodeKind::TestStream { .. } => "TestStream",
        NodeKind::Capture { .. } => "Capture",
        NodeKind::Sink { .. } => "Sink",
    }
}

/// The plan as a Graphviz `digraph`.
pub fn render_dot(plan: &Plan) -> Result<String> {
    let exec = translate(plan)?;
    let graph = stage_graph(&exec, true);
    // The stage each primitive runs in: a fused ParDo's, or the stage a non-fusable
    // node's output feeds.
    let mut stage_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, s) in graph.stages.iter().enumerate() {
        for &n in &s.par_dos {
            stage_of.insert(exec.nodes[n].name.as_str(), i);
        }
    }
    let mut out = String::from(
        "digraph pipeline {\n  rankdir=LR;\n  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=Helvetica];\n  edge [fontname=Helvetica, fontsize=10];\n",
    );
    fn emit(
        out: &mut String,
        plan: &Plan,
        id: &str,
        depth: usize,
        stage_of: &BTreeMap<&str, usize>,
        exec: &crate::translate::ExecutablePlan,
    ) {
        let Some(t) = plan.components.transforms.get(id) else {
            return;
        };
        let pad = "  ".repeat(depth + 1);
        if t.spec.is_none() && !t.subtransforms.is_empty() {
            let _ = writeln!(out, "{pad}subgraph {} {{", quote(&format!("cluster_{id}")));
            let _ = writeln!(
                out,
                "{pad}  label={}; style=dashed;",
                quote(short(&t.unique_name))
            );
            for sub in &t.subtransforms {
                emit(out, plan, sub, depth + 1, stage_of, exec);
            }
            let _ = writeln!(out, "{pad}}}");
            return;
        }
        let kind = exec
            .nodes
            .iter()
            .find(|n| n.name == t.unique_name)
            .map(kind_of)
            .unwrap_or("?");
        let (fill, stage) = match stage_of.get(t.unique_name.as_str()) {
            Some(&s) => (PALETTE[s % PALETTE.len()], format!("\\nstage {s}")),
            None => ("white", String::new()),
        };
        let _ = writeln!(
            out,
            "{pad}{} [label=\"{}\\n{kind}{stage}\", fillcolor={}];",
            quote(&t.unique_name),
            esc(short(&t.unique_name)),
            quote(fill)
        );
    }
    for root in &plan.root_transform_ids {
        emit(&mut out, plan, root, 0, &stage_of, &exec);
    }
    // One edge per consumer of each PCollection, from the primitive that produces it.
    for n in &exec.nodes {
        for &pc in &n.inputs {
            let info = &exec.pcollections[pc];
            let producer = &exec.nodes[info.producer].name;
            let _ = writeln!(
                out,
                "  {} -> {} [label={}];",
                quote(producer),
                quote(&n.name),
                quote(short(&info.name))
            );
        }
    }
    out.push_str("}\n");
    Ok(out)
}
