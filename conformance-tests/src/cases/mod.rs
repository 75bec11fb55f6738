//! Every conformance case, one module per primitive of the SDK or transform of
//! `tidewater_transforms`.

use crate::Case;

mod cogroup;
mod combine;
mod count;
mod create;
mod distinct;
mod event_time;
mod failures;
mod flatten;
mod group_by_key;
mod impulse;
mod kv;
mod library;
mod merging;
mod metrics;
mod nexmark;
mod numeric;
mod panes;
mod pardo;
mod partition;
mod sample;
mod side_inputs;
mod sources;
mod state;
mod text_io;
mod top;
mod triggers;
mod windowing;

/// Every case, in matrix order; names are unique.
pub fn all_cases() -> Vec<Case> {
    [
        create::cases(),
        impulse::cases(),
        pardo::cases(),
        group_by_key::cases(),
        flatten::cases(),
        combine::cases(),
        partition::cases(),
        metrics::cases(),
        failures::cases(),
        // event time
        windowing::cases(),
        merging::cases(),
        triggers::cases(),
        event_time::cases(),
        // state, timers, side inputs and sources
        state::cases(),
        side_inputs::cases(),
        sources::cases(),
        // tidewater_transforms
        count::cases(),
        numeric::cases(),
        kv::cases(),
        distinct::cases(),
        top::cases(),
        sample::cases(),
        cogroup::cases(),
        library::cases(),
        text_io::cases(),
        // workloads
        nexmark::cases(),
    ]
    .concat()
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = super::all_cases().iter().map(|c| c.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two cases share a name");
    }
}
