//! Two versions of a running count whose state is a struct, for the upgrade tests
//! (issue 36): [`v2::Tally`] is [`v1::Tally`] with a field added under
//! `#[serde(default)]`, as a new release of a job would change it. Both keep the type
//! name `Tally` (the module path is not part of what a savepoint checks), so a
//! savepoint of v1 restores into v2, and v2 reads v1's values with the new field at its
//! default. Both emit (word, count so far), as [`crate::stateful_word_count`] does; so
//! does [`signed::SignedCount`], whose cell holds another type that reads the old
//! values.

/// The first version: a tally is a count.
pub mod v1 {
    use serde::{Deserialize, Serialize};
    use tidewater::{StateCell, StateContext, StatefulDoFn, UserError, ValueState};

    /// A word's tally.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    pub struct Tally {
        /// Occurrences so far.
        pub count: u64,
    }

    const TALLY: ValueState<Tally> = tidewater::StateSpec::value("count");

    /// Keeps each word's tally in its cell `count`.
    #[derive(Serialize, Deserialize)]
    pub struct TallyV1;

    impl StatefulDoFn for TallyV1 {
        type Key = String;
        type Value = u64;
        type Out = (String, u64);
        fn process(
            &mut self,
            word: &String,
            n: u64,
            ctx: &mut StateContext<'_, (String, u64)>,
        ) -> Result<(), UserError> {
            let mut t = TALLY.read(ctx)?.unwrap_or_default();
            t.count += n;
            TALLY.write(ctx, &t)?;
            ctx.output((word.clone(), t.count));
            Ok(())
        }
        fn state_cells(&self) -> Vec<StateCell> {
            vec![TALLY.cell()]
        }
    }

    tidewater::register!(StatefulDoFn TallyV1);
}

/// The second version: a tally also counts the occurrences after the first.
pub mod v2 {
    use serde::{Deserialize, Serialize};
    use tidewater::{StateCell, StateContext, StatefulDoFn, UserError, ValueState};

    /// A word's tally; `repeats` is new, and 0 in a tally v1 wrote.
    #[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
    pub struct Tally {
        /// Occurrences so far.
        pub count: u64,
        /// Occurrences after the first one this version saw.
        #[serde(default)]
        pub repeats: u64,
    }

    const TALLY: ValueState<Tally> = tidewater::StateSpec::value("count");

    /// Keeps each word's tally in its cell `count`.
    #[derive(Serialize, Deserialize)]
    pub struct TallyV2;

    impl StatefulDoFn for TallyV2 {
        type Key = String;
        type Value = u64;
        type Out = (String, u64);
        fn process(
            &mut self,
            word: &String,
            n: u64,
            ctx: &mut StateContext<'_, (String, u64)>,
        ) -> Result<(), UserError> {
            let mut t = TALLY.read(ctx)?.unwrap_or_default();
            if t.count > 0 {
                t.repeats += n;
            }
            t.count += n;
            TALLY.write(ctx, &t)?;
            ctx.output((word.clone(), t.count));
            Ok(())
        }
        fn state_cells(&self) -> Vec<StateCell> {
            vec![TALLY.cell()]
        }
    }

    tidewater::register!(StatefulDoFn TallyV2);
}

/// A running count whose cell `count` holds an `i64` where the first version of the
/// job ([`crate::stateful_word_count::RunningCount`]) declared a `u64`: another type,
/// whose values read the old ones (every count a `u64` held fits an `i64`), so a
/// savepoint of that version restores into this one.
pub mod signed {
    use serde::{Deserialize, Serialize};
    use tidewater::{StateCell, StateContext, StatefulDoFn, UserError, ValueState};

    const COUNT: ValueState<i64> = tidewater::StateSpec::value("count");

    /// Keeps each word's count, signed, in its cell `count`.
    #[derive(Serialize, Deserialize)]
    pub struct SignedCount;

    impl StatefulDoFn for SignedCount {
        type Key = String;
        type Value = u64;
        type Out = (String, u64);
        fn process(
            &mut self,
            word: &String,
            n: u64,
            ctx: &mut StateContext<'_, (String, u64)>,
        ) -> Result<(), UserError> {
            let count = COUNT.read(ctx)?.unwrap_or(0) + n as i64;
            COUNT.write(ctx, &count)?;
            ctx.output((word.clone(), count as u64));
            Ok(())
        }
        fn state_cells(&self) -> Vec<StateCell> {
            vec![COUNT.cell()]
        }
    }

    tidewater::register!(StatefulDoFn SignedCount);
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tally_v1_wrote_reads_as_v2_with_the_new_field_at_its_default() {
        let mut bytes = Vec::new();
        tidewater::coder::encode_state_into(&super::v1::Tally { count: 7 }, &mut bytes).unwrap();
        let v2: super::v2::Tally = tidewater::coder::decode_state(&bytes).unwrap();
        assert_eq!(
            v2,
            super::v2::Tally {
                count: 7,
                repeats: 0
            }
        );
    }
}
