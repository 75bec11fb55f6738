//! `Trigger::OrFinally` (Beam's `OrFinallyStateMachine`; child 0 is the main trigger,
//! child 1 the `until` trigger): fires whenever the main trigger fires, and finishes
//! when the main trigger finishes or the `until` trigger fires, in which case it fires
//! one last time. Both run in parallel and the `until` trigger is not cleared when the
//! main one fires, so it counts across panes.

use super::{TriggerContext, TriggerState, TriggerStateMachine};
use tidewater::Timestamp;

const MAIN: usize = 0;
const UNTIL: usize = 1;

pub(super) fn on_element(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ts: Timestamp,
    ctx: &mut TriggerContext<'_>,
) {
    m.element(m.children(node)[MAIN], state, ts, ctx);
    m.element(m.children(node)[UNTIL], state, ts, ctx);
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
    update_finished(m, node, result);
}

pub(super) fn should_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &TriggerState,
    ctx: &TriggerContext<'_>,
) -> bool {
    m.ready(m.children(node)[MAIN], state, ctx) || m.ready(m.children(node)[UNTIL], state, ctx)
}

pub(super) fn on_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    let (main, until) = (m.children(node)[MAIN], m.children(node)[UNTIL]);
    if m.ready(until, state, ctx) {
        m.fire(until, state, ctx);
        m.clear(main, state);
    } else {
        // Then the main trigger is ready; the until trigger keeps its data.
        m.fire(main, state, ctx);
    }
    update_finished(m, node, state);
}

fn update_finished(m: &TriggerStateMachine, node: usize, state: &mut TriggerState) {
    let any_finished = m.children(node).iter().any(|&c| state.finished(c));
    state.set_finished(node, any_finished);
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use tidewater::Trigger;

    /// Beam's `testActualFiresAndFinishes`.
    #[test]
    fn main_fires_and_finishes() {
        let mut t = Tester::new(
            Trigger::after_count(2).or_finally(Trigger::after_count(100)),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        assert!(!t.is_finished(&w));
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    /// Beam's `testActualFiresOnly`.
    #[test]
    fn main_fires_only() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_count(2)).or_finally(Trigger::after_count(100)),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        assert!(!t.is_finished(&w));
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.is_finished(&w));
        t.inject(&[3, 4]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.is_finished(&w));
    }

    /// Beam's `testActualFiresButUntilFinishes`: the until count spans panes.
    #[test]
    fn main_fires_then_until_finishes() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_count(2)).or_finally(Trigger::after_count(3)),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        assert!(!t.is_finished(&w));
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.is_finished(&w));
        t.inject(&[3]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    #[test]
    fn until_the_watermark() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_count(10)).or_finally(Trigger::after_watermark()),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.inject(&[1, 2]);
        assert!(!t.should_fire(&w));
        t.advance_watermark(10);
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
        // The main trigger was cleared, nothing is pending.
        assert_eq!(t.state(&w).nodes[2].count, 0);
    }

    /// Beam's `testShouldFireAfterMerge`.
    #[test]
    fn should_fire_after_merge() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_count(5).or_finally(Trigger::after_watermark()),
                Trigger::repeatedly(Trigger::after_count(1)),
            ]),
            WindowFn::Sessions(10),
        );

        // Finish the or_finally in the first window.
        t.inject(&[1]);
        let first = iw(1, 11);
        assert!(!t.should_fire(&first));
        t.advance_watermark(11);
        assert!(t.should_fire(&first));
        t.fire_if_should_fire(&first);

        t.inject(&[5]);
        let second = iw(5, 15);
        assert!(!t.should_fire(&second));

        // Were the merged window on the second sub-trigger, it would be ready.
        t.merge_windows();
        let merged = iw(1, 15);
        assert!(!t.should_fire(&merged));

        // More elements make the main trigger ready.
        t.inject(&[1, 2, 3, 4, 5]);
        t.merge_windows();
        assert!(t.should_fire(&merged));
    }
}
