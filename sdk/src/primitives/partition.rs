use super::pardo::apply_par_do;
use crate::exec::{DoFnInvoker, ErasedDoFn};
use crate::plan::UserFunction;
use crate::registry;
use crate::{DoFn, Element, PCollection, PTransform, ProcessContext, TupleTag, UserError};
use std::marker::PhantomData;
use std::sync::Arc;

/// Splits a PCollection into `n` by `f(&element, n) -> index`: a named `fn` item or a
/// closure that captures nothing.
///
/// ```
/// fn by_parity(x: &i64, _n: usize) -> usize { (x % 2) as usize }
/// let p = tidewater::Pipeline::new(Default::default());
/// let xs = p.create("Xs", vec![1i64, 2, 3]);
/// let parts = xs.apply("Parity", tidewater::Partition::of(2, by_parity));
/// assert_eq!(parts.len(), 2);
/// let thirds = xs.apply("Thirds", tidewater::Partition::of(3, |x: &i64, n| *x as usize % n));
/// assert_eq!(thirds.len(), 3);
/// ```
pub struct Partition<F> {
    n: usize,
    f: F,
    site: &'static std::panic::Location<'static>,
}

impl Partition<()> {
    /// `n` partitions chosen by `f`.
    #[track_caller]
    pub fn of<T, F: Fn(&T, usize) -> usize + Send + Sync + 'static>(
        n: usize,
        f: F,
    ) -> Partition<F> {
        Partition {
            n,
            f,
            site: std::panic::Location::caller(),
        }
    }

    /// `n` partitions chosen by `f(&params, &element, n)`, its `params` in the plan
    /// (a closure must not capture: see [`PCollection::map_with`]).
    ///
    /// ```
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![1i64, 20, 300]);
    /// let parts = xs.apply(
    ///     "BySize",
    ///     tidewater::Partition::of_with(2, 10i64, |limit: &i64, x: &i64, _n| usize::from(x >= limit)),
    /// );
    /// assert_eq!(parts.len(), 2);
    /// # assert!(p.construction_errors().is_empty());
    /// ```
    #[track_caller]
    pub fn of_with<T, P, F: Fn(&P, &T, usize) -> usize + Send + Sync + 'static>(
        n: usize,
        params: P,
        f: F,
    ) -> PartitionWith<F, P> {
        PartitionWith {
            n,
            params,
            f,
            site: std::panic::Location::caller(),
        }
    }
}

/// The DoFn of [`Partition`]: partition 0 is the main output, partition `i` the output
/// tagged `i`.
pub struct PartitionFn<F, T> {
    f: Arc<F>,
    n: usize,
    tags: Arc<Vec<TupleTag<T>>>,
    _t: PhantomData<fn(T)>,
}

impl<F, T> Clone for PartitionFn<F, T> {
    fn clone(&self) -> Self {
        PartitionFn {
            f: self.f.clone(),
            n: self.n,
            tags: self.tags.clone(),
            _t: PhantomData,
        }
    }
}

impl<F: Fn(&T, usize) -> usize + Send + Sync + 'static, T: Element> DoFn for PartitionFn<F, T> {
    type In = T;
    type Out = T;
    fn process(&mut self, x: T, ctx: &mut ProcessContext<'_, T>) -> Result<(), UserError> {
        let i = (self.f)(&x, self.n);
        route(i, self.n, &self.tags, x, ctx)
    }
}

/// Sends `x` to partition `i` of `n`: 0 is the main output, `i` the output tagged `i`.
fn route<T: Element>(
    i: usize,
    n: usize,
    tags: &[TupleTag<T>],
    x: T,
    ctx: &mut ProcessContext<'_, T>,
) -> Result<(), UserError> {
    match i {
        0 => ctx.output(x),
        i if i < n => ctx.output_to(&tags[i - 1], x),
        i => {
            return Err(format!(
                "the partition function returned {i}, but there are only {n} partitions (0..{n})"
            )
            .into());
        }
    }
    Ok(())
}

