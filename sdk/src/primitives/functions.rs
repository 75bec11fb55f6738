//! `map`, `flat_map`, `filter` and `with_keys` over plain `fn` items.
//!
//! A function item (`fn split(line: String) -> Vec<String>`) has a unique, stable type
//! name and no state, so it travels in the plan by name alone. Closures are refused at
//! construction: they have no stable name (every closure in `main` is
//! `main::{{closure}}`) and their captured state cannot be serialized.

use super::pardo::apply_par_do;
use crate::exec::{DoFnInvoker, ErasedDoFn};
use crate::plan::UserFunction;
use crate::registry::{self, register_element_type};
use crate::{DoFn, Element, PCollection, PTransform, ProcessContext, UserError};
use std::marker::PhantomData;
use std::sync::Arc;

/// Checks that `F` is a function item; otherwise says how to fix the call.
pub(crate) fn check_function_item<F: 'static>(method: &str) -> Result<(), String> {
    let name = std::any::type_name::<F>();
    if last_segment(name).starts_with("{{closure}}") {
        return Err(format!(
            "{method}() was given a closure ({name}). Closures cannot travel in a plan: they have no stable \
             name and what they capture cannot be serialized. Move the code into a named function item, \
             e.g. `fn my_step(x: In) -> Out {{ ... }}`, and pass `my_step`; for a function with \
             parameters, implement DoFn on a struct with serde fields and use ParDo::of"
        ));
    }
    if std::mem::size_of::<F>() != 0 {
        return Err(format!(
            "{method}() was given {name}, which is not a function item (a function pointer or a value \
             with state cannot travel in a plan). Pass a `fn` item by its name, or implement DoFn on a \
             struct with serde fields and use ParDo::of"
        ));
    }
    Ok(())
}

/// The last path segment of a type name, generics aside: `a::b<c::d>::e` gives `e`.
fn last_segment(type_name: &str) -> &str {
    let (mut depth, mut start) = (0usize, 0usize);
    let bytes = type_name.as_bytes();
    for (i, c) in bytes.iter().enumerate() {
        match c {
            b'<' => depth += 1,
            b'>' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && i + 1 < bytes.len() && bytes[i + 1] == b':' => start = i + 2,
            _ => {}
        }
    }
    &type_name[start.min(type_name.len())..]
}

/// A ParDo whose DoFn wraps a function item; the DoFn is registered with a factory
/// that shares the function.
pub(crate) struct FunctionParDo<D> {
    do_fn: D,
    check: Result<(), String>,
}

impl<D> FunctionParDo<D> {
    pub(crate) fn new(do_fn: D, check: Result<(), String>) -> Self {
        FunctionParDo { do_fn, check }
    }
}

impl<D> PTransform<PCollection<D::In>> for FunctionParDo<D>
where
    D: DoFn + Clone + Sync,
{
    type Output = PCollection<D::Out>;
    fn expand(self, input: PCollection<D::In>) -> PCollection<D::Out> {
        let p = input.pipeline().clone();
        if let Err(message) = self.check {
            p.record_error(message);
        }
        register_element_type::<D::In>();
        let name = std::any::type_name::<D>().to_string();
        let d = self.do_fn;
        registry::register_do_fn_factory::<D>(
            &name,
            Arc::new(move |_| Ok(Box::new(DoFnInvoker::new(d.clone())) as Box<dyn ErasedDoFn>)),
        );
        let out = apply_par_do(
            &p,
            input.id,
            UserFunction {
                name,
                fields: serde_json::Value::Null,
            },
            crate::pipeline::output_types::<D::Out>(crate::dofn::MAIN_TAG),
        );
        p.pcollection(out[0])
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

impl<T: Element> PCollection<T> {
    /// Applies the function item `f` to every element.
    ///
    /// ```
    /// fn len(s: String) -> usize { s.len() }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let lens = p.create("Words", vec!["ab".to_string()]).map("Len", len);
    /// assert!(p.construction_errors().is_empty());
    ///
    /// // A closure is refused, with a message saying what to do instead.
    /// let _ = p.create("More", vec![1u8]).map("Inc", |x: u8| x + 1);
    /// assert!(p.construction_errors()[0].contains("Move the code into a named function item"));
    /// ```
    pub fn map<B: Element, F: Fn(T) -> B + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<B> {
        let check = check_function_item::<F>("map");
        self.apply(
            name,
            FunctionParDo {
                do_fn: MapFn::new(f),
                check,
            },
        )
    }

    /// Applies `f` to every element and outputs every item of what it returns.
    ///
    /// ```
    /// fn split(s: String) -> Vec<String> { s.split(' ').map(str::to_string).collect() }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let words = p.create("Lines", vec!["a b".to_string()]).flat_map("Split", split);
    /// ```
    pub fn flat_map<I, F>(&self, name: &str, f: F) -> PCollection<I::Item>
    where
        I: IntoIterator + 'static,
        I::Item: Element,
        F: Fn(T) -> I + Send + Sync + 'static,
    {
        let check = check_function_item::<F>("flat_map");
        self.apply(
            name,
            FunctionParDo {
                do_fn: FlatMapFn::new(f),
                check,
            },
        )
    }

    /// Keeps the elements for which `f` returns true.
    ///
    /// ```
    /// fn even(x: &i64) -> bool { x % 2 == 0 }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let evens = p.create("Xs", vec![1i64, 2]).filter("Even", even);
    /// ```
    pub fn filter<F: Fn(&T) -> bool + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<T> {
        let check = check_function_item::<F>("filter");
        self.apply(
            name,
            FunctionParDo {
                do_fn: FilterFn::new(f),
                check,
            },
        )
    }

    /// Pairs every element with the key `f` computes: `x` becomes `(f(&x), x)`.
    ///
    /// ```
    /// fn first_letter(s: &String) -> String { s[..1].to_string() }
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let keyed = p.create("Words", vec!["ab".to_string()]).with_keys("ByLetter", first_letter);
    /// ```
    pub fn with_keys<K: Element, F: Fn(&T) -> K + Send + Sync + 'static>(
        &self,
        name: &str,
        f: F,
    ) -> PCollection<(K, T)> {
        let check = check_function_item::<F>("with_keys");
        self.apply(
            name,
            FunctionParDo {
                do_fn: WithKeysFn::new(f),
                check,
            },
        )
    }
}
