//! Trigger state machines: when the group-also-by-window reducer emits a pane.
//!
//! One state machine per trigger, one file each, following Beam Java's
//! `runners/core-java/.../triggers/*StateMachine.java`. A [`Trigger`] from the plan is
//! compiled once into a [`TriggerStateMachine`]: a tree of nodes numbered in
//! pre-order, as Beam's `ExecutableTriggerStateMachine` numbers them. The state of one
//! (key, window) is a [`TriggerState`]: one small record per node (its finished bit,
//! Beam's `FinishedTriggersBitSet`, plus the node's own bookkeeping), serializable and
//! runner-neutral so that it can go into a checkpoint.
//!
//! The reducer builds the machine with [`TriggerStateMachine::with_merging`] and its
//! WindowFn's `is_merging()` (some composites behave differently under merging, as in
//! Beam) and drives it the way Beam's `ReduceFnRunner` drives a
//! `TriggerStateMachineRunner`:
//!
//! - [`TriggerStateMachine::on_element`] for every element added to a window (after
//!   merging, into the merge result);
//! - [`TriggerStateMachine::on_merge`] when a merging WindowFn merged windows;
//! - [`TriggerStateMachine::should_fire`] after elements and whenever a requested timer
//!   fires, then [`TriggerStateMachine::on_fire`] when it emits the pane;
//! - [`TriggerStateMachine::is_finished`] to close the window: no more panes, late
//!   data dropped.
//!
//! Time convention, Beam's: a watermark `w` means no element before `w` is still
//! expected, so a timer at `t` fires once its clock is past `t`, "the end of the window
//! has been reached" means `watermark > window.max_timestamp()`, and a processing-time
//! trigger fires once `processing_time > target`.
//!
//! ```
//! use tidewater::{BoundedWindow, Timestamp, Trigger};
//! use tidewater_runners_core::triggers::{TriggerContext, TriggerStateMachine};
//!
//! let machine = TriggerStateMachine::new(&Trigger::repeatedly(Trigger::after_count(2)));
//! let mut state = machine.initial_state();
//! let mut timers = Vec::new();
//! let mut ctx = TriggerContext {
//!     window: BoundedWindow::Global,
//!     watermark: Timestamp::MIN,
//!     processing_time: Timestamp::from_millis(0),
//!     timers: &mut timers,
//! };
//! machine.on_element(&mut state, Timestamp::from_millis(1), &mut ctx);
//! assert!(!machine.should_fire(&state, &ctx));
//! machine.on_element(&mut state, Timestamp::from_millis(2), &mut ctx);
//! assert!(machine.should_fire(&state, &ctx));
//! machine.on_fire(&mut state, &mut ctx);
//! assert!(!machine.should_fire(&state, &ctx) && !machine.is_finished(&state));
//! ```
#![warn(missing_docs)]

mod after_all;
mod after_count;
mod after_each;
mod after_first;
mod after_processing_time;
mod after_watermark;
mod default;
mod explain;
mod never;
mod node_state;
mod or_finally;
mod repeatedly;

#[cfg(test)]
mod tester;

use node_state::Nodes;
use serde::{Deserialize, Serialize};
use tidewater::{BoundedWindow, TimeTransform, Timestamp, Trigger};

pub use explain::{show, Wait};
pub use tidewater::exec::TimeDomain;

/// What a trigger sees for one window, and the timers it may request.
#[derive(Debug)]
pub struct TriggerContext<'a> {
    /// The window the trigger runs for (for [`TriggerStateMachine::on_merge`], the
    /// merge result).
    pub window: BoundedWindow,
    /// The grouping's input watermark (event time).
    pub watermark: Timestamp,
    /// The current processing time.
    pub processing_time: Timestamp,
    /// Timers requested during this call: the reducer will call should_fire again when
    /// they fire. A request is appended only if the same (domain, time) is not already
    /// in the vector.
    pub timers: &'a mut Vec<(TimeDomain, Timestamp)>,
}