/// [`Partition`] with parameters that travel in the plan: `f(&params, &element, n)`
/// (made by [`Partition::of_with`]).
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let by_mod: tidewater::PartitionWith<_, u64> =
///     tidewater::Partition::of_with(2, 3u64, |m: &u64, x: &u64, _n| usize::from(x % m == 0));
/// let parts = p.create("Xs", vec![1u64, 3, 6]).apply("ByMod", by_mod);
/// assert_eq!(parts.len(), 2);
/// ```
pub struct PartitionWith<F, P> {
    n: usize,
    params: P,
    f: F,
    site: &'static std::panic::Location<'static>,
}

/// The DoFn of [`PartitionWith`]: what the plan names for it (the name of the
/// closure's place).
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// let _ = p.create("Xs", vec![1u8])
///     .apply("Odd", tidewater::Partition::of_with(2, (), |_: &(), x: &u8, _n| usize::from(x % 2 == 1)));
/// let plan = p.to_plan().unwrap();
/// assert!(serde_json::to_string(&plan).unwrap().contains("PartitionWithFn"));
/// ```
pub struct PartitionWithFn<F, P, T> {
    f: Arc<F>,
    params: Arc<P>,
    n: usize,
    tags: Arc<Vec<TupleTag<T>>>,
}

impl<F, P, T> Clone for PartitionWithFn<F, P, T> {
    fn clone(&self) -> Self {
        PartitionWithFn {
            f: self.f.clone(),
            params: self.params.clone(),
            n: self.n,
            tags: self.tags.clone(),
        }
    }
}

impl<F, P, T> DoFn for PartitionWithFn<F, P, T>
where
    F: Fn(&P, &T, usize) -> usize + Send + Sync + 'static,
    P: Send + Sync + 'static,
    T: Element,
{
    type In = T;
    type Out = T;
    fn process(&mut self, x: T, ctx: &mut ProcessContext<'_, T>) -> Result<(), UserError> {
        let i = (self.f)(&self.params, &x, self.n);
        route(i, self.n, &self.tags, x, ctx)
    }
}

/// The partition count of a Partition's fields; the error says what was expected.
fn partitions(n: Option<usize>) -> Result<usize, String> {
    n.filter(|n| *n > 0)
        .ok_or_else(|| "expected {\"partitions\": <a positive integer>}".to_string())
}

fn partition_tags<T>(n: usize) -> Arc<Vec<TupleTag<T>>> {
    Arc::new((1..n).map(|i| TupleTag::new(&i.to_string())).collect())
}

/// Registers a Partition's DoFn `D` under `name` and applies it with `fields`.
fn apply_partition<T: Element, D: 'static>(
    input: &PCollection<T>,
    n: usize,
    name: Result<String, String>,
    factory: registry::DoFnFactory,
    fields: serde_json::Value,
) -> Vec<PCollection<T>> {
    let p = input.pipeline().clone();
    if n == 0 {
        p.record_error("a Partition needs at least one partition".into());
    }
    let mut outputs = crate::pipeline::output_types::<T>(crate::dofn::MAIN_TAG);
    outputs.extend((1..n.max(1)).map(|i| (i.to_string(), registry::register_element_type::<T>())));
    let ids = apply_named::<D>(&p, input.id, name, factory, fields, outputs);
    ids.into_iter().map(|id| p.pcollection(id)).collect()
}

/// Registers the DoFn `D` of a function given by name (or the error making the name)
/// and applies it to `input` with `fields` and `outputs`; the output ids in tag order.
fn apply_named<D: 'static>(
    p: &crate::Pipeline,
    input: usize,
    name: Result<String, String>,
    factory: registry::DoFnFactory,
    fields: serde_json::Value,
    outputs: Vec<(String, String)>,
) -> Vec<usize> {
    let name = match name {
        Ok(name) => {
            if registry::register_do_fn_factory_checked::<D>(&name, factory).is_err() {
                p.record_error(super::fn_names::same_place_message(&name));
            }
            name
        }
        Err(m) => {
            p.record_error(m);
            std::any::type_name::<D>().to_string()
        }
    };
    apply_par_do(
        p,
        input,
        UserFunction {
            name,
            fields: fields.into(),
        },
        outputs,
    )
}

