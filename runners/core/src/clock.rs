//! Where processing time comes from, once for every runner: a pipeline with a TestStream
//! runs on the simulated clock its script moves (deterministic), any other on the wall
//! clock ([`tidewater::Timestamp::wall_clock`]).

use crate::translate::{ExecutablePlan, NodeKind};

/// Where processing time comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Starts at 0 and moves only when a TestStream advances it (an engine carries it
    /// in-band): deterministic.
    Simulated,
    /// The wall clock (of each worker).
    Wall,
}

impl Clock {
    /// The clock `plan` runs on: simulated when it replays a TestStream, which scripts
    /// processing time; the wall clock otherwise.
    pub fn for_plan(plan: &ExecutablePlan) -> Clock {
        if plan
            .nodes
            .iter()
            .any(|n| matches!(n.kind, NodeKind::TestStream { .. }))
        {
            Clock::Simulated
        } else {
            Clock::Wall
        }
    }
}
