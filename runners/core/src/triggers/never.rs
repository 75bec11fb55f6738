//! `Trigger::Never` (Beam's `NeverStateMachine`): never fires and never finishes; the
//! reducer emits only the final pane when the window expires (with `EMIT_ALWAYS`
//! closing) or nothing.

pub(super) fn on_element() {}

pub(super) fn on_merge() {}

pub(super) fn should_fire() -> bool {
    false
}

/// Unreachable through the public interface (should_fire is always false). Beam throws
/// here; a no-op keeps a composite's blanket on_fire (AfterAll fires every child)
/// harmless.
pub(super) fn on_fire() {}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use tidewater::Trigger;

    #[test]
    fn never_fires_and_never_finishes() {
        let mut t = Tester::new(Trigger::Never, WindowFn::Fixed(10));
        t.inject(&[1, 2, 3]);
        assert!(!t.should_fire(&iw(0, 10)));
        t.advance_watermark(1_000);
        t.advance_processing_time(1_000);
        assert!(!t.should_fire(&iw(0, 10)));
        assert!(!t.fire_if_should_fire(&iw(0, 10)));
        assert!(!t.is_finished(&iw(0, 10)));
        assert!(t.take_timers().is_empty());
    }

    #[test]
    fn never_in_the_global_window() {
        let mut t = Tester::new(Trigger::Never, WindowFn::Global);
        t.inject(&[1]);
        t.advance_watermark(tidewater::Timestamp::MAX.0);
        assert!(!t.should_fire(&tidewater::BoundedWindow::Global));
        assert!(!t.is_finished(&tidewater::BoundedWindow::Global));
    }
}
