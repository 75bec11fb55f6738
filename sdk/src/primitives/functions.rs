//! `map`, `flat_map`, `filter` and `with_keys` over functions: named `fn` items and
//! closures, with parameters that travel in the plan (`map_with`) or the element's
//! context (`map_with_context`).
//!
//! A light function travels in the plan by name alone, and every process that runs the
//! plan finds it again in its registry, which constructing the same pipeline fills.
//!
//! - A named `fn` item is named by its path (`my_crate::split`): unique and stable in
//!   a binary.
//! - A closure is named by its type's path (`my_crate::main::{{closure}}`, the same for
//!   every closure of one function) plus the place it was given, from
//!   [`std::panic::Location`]: `file:line:column`. The place is the call of `map` (the
//!   methods are `#[track_caller]`), or the call of a helper marked `#[track_caller]`
//!   that calls `map` for its caller. Two different closures that reach `map` from one
//!   place (a helper, not marked, that passes on closures from two callers in one
//!   function) would share a name: that is refused at construction. One closure given
//!   several times from one place (in a loop, or by a helper called twice) is the same
//!   code and shares its name, as a `fn` item used twice does.
//! - A closure must not capture: what it captures is not in the plan, so a saved plan,
//!   another process or the plan's hash would not see it, and two uses of one place
//!   with different captures would share a name. A closure that captures is refused at
//!   construction with a message pointing to the `_with` forms, whose `params`
//!   serialize with serde and travel in the plan's fields; constants and statics need
//!   no capture.
//!
//! The rule behind both: every process that runs a plan runs the same binary and
//! constructs the same pipeline first (as timely's cluster mode does), and a plan
//! naming a function the running binary has not registered is refused before it runs.
//! A closure's name moves when the source above it changes, so a plan with closures
//! runs only on the binary that wrote it.

use super::fn_names::{light_fn_name, same_place_message};
use super::pardo::apply_par_do;
use crate::exec::{DoFnInvoker, ErasedDoFn};
use crate::plan::UserFunction;
use crate::registry::{self, DoFnFactory, register_element_type};
use crate::{
    BoundedWindow, DoFn, Element, PCollection, PTransform, PaneInfo, ProcessContext, Timestamp,
    UserError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::marker::PhantomData;
use std::panic::Location;
use std::sync::Arc;

/// A ParDo over a light function: its plan name (or why it has none), its fields in
/// the plan, and the factory that builds its DoFn from them.
pub(crate) struct FunctionParDo<D> {
    name: Result<String, String>,
    fields: crate::plan::Json,
    factory: DoFnFactory,
    _d: PhantomData<fn() -> D>,
}

impl<D: DoFn + Clone + Sync> FunctionParDo<D> {
    /// A ParDo running `do_fn`, which has no fields: the factory shares it.
    pub(crate) fn new(do_fn: D, name: Result<String, String>) -> Self {
        FunctionParDo {
            name,
            fields: crate::plan::Json::null(),
            factory: Arc::new(move |_| {
                Ok(Box::new(DoFnInvoker::new(do_fn.clone())) as Box<dyn ErasedDoFn>)
            }),
            _d: PhantomData,
        }
    }

    /// A ParDo whose DoFn `build` makes from `fields`, which travel in the plan.
    pub(crate) fn with_fields(
        name: Result<String, String>,
        fields: crate::plan::Json,
        build: impl Fn(&mut dyn erased_serde::Deserializer<'_>) -> Result<D, String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        FunctionParDo {
            name,
            fields,
            factory: Arc::new(move |fields| {
                Ok(Box::new(DoFnInvoker::new(build(fields)?)) as Box<dyn ErasedDoFn>)
            }),
            _d: PhantomData,
        }
    }
}

impl<D> PTransform<PCollection<D::In>> for FunctionParDo<D>
where
    D: DoFn + Clone + Sync,
{
    type Output = PCollection<D::Out>;
    fn expand(self, input: PCollection<D::In>) -> PCollection<D::Out> {
        let p = input.pipeline().clone();
        register_element_type::<D::In>();
        let name = match self.name {
            Ok(name) => match registry::register_do_fn_factory_checked::<D>(&name, self.factory) {
                Ok(()) => name,
                Err(()) => {
                    p.record_error(same_place_message(&name));
                    name
                }
            },
            Err(message) => {
                p.record_error(message);
                std::any::type_name::<D>().to_string()
            }
        };
        let out = apply_par_do(
            &p,
            input.id,
            UserFunction {
                name,
                fields: self.fields,
            },
            crate::pipeline::output_types::<D::Out>(crate::dofn::MAIN_TAG),
        );
        p.pcollection(out[0])
    }
}

/// What a light function sees of its element besides the value: the timestamp, the
/// window it is processed in and the pane it came in (the `_with_context` forms, such
/// as [`PCollection::map_with_context`]).
///
/// ```
/// use tidewater::{Duration, ElementContext, Window, WindowFn};
/// let p = tidewater::Pipeline::new(Default::default());
/// let starts = p
///     .apply("Xs", tidewater::Create::timestamped(vec![(1i64, tidewater::Timestamp::from_millis(1500))]))
///     .apply("Secs", Window::into(WindowFn::fixed(Duration::from_secs(1))))
///     .map_with_context("Start", |x: i64, c: &ElementContext| (x, c.window().start()));
/// assert!(p.construction_errors().is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElementContext {
    timestamp: Timestamp,
    window: BoundedWindow,
    pane: PaneInfo,
}

