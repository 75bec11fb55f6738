//! `Trigger::AfterProcessingTime` (Beam's `AfterProcessingTimeStateMachine` and its base
//! `AfterDelayFromFirstElementStateMachine`): the first element of a pane fixes a
//! target time — its processing time with the transforms applied in order — and a
//! processing-time timer is requested there; the trigger fires once the processing
//! time has reached the target, then finishes.
//!
//! Transforms: `Delay` adds its delay; `AlignTo { period, offset }` rounds up to the
//! next `offset + k * period`, leaving a time that is already aligned as it is (Beam's
//! `AlignFn`). Beam computes the remainder with Java's `%`, which overshoots by one
//! period for times before the offset; here the remainder is Euclidean, so those round
//! up to the next boundary too.
//!
//! Merging takes the earliest target of the merged windows and requests a timer there.
//! The timers of the merged-away windows are left to fire and be ignored.

use super::{TimeDomain, TriggerContext, TriggerState};
use tidewater::{TimeTransform, Timestamp};

/// The target time for a pane whose first element arrived at processing time `at`.
pub(super) fn target(transforms: &[TimeTransform], at: Timestamp) -> Timestamp {
    transforms.iter().fold(at, |t, transform| match *transform {
        TimeTransform::Delay { ms } => Timestamp(t.0.saturating_add(ms)),
        TimeTransform::AlignTo {
            period_ms,
            offset_ms,
        } => {
            if period_ms <= 0 {
                return t;
            }
            let since_boundary = (t.0 - offset_ms).rem_euclid(period_ms);
            if since_boundary == 0 {
                t
            } else {
                Timestamp(t.0.saturating_add(period_ms - since_boundary))
            }
        }
    })
}

pub(super) fn on_element(
    transforms: &[TimeTransform],
    node: usize,
    state: &mut TriggerState,
    ctx: &mut TriggerContext<'_>,
) {
    // Only the pane's first element counts: processing time only advances, so a later
    // target would never fire first.
    if state.nodes[node].delayed_until.is_some() {
        return;
    }
    let at = target(transforms, ctx.processing_time);
    state.nodes[node].delayed_until = Some(at);
    ctx.set_timer(TimeDomain::ProcessingTime, at);
}

pub(super) fn on_merge(
    node: usize,
    merging: &[TriggerState],
    result: &mut TriggerState,
    ctx: &mut TriggerContext<'_>,
) {
    // Beam: a merge result that is itself finished stays so and keeps no target. The
    // result starts as a new window here, so it never is.
    if result.finished(node) {
        result.nodes[node].delayed_until = None;
        return;
    }
    let earliest = merging
        .iter()
        .filter_map(|s| s.nodes[node].delayed_until)
        .min();
    result.nodes[node].delayed_until = earliest;
    if let Some(at) = earliest {
        ctx.set_timer(TimeDomain::ProcessingTime, at);
    }
}

pub(super) fn should_fire(node: usize, state: &TriggerState, ctx: &TriggerContext<'_>) -> bool {
    state.nodes[node]
        .delayed_until
        .is_some_and(|at| ctx.processing_time > at)
}

pub(super) fn on_fire(node: usize, state: &mut TriggerState) {
    clear(node, state);
    state.set_finished(node, true);
}