impl<'a> TriggerContext<'a> {
    /// A context for `window` at the given clocks, collecting timer requests in `timers`.
    pub fn new(
        window: BoundedWindow,
        watermark: Timestamp,
        processing_time: Timestamp,
        timers: &'a mut Vec<(TimeDomain, Timestamp)>,
    ) -> Self {
        TriggerContext {
            window,
            watermark,
            processing_time,
            timers,
        }
    }

    fn set_timer(&mut self, domain: TimeDomain, at: Timestamp) {
        if !self.timers.contains(&(domain, at)) {
            self.timers.push((domain, at));
        }
    }

    /// Whether the watermark has reached the end of the window (see the module docs for
    /// the convention).
    fn end_of_window_reached(&self) -> bool {
        self.watermark > self.window.max_timestamp()
    }

    /// Requests the end-of-window event-time timer unless the end is already reached.
    fn set_end_of_window_timer(&mut self) {
        if !self.end_of_window_reached() {
            let at = self.window.max_timestamp();
            self.set_timer(TimeDomain::EventTime, at);
        }
    }
}

/// Per-(key, window) trigger state; serializable (it goes into checkpoints),
/// runner-neutral.
///
/// One record per node of the compiled trigger tree, in pre-order: whether the node is
/// finished, and the node's bookkeeping (the element count of `AfterCount`, the target
/// time of `AfterProcessingTime`; other nodes keep none).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerState {
    nodes: Nodes,
}

impl TriggerState {
    fn finished(&self, node: usize) -> bool {
        self.nodes[node].finished
    }

    fn set_finished(&mut self, node: usize, finished: bool) {
        self.nodes[node].finished = finished;
    }
}

/// Whether `node` is finished in any of the windows being merged.
fn finished_in_any(merging: &[TriggerState], node: usize) -> bool {
    merging.iter().any(|s| s.finished(node))
}

/// Whether `node` is finished in all of the windows being merged.
fn finished_in_all(merging: &[TriggerState], node: usize) -> bool {
    merging.iter().all(|s| s.finished(node))
}

/// The kind of a compiled node, with its parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    Default,
    Never,
    /// `AfterWatermark` without early or late firings (Beam's `FromEndOfWindow`).
    AfterWatermark,
    /// `AfterWatermark` with early and/or late firings (Beam's
    /// `AfterWatermarkEarlyAndLate`): child 0 is the early trigger (`Never` when only
    /// late firings were given), child 1 the late trigger if any.
    AfterWatermarkEarlyAndLate,
    AfterProcessingTime(Vec<TimeTransform>),
    AfterCount(u64),
    Repeatedly,
    AfterEach,
    AfterFirst,
    AfterAll,
    /// Child 0 is the main trigger, child 1 the `until` trigger.
    OrFinally,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Node {
    kind: Kind,
    children: Vec<usize>,
    /// The first index after this node's subtree.
    end: usize,
}

/// A [`Trigger`] compiled into a tree of state machines (Beam's
/// `ExecutableTriggerStateMachine` plus `TriggerStateMachineRunner`).
///
/// The machine itself holds no per-window data: every call takes the window's
/// [`TriggerState`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerStateMachine {
    nodes: Vec<Node>,
    merging: bool,
}

impl TriggerStateMachine {
    /// Compiles `trigger` for a non-merging WindowFn (global, fixed, sliding windows).
    ///
    /// Use [`TriggerStateMachine::with_merging`] for a merging WindowFn (sessions): as
    /// in Beam, `AfterEach` and `AfterWatermark` then run all their sub-triggers in
    /// parallel so that a merge can revive any of them, which changes results.
    ///
    /// `trigger` should have passed [`Trigger::validate`]; an empty composite does not
    /// panic (`AfterEach` and `AfterFirst` of nothing never fire, `AfterAll` of nothing
    /// fires at once and finishes).
    pub fn new(trigger: &Trigger) -> Self {
        Self::with_merging(trigger, false)
    }

    /// Compiles `trigger` for a WindowFn that merges windows (`is_merging`) or not
    /// (Beam's `TriggerInfo.isMerging()`).
    pub fn with_merging(trigger: &Trigger, is_merging: bool) -> Self {
        let mut nodes = Vec::new();
        compile(trigger, &mut nodes);
        TriggerStateMachine {
            nodes,
            merging: is_merging,
        }
    }

