//! Every conformance case, one module per primitive or transform.

use crate::Case;

mod combine;
mod create;
mod failures;
mod flatten;
mod group_by_key;
mod impulse;
mod metrics;
mod pardo;
mod partition;

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