impl<T: Element, F: Fn(&T, usize) -> usize + Send + Sync + 'static> PTransform<PCollection<T>>
    for Partition<F>
{
    type Output = Vec<PCollection<T>>;
    fn expand(self, input: PCollection<T>) -> Vec<PCollection<T>> {
        let name = super::fn_names::light_fn_name::<PartitionFn<F, T>, F>(
            "Partition::of",
            Some("Partition::of_with"),
            self.site,
        );
        // The function travels by name, the partition count in the fields: one function
        // can partition several PCollections differently.
        let f = Arc::new(self.f);
        let factory: registry::DoFnFactory = Arc::new(move |fields| {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Fields {
                partitions: usize,
            }
            let n = partitions(
                erased_serde::deserialize::<Fields>(fields)
                    .ok()
                    .map(|f| f.partitions),
            )?;
            let d = PartitionFn {
                f: f.clone(),
                n,
                tags: partition_tags(n),
                _t: PhantomData,
            };
            Ok(Box::new(DoFnInvoker::new(d)) as Box<dyn ErasedDoFn>)
        });
        let fields = serde_json::json!({ "partitions": self.n });
        apply_partition::<T, PartitionFn<F, T>>(&input, self.n, name, factory, fields)
    }
}

impl<T, P, F> PTransform<PCollection<T>> for PartitionWith<F, P>
where
    T: Element,
    P: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
    F: Fn(&P, &T, usize) -> usize + Send + Sync + 'static,
{
    type Output = Vec<PCollection<T>>;
    fn expand(self, input: PCollection<T>) -> Vec<PCollection<T>> {
        let mut name = super::fn_names::light_fn_name::<PartitionWithFn<F, P, T>, F>(
            "Partition::of_with",
            None,
            self.site,
        );
        let params = match super::functions::params_fields("Partition::of_with", &self.params) {
            Ok(v) => v,
            Err(e) => {
                name = Err(e);
                serde_json::Value::Null
            }
        };
        let f = Arc::new(self.f);
        let factory: registry::DoFnFactory = Arc::new(move |fields| {
            #[derive(serde::Deserialize)]
            #[serde(deny_unknown_fields)]
            struct Fields<P> {
                partitions: usize,
                params: P,
            }
            let Fields {
                partitions: n,
                params,
            } = erased_serde::deserialize::<Fields<P>>(fields).map_err(|e| {
                format!(
                    "expected {{\"partitions\": <a positive integer>, \"params\": <{}>}}: {}",
                    std::any::type_name::<P>(),
                    crate::plan::without_position(e.to_string())
                )
            })?;
            let n = partitions(Some(n))?;
            let d = PartitionWithFn {
                f: f.clone(),
                params: Arc::new(params),
                n,
                tags: partition_tags(n),
            };
            Ok(Box::new(DoFnInvoker::new(d)) as Box<dyn ErasedDoFn>)
        });
        let fields = serde_json::json!({ "partitions": self.n, "params": params });
        apply_partition::<T, PartitionWithFn<F, P, T>>(&input, self.n, name, factory, fields)
    }
}

/// Where [`PCollection::split2`] sends an element: a typed partition by variant.
///
/// ```
/// use tidewater::Split2;
/// fn parity(x: u8) -> Split2<u8, u8> {
///     if x % 2 == 0 { Split2::First(x) } else { Split2::Second(x) }
/// }
/// assert_eq!(parity(3), Split2::Second(3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split2<A, B> {
    /// To the first output.
    First(A),
    /// To the second output.
    Second(B),
}