    /// Whether the machine was compiled for a merging WindowFn.
    pub fn is_merging(&self) -> bool {
        self.merging
    }

    /// The state of a window that has seen nothing yet.
    pub fn initial_state(&self) -> TriggerState {
        TriggerState {
            nodes: Nodes::new(self.nodes.len()),
        }
    }

    /// Whether `state` has the shape of this machine's states (for example after
    /// restoring a checkpoint taken with another trigger); the other methods panic on a
    /// state that does not.
    pub fn is_state_for(&self, state: &TriggerState) -> bool {
        state.nodes.len() == self.nodes.len()
    }

    /// An element with event timestamp `ts` arrived in ctx.window.
    ///
    /// Does nothing once the trigger is finished: the reducer drops elements of a
    /// closed window, as Beam's `ReduceFnRunner` does.
    pub fn on_element(
        &self,
        state: &mut TriggerState,
        ts: Timestamp,
        ctx: &mut TriggerContext<'_>,
    ) {
        if !state.finished(0) {
            self.element(0, state, ts, ctx);
        }
    }

    /// Windows were merged (session windows) into ctx.window; `merging` are the states
    /// of the merged windows (including possibly the target's own). Returns the merged
    /// state.
    ///
    /// The result starts as the state of a new window, as in Beam where the merge
    /// result is a new window; each node then decides from its states in `merging`
    /// (finished in any / in all of them, the sum of counts, the earliest target time).
    /// Like Beam's `ReduceFnRunner`, pass only the active windows (not those whose
    /// trigger had finished), and call [`TriggerStateMachine::on_element`] on the
    /// result for the element that caused the merge: that is what requests the
    /// end-of-window timer of the merged window for `AfterWatermark`.
    ///
    /// The machine should come from [`TriggerStateMachine::with_merging`] with
    /// `is_merging` true: one built by [`TriggerStateMachine::new`] merges states all
    /// the same, but its `AfterEach` and `AfterWatermark` only fed the current
    /// sub-trigger, so a sub-trigger a merge revives has missed elements.
    pub fn on_merge(&self, merging: &[TriggerState], ctx: &mut TriggerContext<'_>) -> TriggerState {
        let mut result = self.initial_state();
        self.merge(0, merging, &mut result, ctx);
        result
    }

    /// Whether the trigger is ready to fire now. Always false once finished.
    pub fn should_fire(&self, state: &TriggerState, ctx: &TriggerContext<'_>) -> bool {
        !state.finished(0) && self.ready(0, state, ctx)
    }

    /// Called when the reducer fires a pane because should_fire returned true; advances
    /// the state (resets counts, moves AfterEach on, marks finished...).
    pub fn on_fire(&self, state: &mut TriggerState, ctx: &mut TriggerContext<'_>) {
        if !state.finished(0) {
            self.fire(0, state, ctx);
        }
    }

    /// No more panes will ever fire (the reducer then emits nothing more for the window
    /// except possibly a final cleanup pane and discards late data).
    pub fn is_finished(&self, state: &TriggerState) -> bool {
        state.finished(0)
    }

    // Dispatch to the node's file. Sub-triggers are invoked through these too.

    fn kind(&self, node: usize) -> &Kind {
        &self.nodes[node].kind
    }

    fn children(&self, node: usize) -> &[usize] {
        &self.nodes[node].children
    }

    /// The first child of `node` that is not finished (Beam's
    /// `firstUnfinishedSubTrigger`).
    fn first_unfinished_child(&self, node: usize, state: &TriggerState) -> Option<usize> {
        self.children(node)
            .iter()
            .copied()
            .find(|&c| !state.finished(c))
    }

