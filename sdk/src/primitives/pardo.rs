use crate::dofn::MAIN_TAG;
use crate::plan::{FunctionSpec, ParDoPayload, SideInputSpec, UserFunction, urn};
use crate::registry::{self, register_element_type};
use crate::transform::POutput;
use crate::{DoFn, Element, PCollection, PTransform, Pipeline, TupleTag};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// Applies a [`DoFn`] to every element.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use tidewater::{DoFn, ParDo, ProcessContext, UserError};
/// #[derive(Serialize, Deserialize)]
/// struct Double;
/// impl DoFn for Double {
///     type In = i64;
///     type Out = i64;
///     fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
///         ctx.output(2 * x);
///         Ok(())
///     }
/// }
/// let p = tidewater::Pipeline::new(Default::default());
/// let doubled = p.create("Xs", vec![1i64]).apply("Double", ParDo::of(Double));
/// ```
pub struct ParDo<F> {
    f: F,
    sides: Vec<Side>,
}

/// A declared side input: tag, side PCollection, view function name.
#[derive(Clone)]
pub(crate) struct Side {
    tag: String,
    pcollection: usize,
    view: String,
}

fn side_of<T>(view: &crate::PCollectionView<T>) -> Side {
    let (pcollection, name) = view
        .source()
        .cloned()
        .expect("a view made by as_singleton/as_iterable/as_map/as_multimap");
    Side {
        tag: view.tag().to_string(),
        pcollection,
        view: name,
    }
}

impl ParDo<()> {
    /// A ParDo of `f`; its struct fields travel in the plan.
    pub fn of<F: DoFn + Serialize + DeserializeOwned>(f: F) -> ParDo<F> {
        ParDo {
            f,
            sides: Vec::new(),
        }
    }
}

impl<F: DoFn + Serialize + DeserializeOwned> ParDo<F> {
    /// The same ParDo with tagged outputs besides the main one: `tags` lists them,
    /// built with [`ParDoWithOutputs::and`].
    pub fn with_outputs(self) -> ParDoWithOutputs<F> {
        ParDoWithOutputs {
            f: self.f,
            tags: Vec::new(),
            sides: self.sides,
        }
    }

    /// Declares a side input the DoFn reads with `ctx.side_input(&view)`. A view the
    /// DoFn holds in a field declares itself (this is then not needed); one it reaches
    /// otherwise (a static, a view built inside `process`) must be declared here.
    pub fn with_side_input<T>(mut self, view: &crate::PCollectionView<T>) -> Self {
        self.sides.push(side_of(view));
        self
    }
}

/// A ParDo with tagged outputs; its output is a [`PCollectionTuple`].
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use tidewater::{DoFn, ParDo, ProcessContext, TupleTag, UserError};
/// #[derive(Serialize, Deserialize)]
/// struct Parse { bad: TupleTag<String> }
/// impl DoFn for Parse {
///     type In = String;
///     type Out = i64;
///     fn process(&mut self, s: String, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
///         match s.parse() {
///             Ok(n) => ctx.output(n),
///             Err(_) => ctx.output_to(&self.bad, s),
///         }
///         Ok(())
///     }
/// }
/// let bad = TupleTag::<String>::new("bad");
/// let p = tidewater::Pipeline::new(Default::default());
/// let out = p.create("Xs", vec!["1".to_string(), "x".to_string()])
///     .apply("Parse", ParDo::of(Parse { bad: bad.clone() }).with_outputs().and(&bad));
/// let numbers = out.main::<i64>();
/// let errors = out.get(&bad);
/// ```
pub struct ParDoWithOutputs<F> {
    f: F,
    tags: Vec<(String, String)>,
    sides: Vec<Side>,
}

impl<F> ParDoWithOutputs<F> {
    /// Declares the tagged output `tag`.
    pub fn and<T: Element>(mut self, tag: &TupleTag<T>) -> Self {
        self.tags
            .push((tag.name().to_string(), register_element_type::<T>()));
        self
    }
}

/// The outputs of a ParDo with tagged outputs, by tag.
pub struct PCollectionTuple {
    pipeline: Pipeline,
    outputs: BTreeMap<String, usize>,
}

impl PCollectionTuple {
    /// The main output.
    pub fn main<T: Element>(&self) -> PCollection<T> {
        self.by_name(MAIN_TAG)
    }

    /// The output of `tag`. A tag that was not declared, or one of another element
    /// type than the output holds, is a construction error: `run` and `to_plan`
    /// return it.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// # use tidewater::{DoFn, ParDo, ProcessContext, TupleTag, UserError};
    /// # #[derive(Serialize, Deserialize)]
    /// # struct Id { odd: TupleTag<u8> }
    /// # impl DoFn for Id {
    /// #     type In = u8;
    /// #     type Out = u8;
    /// #     fn process(&mut self, x: u8, ctx: &mut ProcessContext<'_, u8>) -> Result<(), UserError> {
    /// #         if x % 2 == 1 { ctx.output_to(&self.odd, x) } else { ctx.output(x) }
    /// #         Ok(())
    /// #     }
    /// # }
    /// let odd = TupleTag::<u8>::new("odd");
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let out = p.create("Xs", vec![1u8, 2])
    ///     .apply("Split", ParDo::of(Id { odd: odd.clone() }).with_outputs().and(&odd));
    /// let odds = out.get(&odd);
    /// assert!(p.construction_errors().is_empty());
    ///
    /// let _ = out.get(&TupleTag::<String>::new("odd"));
    /// assert!(p.construction_errors()[0].contains("holds u8, not alloc::string::String"));
    /// let _ = out.get(&TupleTag::<u8>::new("even"));
    /// assert!(p.construction_errors()[1].contains("no output tagged 'even'"));
    /// ```
    pub fn get<T: Element>(&self, tag: &TupleTag<T>) -> PCollection<T> {
        self.by_name(tag.name())
    }

