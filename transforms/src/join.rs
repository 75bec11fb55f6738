//! A stateful join of two keyed inputs of different types: the two sides are tagged,
//! flattened and handed to one stateful step, whose function says what to do with a
//! value from either side.

use crate::cogroup::Union;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tidewater::{
    Element, FlattenExt, PCollection, StateContext, StatefulDoFn, StatefulParDo, UserError,
};

/// What a [`StatefulJoinExt::join_stateful`] does per key: state and timers as in a
/// [`StatefulDoFn`], with a method per side instead of a tagged value.
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{BagState, StateContext, StateSpec, UserError, ValueState};
/// use tidewater_transforms::{StatefulJoinExt, StatefulJoinFn};
///
/// const NAME: ValueState<String> = StateSpec::value("name");
/// const WAITING: BagState<u32> = StateSpec::bag("waiting");
///
/// /// Each order with its customer's name, whichever comes first.
/// #[derive(Serialize, Deserialize)]
/// struct NameOrders;
///
/// impl StatefulJoinFn for NameOrders {
///     type Key = u8;
///     type Left = String;
///     type Right = u32;
///     type Out = (String, u32);
///     fn left(&mut self, _: &u8, name: String, ctx: &mut StateContext<'_, (String, u32)>) -> Result<(), UserError> {
///         for order in WAITING.read(ctx)? {
///             ctx.output((name.clone(), order));
///         }
///         WAITING.clear(ctx);
///         NAME.write(ctx, &name)
///     }
///     fn right(&mut self, _: &u8, order: u32, ctx: &mut StateContext<'_, (String, u32)>) -> Result<(), UserError> {
///         match NAME.read(ctx)? {
///             Some(name) => ctx.output((name, order)),
///             None => WAITING.add(ctx, &order)?,
///         }
///         Ok(())
///     }
/// }
///
/// tidewater_runner_direct::register();
/// let p = tidewater::Pipeline::new(Default::default());
/// let customers = p.create("Customers", vec![(1u8, "ann".to_string()), (2, "bob".to_string())]);
/// let orders = p.create("Orders", vec![(1u8, 10u32), (1, 11), (2, 20), (3, 30)]);
/// customers.join_stateful("Join", &orders, NameOrders).capture("named");
/// let mut named = p.run().unwrap().captured_values::<(String, u32)>("named").unwrap();
/// named.sort();
/// assert_eq!(named, vec![("ann".into(), 10), ("ann".into(), 11), ("bob".into(), 20)]);
/// ```
pub trait StatefulJoinFn: Send + 'static {
    /// The join key.
    type Key: Element;
    /// The left input's values.
    type Left: Element;
    /// The right input's values.
    type Right: Element;
    /// Output.
    type Out: Element;
    /// Once per left value (and window).
    fn left(
        &mut self,
        key: &Self::Key,
        value: Self::Left,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError>;
    /// Once per right value (and window).
    fn right(
        &mut self,
        key: &Self::Key,
        value: Self::Right,
        ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError>;
    /// When timer `name` of `key` fires.
    fn on_timer(
        &mut self,
        _key: &Self::Key,
        _name: &str,
        _ctx: &mut StateContext<'_, Self::Out>,
    ) -> Result<(), UserError> {
        Ok(())
    }
}

/// The stateful step of a join: dispatches each tagged value to its side.
#[derive(Serialize, Deserialize)]
#[serde(transparent)]
#[serde(bound = "F: Serialize + DeserializeOwned")]
struct JoinStep<F>(F);

impl<F: StatefulJoinFn> StatefulDoFn for JoinStep<F> {
    type Key = F::Key;
    type Value = Union<F::Left, F::Right>;
    type Out = F::Out;
    fn process(
        &mut self,
        key: &F::Key,
        value: Union<F::Left, F::Right>,
        ctx: &mut StateContext<'_, F::Out>,
    ) -> Result<(), UserError> {
        match value {
            Union::Left(l) => self.0.left(key, l, ctx),
            Union::Right(r) => self.0.right(key, r, ctx),
        }
    }
    fn on_timer(
        &mut self,
        key: &F::Key,
        name: &str,
        ctx: &mut StateContext<'_, F::Out>,
    ) -> Result<(), UserError> {
        self.0.on_timer(key, name, ctx)
    }
}

fn tag_left<K, A, B>((k, a): (K, A)) -> (K, Union<A, B>) {
    (k, Union::Left(a))
}

fn tag_right<K, A, B>((k, b): (K, B)) -> (K, Union<A, B>) {
    (k, Union::Right(b))
}

/// The stateful join as a method of the left input (see [`StatefulJoinFn`]).
pub trait StatefulJoinExt<K, L> {
    /// Joins this input (the left side) with `right` by key through `f`, under `name`.
    fn join_stateful<R, F>(
        &self,
        name: &str,
        right: &PCollection<(K, R)>,
        f: F,
    ) -> PCollection<F::Out>
    where
        R: Element,
        F: StatefulJoinFn<Key = K, Left = L, Right = R> + Serialize + DeserializeOwned;
}

impl<K: Element, L: Element> StatefulJoinExt<K, L> for PCollection<(K, L)> {
    fn join_stateful<R, F>(
        &self,
        name: &str,
        right: &PCollection<(K, R)>,
        f: F,
    ) -> PCollection<F::Out>
    where
        R: Element,
        F: StatefulJoinFn<Key = K, Left = L, Right = R> + Serialize + DeserializeOwned,
    {
        let left = self.clone();
        let right = right.clone();
        tidewater::PInput::pipeline(self)
            .clone()
            .apply_to(name, (left, right), JoinTransform(f))
    }
}

/// The composite: tag, flatten, one stateful step.
struct JoinTransform<F>(F);

impl<F>
    tidewater::PTransform<(
        PCollection<(F::Key, F::Left)>,
        PCollection<(F::Key, F::Right)>,
    )> for JoinTransform<F>
where
    F: StatefulJoinFn + Serialize + DeserializeOwned,
{
    type Output = PCollection<F::Out>;
    fn expand(
        self,
        (left, right): (
            PCollection<(F::Key, F::Left)>,
            PCollection<(F::Key, F::Right)>,
        ),
    ) -> PCollection<F::Out> {
        let l = left.map("TagLeft", tag_left::<F::Key, F::Left, F::Right>);
        let r = right.map("TagRight", tag_right::<F::Key, F::Left, F::Right>);
        vec![l, r]
            .apply_flatten("Flatten")
            .apply("Join", StatefulParDo::of(JoinStep(self.0)))
    }
}