impl ElementContext {
    fn of<O: Element>(ctx: &ProcessContext<'_, O>) -> Self {
        ElementContext {
            timestamp: ctx.timestamp(),
            window: ctx.window(),
            pane: ctx.pane(),
        }
    }

    /// The element's timestamp.
    ///
    /// ```
    /// # let p = tidewater::Pipeline::new(Default::default());
    /// # let xs = p.create("Xs", vec![1u8]);
    /// let stamped = xs.map_with_context("Ts", |x: u8, c: &tidewater::ElementContext| (x, c.timestamp()));
    /// ```
    pub fn timestamp(&self) -> Timestamp {
        self.timestamp
    }

    /// The window the element is processed in (an element in several windows is
    /// processed once per window).
    ///
    /// ```
    /// # let p = tidewater::Pipeline::new(Default::default());
    /// # let xs = p.create("Xs", vec![1u8]);
    /// let ends = xs.map_with_context("End", |x: u8, c: &tidewater::ElementContext| (x, c.window().end()));
    /// ```
    pub fn window(&self) -> BoundedWindow {
        self.window.clone()
    }

    /// The pane the element came in.
    ///
    /// ```
    /// # let p = tidewater::Pipeline::new(Default::default());
    /// # let xs = p.create("Xs", vec![1u8]);
    /// let last = xs.filter_with_context("Last", |_: &u8, c: &tidewater::ElementContext| c.pane().is_last);
    /// ```
    pub fn pane(&self) -> PaneInfo {
        self.pane
    }
}