pub(super) fn clear(node: usize, state: &mut TriggerState) {
    state.nodes[node].delayed_until = None;
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use super::super::TimeDomain;
    use super::target;
    use tidewater::{TimeTransform, Timestamp, Trigger};

    fn delay(ms: i64) -> TimeTransform {
        TimeTransform::Delay { ms }
    }

    fn align(period_ms: i64, offset_ms: i64) -> TimeTransform {
        TimeTransform::AlignTo {
            period_ms,
            offset_ms,
        }
    }

    #[test]
    fn target_applies_transforms_in_order() {
        assert_eq!(target(&[], Timestamp(7)), Timestamp(7));
        assert_eq!(target(&[delay(5)], Timestamp(7)), Timestamp(12));
        // Rounds up to the next boundary...
        assert_eq!(target(&[align(10, 0)], Timestamp(7)), Timestamp(10));
        assert_eq!(target(&[align(10, 0)], Timestamp(11)), Timestamp(20));
        // ...but an aligned time stays where it is (Beam's AlignFn).
        assert_eq!(target(&[align(10, 0)], Timestamp(20)), Timestamp(20));
        // With an offset: boundaries at 3, 13, 23, ...
        assert_eq!(target(&[align(10, 3)], Timestamp(7)), Timestamp(13));
        assert_eq!(target(&[align(10, 3)], Timestamp(13)), Timestamp(13));
        assert_eq!(target(&[align(10, 3)], Timestamp(14)), Timestamp(23));
        // Before the offset (Beam's Java `%` would give 10 here, one period too far).
        assert_eq!(target(&[align(10, 3)], Timestamp(1)), Timestamp(3));
        assert_eq!(target(&[align(10, 0)], Timestamp(-3)), Timestamp(0));
        // Order matters.
        assert_eq!(
            target(&[delay(5), align(10, 0)], Timestamp(7)),
            Timestamp(20)
        );
        assert_eq!(
            target(&[align(10, 0), delay(5)], Timestamp(7)),
            Timestamp(15)
        );
        // No overflow at the end of time.
        assert_eq!(
            target(&[delay(i64::MAX)], Timestamp(1)),
            Timestamp(i64::MAX)
        );
    }

    /// Beam's `testAfterProcessingTimeFixedWindows`.
    #[test]
    fn fixed_windows() {
        let mut t = Tester::new(
            Trigger::after_processing_time().plus_delay_of(5),
            WindowFn::Fixed(10),
        );
        let (first, second) = (iw(0, 10), iw(10, 20));
        t.advance_processing_time(10);

        // Timer at 15.
        t.inject(&[1]);
        assert_eq!(
            t.take_timers(),
            vec![(first.clone(), TimeDomain::ProcessingTime, Timestamp(15))]
        );
        t.advance_processing_time(12);
        assert!(!t.should_fire(&first));

        // Elements in the next window: timer at 17 for them.
        t.inject(&[11, 12, 13]);
        assert_eq!(
            t.take_timers(),
            vec![(second.clone(), TimeDomain::ProcessingTime, Timestamp(17))]
        );
        assert!(!t.should_fire(&second));

        t.advance_processing_time(14);
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));

        // More elements in the first window change nothing: 15 still stands.
        t.inject(&[2, 3]);
        assert!(t.take_timers().is_empty());

        // At the target 15 itself: not yet.
        t.advance_processing_time(15);
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));

        // Past the first target: fires, finishing the first window.
        t.advance_processing_time(16);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        t.fire_if_should_fire(&first);
        assert!(t.is_finished(&first));

        t.advance_processing_time(18);
        assert!(t.should_fire(&second));
        t.fire_if_should_fire(&second);
        assert!(t.is_finished(&second));
    }

    #[test]
    fn aligned_to_a_period() {
        let mut t = Tester::new(
            Trigger::after_processing_time().aligned_to(100, 0),
            WindowFn::Global,
        );
        let w = tidewater::BoundedWindow::Global;
        t.advance_processing_time(1_234);
        t.inject(&[1]);
        assert_eq!(
            t.take_timers(),
            vec![(w.clone(), TimeDomain::ProcessingTime, Timestamp(1_300))]
        );
        // At the target: not yet; past it: fires.
        t.advance_processing_time(1_300);
        assert!(!t.should_fire(&w));
        t.advance_processing_time(1_301);
        assert!(t.fire_if_should_fire(&w));
        assert!(t.is_finished(&w));
    }

    /// Beam's `testAfterProcessingTimeWithMergingWindow`: the merged window waits for the
    /// earlier of the two targets.
    #[test]
    fn merging_takes_the_earliest_target() {
        let mut t = Tester::new(
            Trigger::after_processing_time().plus_delay_of(5),
            WindowFn::Sessions(10),
        );
        t.advance_processing_time(10);
        t.inject(&[1]); // in [1, 11), timer for 15
        assert!(!t.should_fire(&iw(1, 11)));

        t.advance_processing_time(12);
        t.inject(&[3]); // in [3, 13), timer for 17
        assert!(!t.should_fire(&iw(3, 13)));
        t.take_timers();

        t.merge_windows();
        let merged = iw(1, 13);
        assert_eq!(
            t.take_timers(),
            vec![(merged.clone(), TimeDomain::ProcessingTime, Timestamp(15))]
        );
        // Further elements do not move the target.
        t.inject(&[3]);
        assert!(t.take_timers().is_empty());

        // At the earlier target 15: not yet; past it (Beam's 16), though before the
        // later target 17: fires.
        t.advance_processing_time(15);
        assert!(!t.should_fire(&merged));
        t.advance_processing_time(16);
        assert!(t.should_fire(&merged));
        t.fire_if_should_fire(&merged);
        assert!(t.is_finished(&merged));
    }

    #[test]
    fn merging_windows_without_a_target_sets_no_timer() {
        let mut t = Tester::new(
            Trigger::after_each(vec![
                Trigger::after_count(1),
                Trigger::after_processing_time().plus_delay_of(5).into(),
            ]),
            WindowFn::Sessions(10),
        );
        t.inject(&[1]);
        t.inject(&[3]);
        t.fire_if_should_fire(&iw(1, 11));
        t.fire_if_should_fire(&iw(3, 13));
        t.take_timers();
        // AfterEach under merging clears every sub-trigger when it fires: no target left.
        t.merge_windows();
        assert!(t.take_timers().is_empty());
        t.advance_processing_time(1_000_000);
        assert!(!t.should_fire(&iw(1, 13)));
    }
}
