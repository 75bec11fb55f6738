//! `Trigger::AfterEach` (Beam's `AfterEachStateMachine`): runs its sub-triggers in
//! order, firing whenever the current one fires and moving to the next when it
//! finishes; finishes after the last.
//!
//! With a merging WindowFn every sub-trigger sees every element (a merge may revive an
//! earlier one) and all of them are cleared whenever the AfterEach fires; without,
//! only the current one runs. As in Beam, this changes results for sub-triggers that
//! keep data across firings (an `or_finally` condition).

use super::{TriggerContext, TriggerState, TriggerStateMachine};
use tidewater::Timestamp;

pub(super) fn on_element(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ts: Timestamp,
    ctx: &mut TriggerContext<'_>,
) {
    if !m.is_merging() {
        if let Some(current) = m.first_unfinished_child(node, state) {
            m.element(current, state, ts, ctx);
        }
    } else {
        // Even finished sub-triggers may be revived by a merge and need their state.
        for &child in m.children(node) {
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
    // A sub-trigger that is no longer finished after the merge becomes the current one
    // again; the ones after it have not started (they were cleared when it fired).
    let mut prior_all_finished = true;
    for &child in m.children(node) {
        if prior_all_finished {
            m.merge(child, merging, result, ctx);
            prior_all_finished &= result.finished(child);
        } else {
            m.clear(child, result);
        }
    }
    update_finished(m, node, result);
}

pub(super) fn should_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &TriggerState,
    ctx: &TriggerContext<'_>,
) -> bool {
    m.first_unfinished_child(node, state)
        .is_some_and(|current| m.ready(current, state, ctx))
}

pub(super) fn on_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    if let Some(current) = m.first_unfinished_child(node, state) {
        m.fire(current, state, ctx);
    }
    if m.is_merging() {
        // All sub-triggers ran in parallel for this pane, which is now gone.
        for &child in m.children(node) {
            m.clear(child, state);
        }
    }
    update_finished(m, node, state);
}

fn update_finished(m: &TriggerStateMachine, node: usize, state: &mut TriggerState) {
    let finished = m.first_unfinished_child(node, state).is_none();
    state.set_finished(node, finished);
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use tidewater::Trigger;

    fn in_sequence_trigger() -> Trigger {
        Trigger::after_each(vec![
            Trigger::repeatedly(Trigger::after_count(2)).or_finally(Trigger::after_count(3)),
            Trigger::repeatedly(Trigger::after_count(5)).or_finally(Trigger::after_watermark()),
        ])
    }

    /// Beam's `testAfterEachInSequence`.
    #[test]
    fn in_sequence() {
        let mut t = Tester::new(in_sequence_trigger(), WindowFn::Fixed(10));
        let w = iw(0, 10);

        // AfterCount(2) not ready.
        t.inject(&[1]);
        assert!(!t.should_fire(&w));

        // AfterCount(2) ready, not finished.
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.is_finished(&w));

        // or_finally(AfterCount(3)) ready and finishes the first.
        t.inject(&[1, 2, 3]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.is_finished(&w));

        // Now the second: four elements would have fired and finished the first.
        assert!(!t.should_fire(&w));
        t.inject(&[1, 2, 3, 4]);
        assert!(!t.should_fire(&w));

        t.inject(&[5]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.is_finished(&w));

        // The watermark finishes the whole thing.
        t.advance_watermark(10);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
    }

    /// Under a merging WindowFn Beam clears every sub-trigger when AfterEach fires,
    /// including the `until` count of an or_finally, which then needs three elements in
    /// one pane; without merging the `until` count carries across the panes.
    #[test]
    fn merging_clears_all_sub_triggers_on_fire() {
        let trigger = Trigger::after_each(vec![
            Trigger::repeatedly(Trigger::after_count(2)).or_finally(Trigger::after_count(3)),
            Trigger::after_count(100),
        ]);

        let mut fixed = Tester::new(trigger.clone(), WindowFn::Fixed(100));
        let w = iw(0, 100);
        fixed.inject(&[1, 2]);
        assert!(fixed.fire_if_should_fire(&w)); // Repeatedly(AfterCount(2)); until at 2
        fixed.inject(&[3]);
        assert!(fixed.fire_if_should_fire(&w)); // until reached 3: the first is done
        fixed.inject(&[4, 5]);
        assert!(!fixed.should_fire(&w), "now on AfterCount(100)");

        // One session window (no merge happens), same elements.
        let mut sessions = Tester::new(trigger, WindowFn::Sessions(1_000));
        let s = iw(1, 1_001);
        sessions.inject(&[1, 1]);
        assert!(sessions.fire_if_should_fire(&s));
        sessions.inject(&[1]);
        assert!(
            !sessions.should_fire(&s),
            "the until count was cleared by the firing"
        );
        sessions.inject(&[1]);
        assert!(sessions.fire_if_should_fire(&s)); // Repeatedly(AfterCount(2)) again
        sessions.inject(&[1, 1]);
        assert!(sessions.fire_if_should_fire(&s)); // two more: still the first sub-trigger
        assert!(!sessions.is_finished(&s));
    }

    #[test]
    fn finishes_after_the_last_once_trigger() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_count(1),
                Trigger::after_count(2),
                Trigger::after_watermark().into(),
            ]),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.inject(&[1]);
        assert!(t.fire_if_should_fire(&w));
        t.inject(&[2]);
        assert!(!t.should_fire(&w), "the second counts from zero");
        t.inject(&[3]);
        assert!(t.fire_if_should_fire(&w));
        assert!(!t.is_finished(&w));
        t.inject(&[4]);
        assert!(!t.should_fire(&w));
        t.advance_watermark(10);
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
    }

    #[test]
    fn merge_revives_an_earlier_sub_trigger() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_watermark().into(),
                Trigger::after_count(1),
            ]),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[30]);
        t.advance_watermark(11);
        assert!(t.fire_if_should_fire(&iw(1, 11)));
        // [1, 11) is on AfterCount(1) now.
        t.inject(&[1]);
        assert!(t.should_fire(&iw(1, 11)));
        // An element at 8 merges [1, 11) and [8, 18) into [1, 18), which ends after the
        // watermark: AfterWatermark is active again and AfterCount(1) not started.
        t.inject(&[8]);
        t.merge_windows();
        let merged = iw(1, 18);
        assert!(!t.should_fire(&merged));
        assert!(!t.is_finished(&merged));
        t.advance_watermark(18);
        assert!(t.should_fire(&merged));
    }
}