macro_rules! function_do_fn {
    ($(#[$doc:meta])* $name:ident<$($g:ident),*>) => {
        $(#[$doc])*
        pub struct $name<F, $($g),*> {
            f: Arc<F>,
            _t: PhantomData<fn($($g),*)>,
        }

        impl<F, $($g),*> Clone for $name<F, $($g),*> {
            fn clone(&self) -> Self {
                $name { f: self.f.clone(), _t: PhantomData }
            }
        }

        impl<F, $($g),*> $name<F, $($g),*> {
            fn new(f: F) -> Self {
                $name { f: Arc::new(f), _t: PhantomData }
            }
        }
    };
}

macro_rules! params_do_fn {
    ($(#[$doc:meta])* $name:ident<$($g:ident),*>) => {
        $(#[$doc])*
        pub struct $name<F, P, $($g),*> {
            f: Arc<F>,
            params: Arc<P>,
            _t: PhantomData<fn($($g),*)>,
        }

        impl<F, P, $($g),*> Clone for $name<F, P, $($g),*> {
            fn clone(&self) -> Self {
                $name { f: self.f.clone(), params: self.params.clone(), _t: PhantomData }
            }
        }
    };
}

function_do_fn!(
    /// The DoFn of [`PCollection::map`].
    MapFn<A, B>
);
function_do_fn!(
    /// The DoFn of [`PCollection::flat_map`].
    FlatMapFn<A, I>
);
function_do_fn!(
    /// The DoFn of [`PCollection::filter`].
    FilterFn<A>
);
function_do_fn!(
    /// The DoFn of [`PCollection::with_keys`].
    WithKeysFn<A, K>
);
function_do_fn!(
    /// The DoFn of [`PCollection::map_with_context`].
    MapWithContextFn<A, B>
);
function_do_fn!(
    /// The DoFn of [`PCollection::flat_map_with_context`].
    FlatMapWithContextFn<A, I>
);
function_do_fn!(
    /// The DoFn of [`PCollection::filter_with_context`].
    FilterWithContextFn<A>
);
params_do_fn!(
    /// The DoFn of [`PCollection::map_with`].
    MapWithFn<A, B>
);
params_do_fn!(
    /// The DoFn of [`PCollection::flat_map_with`].
    FlatMapWithFn<A, I>
);
params_do_fn!(
    /// The DoFn of [`PCollection::filter_with`].
    FilterWithFn<A>
);

impl<F, A, B> DoFn for MapFn<F, A, B>
where
    F: Fn(A) -> B + Send + Sync + 'static,
    A: Element,
    B: Element,
{
    type In = A;
    type Out = B;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, B>) -> Result<(), UserError> {
        ctx.output((self.f)(x));
        Ok(())
    }
}

impl<F, A, I> DoFn for FlatMapFn<F, A, I>
where
    F: Fn(A) -> I + Send + Sync + 'static,
    A: Element,
    I: IntoIterator + 'static,
    I::Item: Element,
{
    type In = A;
    type Out = I::Item;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, I::Item>) -> Result<(), UserError> {
        for y in (self.f)(x) {
            ctx.output(y);
        }
        Ok(())
    }
}

impl<F, A> DoFn for FilterFn<F, A>
where
    F: Fn(&A) -> bool + Send + Sync + 'static,
    A: Element,
{
    type In = A;
    type Out = A;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, A>) -> Result<(), UserError> {
        if (self.f)(&x) {
            ctx.output(x);
        }
        Ok(())
    }
}

impl<F, A, K> DoFn for WithKeysFn<F, A, K>
where
    F: Fn(&A) -> K + Send + Sync + 'static,
    A: Element,
    K: Element,
{
    type In = A;
    type Out = (K, A);
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, (K, A)>) -> Result<(), UserError> {
        let k = (self.f)(&x);
        ctx.output((k, x));
        Ok(())
    }
}

impl<F, A, B> DoFn for MapWithContextFn<F, A, B>
where
    F: Fn(A, &ElementContext) -> B + Send + Sync + 'static,
    A: Element,
    B: Element,
{
    type In = A;
    type Out = B;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, B>) -> Result<(), UserError> {
        let c = ElementContext::of(ctx);
        ctx.output((self.f)(x, &c));
        Ok(())
    }
}

impl<F, A, I> DoFn for FlatMapWithContextFn<F, A, I>
where
    F: Fn(A, &ElementContext) -> I + Send + Sync + 'static,
    A: Element,
    I: IntoIterator + 'static,
    I::Item: Element,
{
    type In = A;
    type Out = I::Item;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, I::Item>) -> Result<(), UserError> {
        let c = ElementContext::of(ctx);
        for y in (self.f)(x, &c) {
            ctx.output(y);
        }
        Ok(())
    }
}

impl<F, A> DoFn for FilterWithContextFn<F, A>
where
    F: Fn(&A, &ElementContext) -> bool + Send + Sync + 'static,
    A: Element,
{
    type In = A;
    type Out = A;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, A>) -> Result<(), UserError> {
        if (self.f)(&x, &ElementContext::of(ctx)) {
            ctx.output(x);
        }
        Ok(())
    }
}

impl<F, P, A, B> DoFn for MapWithFn<F, P, A, B>
where
    F: Fn(&P, A) -> B + Send + Sync + 'static,
    P: Send + Sync + 'static,
    A: Element,
    B: Element,
{
    type In = A;
    type Out = B;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, B>) -> Result<(), UserError> {
        ctx.output((self.f)(&self.params, x));
        Ok(())
    }
}

impl<F, P, A, I> DoFn for FlatMapWithFn<F, P, A, I>
where
    F: Fn(&P, A) -> I + Send + Sync + 'static,
    P: Send + Sync + 'static,
    A: Element,
    I: IntoIterator + 'static,
    I::Item: Element,
{
    type In = A;
    type Out = I::Item;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, I::Item>) -> Result<(), UserError> {
        for y in (self.f)(&self.params, x) {
            ctx.output(y);
        }
        Ok(())
    }
}

