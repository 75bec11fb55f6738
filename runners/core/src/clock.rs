//! Where processing time comes from, once for every runner: a pipeline with a TestStream
//! runs on the simulated clock its script moves (deterministic), any other on the wall
//! clock ([`tidewater::Timestamp::wall_clock`]).
//!
//! On the simulated clock a Read beside the TestStream reads at the clock's start
//! ([`SIMULATED_START`]) whatever the script does, and is read out before the script's
//! first event: to its end if bounded, else until a read finds nothing, when it is
//! drained ([`crate::source_driver::SourceDriver::drain_if_idle`]: at a time that never
//! moves, nothing more comes). What it gives, and when its watermark reaches the end of
//! time, so do not depend on how a runner interleaves it with the script.

use crate::translate::{ExecutablePlan, NodeKind};
use tidewater::Timestamp;

/// The simulated clock's processing time before the script moves it.
pub const SIMULATED_START: Timestamp = Timestamp(0);

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
    /// The processing time a Read (not the TestStream) reads at when its runner's
    /// processing time is `now`: `now` on the wall clock, the start on the simulated one.
    ///
    /// ```
    /// use tidewater::Timestamp;
    /// use tidewater_runners_core::clock::{Clock, SIMULATED_START};
    /// assert_eq!(Clock::Wall.read_time(Timestamp(5)), Timestamp(5));
    /// assert_eq!(Clock::Simulated.read_time(Timestamp(5)), SIMULATED_START);
    /// ```
    pub fn read_time(self, now: Timestamp) -> Timestamp {
        match self {
            Clock::Simulated => SIMULATED_START,
            Clock::Wall => now,
        }
    }

    /// Whether `plan` needs an engine's epochs aligned: one that replays a TestStream.
    /// An engine applies the script in order (each event an epoch, the events of a
    /// Read beside it in the first, by the rule above) only by aligning its epochs;
    /// without, an element the script adds behind its watermark can overtake that
    /// watermark on its way to a grouping at another worker and count as on time.
    pub fn needs_aligned_epochs(plan: &ExecutablePlan) -> bool {
        Clock::for_plan(plan) == Clock::Simulated
    }

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
