//! Beam's `Reshuffle`: redistributes elements across workers, keeping their timestamps
//! and windows.

use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use tidewater::{
    DoFn, Element, PCollection, PTransform, ParDo, ProcessContext, StateContext, StatefulDoFn,
    StatefulParDo, UserError,
};

/// Redistributes elements across workers through a keyed exchange (Beam's
/// `Reshuffle.viaRandomKey()`): after it, a fused chain of steps starts again on every
/// worker, which breaks fusion after a source that splits badly or a step that fans
/// out. Elements keep their timestamps and windows; their panes are reset.
///
/// As in any stateful step, an element behind the watermark by more than its window's
/// allowed lateness is dropped (and counted as dropped due to lateness); Beam's
/// Reshuffle instead re-windows with unbounded lateness.
///
/// ```
/// use tidewater_transforms::Reshuffle;
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Xs", (0..100u32).collect::<Vec<_>>())
///     .apply("Reshuffle", Reshuffle::via_random_key())
///     .capture("xs");
/// let mut xs = p.run().unwrap().captured_values::<u32>("xs").unwrap();
/// xs.sort();
/// assert_eq!(xs, (0..100).collect::<Vec<_>>());
/// ```
pub struct Reshuffle;

impl Reshuffle {
    /// Spreads elements over keys drawn in turn from a random start per worker.
    pub fn via_random_key() -> ReshuffleViaRandomKey {
        ReshuffleViaRandomKey
    }
}

/// See [`Reshuffle::via_random_key`].
pub struct ReshuffleViaRandomKey;

/// The number of keys elements are spread over.
const SPREAD: u32 = 1 << 12;

/// Pairs each element with the next key of its instance.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct AssignKey<T> {
    #[serde(skip)]
    next: Option<u32>,
    #[serde(skip)]
    _t: PhantomData<fn(T)>,
}

impl<T: Element> DoFn for AssignKey<T> {
    type In = T;
    type Out = (u32, T);
    fn process(&mut self, x: T, ctx: &mut ProcessContext<'_, (u32, T)>) -> Result<(), UserError> {
        let next = self.next.get_or_insert_with(|| {
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u8(0);
            h.finish() as u32
        });
        *next = next.wrapping_add(1);
        ctx.output((*next % SPREAD, x));
        Ok(())
    }
}

/// Outputs every value as it comes, behind the keyed exchange.
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
struct PassOn<T>(#[serde(skip)] PhantomData<fn(T)>);

impl<T: Element> StatefulDoFn for PassOn<T> {
    type Key = u32;
    type Value = T;
    type Out = T;
    fn process(&mut self, _: &u32, x: T, ctx: &mut StateContext<'_, T>) -> Result<(), UserError> {
        ctx.output(x);
        Ok(())
    }
}

impl<T: Element> PTransform<PCollection<T>> for ReshuffleViaRandomKey {
    type Output = PCollection<T>;
    fn expand(self, input: PCollection<T>) -> PCollection<T> {
        input
            .apply(
                "AssignKey",
                ParDo::of(AssignKey::<T> {
                    next: None,
                    _t: PhantomData,
                }),
            )
            .apply("PassOn", StatefulParDo::of(PassOn::<T>(PhantomData)))
    }
}