    fn element(
        &self,
        node: usize,
        state: &mut TriggerState,
        ts: Timestamp,
        ctx: &mut TriggerContext<'_>,
    ) {
        match self.kind(node) {
            Kind::Default => default::on_element(ctx),
            Kind::Never => never::on_element(),
            Kind::AfterWatermark => after_watermark::on_element(ctx),
            Kind::AfterWatermarkEarlyAndLate => {
                after_watermark::early_and_late_on_element(self, node, state, ts, ctx)
            }
            Kind::AfterProcessingTime(transforms) => {
                after_processing_time::on_element(transforms, node, state, ctx)
            }
            Kind::AfterCount(_) => after_count::on_element(node, state),
            Kind::Repeatedly => repeatedly::on_element(self, node, state, ts, ctx),
            Kind::AfterEach => after_each::on_element(self, node, state, ts, ctx),
            Kind::AfterFirst => after_first::on_element(self, node, state, ts, ctx),
            Kind::AfterAll => after_all::on_element(self, node, state, ts, ctx),
            Kind::OrFinally => or_finally::on_element(self, node, state, ts, ctx),
        }
    }

    fn merge(
        &self,
        node: usize,
        merging: &[TriggerState],
        result: &mut TriggerState,
        ctx: &mut TriggerContext<'_>,
    ) {
        match self.kind(node) {
            Kind::Default => default::on_merge(ctx),
            Kind::Never => never::on_merge(),
            Kind::AfterWatermark => after_watermark::on_merge(node, merging, result, ctx),
            Kind::AfterWatermarkEarlyAndLate => {
                after_watermark::early_and_late_on_merge(self, node, merging, result, ctx)
            }
            Kind::AfterProcessingTime(_) => {
                after_processing_time::on_merge(node, merging, result, ctx)
            }
            Kind::AfterCount(_) => after_count::on_merge(node, merging, result),
            Kind::Repeatedly => repeatedly::on_merge(self, node, merging, result, ctx),
            Kind::AfterEach => after_each::on_merge(self, node, merging, result, ctx),
            Kind::AfterFirst => after_first::on_merge(self, node, merging, result, ctx),
            Kind::AfterAll => after_all::on_merge(self, node, merging, result, ctx),
            Kind::OrFinally => or_finally::on_merge(self, node, merging, result, ctx),
        }
    }

    /// Beam's `shouldFire` of one node (regardless of its own finished bit: composites
    /// look at their children's bits themselves).
    fn ready(&self, node: usize, state: &TriggerState, ctx: &TriggerContext<'_>) -> bool {
        match self.kind(node) {
            Kind::Default => default::should_fire(ctx),
            Kind::Never => never::should_fire(),
            Kind::AfterWatermark => after_watermark::should_fire(ctx),
            Kind::AfterWatermarkEarlyAndLate => {
                after_watermark::early_and_late_should_fire(self, node, state, ctx)
            }
            Kind::AfterProcessingTime(_) => after_processing_time::should_fire(node, state, ctx),
            Kind::AfterCount(count) => after_count::should_fire(*count, node, state),
            Kind::Repeatedly => repeatedly::should_fire(self, node, state, ctx),
            Kind::AfterEach => after_each::should_fire(self, node, state, ctx),
            Kind::AfterFirst => after_first::should_fire(self, node, state, ctx),
            Kind::AfterAll => after_all::should_fire(self, node, state, ctx),
            Kind::OrFinally => or_finally::should_fire(self, node, state, ctx),
        }
    }

    fn fire(&self, node: usize, state: &mut TriggerState, ctx: &TriggerContext<'_>) {
        match self.kind(node) {
            Kind::Default => default::on_fire(),
            Kind::Never => never::on_fire(),
            Kind::AfterWatermark => after_watermark::on_fire(node, state),
            Kind::AfterWatermarkEarlyAndLate => {
                after_watermark::early_and_late_on_fire(self, node, state, ctx)
            }
            Kind::AfterProcessingTime(_) => after_processing_time::on_fire(node, state),
            Kind::AfterCount(_) => after_count::on_fire(node, state),
            Kind::Repeatedly => repeatedly::on_fire(self, node, state, ctx),
            Kind::AfterEach => after_each::on_fire(self, node, state, ctx),
            Kind::AfterFirst => after_first::on_fire(self, node, state, ctx),
            Kind::AfterAll => after_all::on_fire(self, node, state, ctx),
            Kind::OrFinally => or_finally::on_fire(self, node, state, ctx),
        }
    }