impl<F, P, A> DoFn for FilterWithFn<F, P, A>
where
    F: Fn(&P, &A) -> bool + Send + Sync + 'static,
    P: Send + Sync + 'static,
    A: Element,
{
    type In = A;
    type Out = A;
    fn process(&mut self, x: A, ctx: &mut ProcessContext<'_, A>) -> Result<(), UserError> {
        if (self.f)(&self.params, &x) {
            ctx.output(x);
        }
        Ok(())
    }
}

/// The parameters' JSON, or a construction error saying why they have none.
pub(crate) fn params_fields<P: Serialize>(
    method: &str,
    params: &P,
) -> Result<serde_json::Value, String> {
    serde_json::to_value(params).map_err(|e| {
        format!(
            "the parameters given to {method}() ({}) must serialize to JSON to travel in the plan: {e}",
            std::any::type_name::<P>()
        )
    })
}

/// A ParDo whose DoFn `make` builds from the function `f` and the parameters
/// decoded from the plan's fields.
pub(crate) fn params_par_do<D, F, P>(
    method: &str,
    name: Result<String, String>,
    params: &P,
    f: F,
    make: fn(Arc<F>, Arc<P>) -> D,
) -> FunctionParDo<D>
where
    D: DoFn + Clone + Sync,
    F: Send + Sync + 'static,
    P: Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let (name, fields) = match params_fields(method, params) {
        Ok(fields) => (name, fields.into()),
        Err(e) => (Err(e), crate::plan::Json::null()),
    };
    let f = Arc::new(f);
    FunctionParDo::with_fields(name, fields, move |fields| {
        let params: P = erased_serde::deserialize(fields).map_err(|e| {
            format!(
                "cannot decode the parameters ({}): {}",
                std::any::type_name::<P>(),
                crate::plan::without_position(e.to_string())
            )
        })?;
        Ok(make(f.clone(), Arc::new(params)))
    })
}

impl<T: Element> PCollection<T> {
    /// Applies `f` to every element: a named `fn` item or a closure that captures
    /// nothing (see [`PCollection::map_with`] for parameters).
    ///
    /// ```
    /// fn len(s: String) -> usize { s.len() }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let words = p.create("Words", vec!["ab".to_string()]);
    /// let lens = words.map("Len", len);
    /// let doubled = lens.map("Double", |n: usize| n * 2);
    /// assert!(p.construction_errors().is_empty());
    ///
    /// // A closure that captures is refused: its captures would not be in the plan.
    /// let k = 3;
    /// let _ = doubled.map("Times", move |n: usize| n * k);
    /// assert!(p.construction_errors()[0].contains("captures values"));
    /// ```
    #[track_caller]
    pub fn map<B: Element, F: Fn(T) -> B + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<B> {
        let fn_name =
            light_fn_name::<MapFn<F, T, B>, F>("map", Some("map_with"), Location::caller());
        self.apply(name, FunctionParDo::new(MapFn::new(f), fn_name))
    }

    /// Applies `f` to every element and outputs every item of what it returns.
    ///
    /// ```
    /// fn split(s: String) -> Vec<String> { s.split(' ').map(str::to_string).collect() }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let lines = p.create("Lines", vec!["a b".to_string()]);
    /// let words = lines.flat_map("Split", split);
    /// let chars = words.flat_map("Chars", |w: String| w.chars().collect::<Vec<_>>());
    /// ```
    #[track_caller]
    pub fn flat_map<I, F>(&self, name: &str, f: F) -> PCollection<I::Item>
    where
        I: IntoIterator + 'static,
        I::Item: Element,
        F: Fn(T) -> I + Send + Sync + 'static,
    {
        let fn_name = light_fn_name::<FlatMapFn<F, T, I>, F>(
            "flat_map",
            Some("flat_map_with"),
            Location::caller(),
        );
        self.apply(name, FunctionParDo::new(FlatMapFn::new(f), fn_name))
    }

    /// Keeps the elements for which `f` returns true.
    ///
    /// ```
    /// fn even(x: &i64) -> bool { x % 2 == 0 }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let evens = p.create("Xs", vec![1i64, 2]).filter("Even", even);
    /// let positive = evens.filter("Positive", |x: &i64| *x > 0);
    /// ```
    #[track_caller]
    pub fn filter<F: Fn(&T) -> bool + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<T> {
        let fn_name =
            light_fn_name::<FilterFn<F, T>, F>("filter", Some("filter_with"), Location::caller());
        self.apply(name, FunctionParDo::new(FilterFn::new(f), fn_name))
    }

