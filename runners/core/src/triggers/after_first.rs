//! `Trigger::AfterFirst` (Beam's `AfterFirstStateMachine`): fires as soon as any
//! sub-trigger fires (or has finished), then finishes. On firing, the sub-triggers
//! that are ready fire and the others are cleared, since the pane they tracked is gone.

use super::{TriggerContext, TriggerState, TriggerStateMachine};
use tidewater::Timestamp;

pub(super) fn on_element(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ts: Timestamp,
    ctx: &mut TriggerContext<'_>,
) {
    for &child in m.children(node) {
        m.element(child, state, ts, ctx);
    }
}

pub(super) fn on_merge(
    m: &TriggerStateMachine,
    node: usize,
    merging: &[TriggerState],
    result: &mut TriggerState,
    ctx: &mut TriggerContext<'_>,
) {
    for &child in m.children(node) {
        m.merge(child, merging, result, ctx);
    }
    let any_finished = m.children(node).iter().any(|&c| result.finished(c));
    result.set_finished(node, any_finished);
}

pub(super) fn should_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &TriggerState,
    ctx: &TriggerContext<'_>,
) -> bool {
    m.children(node)
        .iter()
        .any(|&c| state.finished(c) || m.ready(c, state, ctx))
}

pub(super) fn on_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    for &child in m.children(node) {
        if m.ready(child, state, ctx) {
            m.fire(child, state, ctx);
        } else {
            m.clear(child, state);
        }
    }
    state.set_finished(node, true);
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use tidewater::Trigger;

    fn count_or_processing_time() -> Trigger {
        Trigger::after_first(vec![
            Trigger::after_count(3),
            Trigger::after_processing_time().plus_delay_of(10).into(),
        ])
    }

    /// Beam's `testNeitherShouldFireFixedWindows`.
    #[test]
    fn neither_ready() {
        let mut t = Tester::new(count_or_processing_time(), WindowFn::Fixed(10));
        t.advance_processing_time(0);
        t.inject(&[1]);
        let w = iw(0, 10);
        assert!(!t.should_fire(&w));
        assert!(!t.fire_if_should_fire(&w));
        assert!(!t.is_finished(&w));
    }

    /// Beam's `testOnlyT1ShouldFireFixedWindows`.
    #[test]
    fn only_the_first_ready() {
        let mut t = Tester::new(count_or_processing_time(), WindowFn::Fixed(10));
        t.advance_processing_time(0);
        t.inject(&[1, 2, 3]);
        let w = iw(0, 10);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    /// Beam's `testOnlyT2ShouldFireFixedWindows`.
    #[test]
    fn only_the_second_ready() {
        let mut t = Tester::new(count_or_processing_time(), WindowFn::Fixed(10));
        t.advance_processing_time(0);
        t.inject(&[1]);
        // Past the AfterProcessingTime's target 10.
        t.advance_processing_time(11);
        let w = iw(0, 10);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    /// Beam's `testBothShouldFireFixedWindows`.
    #[test]
    fn both_ready() {
        let mut t = Tester::new(count_or_processing_time(), WindowFn::Fixed(10));
        t.advance_processing_time(0);
        t.inject(&[1, 2, 3]);
        // Past the AfterProcessingTime's target 10.
        t.advance_processing_time(11);
        let w = iw(0, 10);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    #[test]
    fn fired_and_cleared_sub_triggers() {
        let m = super::super::TriggerStateMachine::new(&count_or_processing_time());
        let mut t = Tester::with_machine(m, WindowFn::Fixed(10));
        t.advance_processing_time(0);
        t.inject(&[1, 2, 3]);
        let w = iw(0, 10);
        assert!(t.fire_if_should_fire(&w));
        let s = t.state(&w);
        // AfterCount fired (finished), AfterProcessingTime was cleared (not finished).
        assert!(s.finished(1));
        assert!(!s.finished(2));
        assert_eq!(s.nodes[2].delayed_until, None);
    }

    /// Beam's `testShouldFireAfterMerge`: the AfterFirst rewinds to unfinished in the
    /// merged window and is the current sub-trigger of the AfterEach again.
    #[test]
    fn should_fire_after_merge() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_first(vec![
                    Trigger::after_count(5),
                    Trigger::after_watermark().into(),
                ]),
                Trigger::repeatedly(Trigger::after_count(1)),
            ]),
            WindowFn::Sessions(10),
        );

        // Finish the AfterFirst in the first window.
        t.inject(&[1]);
        let first = iw(1, 11);
        assert!(!t.should_fire(&first));
        t.advance_watermark(11);
        assert!(t.should_fire(&first));
        t.fire_if_should_fire(&first);

        // A second window where it is not done.
        t.inject(&[5]);
        let second = iw(5, 15);
        assert!(!t.should_fire(&second));

        // Merged: were it on the second sub-trigger, it would be ready.
        t.merge_windows();
        let merged = iw(1, 15);
        assert!(!t.should_fire(&merged));

        // More elements make the AfterFirst's count ready.
        t.inject(&[1, 2, 3, 4, 5]);
        t.merge_windows();
        assert!(t.should_fire(&merged));
    }
}
