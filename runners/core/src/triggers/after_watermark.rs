//! `Trigger::AfterWatermark` (Beam's `AfterWatermarkStateMachine`).
//!
//! Without early or late firings (Beam's `FromEndOfWindow`): fires once when the
//! watermark reaches the end of the window, then finishes.
//!
//! With them (Beam's `AfterWatermarkEarlyAndLate`; child 0 is the early trigger, child 1
//! the late one): the early trigger fires repeatedly until the end of the window, then
//! the on-time pane fires once, then the late trigger fires repeatedly. Without a late
//! trigger it finishes after the on-time pane. The early trigger's finished bit records
//! the move to the late phase.
//!
//! One deviation from Beam Java: to re-arm the early or late trigger after it fired,
//! Beam clears its state and unsets its own finished bit only, which leaves the bits of
//! its descendants set (an early `AfterFirst(AfterCount(5), ...)` would then be ready
//! on every evaluation after its first firing, the bug Beam fixed in `Repeatedly` by
//! resetting the whole subtree). Here the sub-trigger's whole subtree is reset.

use super::{finished_in_all, TriggerContext, TriggerState, TriggerStateMachine};
use tidewater::Timestamp;

pub(super) const EARLY: usize = 0;
pub(super) const LATE: usize = 1;

// Plain AfterWatermark.pastEndOfWindow().

pub(super) fn on_element(ctx: &mut TriggerContext<'_>) {
    // The timer may already have passed, in which case it fires at once.
    ctx.set_end_of_window_timer();
}

pub(super) fn on_merge(
    node: usize,
    merging: &[TriggerState],
    result: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    // Still active in any merging window: active in the merged one, since pending
    // elements have not fired yet. Finished in all: active again only if the merged
    // window ends later than the watermark. The reducer removes the end-of-window
    // timers of the merged-away windows.
    let finished = finished_in_all(merging, node) && ctx.end_of_window_reached();
    result.set_finished(node, finished);
}

pub(super) fn should_fire(ctx: &TriggerContext<'_>) -> bool {
    ctx.end_of_window_reached()
}

pub(super) fn on_fire(node: usize, state: &mut TriggerState) {
    state.set_finished(node, true);
}

// With early and/or late firings.

fn early(m: &TriggerStateMachine, node: usize) -> usize {
    m.children(node)[EARLY]
}

fn late(m: &TriggerStateMachine, node: usize) -> Option<usize> {
    m.children(node).get(LATE).copied()
}

pub(super) fn early_and_late_on_element(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ts: Timestamp,
    ctx: &mut TriggerContext<'_>,
) {
    ctx.set_end_of_window_timer();
    if !m.is_merging() {
        // Without merges only the current phase's trigger needs the element.
        if let Some(current) = m.first_unfinished_child(node, state) {
            m.element(current, state, ts, ctx);
        }
    } else {
        // A merge may move the window back to the early phase: keep both up to date.
        for &child in m.children(node) {
            m.element(child, state, ts, ctx);
        }
    }
}

pub(super) fn early_and_late_on_merge(
    m: &TriggerStateMachine,
    node: usize,
    merging: &[TriggerState],
    result: &mut TriggerState,
    ctx: &mut TriggerContext<'_>,
) {
    let early = early(m, node);
    if !finished_in_all(merging, early) || !ctx.end_of_window_reached() {
        // Still (or again) in the early phase: pending elements of some merging window
        // have not had their on-time pane yet.
        m.merge(early, merging, result, ctx);
        result.set_finished(early, false);
        if let Some(late) = late(m, node) {
            m.reset_tree(late, result);
        }
    } else {
        // The early phase and the on-time pane are done for good.
        result.set_finished(early, true);
        if let Some(late) = late(m, node) {
            m.merge(late, merging, result, ctx);
        }
    }
}

pub(super) fn early_and_late_should_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &TriggerState,
    ctx: &TriggerContext<'_>,
) -> bool {
    let early = early(m, node);
    if !state.finished(early) {
        // Early phase: fire for the early trigger, or on time at the end of the window.
        m.ready(early, state, ctx) || ctx.end_of_window_reached()
    } else if let Some(late) = late(m, node) {
        m.ready(late, state, ctx)
    } else {
        false
    }
}

