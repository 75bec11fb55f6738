//! `Trigger::AfterAll` (Beam's `AfterAllStateMachine`): fires once every sub-trigger
//! is ready or has finished, then finishes. Elements go only to the sub-triggers that
//! are not finished; merging finishes it only if every sub-trigger is finished after
//! the merge.

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
        if !state.finished(child) {
            m.element(child, state, ts, ctx);
        }
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
    let all_finished = m.children(node).iter().all(|&c| result.finished(c));
    result.set_finished(node, all_finished);
}

pub(super) fn should_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &TriggerState,
    ctx: &TriggerContext<'_>,
) -> bool {
    m.children(node)
        .iter()
        .all(|&c| state.finished(c) || m.ready(c, state, ctx))
}

pub(super) fn on_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    for &child in m.children(node) {
        m.fire(child, state, ctx);
    }
    state.set_finished(node, true);
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use tidewater::Trigger;

    /// Beam's `testT1FiresFirst`.
    #[test]
    fn first_ready_first() {
        let mut t = Tester::new(
            Trigger::after_all(vec![Trigger::after_count(1), Trigger::after_count(2)]),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    /// Beam's `testT2FiresFirst`.
    #[test]
    fn second_ready_first() {
        let mut t = Tester::new(
            Trigger::after_all(vec![Trigger::after_count(2), Trigger::after_count(1)]),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    #[test]
    fn waits_for_the_watermark_and_a_count() {
        let mut t = Tester::new(
            Trigger::after_all(vec![
                Trigger::after_watermark().into(),
                Trigger::after_count(2),
            ]),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.inject(&[1, 2]);
        assert!(!t.should_fire(&w));
        t.advance_watermark(10);
        assert!(t.should_fire(&w));
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
    }

    #[test]
    fn elements_go_only_to_unfinished_sub_triggers() {
        use super::super::{TriggerContext, TriggerStateMachine};
        use tidewater::Timestamp;
        let m = TriggerStateMachine::new(&Trigger::after_all(vec![
            Trigger::after_count(1),
            Trigger::after_count(3),
        ]));
        let mut state = m.initial_state();
        state.set_finished(1, true);
        let mut timers = Vec::new();
        let mut ctx = TriggerContext::new(iw(0, 10), Timestamp::MIN, Timestamp::MIN, &mut timers);
        m.on_element(&mut state, Timestamp(1), &mut ctx);
        assert_eq!((state.nodes[1].count, state.nodes[2].count), (0, 1));
        // The finished sub-trigger counts as ready.
        assert!(!m.should_fire(&state, &ctx));
        m.on_element(&mut state, Timestamp(2), &mut ctx);
        m.on_element(&mut state, Timestamp(3), &mut ctx);
        assert!(m.should_fire(&state, &ctx));
    }

    /// Beam's `testOnMergeRewinds`: the AfterAll unsets its finished bit when a merge
    /// makes it unfinished.
    #[test]
    fn merge_rewinds() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_all(vec![
                    Trigger::after_watermark().into(),
                    Trigger::after_count(1),
                ]),
                Trigger::repeatedly(Trigger::after_count(1)),
            ]),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        let first = iw(1, 11);
        t.inject(&[5]);
        let second = iw(5, 15);

        // Finish the AfterAll in the first window.
        t.advance_watermark(11);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        t.fire_if_should_fire(&first);

        // Merged: the AfterAll is not finished.
        t.merge_windows();
        let merged = iw(1, 15);
        assert!(!t.is_finished(&merged));
        assert!(
            !t.state(&merged).finished(1),
            "the AfterAll itself is unfinished"
        );

        // Back on the first sub-trigger: an element does not fire it.
        t.inject(&[3]);
        t.merge_windows();
        assert!(!t.should_fire(&merged));

        // Fire the AfterAll in the merged window.
        t.advance_watermark(15);
        assert!(t.should_fire(&merged));
        t.fire_if_should_fire(&merged);

        // Now on the second sub-trigger.
        t.inject(&[2]);
        t.merge_windows();
        assert!(t.should_fire(&merged));
        t.fire_if_should_fire(&merged);
        t.inject(&[2]);
        t.merge_windows();
        assert!(t.should_fire(&merged));
        t.fire_if_should_fire(&merged);
        assert!(!t.is_finished(&merged));
    }
}
