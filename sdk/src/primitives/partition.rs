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
        match (self.f)(&x, self.n) {
            0 => ctx.output(x),
            i if i < self.n => ctx.output_to(&self.tags[i - 1], x),
            i => {
                return Err(format!(
                    "the partition function returned {i}, but there are only {} partitions (0..{})",
                    self.n, self.n
                )
                .into())
            }
        }
        Ok(())
    }
}

impl<T: Element, F: Fn(&T, usize) -> usize + Send + Sync + 'static> PTransform<PCollection<T>>
    for Partition<F>
{
    type Output = Vec<PCollection<T>>;
    fn expand(self, input: PCollection<T>) -> Vec<PCollection<T>> {
        let p = input.pipeline().clone();
        let name = super::functions::light_fn_name::<PartitionFn<F, T>, F>(
            "Partition::of",
            None,
            self.site,
        );
        if self.n == 0 {
            p.record_error("a Partition needs at least one partition".into());
        }
        let mut outputs = crate::pipeline::output_types::<T>(crate::dofn::MAIN_TAG);
        outputs.extend(
            (1..self.n.max(1)).map(|i| (i.to_string(), registry::register_element_type::<T>())),
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
            let n = erased_serde::deserialize::<Fields>(fields)
                .ok()
                .map(|f| f.partitions)
                .filter(|n| *n > 0)
                .ok_or_else(|| "expected {\"partitions\": <a positive integer>}".to_string())?;
            let tags = Arc::new((1..n).map(|i| TupleTag::new(&i.to_string())).collect());
            let d = PartitionFn {
                f: f.clone(),
                n,
                tags,
                _t: PhantomData,
            };
            Ok(Box::new(DoFnInvoker::new(d)) as Box<dyn ErasedDoFn>)
        });
        let name = match name {
            Ok(name) => {
                if registry::register_do_fn_factory_checked::<PartitionFn<F, T>>(&name, factory)
                    .is_err()
                {
                    p.record_error(super::functions::same_place_message(&name));
                }
                name
            }
            Err(m) => {
                p.record_error(m);
                std::any::type_name::<PartitionFn<F, T>>().to_string()
            }
        };
        let fields = serde_json::json!({ "partitions": self.n });
        let ids = apply_par_do(
            &p,
            input.id,
            UserFunction {
                name,
                fields: fields.into(),
            },
            outputs,
        );
        ids.into_iter().map(|id| p.pcollection(id)).collect()
    }
}