    /// Beam's `clear`: drops the bookkeeping of the node's subtree, keeping finished
    /// bits.
    fn clear(&self, node: usize, state: &mut TriggerState) {
        match self.kind(node) {
            Kind::AfterProcessingTime(_) => after_processing_time::clear(node, state),
            Kind::AfterCount(_) => after_count::clear(node, state),
            _ => {
                for &child in self.children(node) {
                    self.clear(child, state);
                }
            }
        }
    }

    /// Beam's `resetTree`: unsets the finished bits of the node's subtree and clears it.
    fn reset_tree(&self, node: usize, state: &mut TriggerState) {
        for n in &mut state.nodes[node..self.nodes[node].end] {
            n.finished = false;
        }
        self.clear(node, state);
    }
}

/// Appends `trigger`'s subtree to `nodes` in pre-order and returns its index.
fn compile(trigger: &Trigger, nodes: &mut Vec<Node>) -> usize {
    let index = nodes.len();
    nodes.push(Node {
        kind: Kind::Never,
        children: Vec::new(),
        end: 0,
    });
    let (kind, children) = match trigger {
        Trigger::Default => (Kind::Default, Vec::new()),
        Trigger::Never => (Kind::Never, Vec::new()),
        Trigger::AfterWatermark {
            early: None,
            late: None,
        } => (Kind::AfterWatermark, Vec::new()),
        Trigger::AfterWatermark { early, late } => {
            // As Beam's `withLateFirings` alone: the early trigger is `Never`.
            let early = early.as_deref().unwrap_or(&Trigger::Never);
            let mut children = vec![compile(early, nodes)];
            if let Some(late) = late {
                children.push(compile(late, nodes));
            }
            (Kind::AfterWatermarkEarlyAndLate, children)
        }
        Trigger::AfterProcessingTime { transforms } => {
            (Kind::AfterProcessingTime(transforms.clone()), Vec::new())
        }
        Trigger::AfterCount { count } => (Kind::AfterCount(*count), Vec::new()),
        Trigger::Repeatedly { trigger } => (Kind::Repeatedly, vec![compile(trigger, nodes)]),
        Trigger::AfterEach { triggers } => (
            Kind::AfterEach,
            triggers.iter().map(|t| compile(t, nodes)).collect(),
        ),
        Trigger::AfterFirst { triggers } => (
            Kind::AfterFirst,
            triggers.iter().map(|t| compile(t, nodes)).collect(),
        ),
        Trigger::AfterAll { triggers } => (
            Kind::AfterAll,
            triggers.iter().map(|t| compile(t, nodes)).collect(),
        ),
        Trigger::OrFinally { main, until } => (
            Kind::OrFinally,
            vec![compile(main, nodes), compile(until, nodes)],
        ),
    };
    let end = nodes.len();
    nodes[index] = Node {
        kind,
        children,
        end,
    };
    index
}

#[cfg(test)]
mod tests {
    use super::tester::{iw, Tester, WindowFn};
    use super::*;

    #[test]
    fn compiles_in_pre_order_like_executable_trigger_state_machine() {
        // AfterEach(AfterFirst(AfterCount(5), AfterWatermark), Repeatedly(AfterCount(1)))
        let t = Trigger::after_each(vec![
            Trigger::after_first(vec![
                Trigger::after_count(5),
                Trigger::after_watermark().into(),
            ]),
            Trigger::repeatedly(Trigger::after_count(1)),
        ]);
        let m = TriggerStateMachine::new(&t);
        let shape: Vec<(Kind, Vec<usize>, usize)> = m
            .nodes
            .iter()
            .map(|n| (n.kind.clone(), n.children.clone(), n.end))
            .collect();
        assert_eq!(
            shape,
            vec![
                (Kind::AfterEach, vec![1, 4], 6),
                (Kind::AfterFirst, vec![2, 3], 4),
                (Kind::AfterCount(5), vec![], 3),
                (Kind::AfterWatermark, vec![], 4),
                (Kind::Repeatedly, vec![5], 6),
                (Kind::AfterCount(1), vec![], 6),
            ]
        );
        assert_eq!(m.initial_state().nodes.len(), 6);
    }