pub(super) fn early_and_late_on_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    let early = early(m, node);
    if !state.finished(early) {
        if !ctx.end_of_window_reached() {
            // An early pane; the early trigger repeats implicitly.
            m.fire(early, state, ctx);
            m.reset_tree(early, state);
        } else {
            // The on-time pane: the early phase ends, the late one starts afresh (its
            // trigger ran in parallel under merging).
            if m.ready(early, state, ctx) {
                m.fire(early, state, ctx);
            }
            m.reset_tree(early, state);
            state.set_finished(early, true);
            match late(m, node) {
                None => state.set_finished(node, true),
                Some(late) => m.reset_tree(late, state),
            }
        }
    } else if let Some(late) = late(m, node) {
        // A late pane; the late trigger repeats implicitly.
        m.fire(late, state, ctx);
        m.reset_tree(late, state);
    } else {
        state.set_finished(node, true);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use super::super::TimeDomain;
    use tidewater::{Timestamp, Trigger};

    #[test]
    fn fires_once_at_the_end_of_the_window_and_finishes() {
        let mut t = Tester::new(Trigger::after_watermark(), WindowFn::Fixed(10));
        t.inject(&[1, 2]);
        let w = iw(0, 10);
        assert_eq!(
            t.take_timers(),
            vec![(w.clone(), TimeDomain::EventTime, Timestamp(9))]
        );
        // The watermark at the timer, the max timestamp 9: not yet; past it: fires.
        t.advance_watermark(9);
        assert!(!t.should_fire(&w));
        t.advance_watermark(10);
        assert!(t.should_fire(&w));
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
        // Late data for the closed window is dropped.
        t.inject(&[3]);
        assert!(!t.should_fire(&w));
    }

    #[test]
    fn no_timer_once_the_end_of_the_window_is_reached() {
        let mut t = Tester::new(Trigger::after_watermark(), WindowFn::Fixed(10));
        t.advance_watermark(10);
        t.inject(&[1]);
        assert!(t.take_timers().is_empty());
        assert!(t.should_fire(&iw(0, 10)));
    }

    /// Beam's `testEarlyAndAtWatermark`, with AfterCount(2) for the mocked early trigger.
    #[test]
    fn early_and_at_watermark() {
        let mut t = Tester::new(
            Trigger::after_watermark().with_early_firings(Trigger::after_count(2)),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1]);
        assert_eq!(
            t.take_timers(),
            vec![(w.clone(), TimeDomain::EventTime, Timestamp(99))]
        );
        assert!(!t.should_fire(&w));
        t.inject(&[2]);
        assert!(t.should_fire(&w));
        assert!(t.fire_if_should_fire(&w)); // early
        assert!(!t.is_finished(&w));
        // The early trigger repeats: its count starts over.
        t.inject(&[3]);
        assert!(!t.should_fire(&w));
        t.inject(&[4]);
        assert!(t.fire_if_should_fire(&w)); // early again
        assert!(!t.is_finished(&w));

        // On time, even with no new elements; then finished.
        t.advance_watermark(100);
        assert!(t.should_fire(&w));
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
    }

    /// Beam's `testAtWatermarkAndLate`.
    #[test]
    fn at_watermark_and_late() {
        let mut t = Tester::new(
            Trigger::after_watermark().with_late_firings(Trigger::after_count(1)),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1]);
        // No early firings: the early trigger is Never.
        assert!(!t.should_fire(&w));
        assert!(!t.fire_if_should_fire(&w));
        assert!(!t.is_finished(&w));

        t.advance_watermark(100);
        assert!(t.should_fire(&w));
        assert!(t.fire_if_should_fire(&w)); // on time
        assert!(!t.is_finished(&w));

        // Late firings, one per late element, forever.
        assert!(!t.should_fire(&w));
        for ts in [5, 6, 7] {
            t.inject(&[ts]);
            assert!(t.should_fire(&w));
            assert!(t.fire_if_should_fire(&w));
            assert!(!t.should_fire(&w));
            assert!(!t.is_finished(&w));
        }
    }

    /// Beam's `testEarlyAndAtWatermarkAndLate`.
    #[test]
    fn early_at_watermark_and_late() {
        let mut t = Tester::new(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_count(2))
                .with_late_firings(Trigger::after_count(3)),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1, 2]);
        assert!(t.fire_if_should_fire(&w)); // early
        t.inject(&[3]);
        assert!(!t.should_fire(&w));

        t.advance_watermark(100);
        assert!(t.fire_if_should_fire(&w)); // on time
        assert!(!t.is_finished(&w));

        // The late trigger starts from zero after the on-time pane.
        t.inject(&[4, 5]);
        assert!(!t.should_fire(&w));
        t.inject(&[6]);
        assert!(t.fire_if_should_fire(&w)); // late
        assert!(!t.is_finished(&w));
        t.inject(&[7, 8]);
        assert!(!t.should_fire(&w));
        t.inject(&[9]);
        assert!(t.fire_if_should_fire(&w));
        assert!(!t.is_finished(&w));
    }

    #[test]
    fn on_time_pane_also_consumes_a_ready_early_trigger() {
        let mut t = Tester::new(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_count(1))
                .with_late_firings(Trigger::after_count(2)),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.advance_watermark(10);
        t.inject(&[1]);
        assert!(t.fire_if_should_fire(&w)); // on time, not early
                                            // Now in the late phase: one element is not enough for AfterCount(2).
        t.inject(&[2]);
        assert!(!t.should_fire(&w));
        t.inject(&[3]);
        assert!(t.should_fire(&w));
    }

    #[test]
    fn early_processing_time_firings_then_on_time() {
        let mut t = Tester::new(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_processing_time().plus_delay_of(10)),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.advance_processing_time(1_000);
        t.inject(&[1]);
        assert_eq!(
            t.take_timers(),
            vec![
                (w.clone(), TimeDomain::EventTime, Timestamp(99)),
                (w.clone(), TimeDomain::ProcessingTime, Timestamp(1_010))
            ]
        );
        // At the target: not yet; past it: an early pane.
        t.advance_processing_time(1_010);
        assert!(!t.should_fire(&w));
        t.advance_processing_time(1_011);
        assert!(t.fire_if_should_fire(&w));
        // Re-armed: nothing until the next element, which sets a new delay.
        t.advance_processing_time(2_000);
        assert!(!t.should_fire(&w));
        t.inject(&[2]);
        assert_eq!(
            t.take_timers(),
            vec![
                (w.clone(), TimeDomain::EventTime, Timestamp(99)),
                (w.clone(), TimeDomain::ProcessingTime, Timestamp(2_010))
            ]
        );
        assert!(!t.should_fire(&w));
        t.advance_watermark(100);
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
    }

    /// The deviation from Beam: a composite early trigger is re-armed as a whole, so an
    /// AfterFirst does not stay ready after its first firing.
    #[test]
    fn composite_early_trigger_is_reset_after_each_early_pane() {
        let mut t = Tester::new(
            Trigger::after_watermark().with_early_firings(Trigger::after_first(vec![
                Trigger::after_count(3),
                Trigger::after_processing_time().plus_delay_of(1_000).into(),
            ])),
            WindowFn::Fixed(100),
        );
        let w = iw(0, 100);
        t.inject(&[1, 2, 3]);
        assert!(t.fire_if_should_fire(&w));
        t.inject(&[4]);
        assert!(
            !t.should_fire(&w),
            "the early AfterFirst must wait for 3 new elements again"
        );
        t.inject(&[5, 6]);
        assert!(t.should_fire(&w));
    }

    #[test]
    fn composite_late_trigger_is_reset_after_each_late_pane() {
        let mut t = Tester::new(
            Trigger::after_watermark().with_late_firings(Trigger::after_all(vec![
                Trigger::after_count(2),
                Trigger::after_processing_time().into(),
            ])),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.advance_processing_time(0);
        t.inject(&[1]);
        t.advance_watermark(10);
        assert!(t.fire_if_should_fire(&w)); // on time
        t.inject(&[2, 3]); // the AfterProcessingTime's target: 0
        t.advance_processing_time(1);
        assert!(t.fire_if_should_fire(&w)); // late
        t.inject(&[4]); // the AfterProcessingTime's target: 1
        t.advance_processing_time(2);
        assert!(
            !t.should_fire(&w),
            "the late AfterAll must see 2 new elements again"
        );
        t.inject(&[5]);
        assert!(t.should_fire(&w));
    }

    /// Beam's `testOnMergeAlreadyFinished`.
    #[test]
    fn merge_of_windows_finished_past_their_end_stays_finished() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_watermark().into(),
                Trigger::repeatedly(Trigger::after_count(1)),
            ]),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[5]);
        let (first, second, merged) = (iw(1, 11), iw(5, 15), iw(1, 15));

        // Finish the AfterWatermark in both windows.
        t.advance_watermark(15);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        t.fire_if_should_fire(&first);
        t.fire_if_should_fire(&second);

        // Both on the second trigger.
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));
        t.inject(&[1]);
        t.inject(&[5]);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        t.fire_if_should_fire(&first);
        t.fire_if_should_fire(&second);

        // Merging leaves the AfterWatermark finished: still on the second trigger.
        t.merge_windows();
        assert!(!t.should_fire(&merged));
        t.inject(&[1]);
        assert!(t.should_fire(&merged));
    }

    /// Beam's `testOnMergeRewinds`.
    #[test]
    fn merge_rewinds_to_unfinished_when_the_merged_window_ends_later() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_watermark().into(),
                Trigger::repeatedly(Trigger::after_count(1)),
            ]),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[5]);
        let (first, second, merged) = (iw(1, 11), iw(5, 15), iw(1, 15));

        // Finish the AfterWatermark in the first window only.
        t.advance_watermark(11);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        t.fire_if_should_fire(&first);

        assert!(!t.should_fire(&first));
        t.inject(&[1]);
        assert!(t.should_fire(&first));
        t.fire_if_should_fire(&first);

        // The merge re-activates the watermark trigger.
        t.merge_windows();
        assert!(!t.should_fire(&merged));
        t.inject(&[1]);
        assert!(!t.should_fire(&merged));
        t.advance_watermark(15);
        assert!(t.should_fire(&merged));
    }

    /// Beam's `testEarlyAndLateOnMergeAlreadyFinished`.
    #[test]
    fn early_and_late_merge_of_late_phase_windows_stays_late() {
        let mut t = Tester::new(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_count(100))
                .with_late_firings(Trigger::after_count(1)),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[5]);
        let (first, second, merged) = (iw(1, 11), iw(5, 15), iw(1, 15));

        t.advance_watermark(15);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        t.fire_if_should_fire(&first);
        t.fire_if_should_fire(&second);

        // In the late phase.
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));
        t.inject(&[1]);
        t.inject(&[5]);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        t.fire_if_should_fire(&first);
        t.fire_if_should_fire(&second);

        // Merging leaves it in the late phase.
        t.merge_windows();
        assert!(!t.should_fire(&merged));
        t.inject(&[1]);
        assert!(t.should_fire(&merged));
    }

    /// Beam's `testEarlyAndLateOnMergeRewinds`.
    #[test]
    fn early_and_late_merge_rewinds_to_the_early_phase() {
        let mut t = Tester::new(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_count(100))
                .with_late_firings(Trigger::after_count(1)),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[5]);
        let (first, second, merged) = (iw(1, 11), iw(5, 15), iw(1, 15));

        t.advance_watermark(11);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        t.fire_if_should_fire(&first);

        // The first window is in the late phase.
        assert!(!t.should_fire(&first));
        t.inject(&[1]);
        assert!(t.should_fire(&first));
        t.fire_if_should_fire(&first);

        // The merge re-activates the early phase: one element does not fire.
        t.merge_windows();
        assert!(!t.should_fire(&merged));
        t.inject(&[1]);
        assert!(!t.should_fire(&merged));

        // And the watermark fires it on time again.
        t.advance_watermark(15);
        assert!(t.should_fire(&merged));
    }

    #[test]
    fn early_and_late_merge_sums_the_early_counts() {
        let mut t = Tester::new(
            Trigger::after_watermark()
                .with_early_firings(Trigger::after_count(3))
                .with_late_firings(Trigger::after_count(1)),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[5]);
        assert!(!t.should_fire(&iw(1, 11)));
        assert!(!t.should_fire(&iw(5, 15)));
        t.merge_windows();
        let merged = iw(1, 15);
        assert!(!t.should_fire(&merged));
        t.inject(&[1]);
        assert!(t.should_fire(&merged));
        assert!(t.fire_if_should_fire(&merged)); // early
        assert!(!t.is_finished(&merged));
    }
}
