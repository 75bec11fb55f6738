//! Pipeline and PCollection: building the graph.

use crate::plan::{
    self, CoderSpec, Components, EnvironmentSpec, FunctionSpec, IsBounded, PCollectionSpec, Plan,
    TransformSpec, urn,
};
use crate::runner::{self, PipelineResult};
use crate::transform::{PBegin, PInput, POutput, PTransform};
use crate::{Element, Error, PipelineOptions, Result, WindowingStrategy};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::marker::PhantomData;
use std::rc::Rc;

const GLOBAL_WINDOW_CODER: &str = "global_window";
const INTERVAL_WINDOW_CODER: &str = "interval_window";
static GLOBAL: std::sync::LazyLock<WindowingStrategy> =
    std::sync::LazyLock::new(WindowingStrategy::global);

/// The id of the `n`th distinct windowing strategy: "global" for the default one, so
/// that plans of unwindowed pipelines read plainly.
fn windowing_id(n: usize, w: &WindowingStrategy) -> String {
    if *w == *GLOBAL {
        "global".into()
    } else {
        format!("windowing{n}")
    }
}
const RUST_ENV: &str = "rust";

thread_local! {
    /// The pipelines whose transforms are being expanded on this thread, innermost last.
    static EXPANDING: RefCell<Vec<Pipeline>> = const { RefCell::new(Vec::new()) };
}

struct TransformNode {
    unique_name: String,
    spec: Option<FunctionSpec>,
    inputs: Vec<(String, usize)>,
    outputs: Vec<(String, usize)>,
    subtransforms: Vec<usize>,
    runs_user_code: bool,
    uid: Option<String>,
}

struct PCollectionNode {
    unique_name: String,
    element_type: String,
    bounded: IsBounded,
    windowing: WindowingStrategy,
}

#[derive(Default)]
struct Graph {
    transforms: Vec<TransformNode>,
    pcollections: Vec<PCollectionNode>,
    roots: Vec<usize>,
    scopes: Vec<usize>,
    names: BTreeSet<String>,
    capture_names: BTreeSet<String>,
    errors: Vec<Error>,
}

/// A pipeline under construction: the graph of transforms and PCollections, and the
/// options it runs with.
///
/// ```
/// use tidewater::{Pipeline, PipelineOptions};
/// tidewater_runner_direct::register();
/// let p = Pipeline::new(PipelineOptions::default());
/// let squares = p.create("Numbers", vec![1i64, 2, 3]).map("Square", square);
/// squares.capture("squares");
/// let result = p.run().unwrap();
/// assert_eq!(result.captured_values::<i64>("squares").unwrap(), vec![1, 4, 9]);
///
/// fn square(x: i64) -> i64 { x * x }
/// ```
#[derive(Clone)]
pub struct Pipeline {
    graph: Rc<RefCell<Graph>>,
    options: Rc<PipelineOptions>,
}