    /// The output tagged `tag`; a missing tag or another element type is a
    /// construction error (and what is returned then is produced by nothing).
    fn by_name<T: Element>(&self, tag: &str) -> PCollection<T> {
        let Some(&id) = self.outputs.get(tag) else {
            self.pipeline.record_error(format!(
                "no output tagged '{tag}'; declared: {}",
                self.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
            return self.pipeline.orphan();
        };
        let declared = self.pipeline.element_type_of(id);
        let asked = std::any::type_name::<T>();
        if declared != asked {
            self.pipeline.record_error(format!(
                "output '{tag}' holds {declared}, not {asked}: read it with the TupleTag it was declared with"
            ));
            return self.pipeline.orphan();
        }
        self.pipeline.pcollection(id)
    }
}

impl POutput for PCollectionTuple {
    fn pcollections(&self) -> Vec<(String, usize)> {
        self.outputs.iter().map(|(k, v)| (k.clone(), *v)).collect()
    }
}

/// Adds a ParDo primitive running `do_fn` to the transform being expanded; returns the
/// output ids in tag order.
pub(crate) fn apply_par_do(
    p: &Pipeline,
    input: usize,
    do_fn: UserFunction,
    outputs: Vec<(String, String)>,
) -> Vec<usize> {
    apply_par_do_with_sides(p, input, do_fn, outputs, &[])
}

pub(crate) fn apply_par_do_with_sides(
    p: &Pipeline,
    input: usize,
    do_fn: UserFunction,
    outputs: Vec<(String, String)>,
    sides: &[Side],
) -> Vec<usize> {
    p.add_inputs(
        sides
            .iter()
            .map(|s| (s.tag.clone(), s.pcollection))
            .collect(),
    );
    for (i, (tag, _)) in outputs.iter().enumerate() {
        if outputs[..i].iter().any(|(t, _)| t == tag) {
            p.record_error(format!("output tag '{tag}' is declared twice"));
        }
    }
    let payload = ParDoPayload {
        do_fn,
        output_tags: outputs.iter().map(|(t, _)| t.clone()).collect(),
        side_inputs: sides
            .iter()
            .map(|s| SideInputSpec {
                tag: s.tag.clone(),
                view: UserFunction {
                    name: s.view.clone(),
                    fields: crate::plan::Json::null(),
                },
            })
            .collect(),
    };
    let spec = FunctionSpec {
        urn: urn::PAR_DO.into(),
        payload: serde_json::to_value(payload)
            .expect("payload serializes")
            .into(),
    };
    let bounded = p.is_bounded(&[input]);
    p.set_primitive(spec, true, outputs, bounded)
}

/// The DoFn for the plan, with the side inputs declared: those given with
/// `with_side_input` and every view held in the DoFn's fields (a view declares itself
/// when the fields are written).
fn do_fn_and_sides<F: DoFn + Serialize + DeserializeOwned>(
    p: &Pipeline,
    f: &F,
    declared: &[Side],
) -> (UserFunction, Vec<Side>) {
    let (do_fn, views) = crate::side_input::views_in(|| serde_do_fn(p, f));
    let mut sides = declared.to_vec();
    for (tag, pcollection, view) in views {
        if !sides.iter().any(|s| s.tag == tag) {
            sides.push(Side {
                tag,
                pcollection,
                view,
            });
        }
    }
    (do_fn, sides)
}

fn serde_do_fn<F: DoFn + Serialize + DeserializeOwned>(p: &Pipeline, f: &F) -> UserFunction {
    let name = registry::register_do_fn::<F>();
    let fields = serde_json::to_value(f).unwrap_or_else(|e| {
        p.record_error(format!("the fields of DoFn {name} do not serialize: {e}"));
        serde_json::Value::Null
    });
    UserFunction {
        name,
        fields: fields.into(),
    }
}

impl<F: DoFn + Serialize + DeserializeOwned> PTransform<PCollection<F::In>> for ParDo<F> {
    type Output = PCollection<F::Out>;
    fn expand(self, input: PCollection<F::In>) -> PCollection<F::Out> {
        let p = input.pipeline().clone();
        let (do_fn, sides) = do_fn_and_sides(&p, &self.f, &self.sides);
        let out = apply_par_do_with_sides(
            &p,
            input.id,
            do_fn,
            crate::pipeline::output_types::<F::Out>(MAIN_TAG),
            &sides,
        );
        p.pcollection(out[0])
    }
}

impl<F: DoFn + Serialize + DeserializeOwned> PTransform<PCollection<F::In>>
    for ParDoWithOutputs<F>
{
    type Output = PCollectionTuple;
    fn expand(self, input: PCollection<F::In>) -> PCollectionTuple {
        let p = input.pipeline().clone();
        let (do_fn, sides) = do_fn_and_sides(&p, &self.f, &self.sides);
        let mut tags = crate::pipeline::output_types::<F::Out>(MAIN_TAG);
        tags.extend(self.tags);
        let names: Vec<String> = tags.iter().map(|(t, _)| t.clone()).collect();
        let ids = apply_par_do_with_sides(&p, input.id, do_fn, tags, &sides);
        PCollectionTuple {
            pipeline: p,
            outputs: names.into_iter().zip(ids).collect(),
        }
    }
}