    #[test]
    fn late_firings_alone_get_a_never_early_trigger() {
        let m = TriggerStateMachine::new(
            &Trigger::after_watermark()
                .with_late_firings(Trigger::after_count(1))
                .into(),
        );
        let kinds: Vec<Kind> = m.nodes.iter().map(|n| n.kind.clone()).collect();
        assert_eq!(
            kinds,
            vec![
                Kind::AfterWatermarkEarlyAndLate,
                Kind::Never,
                Kind::AfterCount(1)
            ]
        );
        let m = TriggerStateMachine::new(
            &Trigger::after_watermark()
                .with_early_firings(Trigger::after_count(1))
                .into(),
        );
        assert_eq!(m.nodes[0].children, vec![1]);
    }

    #[test]
    fn state_round_trips_through_serde() {
        let mut t = Tester::new(
            Trigger::after_first(vec![
                Trigger::after_count(3),
                Trigger::after_processing_time().plus_delay_of(5).into(),
            ]),
            WindowFn::Fixed(10),
        );
        t.advance_processing_time(100);
        t.inject(&[1, 2]);
        let state = t.state(&iw(0, 10));
        let json = serde_json::to_string(&state).unwrap();
        let back: TriggerState = serde_json::from_str(&json).unwrap();
        assert_eq!(back, state);
        assert_eq!(back.nodes[1].count, 2);
        assert_eq!(back.nodes[2].delayed_until, Some(Timestamp(105)));
        assert!(t.machine().is_state_for(&back));
        assert!(!TriggerStateMachine::new(&Trigger::Default).is_state_for(&back));
    }

    #[test]
    fn timers_are_not_requested_twice() {
        let m = TriggerStateMachine::new(&Trigger::Default);
        let mut state = m.initial_state();
        let mut timers = Vec::new();
        let mut ctx = TriggerContext::new(iw(0, 10), Timestamp::MIN, Timestamp(0), &mut timers);
        m.on_element(&mut state, Timestamp(1), &mut ctx);
        m.on_element(&mut state, Timestamp(2), &mut ctx);
        assert_eq!(timers, vec![(TimeDomain::EventTime, Timestamp(9))]);
    }

    #[test]
    fn empty_composites_do_not_panic() {
        let ctx_window = iw(0, 10);
        for (trigger, fires) in [
            (Trigger::after_each(vec![]), false),
            (Trigger::after_first(vec![]), false),
            (Trigger::after_all(vec![]), true),
        ] {
            for merging in [false, true] {
                let m = TriggerStateMachine::with_merging(&trigger, merging);
                let mut state = m.initial_state();
                let mut timers = Vec::new();
                let mut ctx = TriggerContext::new(
                    ctx_window.clone(),
                    Timestamp::MIN,
                    Timestamp(0),
                    &mut timers,
                );
                m.on_element(&mut state, Timestamp(1), &mut ctx);
                let merged = m.on_merge(&[state.clone(), state.clone()], &mut ctx);
                // Merging finishes the vacuous AfterEach and AfterAll.
                assert!(!m.should_fire(&merged, &ctx), "{trigger:?}");
                assert_eq!(m.should_fire(&state, &ctx), fires, "{trigger:?}");
                if fires {
                    m.on_fire(&mut state, &mut ctx);
                    assert!(m.is_finished(&state));
                }
            }
        }
    }

    #[test]
    fn a_finished_trigger_ignores_elements_and_never_fires() {
        let m = TriggerStateMachine::new(&Trigger::after_count(1));
        let mut state = m.initial_state();
        let mut timers = Vec::new();
        let mut ctx = TriggerContext::new(iw(0, 10), Timestamp::MIN, Timestamp(0), &mut timers);
        m.on_element(&mut state, Timestamp(1), &mut ctx);
        assert!(m.should_fire(&state, &ctx));
        m.on_fire(&mut state, &mut ctx);
        assert!(m.is_finished(&state));
        let before = state.clone();
        m.on_element(&mut state, Timestamp(2), &mut ctx);
        assert_eq!(state, before);
        assert!(!m.should_fire(&state, &ctx));
    }
}
