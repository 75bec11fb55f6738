//! `Trigger::AfterCount` (Beam's `AfterPaneStateMachine.elementCountAtLeast`): counts
//! the elements of the pane, fires once the count reaches the threshold, then
//! finishes. Merging sums the counts, unless the trigger had finished in any merged
//! window: then the merged trigger is finished too.

use super::{finished_in_any, TriggerState};

pub(super) fn on_element(node: usize, state: &mut TriggerState) {
    state.nodes[node].count += 1;
}

pub(super) fn on_merge(node: usize, merging: &[TriggerState], result: &mut TriggerState) {
    // Enough elements already fired it in some window: finished in the merged one.
    if finished_in_any(merging, node) {
        result.set_finished(node, true);
        clear(node, result);
        return;
    }
    result.nodes[node].count = merging.iter().map(|s| s.nodes[node].count).sum();
}

pub(super) fn should_fire(threshold: u64, node: usize, state: &TriggerState) -> bool {
    state.nodes[node].count >= threshold
}

pub(super) fn on_fire(node: usize, state: &mut TriggerState) {
    clear(node, state);
    state.set_finished(node, true);
}

pub(super) fn clear(node: usize, state: &mut TriggerState) {
    state.nodes[node].count = 0;
}

#[cfg(test)]
mod tests {
    use super::super::tester::{iw, Tester, WindowFn};
    use tidewater::Trigger;

    /// Beam's `testAfterPaneElementCountFixedWindows`.
    #[test]
    fn fixed_windows() {
        let mut t = Tester::new(Trigger::after_count(2), WindowFn::Fixed(10));
        let w = iw(0, 10);
        t.inject(&[1]);
        assert!(!t.should_fire(&w));
        t.inject(&[2]);
        t.inject(&[11]);
        assert!(t.should_fire(&w));
        t.fire_if_should_fire(&w);
        assert!(t.is_finished(&w));
        // No leakage into the other window.
        assert!(!t.is_finished(&iw(10, 20)));
        assert!(!t.should_fire(&iw(10, 20)));
        assert!(t.take_timers().is_empty());
    }

    /// Beam's `testAfterPaneElementCountSessions`.
    #[test]
    fn sessions() {
        let mut t = Tester::new(Trigger::after_count(2), WindowFn::Sessions(10));
        t.inject(&[1, 2]);
        assert!(!t.should_fire(&iw(1, 11)));
        assert!(!t.should_fire(&iw(2, 12)));

        t.merge_windows();
        let merged = iw(1, 12);
        assert!(t.should_fire(&merged));
        t.fire_if_should_fire(&merged);
        assert!(t.is_finished(&merged));

        // The closed window is not around to merge with: a new FIRE_AND_FINISH.
        t.inject(&[7, 9]);
        t.merge_windows();
        let new_merged = iw(7, 19);
        assert!(t.should_fire(&new_merged));
        t.fire_if_should_fire(&new_merged);
        assert!(t.is_finished(&new_merged));
    }

    #[test]
    fn merge_with_a_window_where_it_finished_is_finished() {
        // Inside AfterEach the window stays open after the AfterCount finishes, so the
        // finished AfterCount takes part in the next merge.
        let mut t = Tester::new(
            Trigger::after_each(vec![Trigger::after_count(2), Trigger::after_count(3)]),
            WindowFn::Sessions(10),
        );
        t.inject(&[1, 1]);
        assert!(t.fire_if_should_fire(&iw(1, 11)));
        assert!(!t.is_finished(&iw(1, 11)));
        t.inject(&[5]);
        t.merge_windows();
        let merged = iw(1, 15);
        // On the second sub-trigger, which AfterEach cleared on firing: 0 + 1.
        assert!(!t.should_fire(&merged));
        // Elements of the windows merged away go to the merge result.
        t.inject(&[1, 5]);
        assert!(t.should_fire(&merged));
        assert!(t.fire_if_should_fire(&merged));
        assert!(t.is_finished(&merged));
    }
}
