//! `Trigger::Default` (Beam's `DefaultTriggerStateMachine`): fires whenever the
//! watermark has passed the end of the window, forever — the same as
//! `Repeatedly(AfterWatermark)` without keeping any state. It never finishes, so every
//! late element fires another pane (within the allowed lateness).

use super::TriggerContext;

pub(super) fn on_element(ctx: &mut TriggerContext<'_>) {
    // Once the end of the window is reached we are ready to fire already.
    ctx.set_end_of_window_timer();
}

pub(super) fn on_merge(ctx: &mut TriggerContext<'_>) {
    ctx.set_end_of_window_timer();
}

pub(super) fn should_fire(ctx: &TriggerContext<'_>) -> bool {
    ctx.end_of_window_reached()
}

pub(super) fn on_fire() {}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use super::super::TimeDomain;
    use tidewater::{Timestamp, Trigger};

    #[test]
    fn fixed_windows() {
        let mut t = Tester::new(Trigger::Default, WindowFn::Fixed(100));
        t.inject(&[1, 101]);
        let (first, second) = (iw(0, 100), iw(100, 200));
        assert_eq!(
            t.take_timers(),
            vec![
                (first.clone(), TimeDomain::EventTime, Timestamp(99)),
                (second.clone(), TimeDomain::EventTime, Timestamp(199))
            ]
        );

        // The watermark at the end of [0, 100) (its max timestamp 99): not ready yet.
        t.advance_watermark(99);
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));

        // Past the end of [0, 100): ready.
        t.advance_watermark(100);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));

        // Fired, but the first window may fire again.
        t.fire_if_should_fire(&first);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));

        t.advance_watermark(200);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        assert!(!t.is_finished(&first));
        assert!(!t.is_finished(&second));
    }

    #[test]
    fn late_elements_fire_again_without_a_timer() {
        let mut t = Tester::new(Trigger::Default, WindowFn::Fixed(10));
        t.inject(&[1]);
        t.advance_watermark(50);
        assert!(t.fire_if_should_fire(&iw(0, 10)));
        t.take_timers();
        // A late element: ready at once, no timer needed.
        t.inject(&[2]);
        assert!(t.take_timers().is_empty());
        assert!(t.fire_if_should_fire(&iw(0, 10)));
        assert!(!t.is_finished(&iw(0, 10)));
    }

    #[test]
    fn sliding_windows() {
        let mut t = Tester::new(
            Trigger::Default,
            WindowFn::Sliding {
                size: 100,
                period: 50,
            },
        );
        t.inject(&[1, 50]);
        let (first, second, third) = (iw(-50, 50), iw(0, 100), iw(50, 150));
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));
        assert!(!t.should_fire(&third));

        // At 50, past the end of [-50, 50): the first is ready, and stays ready after
        // firing.
        t.advance_watermark(50);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        assert!(!t.should_fire(&third));
        t.fire_if_should_fire(&first);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));

        // At 99, the max timestamp of [0, 100): still only the first.
        t.advance_watermark(99);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        assert!(!t.should_fire(&third));

        // At 100: the first and the second.
        t.advance_watermark(100);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        assert!(!t.should_fire(&third));
        t.fire_if_should_fire(&first);
        assert!(!t.is_finished(&first));
        assert!(!t.is_finished(&second));
        assert!(!t.is_finished(&third));
    }

    #[test]
    fn sessions() {
        let mut t = Tester::new(Trigger::Default, WindowFn::Sessions(100));
        t.inject(&[1, 50]);
        t.take_timers();
        t.merge_windows();
        let (first, second, merged) = (iw(1, 101), iw(50, 150), iw(1, 150));
        // The merge requests the end-of-window timer of the merged window.
        assert_eq!(
            t.take_timers(),
            vec![(merged.clone(), TimeDomain::EventTime, Timestamp(149))]
        );

        // At 100, the max timestamp of [1, 101): not ready in any window yet.
        t.advance_watermark(100);
        assert!(!t.should_fire(&first));
        assert!(!t.should_fire(&second));
        assert!(!t.should_fire(&merged));

        // The first window is "ready": the caller owns knowledge of which windows are
        // merged away.
        t.advance_watermark(149);
        assert!(t.should_fire(&first));
        assert!(!t.should_fire(&second));
        assert!(!t.should_fire(&merged));

        // Past 149, the max timestamp of [50, 150) and [1, 150): ready in all.
        t.advance_watermark(150);
        assert!(t.should_fire(&first));
        assert!(t.should_fire(&second));
        assert!(t.should_fire(&merged));

        // It repeats.
        t.fire_if_should_fire(&merged);
        assert!(t.should_fire(&merged));
        assert!(!t.is_finished(&merged));
    }

    #[test]
    fn merge_past_the_end_of_the_window_requests_no_timer() {
        let mut t = Tester::new(Trigger::Default, WindowFn::Sessions(10));
        t.inject(&[1, 5]);
        t.take_timers();
        t.advance_watermark(20);
        t.merge_windows();
        assert!(t.take_timers().is_empty());
        assert!(t.should_fire(&iw(1, 15)));
    }
}
