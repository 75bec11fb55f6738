//! `Trigger::Repeatedly` (Beam's `RepeatedlyStateMachine`): fires whenever its
//! sub-trigger fires, and when the sub-trigger finishes, resets its whole subtree
//! (finished bits and state) so it starts over. Never finishes by itself; combine with
//! `or_finally` to stop it.

use super::{TriggerContext, TriggerState, TriggerStateMachine};
use tidewater::Timestamp;

fn repeated(m: &TriggerStateMachine, node: usize) -> usize {
    m.children(node)[0]
}

pub(super) fn on_element(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ts: Timestamp,
    ctx: &mut TriggerContext<'_>,
) {
    m.element(repeated(m, node), state, ts, ctx);
}

pub(super) fn on_merge(
    m: &TriggerStateMachine,
    node: usize,
    merging: &[TriggerState],
    result: &mut TriggerState,
    ctx: &mut TriggerContext<'_>,
) {
    m.merge(repeated(m, node), merging, result, ctx);
}

pub(super) fn should_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &TriggerState,
    ctx: &TriggerContext<'_>,
) -> bool {
    m.ready(repeated(m, node), state, ctx)
}

pub(super) fn on_fire(
    m: &TriggerStateMachine,
    node: usize,
    state: &mut TriggerState,
    ctx: &TriggerContext<'_>,
) {
    let repeated = repeated(m, node);
    m.fire(repeated, state, ctx);
    if state.finished(repeated) {
        m.reset_tree(repeated, state);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use super::super::TimeDomain;
    use tidewater::{BoundedWindow, Timestamp, Trigger};

    const MINUTE: i64 = 60_000;

    #[test]
    fn fires_whenever_the_sub_trigger_fires() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_count(2)),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        for round in 0..3 {
            t.inject(&[1]);
            assert!(!t.should_fire(&w), "round {round}");
            t.inject(&[2]);
            assert!(t.should_fire(&w), "round {round}");
            assert!(t.fire_if_should_fire(&w));
            assert!(!t.is_finished(&w));
        }
    }

    /// Beam's `testShouldFireAfterMerge`.
    #[test]
    fn should_fire_after_merge() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_count(2)),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        assert!(!t.should_fire(&iw(1, 11)));
        t.inject(&[5]);
        assert!(!t.should_fire(&iw(5, 15)));
        t.merge_windows();
        assert!(t.should_fire(&iw(1, 15)));
    }

    /// Beam's `testRepeatedlyAfterFirstElementCount`.
    #[test]
    fn after_first_element_count() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_first(vec![
                Trigger::after_processing_time()
                    .plus_delay_of(15 * MINUTE)
                    .into(),
                Trigger::after_count(5),
            ])),
            WindowFn::Global,
        );
        let w = BoundedWindow::Global;
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        t.inject(&[2, 3, 4, 5]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.should_fire(&w));
        // The whole AfterFirst subtree was reset: 4 more elements are not enough.
        t.inject(&[6, 7, 8, 9]);
        assert!(!t.should_fire(&w));
        t.inject(&[10]);
        assert!(t.should_fire(&w));
    }

    /// Beam's `testRepeatedlyAfterFirstProcessingTime`.
    #[test]
    fn after_first_processing_time() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_first(vec![
                Trigger::after_processing_time()
                    .plus_delay_of(15 * MINUTE)
                    .into(),
                Trigger::after_count(5),
            ])),
            WindowFn::Global,
        );
        let w = BoundedWindow::Global;
        // Beam's tester starts the processing time at the minimum timestamp, so its 15
        // minutes are long past the target; here the element arrives at 0, which puts
        // the target at exactly 15 minutes.
        t.advance_processing_time(0);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        t.advance_processing_time(15 * MINUTE);
        assert!(!t.should_fire(&w), "not at the target itself");
        t.advance_processing_time(15 * MINUTE + 1);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.should_fire(&w));
    }

    /// Beam's `testRepeatedlyElementCount`.
    #[test]
    fn element_count() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_count(5)),
            WindowFn::Global,
        );
        let w = BoundedWindow::Global;
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        t.inject(&[2, 3, 4, 5]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.should_fire(&w));
    }

    /// Beam's `testRepeatedlyProcessingTime`, with the timers it requests.
    #[test]
    fn processing_time() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_processing_time().plus_delay_of(15 * MINUTE)),
            WindowFn::Global,
        );
        let w = BoundedWindow::Global;
        t.advance_processing_time(0);
        t.inject(&[1]);
        assert_eq!(
            t.take_timers(),
            vec![(
                w.clone(),
                TimeDomain::ProcessingTime,
                Timestamp(15 * MINUTE)
            )]
        );
        assert!(!t.should_fire(&w));
        // Beam's 15 minutes are long past its target, as its tester starts the processing
        // time at the minimum timestamp; here the target is exactly 15 minutes.
        t.advance_processing_time(15 * MINUTE);
        assert!(!t.should_fire(&w), "not at the target itself");
        t.advance_processing_time(15 * MINUTE + 1);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(!t.should_fire(&w));
        // The next pane's first element sets the next target.
        t.advance_processing_time(20 * MINUTE);
        t.inject(&[2]);
        assert_eq!(
            t.take_timers(),
            vec![(
                w.clone(),
                TimeDomain::ProcessingTime,
                Timestamp(35 * MINUTE)
            )]
        );
        assert!(!t.should_fire(&w));
    }

    #[test]
    fn repeated_watermark_fires_for_late_data_like_the_default_trigger() {
        let mut t = Tester::new(
            Trigger::repeatedly(Trigger::after_watermark()),
            WindowFn::Fixed(10),
        );
        let w = iw(0, 10);
        t.inject(&[1]);
        t.advance_watermark(10);
        assert!(t.fire_if_should_fire(&w));
        // The reset sub-trigger is immediately ready again, as Default is.
        assert!(t.should_fire(&w));
        assert!(!t.is_finished(&w));
    }
}
