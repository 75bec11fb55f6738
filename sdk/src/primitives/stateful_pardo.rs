use crate::plan::{FunctionSpec, UserFunction, urn};
use crate::{PCollection, PTransform, StatefulDoFn};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Applies a [`StatefulDoFn`] to a keyed PCollection. State is kept per encoded key, so
/// like [`GroupByKey`](crate::GroupByKey) it refuses a key type with a float or a
/// `HashMap`/`HashSet` in it.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// # use tidewater::{StateContext, StatefulDoFn, UserError};
/// # #[derive(Serialize, Deserialize)] struct RunningCount;
/// # impl StatefulDoFn for RunningCount { type Key = String; type Value = u64; type Out = (String, u64);
/// #   fn process(&mut self, w: &String, n: u64, ctx: &mut StateContext<'_, (String, u64)>) -> Result<(), UserError> {
/// #     let c = ctx.read_value::<u64>("c")?.unwrap_or(0) + n; ctx.write_value("c", &c)?; ctx.output((w.clone(), c)); Ok(()) } }
/// let p = tidewater::Pipeline::new(Default::default());
/// let running = p.create("Words", vec![("a".to_string(), 1u64)]).apply("Running", tidewater::StatefulParDo::of(RunningCount));
/// ```
pub struct StatefulParDo<F> {
    f: F,
}

impl StatefulParDo<()> {
    /// A stateful ParDo of `f`; its fields travel in the plan.
    pub fn of<F: StatefulDoFn + Serialize + DeserializeOwned>(f: F) -> StatefulParDo<F> {
        StatefulParDo { f }
    }
}

impl<F: StatefulDoFn + Serialize + DeserializeOwned> PTransform<PCollection<(F::Key, F::Value)>>
    for StatefulParDo<F>
{
    type Output = PCollection<F::Out>;
    fn expand(self, input: PCollection<(F::Key, F::Value)>) -> PCollection<F::Out> {
        let p = input.pipeline().clone();
        if p.windowing_of(input.id).window_fn.is_merging() {
            p.record_error("a stateful ParDo cannot run over merging windows (sessions): state is kept per window, and merging windows have none until they merge (Beam refuses it too); window the input with non-merging windows".into());
        }
        crate::key_check::check_key_type::<F::Key>(&p, "StatefulParDo");
        let name = crate::registry::register_stateful_do_fn::<F>();
        let fields = serde_json::to_value(&self.f).unwrap_or_else(|e| {
            p.record_error(format!("the fields of {name} do not serialize: {e}"));
            serde_json::Value::Null
        });
        let payload = serde_json::json!({ "do_fn": UserFunction { name, fields: fields.into() } });
        let bounded = p.is_bounded(&[input.id]);
        let out = p.set_primitive(
            FunctionSpec {
                urn: urn::STATEFUL_PAR_DO.into(),
                payload: payload.into(),
            },
            true,
            crate::pipeline::output_types::<F::Out>("main"),
            bounded,
        );
        p.pcollection(out[0])
    }
}