    /// Pairs every element with the key `f` computes: `x` becomes `(f(&x), x)`.
    ///
    /// ```
    /// fn first_letter(s: &String) -> String { s[..1].to_string() }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let words = p.create("Words", vec!["ab".to_string()]);
    /// let keyed = words.with_keys("ByLetter", first_letter);
    /// let by_len = words.with_keys("ByLength", |s: &String| s.len());
    /// ```
    #[track_caller]
    pub fn with_keys<K: Element, F: Fn(&T) -> K + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<(K, T)> {
        let fn_name =
            light_fn_name::<WithKeysFn<F, T, K>, F>("with_keys", None, Location::caller());
        self.apply(name, FunctionParDo::new(WithKeysFn::new(f), fn_name))
    }

    /// [`with_keys`](PCollection::with_keys) with parameters that travel in the plan:
    /// `x` becomes `(f(&params, &x), x)` (see [`PCollection::map_with`]).
    ///
    /// ```
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.create("Xs", vec![7u32, 12])
    ///     .with_keys_with("Bucket", 5u32, |width: &u32, x: &u32| x / width)
    ///     .capture("keyed");
    /// let mut keyed = p.run().unwrap().captured_values::<(u32, u32)>("keyed").unwrap();
    /// keyed.sort();
    /// assert_eq!(keyed, vec![(1, 7), (2, 12)]);
    /// ```
    #[track_caller]
    pub fn with_keys_with<P, K, F>(&self, name: &str, params: P, f: F) -> PCollection<(K, T)>
    where
        P: Serialize + DeserializeOwned + Send + Sync + 'static,
        K: Element,
        F: Fn(&P, &T) -> K + Send + Sync + 'static,
    {
        // The wrapper captures only `f`, which captures nothing: it travels by name,
        // and that name is the caller's place (`map_with` is `#[track_caller]` too).
        self.map_with(name, params, move |p: &P, x: T| (f(p, &x), x))
    }

    /// [`map`](PCollection::map) whose function also sees the element's timestamp,
    /// window and pane.
    ///
    /// ```
    /// use tidewater::{Duration, ElementContext, Timestamp, Window, WindowFn};
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.apply("Xs", tidewater::Create::timestamped(vec![('a', Timestamp::from_millis(1500))]))
    ///     .apply("Secs", Window::into(WindowFn::fixed(Duration::from_secs(1))))
    ///     .map_with_context("Start", |x: char, c: &ElementContext| (x, c.window().start().millis()))
    ///     .capture("starts");
    /// let starts = p.run().unwrap().captured_values::<(char, i64)>("starts").unwrap();
    /// assert_eq!(starts, vec![('a', 1000)]);
    /// ```
    #[track_caller]
    pub fn map_with_context<B: Element, F: Fn(T, &ElementContext) -> B + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<B> {
        let fn_name = light_fn_name::<MapWithContextFn<F, T, B>, F>(
            "map_with_context",
            None,
            Location::caller(),
        );
        self.apply(name, FunctionParDo::new(MapWithContextFn::new(f), fn_name))
    }

