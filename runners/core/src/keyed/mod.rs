//! Keyed operators: the stateful steps an engine hosts after a keyed exchange, behind
//! one interface. An operator takes batches of input, moves forward in event and
//! processing time, emits what fired, tells its output watermark and when it next
//! needs to wake up, and snapshots and restores its state per key group.
//!
//! Two implementations carry the semantics:
//! - [`GroupAlsoByWindow`]: GroupByKey and Combine (whole, or the final half of a
//!   lifted combine) through the reducer, plus Combine.globally's default output;
//! - [`stateful::StatefulRunner`]: a stateful DoFn with its state and timers.
//!
//! Every engine drives them the same way; the direct runner drives one instance per
//! transform, a distributed engine one per worker, each owning a range of key groups.
//!
//! The parts: [`operator`] (the interface and key groups), [`snapshot`] (what their
//! snapshots are made of), [`reduce`] (the reducer, Beam's `ReduceFnRunner`, with its
//! active windows and snapshot wire format), [`group_also_by_window`] and [`stateful`]
//! (the two operators); this module builds them from a plan.

pub mod group_also_by_window;
pub mod operator;
pub mod reduce;
pub mod snapshot;
pub mod stateful;

pub use group_also_by_window::GroupAlsoByWindow;
pub use operator::{KeyGroups, KeyedOperator};
pub use snapshot::{KeyedSnapshot, LaterParts, ScopedParts, SnapshotKind};

use crate::translate::{ExecutablePlan, NodeKind};
use crate::windowing::WindowAssigner;
use reduce::Reducer;
use std::sync::Arc;
use tidewater::exec::GroupingPhase;
use tidewater::{Error, Result, WindowFn};

/// Builds the keyed operator of plan node `node` (a grouping or a stateful ParDo).
/// `lifted`: the node's combine was lifted, so its input is accumulators; `state`:
/// where a stateful ParDo keeps its cells, and a grouping the windows beyond its
/// budget in memory.
pub fn instantiate(
    plan: &ExecutablePlan,
    node: usize,
    lifted: bool,
    key_groups: &KeyGroups,
    state: &crate::state::StateChoice,
) -> Result<Box<dyn KeyedOperator>> {
    let n = &plan.nodes[node];
    let windowing = plan.pcollections[n.inputs[0]].windowing.clone();
    match &n.kind {
        NodeKind::Grouping { ops } => {
            let assigner = WindowAssigner::new(&windowing.window_fn, &n.name)?;
            let phase = if lifted {
                GroupingPhase::Final
            } else {
                GroupingPhase::Full
            };
            let global = windowing.window_fn == WindowFn::Global;
            let reducer = Reducer::new(windowing, assigner, ops.new_reduce_state(phase))
                .with_store(state, key_groups.max)?;
            Ok(Box::new(GroupAlsoByWindow::new(
                reducer,
                ops.clone(),
                global,
                key_groups,
            )))
        }
        NodeKind::Stateful { .. } => Ok(Box::new(
            stateful::StatefulRunner::new(
                n.instantiate_stateful()?,
                state,
                key_groups.max,
                windowing.allowed_lateness_ms,
            )?
            .owning(key_groups.owned.clone()),
        )),
        _ => Err(Error::Internal(format!(
            "'{}' is not a keyed transform",
            n.name
        ))),
    }
}

/// How the input of keyed node `node` (a grouping, or a stateful ParDo) is hashed and
/// split by key for the exchange in front of its operator; `lifted`: the exchange
/// carries the accumulators of a lifted combine.
pub fn key_ops(
    plan: &ExecutablePlan,
    node: usize,
    lifted: bool,
) -> Result<Arc<dyn tidewater::exec::KeyOps>> {
    let n = &plan.nodes[node];
    match &n.kind {
        NodeKind::Grouping { ops } => Ok(ops.key_ops(if lifted {
            GroupingPhase::Final
        } else {
            GroupingPhase::Full
        })),
        NodeKind::Stateful { .. } => Ok(n.instantiate_stateful()?.key_ops()),
        _ => Err(Error::Internal(format!(
            "'{}' is not a keyed transform",
            n.name
        ))),
    }
}