/// A typed, immutable collection of elements: the output of one transform.
pub struct PCollection<T> {
    pub(crate) pipeline: Pipeline,
    pub(crate) id: usize,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for PCollection<T> {
    fn clone(&self) -> Self {
        PCollection {
            pipeline: self.pipeline.clone(),
            id: self.id,
            _t: PhantomData,
        }
    }
}

impl Pipeline {
    /// An empty pipeline that will run with `options`.
    pub fn new(options: PipelineOptions) -> Self {
        Pipeline {
            graph: Rc::new(RefCell::new(Graph::default())),
            options: Rc::new(options),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &PipelineOptions {
        &self.options
    }

    /// Applies a root transform (Create, Impulse, a read) under `name`.
    pub fn apply<Tr: PTransform<PBegin>>(&self, name: &str, transform: Tr) -> Tr::Output {
        self.apply_transform(name, PBegin(self.clone()), transform)
    }

    /// The pipeline as a portable plan, or the first construction error.
    pub fn to_plan(&self) -> Result<Plan> {
        let g = self.graph.borrow();
        if let Some(e) = g.errors.first() {
            return Err(clone_error(e));
        }
        let plan = g.to_plan();
        let json = plan::encode(&plan);
        for name in crate::registry::collisions() {
            if json.contains(&format!("\"{name}\"")) {
                return Err(Error::Construction {
                    transform: String::new(),
                    message: format!(
                        "two different Rust types are both named '{name}' (for example two functions with the same path \
                         in sibling blocks), so the plan cannot tell them apart: give one of them a distinct name"
                    ),
                });
            }
        }
        Ok(plan)
    }

    /// Every construction error recorded so far.
    pub fn construction_errors(&self) -> Vec<String> {
        self.graph
            .borrow()
            .errors
            .iter()
            .map(|e| e.to_string())
            .collect()
    }

    /// Runs the pipeline on the runner the options name: the plan is encoded to JSON,
    /// decoded again, checked against the runner's capabilities and only then run.
    pub fn run(&self) -> Result<PipelineResult> {
        crate::log::init(self.options.log_format);
        let plan = self.to_plan()?;
        let json = plan::encode(&plan);
        if let Some(path) = &self.options.dump_plan {
            std::fs::write(path, &json).map_err(|cause| Error::Io {
                what: "cannot write the plan to".into(),
                path: path.clone(),
                cause,
            })?;
            tracing::info!("wrote the plan to {}", path.display());
        }
        if let Some(path) = &self.options.dump_plan_dot {
            let render = runner::plan_renderer().ok_or_else(|| Error::InvalidOption {
                option: "--dump-plan-dot".into(),
                message: "no runner linked into this binary renders plans".into(),
            })?;
            std::fs::write(path, render(&plan)?).map_err(|cause| Error::Io {
                what: "cannot write the pipeline graph to".into(),
                path: path.clone(),
                cause,
            })?;
            tracing::info!("wrote the pipeline graph to {}", path.display());
        }
        if self.options.plan.is_some() {
            return run_plan_file(&self.options);
        }
        run_plan_json(&json, &self.options)
    }

    /// Applies `transform` to any input (a tuple of PCollections, a list) under `name`.
    ///
    /// ```
    /// use tidewater::{Flatten, Pipeline};
    /// let p = Pipeline::new(Default::default());
    /// let a = p.create("A", vec![1u8]);
    /// let both = p.apply_to("Both", vec![a.clone(), a], Flatten);
    /// ```
    pub fn apply_to<I: PInput, Tr: PTransform<I>>(
        &self,
        name: &str,
        input: I,
        transform: Tr,
    ) -> Tr::Output {
        self.apply_transform(name, input, transform)
    }

    pub(crate) fn apply_transform<I: PInput, Tr: PTransform<I>>(
        &self,
        name: &str,
        input: I,
        transform: Tr,
    ) -> Tr::Output {
        let id = self.begin(name, input.pcollections());
        EXPANDING.with(|e| e.borrow_mut().push(self.clone()));
        let output = transform.expand(input);
        EXPANDING.with(|e| e.borrow_mut().pop());
        self.end(id, output.pcollections());
        output
    }

    /// The pipeline whose transform this thread is expanding, if any: for a transform
    /// whose input cannot name it (an empty list).
    pub(crate) fn expanding() -> Option<Pipeline> {
        EXPANDING.with(|e| e.borrow().last().cloned())
    }

    /// A PCollection that no transform produces, handed out after a construction
    /// error (a missing tag, say) so that construction can go on to report the rest;
    /// the pipeline never runs.
    pub(crate) fn orphan<T: Element>(&self) -> PCollection<T> {
        let id = {
            let mut g = self.graph.borrow_mut();
            let id = g.pcollections.len();
            g.pcollections.push(PCollectionNode {
                unique_name: format!("(error {id})"),
                element_type: crate::registry::register_element_type::<T>(),
                bounded: IsBounded::Bounded,
                windowing: WindowingStrategy::global(),
            });
            id
        };
        self.pcollection(id)
    }

    fn begin(&self, name: &str, inputs: Vec<(String, usize)>) -> usize {
        let mut g = self.graph.borrow_mut();
        let parent = g.scopes.last().copied();
        let full = match parent {
            Some(p) => format!("{}/{}", g.transforms[p].unique_name, name),
            None => name.to_string(),
        };
        if name.is_empty() {
            g.errors.push(Error::Construction {
                transform: full.clone(),
                message: "a transform name may not be empty".into(),
            });
        } else if !g.names.insert(full.clone()) {
            g.errors.push(Error::Construction {
                transform: full.clone(),
                message: "this name is already used by another transform at the same level; give each application its own name".into(),
            });
        }
        let id = g.transforms.len();
        g.transforms.push(TransformNode {
            unique_name: full,
            spec: None,
            inputs,
            outputs: Vec::new(),
            subtransforms: Vec::new(),
            runs_user_code: false,
            uid: None,
        });
        match parent {
            Some(p) => g.transforms[p].subtransforms.push(id),
            None => g.roots.push(id),
        }
        g.scopes.push(id);
        id
    }

    fn end(&self, id: usize, outputs: Vec<(String, usize)>) {
        let mut g = self.graph.borrow_mut();
        g.scopes.pop();
        if g.transforms[id].spec.is_none() {
            g.transforms[id].outputs = outputs;
        }
    }

    /// Gives the transform the user applied to produce PCollection `pc` (the
    /// outermost one that outputs it) the uid `uid`.
    fn set_uid(&self, pc: usize, uid: &str) {
        let producer = {
            let g = self.graph.borrow();
            (0..g.transforms.len())
                .filter(|&t| g.transforms[t].outputs.iter().any(|(_, o)| *o == pc))
                .min_by_key(|&t| g.transforms[t].unique_name.len())
        };
        self.set_uid_of(producer, uid);
    }

    /// Gives the transform being expanded the uid `uid` (a transform without output,
    /// such as a sink, takes its uid so).
    pub(crate) fn set_current_uid(&self, uid: &str) {
        let current = self.graph.borrow().scopes.last().copied();
        self.set_uid_of(current, uid);
    }

    /// Gives transform `producer` the uid `uid`, or records why not.
    fn set_uid_of(&self, producer: Option<usize>, uid: &str) {
        let mut g = self.graph.borrow_mut();
        let message = if uid.is_empty() {
            Some("a uid may not be empty".to_string())
        } else if g.transforms.iter().any(|t| t.uid.as_deref() == Some(uid)) {
            Some(format!(
                "the uid '{uid}' is already given to another transform"
            ))
        } else {
            None
        };
        match (producer, message) {
            (Some(t), None) => g.transforms[t].uid = Some(uid.to_string()),
            (t, message) => {
                let transform = t
                    .map(|t| g.transforms[t].unique_name.clone())
                    .unwrap_or_default();
                g.errors.push(Error::Construction {
                    transform,
                    message: message.unwrap_or_else(|| {
                        "no transform produces this PCollection: it cannot take a uid".into()
                    }),
                });
            }
        }
    }

    /// The full name of the transform being expanded.
    pub(crate) fn current_name(&self) -> String {
        let g = self.graph.borrow();
        g.scopes
            .last()
            .map(|&s| g.transforms[s].unique_name.clone())
            .unwrap_or_default()
    }

    /// Records a construction error against the transform being expanded: `run` and
    /// `to_plan` return it. Composite transforms call this for bad arguments (a read
    /// whose pattern matches no file, say) instead of panicking.
    ///
    /// ```
    /// let p = tidewater::Pipeline::new(Default::default());
    /// p.record_error("no good".into());
    /// assert_eq!(p.to_plan().unwrap_err().to_string(), "cannot construct transform '': no good");
    /// ```
    pub fn record_error(&self, message: String) {
        let transform = self.current_name();
        self.graph
            .borrow_mut()
            .errors
            .push(Error::Construction { transform, message });
    }

    /// Makes the transform being expanded a primitive with `spec`; returns its outputs,
    /// one new PCollection per `(tag, element type)`, windowed like the first input (or
    /// globally, for a root).
    pub(crate) fn set_primitive(
        &self,
        spec: FunctionSpec,
        runs_user_code: bool,
        output_types: Vec<(String, String)>,
        bounded: IsBounded,
    ) -> Vec<usize> {
        let windowing = {
            let g = self.graph.borrow();
            let id = *g.scopes.last().expect("set_primitive outside of apply");
            g.transforms[id]
                .inputs
                .first()
                .map(|(_, pc)| g.pcollections[*pc].windowing.clone())
                .unwrap_or_else(WindowingStrategy::global)
        };
        self.set_primitive_windowed(spec, runs_user_code, output_types, bounded, windowing)
    }

    /// [`Pipeline::set_primitive`] with the outputs' windowing strategy given.
    pub(crate) fn set_primitive_windowed(
        &self,
        spec: FunctionSpec,
        runs_user_code: bool,
        output_types: Vec<(String, String)>,
        bounded: IsBounded,
        windowing: WindowingStrategy,
    ) -> Vec<usize> {
        let mut g = self.graph.borrow_mut();
        let Some(&id) = g.scopes.last() else {
            panic!("set_primitive outside of apply: primitives are applied through apply()");
        };
        assert!(
            g.transforms[id].spec.is_none() && g.transforms[id].subtransforms.is_empty(),
            "a primitive expanded twice"
        );
        let mut outs = Vec::new();
        for (tag, element_type) in output_types {
            let pc = g.pcollections.len();
            let unique_name = format!("{}.{}", g.transforms[id].unique_name, tag);
            g.pcollections.push(PCollectionNode {
                unique_name,
                element_type,
                bounded,
                windowing: windowing.clone(),
            });
            g.transforms[id].outputs.push((tag, pc));
            outs.push(pc);
        }
        g.transforms[id].spec = Some(spec);
        g.transforms[id].runs_user_code = runs_user_code;
        outs
    }

    pub(crate) fn pcollection<T: Element>(&self, id: usize) -> PCollection<T> {
        PCollection {
            pipeline: self.clone(),
            id,
            _t: PhantomData,
        }
    }

    pub(crate) fn is_bounded(&self, ids: &[usize]) -> IsBounded {
        let g = self.graph.borrow();
        if ids
            .iter()
            .all(|&i| g.pcollections[i].bounded == IsBounded::Bounded)
        {
            IsBounded::Bounded
        } else {
            IsBounded::Unbounded
        }
    }

    /// Adds inputs (side inputs) to the transform being expanded.
    pub(crate) fn add_inputs(&self, inputs: Vec<(String, usize)>) {
        let mut g = self.graph.borrow_mut();
        let id = *g.scopes.last().expect("add_inputs outside of apply");
        g.transforms[id].inputs.extend(inputs);
    }

    /// Claims a capture name; false if another Capture has it.
    pub(crate) fn claim_capture_name(&self, name: &str) -> bool {
        self.graph
            .borrow_mut()
            .capture_names
            .insert(name.to_string())
    }

    pub(crate) fn windowing_of(&self, id: usize) -> WindowingStrategy {
        self.graph.borrow().pcollections[id].windowing.clone()
    }

    pub(crate) fn element_type_of(&self, id: usize) -> String {
        self.graph.borrow().pcollections[id].element_type.clone()
    }

    pub(crate) fn pcollection_name(&self, id: usize) -> String {
        self.graph.borrow().pcollections[id].unique_name.clone()
    }
}

/// Runs the saved plan `options.plan` names (`--plan FILE`) without constructing a
/// pipeline: the plan's functions resolve in the run-time registry (what this process
/// constructed) or among the functions the binary links ([`register!`](crate::register)).
/// A name found in neither is refused before anything runs.
///
/// ```
/// let options = tidewater::PipelineOptions::default();
/// let e = tidewater::run_plan_file(&options).unwrap_err();
/// assert_eq!(e.to_string(), "invalid option --plan: no saved plan to run: give --plan FILE");
/// ```
pub fn run_plan_file(options: &PipelineOptions) -> Result<PipelineResult> {
    let path = options.plan.as_ref().ok_or_else(|| Error::InvalidOption {
        option: "--plan".into(),
        message: "no saved plan to run: give --plan FILE".into(),
    })?;
    let saved = std::fs::read_to_string(path).map_err(|cause| Error::Io {
        what: "cannot read the plan".into(),
        path: path.clone(),
        cause,
    })?;
    crate::log::init(options.log_format);
    tracing::info!("running the saved plan {}", path.display());
    run_plan_json(&saved, options)
}

/// Decodes a plan from JSON, checks it against the runner the options name, and runs
/// it. [`Pipeline::run`] ends here; so does a binary that runs a plan file.
pub fn run_plan_json(json: &str, options: &PipelineOptions) -> Result<PipelineResult> {
    let decoded = plan::decode(json)?;
    let runner = runner::lookup_runner(&options.runner)?;
    refuse_foreign_flags(runner.as_ref(), options)?;
    let unsupported = runner.capabilities().check(&decoded);
    if !unsupported.is_empty() {
        return Err(Error::Unsupported {
            runner: runner.name().to_string(),
            unsupported,
        });
    }
    runner.run(&decoded, options)
}

/// Refuses a runner flag that `runner` does not declare (another runner's, such as
/// `--batch-interval` given to the native runner): it would be ignored.
fn refuse_foreign_flags(runner: &dyn runner::Runner, options: &PipelineOptions) -> Result<()> {
    for (name, _) in options.runner_flags.iter() {
        if runner.flags().iter().any(|f| f.name == name) {
            continue;
        }
        let owners = crate::runner_flags::runners_with_flag(name);
        let message = if owners.is_empty() {
            format!(
                "no registered runner takes this flag, and the {} runner does not",
                runner.name()
            )
        } else {
            let owners: Vec<String> = owners.iter().map(|o| format!("--runner={o}")).collect();
            format!(
                "the {} runner does not take this flag; it is for {}",
                runner.name(),
                owners.join(" or ")
            )
        };
        return Err(Error::InvalidOption {
            option: format!("--{name}"),
            message,
        });
    }
    Ok(())
}

fn clone_error(e: &Error) -> Error {
    match e {
        Error::Construction { transform, message } => Error::Construction {
            transform: transform.clone(),
            message: message.clone(),
        },
        other => Error::Internal(other.to_string()),
    }
}

impl Graph {
    fn to_plan(&self) -> Plan {
        let mut c = Components::default();
        let tid = |i: usize| self.transforms[i].unique_name.clone();
        let pid = |i: usize| self.pcollections[i].unique_name.clone();
        for t in &self.transforms {
            c.transforms.insert(
                t.unique_name.clone(),
                TransformSpec {
                    unique_name: t.unique_name.clone(),
                    spec: t.spec.clone(),
                    inputs: t.inputs.iter().map(|(k, v)| (k.clone(), pid(*v))).collect(),
                    outputs: t
                        .outputs
                        .iter()
                        .map(|(k, v)| (k.clone(), pid(*v)))
                        .collect(),
                    subtransforms: t.subtransforms.iter().map(|&s| tid(s)).collect(),
                    environment_id: t.runs_user_code.then(|| RUST_ENV.to_string()),
                    uid: t.uid.clone(),
                },
            );
        }
        let mut strategies: Vec<&WindowingStrategy> = Vec::new();
        for p in &self.pcollections {
            c.coders
                .entry(p.element_type.clone())
                .or_insert_with(|| CoderSpec {
                    urn: crate::coder::ELEMENT_CODER_URN.into(),
                    rust_type: Some(p.element_type.clone()),
                    component_coder_ids: Vec::new(),
                });
            let n = match strategies.iter().position(|w| **w == p.windowing) {
                Some(n) => n,
                None => {
                    strategies.push(&p.windowing);
                    strategies.len() - 1
                }
            };
            c.pcollections.insert(
                p.unique_name.clone(),
                PCollectionSpec {
                    unique_name: p.unique_name.clone(),
                    coder_id: p.element_type.clone(),
                    is_bounded: p.bounded,
                    windowing_strategy_id: windowing_id(n, &p.windowing),
                },
            );
        }
        for (coder, urn) in [
            (GLOBAL_WINDOW_CODER, urn::GLOBAL_WINDOW_CODER),
            (INTERVAL_WINDOW_CODER, urn::INTERVAL_WINDOW_CODER),
        ] {
            c.coders.insert(
                coder.into(),
                CoderSpec {
                    urn: urn.into(),
                    rust_type: None,
                    component_coder_ids: Vec::new(),
                },
            );
        }
        if strategies.is_empty() {
            strategies.push(&GLOBAL);
        }
        for (n, w) in strategies.into_iter().enumerate() {
            let coder = if w.window_fn == crate::WindowFn::Global {
                GLOBAL_WINDOW_CODER
            } else {
                INTERVAL_WINDOW_CODER
            };
            c.windowing_strategies.insert(
                windowing_id(n, w),
                plan::windowing_to_spec(w, coder, RUST_ENV),
            );
        }
        c.environments.insert(
            RUST_ENV.into(),
            EnvironmentSpec {
                urn: urn::RUST_ENV.into(),
                payload: serde_json::json!({ "sdk": "tidewater", "sdk_version": env!("CARGO_PKG_VERSION") }).into(),
            },
        );
        Plan {
            version: plan::PLAN_VERSION,
            components: c,
            root_transform_ids: self.roots.iter().map(|&r| tid(r)).collect(),
        }
    }
}

impl<T: Element> PCollection<T> {
    /// Applies `transform` to this PCollection under `name`.
    pub fn apply<Tr: PTransform<PCollection<T>>>(&self, name: &str, transform: Tr) -> Tr::Output {
        self.pipeline
            .clone()
            .apply_transform(name, self.clone(), transform)
    }

    /// Pins the id under which the transform that produced this PCollection keeps
    /// its state in checkpoints and savepoints (Flink's `uid`), so that the transform
    /// may be renamed or moved in a later version of the pipeline and still restore
    /// its state. Without one a transform's id is its full name. For a composite
    /// (`Count::per_key`, say) the uid stands for its name in the ids of the
    /// primitives in it.
    ///
    /// ```
    /// let p = tidewater::Pipeline::new(Default::default());
    /// let kvs = p.create("Kvs", vec![("a".to_string(), 1i64)]);
    /// let _grouped = kvs.apply("Group v2", tidewater::GroupByKey).with_uid("group");
    /// let plan = p.to_plan().unwrap();
    /// assert_eq!(plan.components.transforms["Group v2"].uid.as_deref(), Some("group"));
    /// ```
    pub fn with_uid(self, uid: &str) -> Self {
        self.pipeline.set_uid(self.id, uid);
        self
    }

    /// The pipeline this PCollection belongs to.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Its unique name, `<producing transform>.<tag>`.
    pub fn name(&self) -> String {
        self.pipeline.pcollection_name(self.id)
    }

    /// Whether it is bounded.
    pub fn is_bounded(&self) -> bool {
        self.pipeline.is_bounded(&[self.id]) == IsBounded::Bounded
    }
}

/// Ids for use by the plan's builder in this crate.
pub(crate) fn output_types<T: Element>(tag: &str) -> Vec<(String, String)> {
    vec![(
        tag.to_string(),
        crate::registry::register_element_type::<T>(),
    )]
}