/// Where [`PCollection::split3`] sends an element: a typed partition by variant.
///
/// ```
/// use tidewater::Split3;
/// let s: Split3<i64, String, ()> = Split3::Second("x".into());
/// assert!(matches!(s, Split3::Second(_)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Split3<A, B, C> {
    /// To the first output.
    First(A),
    /// To the second output.
    Second(B),
    /// To the third output.
    Third(C),
}

/// The DoFn of [`PCollection::split2`] and [`PCollection::split3`]: the first output is
/// the main one, the others are tagged `1` and `2`.
///
/// ```
/// use tidewater::Split2;
/// let p = tidewater::Pipeline::new(Default::default());
/// let (_small, _big) = p.create("Xs", vec![1u32, 100])
///     .split2("BySize", |x: u32| if x < 10 { Split2::First(x) } else { Split2::Second(x as u64) });
/// let plan = serde_json::to_string(&p.to_plan().unwrap()).unwrap();
/// assert!(plan.contains("SplitFn"));
/// ```
pub struct SplitFn<F, T, A, B, C> {
    f: Arc<F>,
    second: TupleTag<B>,
    third: TupleTag<C>,
    _t: PhantomData<fn(T) -> A>,
}

impl<F, T, A, B, C> Clone for SplitFn<F, T, A, B, C> {
    fn clone(&self) -> Self {
        SplitFn {
            f: self.f.clone(),
            second: self.second.clone(),
            third: self.third.clone(),
            _t: PhantomData,
        }
    }
}

/// What a split function returns: the variant and its value.
trait Routed<A, B, C> {
    fn route(self) -> Split3<A, B, C>;
}

impl<A, B> Routed<A, B, ()> for Split2<A, B> {
    fn route(self) -> Split3<A, B, ()> {
        match self {
            Split2::First(a) => Split3::First(a),
            Split2::Second(b) => Split3::Second(b),
        }
    }
}

impl<A, B, C> Routed<A, B, C> for Split3<A, B, C> {
    fn route(self) -> Split3<A, B, C> {
        self
    }
}

impl<F, T, A, B, C, R> DoFn for SplitFn<F, T, A, B, C>
where
    F: Fn(T) -> R + Send + Sync + 'static,
    R: Routed<A, B, C>,
    T: Element,
    A: Element,
    B: Element,
    C: Element,
{
    type In = T;
    type Out = A;
    fn process(&mut self, x: T, ctx: &mut ProcessContext<'_, A>) -> Result<(), UserError> {
        match (self.f)(x).route() {
            Split3::First(a) => ctx.output(a),
            Split3::Second(b) => ctx.output_to(&self.second, b),
            Split3::Third(c) => ctx.output_to(&self.third, c),
        }
        Ok(())
    }
}

/// [`PCollection::split2`] and [`PCollection::split3`] as a transform.
struct Split<F, R> {
    f: F,
    method: &'static str,
    site: &'static std::panic::Location<'static>,
    _r: PhantomData<fn() -> R>,
}

impl<F, R> Split<F, R> {
    /// Applies the split DoFn with outputs of `A`, `B` and, if `three`, `C`.
    fn ids<T, A, B, C>(self, input: &PCollection<T>, three: bool) -> Vec<usize>
    where
        F: Fn(T) -> R + Send + Sync + 'static,
        R: Routed<A, B, C> + 'static,
        T: Element,
        A: Element,
        B: Element,
        C: Element,
    {
        let name = super::fn_names::light_fn_name::<SplitFn<F, T, A, B, C>, F>(
            self.method,
            None,
            self.site,
        );
        let mut outputs = crate::pipeline::output_types::<A>(crate::dofn::MAIN_TAG);
        outputs.push(("1".into(), registry::register_element_type::<B>()));
        if three {
            outputs.push(("2".into(), registry::register_element_type::<C>()));
        }
        let f = Arc::new(self.f);
        let factory: registry::DoFnFactory = Arc::new(move |_| {
            let d = SplitFn {
                f: f.clone(),
                second: TupleTag::<B>::new("1"),
                third: TupleTag::<C>::new("2"),
                _t: PhantomData,
            };
            Ok(Box::new(DoFnInvoker::new(d)) as Box<dyn ErasedDoFn>)
        });
        let p = input.pipeline().clone();
        apply_named::<SplitFn<F, T, A, B, C>>(
            &p,
            input.id,
            name,
            factory,
            serde_json::Value::Null,
            outputs,
        )
    }
}

