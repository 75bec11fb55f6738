//! Which state a changed pipeline takes over (issue 36, `compat.rs`), on real plans:
//! a stateless change (a map added, another closure, another allowed lateness) restores
//! every stateful part; another window fn makes the grouping incompatible, naming it;
//! a renamed grouping is dropped (refused unless allowed) and its new name starts
//! empty.

use tidewater::{Pipeline, PipelineOptions, Window, WindowFn};
use tidewater_runners_core::compat::{compatibility, state_ids};
use tidewater_runners_core::translate;

fn plan(
    extra_map: bool,
    size_ms: i64,
    lateness_ms: i64,
    group: &str,
) -> Vec<tidewater_runners_core::compat::StateId> {
    let p = Pipeline::new(PipelineOptions::default());
    let mut pairs = p
        .create("In", vec![("k".to_string(), 1i64)])
        .map("Double", |(k, v): (String, i64)| (k, v * 2));
    if extra_map {
        pairs = pairs.map("Triple", |(k, v): (String, i64)| (k, v * 3));
    }
    pairs
        .apply(
            "Fixed",
            Window::into(WindowFn::fixed(size_ms)).with_allowed_lateness(lateness_ms),
        )
        .group_by_key(group);
    state_ids(&translate(&p.to_plan().expect("plan")).expect("translates"))
}

#[test]
fn stateless_changes_restore_everything_and_a_changed_or_renamed_grouping_is_named() {
    let v1 = plan(false, 10, 0, "Group");
    assert_eq!(v1.len(), 2, "{v1:?}");
    let same = compatibility(&v1, &plan(true, 10, 5_000, "Group"));
    assert_eq!(same.render(), "Group: restored\nIn: restored\n");
    assert_eq!(same.refusal(false), None);

    let resized = compatibility(&v1, &plan(false, 20, 0, "Group"));
    let why = resized.refusal(true).expect("another window fn is refused");
    assert!(
        why.starts_with("'Group' changed its window fn from ")
            && why.contains("10")
            && why.contains("20"),
        "{why}"
    );

    let renamed = compatibility(&v1, &plan(false, 10, 0, "Grouped"));
    assert_eq!(
        renamed.render(),
        "Group: dropped (its state is not restored)\nGrouped: new (starts empty)\nIn: restored\n"
    );
    assert!(renamed.refusal(false).is_some());
    assert_eq!(renamed.refusal(true), None);
}