    /// [`flat_map`](PCollection::flat_map) whose function also sees the element's
    /// timestamp, window and pane.
    ///
    /// ```
    /// use tidewater::ElementContext;
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![3u32]);
    /// let early = xs.flat_map_with_context("UpToTs", |n: u32, c: &ElementContext| {
    ///     let ts = c.timestamp().millis();
    ///     (0..n).map(move |i| (i, ts))
    /// });
    /// # let _ = early;
    /// ```
    #[track_caller]
    pub fn flat_map_with_context<I, F>(&self, name: &str, f: F) -> PCollection<I::Item>
    where
        I: IntoIterator + 'static,
        I::Item: Element,
        F: Fn(T, &ElementContext) -> I + Send + Sync + 'static,
    {
        let fn_name = light_fn_name::<FlatMapWithContextFn<F, T, I>, F>(
            "flat_map_with_context",
            None,
            Location::caller(),
        );
        self.apply(
            name,
            FunctionParDo::new(FlatMapWithContextFn::new(f), fn_name),
        )
    }

    /// [`filter`](PCollection::filter) whose predicate also sees the element's
    /// timestamp, window and pane.
    ///
    /// ```
    /// use tidewater::{ElementContext, Timestamp};
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![1u8]);
    /// let recent = xs.filter_with_context("Recent", |_: &u8, c: &ElementContext| {
    ///     c.timestamp() >= Timestamp::from_millis(0)
    /// });
    /// ```
    #[track_caller]
    pub fn filter_with_context<F: Fn(&T, &ElementContext) -> bool + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<T> {
        let fn_name = light_fn_name::<FilterWithContextFn<F, T>, F>(
            "filter_with_context",
            None,
            Location::caller(),
        );
        self.apply(
            name,
            FunctionParDo::new(FilterWithContextFn::new(f), fn_name),
        )
    }

    /// [`map`](PCollection::map) with parameters: `f(&params, x)`. The parameters
    /// serialize with serde and travel in the plan's fields (so the plan, its hash and
    /// every process see them); `f` captures nothing. One call site may run with
    /// different parameters in each application.
    ///
    /// ```
    /// tidewater_runner_direct::register();
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![1i64, 2]);
    /// for k in [10i64, 100] {
    ///     xs.map_with(&format!("Times{k}"), k, |k: &i64, x: i64| x * k)
    ///         .capture(&format!("times{k}"));
    /// }
    /// let result = p.run().unwrap();
    /// let mut times100 = result.captured_values::<i64>("times100").unwrap();
    /// times100.sort();
    /// assert_eq!(times100, vec![100, 200]);
    /// let mut times10 = result.captured_values::<i64>("times10").unwrap();
    /// times10.sort();
    /// assert_eq!(times10, vec![10, 20]);
    /// ```
    #[track_caller]
    pub fn map_with<P, B, F>(&self, name: &str, params: P, f: F) -> PCollection<B>
    where
        P: Serialize + DeserializeOwned + Send + Sync + 'static,
        B: Element,
        F: Fn(&P, T) -> B + Send + Sync + 'static,
    {
        let fn_name =
            light_fn_name::<MapWithFn<F, P, T, B>, F>("map_with", None, Location::caller());
        let make = |f, params| MapWithFn {
            f,
            params,
            _t: PhantomData,
        };
        self.apply(name, params_par_do("map_with", fn_name, &params, f, make))
    }

    /// [`flat_map`](PCollection::flat_map) with parameters that travel in the plan:
    /// `f(&params, x)` (see [`PCollection::map_with`]).
    ///
    /// ```
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let lines = p.create("Lines", vec!["a bb ccc".to_string()]);
    /// let long = lines.flat_map_with("LongWords", 2usize, |min: &usize, l: String| {
    ///     l.split(' ').filter(|w| w.len() >= *min).map(str::to_string).collect::<Vec<_>>()
    /// });
    /// # assert!(p.construction_errors().is_empty());
    /// ```
    #[track_caller]
    pub fn flat_map_with<P, I, F>(&self, name: &str, params: P, f: F) -> PCollection<I::Item>
    where
        P: Serialize + DeserializeOwned + Send + Sync + 'static,
        I: IntoIterator + 'static,
        I::Item: Element,
        F: Fn(&P, T) -> I + Send + Sync + 'static,
    {
        let fn_name = light_fn_name::<FlatMapWithFn<F, P, T, I>, F>(
            "flat_map_with",
            None,
            Location::caller(),
        );
        let make = |f, params| FlatMapWithFn {
            f,
            params,
            _t: PhantomData,
        };
        self.apply(
            name,
            params_par_do("flat_map_with", fn_name, &params, f, make),
        )
    }

    /// [`filter`](PCollection::filter) with parameters that travel in the plan:
    /// `f(&params, &x)` (see [`PCollection::map_with`]).
    ///
    /// ```
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![1i64, 5, 9]);
    /// let big = xs.filter_with("Big", 4i64, |min: &i64, x: &i64| x > min);
    /// # assert!(p.construction_errors().is_empty());
    /// ```
    #[track_caller]
    pub fn filter_with<P, F>(&self, name: &str, params: P, f: F) -> PCollection<T>
    where
        P: Serialize + DeserializeOwned + Send + Sync + 'static,
        F: Fn(&P, &T) -> bool + Send + Sync + 'static,
    {
        let fn_name =
            light_fn_name::<FilterWithFn<F, P, T>, F>("filter_with", None, Location::caller());
        let make = |f, params| FilterWithFn {
            f,
            params,
            _t: PhantomData,
        };
        self.apply(
            name,
            params_par_do("filter_with", fn_name, &params, f, make),
        )
    }
}