impl<T, A, B, F> PTransform<PCollection<T>> for Split<F, Split2<A, B>>
where
    T: Element,
    A: Element,
    B: Element,
    F: Fn(T) -> Split2<A, B> + Send + Sync + 'static,
{
    type Output = (PCollection<A>, PCollection<B>);
    fn expand(self, input: PCollection<T>) -> Self::Output {
        let ids = self.ids::<T, A, B, ()>(&input, false);
        let p = input.pipeline();
        (p.pcollection(ids[0]), p.pcollection(ids[1]))
    }
}

impl<T, A, B, C, F> PTransform<PCollection<T>> for Split<F, Split3<A, B, C>>
where
    T: Element,
    A: Element,
    B: Element,
    C: Element,
    F: Fn(T) -> Split3<A, B, C> + Send + Sync + 'static,
{
    type Output = (PCollection<A>, PCollection<B>, PCollection<C>);
    fn expand(self, input: PCollection<T>) -> Self::Output {
        let ids = self.ids::<T, A, B, C>(&input, true);
        let p = input.pipeline();
        (
            p.pcollection(ids[0]),
            p.pcollection(ids[1]),
            p.pcollection(ids[2]),
        )
    }
}

impl<T: Element> PCollection<T> {
    /// Splits by variant into two typed PCollections (a Partition whose outputs have
    /// types of their own): `f` returns [`Split2::First`] or [`Split2::Second`]; a named
    /// `fn` item or a closure that captures nothing.
    ///
    /// ```
    /// use tidewater::Split2;
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let lines = p.create("Lines", vec!["7".to_string(), "x".to_string()]);
    /// let (numbers, words) = lines.split2("Parse", |l: String| match l.parse::<i64>() {
    ///     Ok(n) => Split2::First(n),
    ///     Err(_) => Split2::Second(l),
    /// });
    /// numbers.capture("numbers");
    /// words.capture("words");
    /// # assert!(p.construction_errors().is_empty());
    /// ```
    #[track_caller]
    pub fn split2<A, B, F>(&self, name: &str, f: F) -> (PCollection<A>, PCollection<B>)
    where
        A: Element,
        B: Element,
        F: Fn(T) -> Split2<A, B> + Send + Sync + 'static,
    {
        self.apply(
            name,
            Split {
                f,
                method: "split2",
                site: std::panic::Location::caller(),
                _r: PhantomData,
            },
        )
    }

    /// Splits by variant into three typed PCollections: `f` returns
    /// [`Split3::First`], [`Split3::Second`] or [`Split3::Third`] (Nexmark's persons,
    /// auctions and bids from one event stream, in one pass).
    ///
    /// ```
    /// use tidewater::Split3;
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let xs = p.create("Xs", vec![-1i64, 0, 5]);
    /// let (neg, zero, pos) = xs.split3("Sign", |x: i64| match x.signum() {
    ///     -1 => Split3::First(x),
    ///     0 => Split3::Second(()),
    ///     _ => Split3::Third(x as u64),
    /// });
    /// # let _ = (neg, zero, pos);
    /// # assert!(p.construction_errors().is_empty());
    /// ```
    #[track_caller]
    pub fn split3<A, B, C, F>(
        &self,
        name: &str,
        f: F,
    ) -> (PCollection<A>, PCollection<B>, PCollection<C>)
    where
        A: Element,
        B: Element,
        C: Element,
        F: Fn(T) -> Split3<A, B, C> + Send + Sync + 'static,
    {
        self.apply(
            name,
            Split {
                f,
                method: "split3",
                site: std::panic::Location::caller(),
                _r: PhantomData,
            },
        )
    }
}
