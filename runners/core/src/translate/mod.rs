//! Decoded plan -> executable graph: every primitive resolved to registered code, every
//! PCollection to its element type, in topological order.

use std::collections::BTreeMap;
use std::sync::Arc;
use tidewater::exec::{ElementType, ErasedDoFn, GroupingOps};
use tidewater::plan::Json;
use tidewater::plan::{
    urn, CapturePayload, CreatePayload, GroupingPayload, ParDoPayload, Plan, TransformSpec,
};
use tidewater::registry::{self, DoFnFactory};
use tidewater::{Error, Result};

/// A PCollection of the executable graph.
pub struct PCollectionInfo {
    /// Unique name.
    pub name: String,
    /// Its element type.
    pub element_type: Arc<dyn ElementType>,
    /// The nodes that consume it, in plan order, once per input they take it as.
    pub consumers: Vec<usize>,
    /// The node that produces it.
    pub producer: usize,
    /// How it is windowed.
    pub windowing: tidewater::WindowingStrategy,
    /// Whether it is bounded.
    pub bounded: bool,
}

/// What a node does.
pub enum NodeKind {
    /// One `()` element.
    Impulse,
    /// Fixed elements (JSON, decoded by the element type).
    Create {
        /// The elements.
        elements: Vec<Json>,
    },
    /// A DoFn.
    ParDo {
        /// The DoFn's registered name.
        do_fn: String,
        /// Builds a fresh instance.
        factory: DoFnFactory,
        /// The DoFn's fields.
        fields: Json,
        /// Output tags in output order.
        output_tags: Vec<String>,
        /// Side inputs: tag and view function; node input `1 + i` is side input `i`.
        side_inputs: Vec<(String, Arc<dyn tidewater::ViewOps>)>,
    },
    /// GroupByKey or Combine.
    Grouping {
        /// The typed operations.
        ops: Arc<dyn GroupingOps>,
    },
    /// Union of the inputs.
    Flatten,
    /// Assigns windows (none: keeps them).
    WindowInto {
        /// The assigner.
        assigner: Option<crate::windowing::WindowAssigner>,
    },
    /// A DoFn with state and timers.
    Stateful {
        /// Registered name.
        name: String,
        /// Builds an instance.
        factory: tidewater::registry::StatefulDoFnFactory,
        /// Its fields.
        fields: Json,
    },
    /// Reads a registered source.
    Read {
        /// The source's registered name.
        name: String,
        /// Builds an instance.
        factory: tidewater::registry::SourceFactory,
        /// Its fields.
        fields: Json,
    },
    /// A scripted unbounded source.
    TestStream {
        /// The script, shared by the drivers that replay it (never copied).
        events: std::sync::Arc<[tidewater::TestStreamEvent]>,
    },
    /// Writes the input into an exactly-once sink.
    Sink {
        /// The sink's registered name.
        name: String,
        /// Builds an instance.
        factory: tidewater::registry::SinkFactory,
        /// Its fields.
        fields: Json,
    },
    /// Returns the input in the result.
    Capture {
        /// Capture name.
        name: String,
    },
}

/// One primitive transform.
pub struct Node {
    /// The transform's unique name.
    pub name: String,
    /// The id its state is matched by when a snapshot is restored into a changed
    /// pipeline: its name, or the uid the user pinned on it or on a composite around
    /// it (see [`crate::compat`]).
    pub uid: String,
    /// What it does.
    pub kind: NodeKind,
    /// Input PCollections (indices into [`ExecutablePlan::pcollections`]).
    pub inputs: Vec<usize>,
    /// Output PCollections, in output order.
    pub outputs: Vec<usize>,
}

impl NodeKind {
    /// Whether the node runs element by element and fuses into stages (ParDo and
    /// window assignment).
    pub fn is_fusable(&self) -> bool {
        match self {
            NodeKind::ParDo { side_inputs, .. } => side_inputs.is_empty(),
            NodeKind::WindowInto { .. } => true,
            _ => false,
        }
    }

    /// Output tags of a fusable node, in output order.
    pub fn output_tags(&self) -> Vec<String> {
        match self {
            NodeKind::ParDo { output_tags, .. } => output_tags.clone(),
            _ => vec![tidewater::MAIN_TAG.to_string()],
        }
    }
}

impl Node {
    /// Builds a registered function from its fields; a payload that does not fit names
    /// the function and this transform.
    fn build<T>(
        &self,
        name: &str,
        factory: &(dyn Fn(&mut dyn erased_serde::Deserializer<'_>) -> std::result::Result<T, String>
              + Send
              + Sync),
        fields: &Json,
    ) -> Result<T> {
        fields
            .with_deserializer(factory)
            .map_err(|message| Error::FunctionPayload {
                name: name.to_string(),
                transform: self.name.clone(),
                message,
            })
    }

    /// A fresh instance of a sink node's sink.
    pub fn instantiate_sink(&self) -> Result<Box<dyn tidewater::exec::ErasedSink>> {
        match &self.kind {
            NodeKind::Sink {
                name,
                factory,
                fields,
            } => self.build(name, factory.as_ref(), fields),
            _ => Err(Error::Internal(format!("'{}' is not a sink", self.name))),
        }
    }

    /// A sink node's fields (its configuration, as the plan holds it).
    pub fn sink_fields(&self) -> Option<&Json> {
        match &self.kind {
            NodeKind::Sink { fields, .. } => Some(fields),
            _ => None,
        }
    }

    /// An instance of a sink node's sink as configured by `fields` (another version's
    /// configuration of the same registered sink).
    pub fn instantiate_sink_as(
        &self,
        fields: &Json,
    ) -> Result<Box<dyn tidewater::exec::ErasedSink>> {
        match &self.kind {
            NodeKind::Sink { name, factory, .. } => self.build(name, factory.as_ref(), fields),
            _ => Err(Error::Internal(format!("'{}' is not a sink", self.name))),
        }
    }

    /// A fresh instance of a stateful ParDo node's DoFn.
    pub fn instantiate_stateful(&self) -> Result<Box<dyn tidewater::exec::ErasedStatefulDoFn>> {
        match &self.kind {
            NodeKind::Stateful {
                name,
                factory,
                fields,
            } => self.build(name, factory.as_ref(), fields),
            _ => Err(Error::Internal(format!(
                "'{}' is not a stateful ParDo",
                self.name
            ))),
        }
    }

    /// A fresh instance of a Read node's source.
    pub fn instantiate_source(&self) -> Result<Box<dyn tidewater::exec::ErasedSource>> {
        match &self.kind {
            NodeKind::Read {
                name,
                factory,
                fields,
            } => self.build(name, factory.as_ref(), fields),
            _ => Err(Error::Internal(format!("'{}' is not a Read", self.name))),
        }
    }

    /// A fresh instance of a fusable node's function.
    pub fn instantiate(
        &self,
        plan_pcollections: &[PCollectionInfo],
    ) -> Result<Box<dyn ErasedDoFn>> {
        match &self.kind {
            NodeKind::WindowInto { assigner } => {
                Ok(Box::new(crate::windowing::AssignWindowsFn::new(
                    assigner.clone(),
                    plan_pcollections[self.inputs[0]].element_type.name(),
                )))
            }
            NodeKind::ParDo {
                do_fn,
                factory,
                fields,
                ..
            } => self.build(do_fn, factory.as_ref(), fields),
            _ => Err(Error::Internal(format!("'{}' is not a ParDo", self.name))),
        }
    }
}

/// The executable form of a plan.
pub struct ExecutablePlan {
    /// Primitive transforms in topological order.
    pub nodes: Vec<Node>,
    /// PCollections.
    pub pcollections: Vec<PCollectionInfo>,
    /// The hash of the plan it was translated from, which ties snapshots to it.
    pub plan_hash: u64,
}

/// The registered function a payload `{"<field>": UserFunction}` names: its name, its
/// factory and its fields; an unknown name says what kind of function it should be.
mod shape;

use shape::check_shape;

fn registered<F>(
    t: &TransformSpec,
    value: &Json,
    field: &str,
    (kind, kind_snake): (&'static str, &'static str),
    lookup: fn(&str) -> Option<F>,
) -> Result<(String, F, Json)> {
    let mut p: BTreeMap<String, tidewater::plan::UserFunction> = payload(t, value)?;
    let f = match (p.remove(field), p.keys().next()) {
        (Some(f), None) => f,
        (_, Some(other)) => {
            return Err(invalid(format!(
                "transform '{}': unknown payload field '{other}' (expected only '{field}')",
                t.unique_name
            )))
        }
        (None, None) => {
            return Err(invalid(format!(
                "transform '{}': the payload has no '{field}'",
                t.unique_name
            )))
        }
    };
    let factory = lookup(&f.name).ok_or_else(|| Error::UnknownFunction {
        kind,
        kind_snake,
        name: f.name.clone(),
        transform: format!("transform '{}'", t.unique_name),
    })?;
    Ok((f.name, factory, f.fields))
}

fn payload<T: serde::de::DeserializeOwned>(t: &TransformSpec, value: &Json) -> Result<T> {
    value.parse().map_err(|e| Error::InvalidPlan {
        message: format!(
            "payload of transform '{}' ({}) is malformed: {}",
            t.unique_name,
            t.spec.as_ref().map(|s| s.urn.as_str()).unwrap_or(""),
            tidewater::plan::without_position(e.to_string())
        ),
    })
}

fn invalid(message: String) -> Error {
    Error::InvalidPlan { message }
}

/// Registers every function the plan names that this binary linked
/// ([`tidewater::register!`]) but has not registered at run time (it did not construct
/// the pipeline), so that the resolution below finds them with their element types.
/// Names found in neither registry are left for it to report.
fn link_functions(plan: &Plan) -> Result<()> {
    use tidewater::plan::{FunctionSpec, UserFunction};
    let c = &plan.components;
    let link = |name: &str, fields: &Json, transform: &str| {
        let mut de = serde_json::Deserializer::from_str(fields.get());
        registry::link(name, &mut de)
            .map(|_| ())
            .map_err(|message| Error::FunctionPayload {
                name: name.to_string(),
                transform: transform.to_string(),
                message: tidewater::plan::without_position(message),
            })
    };
    #[derive(serde::Deserialize)]
    struct CustomWindowFn {
        name: String,
        fields: Json,
    }
    let custom_window_fn = |spec: &FunctionSpec, transform: &str| {
        if spec.urn != urn::CUSTOM_WINDOWS {
            return Ok(());
        }
        match spec.payload.parse::<CustomWindowFn>() {
            Ok(w) => link(&w.name, &w.fields, transform),
            // A malformed payload is reported where it is decoded.
            Err(_) => Ok(()),
        }
    };
    for (id, ws) in &c.windowing_strategies {
        custom_window_fn(&ws.window_fn, &format!("windowing strategy {id}"))?;
    }
    // The function a payload holds, if it has that shape; other fields are skipped
    // unread.
    #[derive(serde::Deserialize)]
    struct Functions {
        #[serde(default)]
        do_fn: Option<UserFunction>,
        #[serde(default)]
        source: Option<UserFunction>,
        #[serde(default)]
        sink: Option<UserFunction>,
        #[serde(default)]
        grouping: Option<UserFunction>,
    }
    type Known = fn(&str) -> bool;
    let mut named: Vec<(&str, &'static str, &'static str, Known, UserFunction)> = Vec::new();
    for t in c.transforms.values() {
        let Some(spec) = &t.spec else { continue };
        let (kind, kind_snake, known): (_, _, Known) = match spec.urn.as_str() {
            urn::PAR_DO => ("DoFn", "do_fn", registry::has_do_fn),
            urn::STATEFUL_PAR_DO => ("stateful DoFn", "stateful_do_fn", |n| {
                registry::stateful_do_fn(n).is_some()
            }),
            urn::READ => ("source", "source", |n| registry::source(n).is_some()),
            urn::SINK => ("sink", "sink", |n| registry::sink(n).is_some()),
            urn::GROUP_BY_KEY | urn::COMBINE_PER_KEY | urn::COMBINE_GLOBALLY => {
                ("grouping", "grouping", |n| registry::grouping(n).is_some())
            }
            urn::WINDOW_INTO => {
                #[derive(serde::Deserialize)]
                struct WindowInto {
                    window_fn: FunctionSpec,
                }
                if let Ok(w) = spec.payload.parse::<WindowInto>() {
                    custom_window_fn(&w.window_fn, &t.unique_name)?;
                }
                continue;
            }
            _ => continue,
        };
        // A malformed payload is reported where it is decoded.
        let Ok(p) = spec.payload.parse::<Functions>() else {
            continue;
        };
        if let Some(f) = p.do_fn.or(p.source).or(p.sink).or(p.grouping) {
            named.push((&t.unique_name, kind, kind_snake, known, f));
        }
    }
    for (transform, kind, _, _, f) in &named {
        if *kind != "grouping" {
            link(&f.name, &f.fields, transform)?;
        } else if let Some(combine_fn) = registry::combine_fn_of(&f.name) {
            // A combine of a linked CombineFn registers its groupings (the fields are
            // the CombineFn's); other groupings are generic and never linked.
            if registry::grouping(&f.name).is_none() {
                link(combine_fn, &f.fields, transform)?;
            }
        }
    }
    // A function neither registry knows is reported before the element types it would
    // have registered, so that the error names the function.
    for (transform, kind, kind_snake, known, f) in named {
        if !known(&f.name) {
            return Err(Error::UnknownFunction {
                kind,
                kind_snake,
                name: f.name,
                transform: format!("transform '{transform}'"),
            });
        }
    }
    Ok(())
}

/// Resolves every primitive of `plan` to registered code and orders them.
pub fn translate(plan: &Plan) -> Result<ExecutablePlan> {
    link_functions(plan)?;
    let c = &plan.components;
    // PCollections: ids to indices, with element types.
    let mut pc_index = BTreeMap::new();
    let mut pcollections = Vec::new();
    for (id, pc) in &c.pcollections {
        let coder = c.coders.get(&pc.coder_id).ok_or_else(|| {
            invalid(format!(
                "PCollection '{id}' uses coder '{}', which is not defined",
                pc.coder_id
            ))
        })?;
        let Some(type_name) = &coder.rust_type else {
            return Err(invalid(format!(
                "PCollection '{id}' has coder '{}', which names no Rust type",
                pc.coder_id
            )));
        };
        let element_type =
            registry::element_type(type_name).ok_or_else(|| Error::UnknownFunction {
                kind: "element type",
                kind_snake: "element_type",
                name: type_name.clone(),
                transform: format!("PCollection '{}'", pc.unique_name),
            })?;
        let ws_spec = c
            .windowing_strategies
            .get(&pc.windowing_strategy_id)
            .ok_or_else(|| {
                invalid(format!(
                    "PCollection '{id}' uses windowing strategy '{}', which is not defined",
                    pc.windowing_strategy_id
                ))
            })?;
        let windowing = tidewater::plan::windowing_from_spec(ws_spec, &pc.windowing_strategy_id)?;
        pc_index.insert(id.as_str(), pcollections.len());
        pcollections.push(PCollectionInfo {
            windowing,
            bounded: pc.is_bounded == tidewater::plan::IsBounded::Bounded,
            name: pc.unique_name.clone(),
            element_type,
            consumers: Vec::new(),
            producer: usize::MAX,
        });
    }
    // Primitive transforms.
    let uids = uids(c)?;
    let mut nodes = Vec::new();
    for t in c.transforms.values() {
        let Some(spec) = &t.spec else { continue };
        let lookup = |p: &String| {
            pc_index.get(p.as_str()).copied().ok_or_else(|| {
                invalid(format!(
                    "transform '{}' refers to undefined PCollection '{p}'",
                    t.unique_name
                ))
            })
        };
        let mut inputs: Vec<usize> = t.inputs.values().map(lookup).collect::<Result<_>>()?;
        let kind = match spec.urn.as_str() {
            urn::IMPULSE => NodeKind::Impulse,
            urn::CREATE => NodeKind::Create {
                elements: payload::<CreatePayload>(t, &spec.payload)?.elements,
            },
            urn::FLATTEN => NodeKind::Flatten,
            urn::WINDOW_INTO => {
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Payload {
                    window_fn: tidewater::plan::FunctionSpec,
                }
                let assigner = match &spec.payload {
                    p if p.is_null() => None,
                    p => {
                        let p: Payload = payload(t, p)?;
                        let w = tidewater::plan::window_fn_from_spec(&p.window_fn, &t.unique_name)?;
                        Some(crate::windowing::WindowAssigner::new(&w, &t.unique_name)?)
                    }
                };
                NodeKind::WindowInto { assigner }
            }
            urn::STATEFUL_PAR_DO => {
                let (name, factory, fields) = registered(
                    t,
                    &spec.payload,
                    "do_fn",
                    ("stateful DoFn", "stateful_do_fn"),
                    registry::stateful_do_fn,
                )?;
                NodeKind::Stateful {
                    name,
                    factory,
                    fields,
                }
            }
            urn::READ => {
                let (name, factory, fields) = registered(
                    t,
                    &spec.payload,
                    "source",
                    ("source", "source"),
                    registry::source,
                )?;
                NodeKind::Read {
                    name,
                    factory,
                    fields,
                }
            }
            urn::TEST_STREAM => {
                #[derive(serde::Deserialize)]
                #[serde(deny_unknown_fields)]
                struct Payload {
                    events: Vec<tidewater::TestStreamEvent>,
                }
                NodeKind::TestStream {
                    events: payload::<Payload>(t, &spec.payload)?.events.into(),
                }
            }
            urn::SINK => {
                let (name, factory, fields) =
                    registered(t, &spec.payload, "sink", ("sink", "sink"), registry::sink)?;
                NodeKind::Sink {
                    name,
                    factory,
                    fields,
                }
            }
            urn::CAPTURE => NodeKind::Capture {
                name: payload::<CapturePayload>(t, &spec.payload)?.name,
            },
            urn::PAR_DO => {
                let p: ParDoPayload = payload(t, &spec.payload)?;
                let factory =
                    registry::do_fn(&p.do_fn.name).ok_or_else(|| Error::UnknownFunction {
                        kind: "DoFn",
                        kind_snake: "do_fn",
                        name: p.do_fn.name.clone(),
                        transform: format!("transform '{}'", t.unique_name),
                    })?;
                // The main input first, then the side inputs in declaration order.
                let mut side_inputs = Vec::new();
                if !p.side_inputs.is_empty() {
                    let main = t
                        .inputs
                        .iter()
                        .find(|(k, _)| !p.side_inputs.iter().any(|s| &s.tag == *k))
                        .map(|(_, v)| v)
                        .ok_or_else(|| {
                            invalid(format!("ParDo '{}' has no main input", t.unique_name))
                        })?;
                    inputs = vec![lookup(main)?];
                    for side in &p.side_inputs {
                        let pc = t.inputs.get(&side.tag).ok_or_else(|| {
                            invalid(format!(
                                "ParDo '{}' declares side input '{}' but has no input of that name",
                                t.unique_name, side.tag
                            ))
                        })?;
                        inputs.push(lookup(pc)?);
                        let factory = registry::view(&side.view.name).ok_or_else(|| {
                            Error::UnknownFunction {
                                kind: "side input view",
                                kind_snake: "view",
                                name: side.view.name.clone(),
                                transform: format!("transform '{}'", t.unique_name),
                            }
                        })?;
                        let ops = side.view.fields.with_deserializer(|d| factory(d)).map_err(
                            |message| Error::FunctionPayload {
                                name: side.view.name.clone(),
                                transform: t.unique_name.clone(),
                                message,
                            },
                        )?;
                        side_inputs.push((side.tag.clone(), ops));
                    }
                }
                NodeKind::ParDo {
                    do_fn: p.do_fn.name,
                    factory,
                    fields: p.do_fn.fields,
                    output_tags: p.output_tags,
                    side_inputs,
                }
            }
            urn::GROUP_BY_KEY | urn::COMBINE_PER_KEY | urn::COMBINE_GLOBALLY => {
                let p: GroupingPayload = payload(t, &spec.payload)?;
                let factory =
                    registry::grouping(&p.grouping.name).ok_or_else(|| Error::UnknownFunction {
                        kind: "grouping",
                        kind_snake: "grouping",
                        name: p.grouping.name.clone(),
                        transform: format!("transform '{}'", t.unique_name),
                    })?;
                let ops = p
                    .grouping
                    .fields
                    .with_deserializer(|d| factory(d))
                    .map_err(|message| Error::FunctionPayload {
                        name: p.grouping.name.clone(),
                        transform: t.unique_name.clone(),
                        message,
                    })?;
                NodeKind::Grouping {
                    ops: Arc::from(ops),
                }
            }
            other => {
                return Err(Error::Unsupported {
                    runner: "this binary".into(),
                    unsupported: vec![tidewater::runner::UnsupportedFeature {
                        feature: tidewater::runner::Feature::UnknownTransform,
                        transform: t.unique_name.clone(),
                        reason: format!("URN '{other}' is not a primitive this SDK defines"),
                    }],
                })
            }
        };
        let outputs: Vec<usize> = match &kind {
            NodeKind::ParDo { output_tags, .. } if output_tags.len() != t.outputs.len() || output_tags.iter().any(|tag| !t.outputs.contains_key(tag)) => {
                return Err(invalid(format!(
                    "ParDo '{}' declares output tags [{}] but has outputs [{}]",
                    t.unique_name,
                    output_tags.join(", "),
                    t.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
                )))
            }
            NodeKind::ParDo { output_tags, .. } => output_tags
                .iter()
                .map(|tag| {
                    t.outputs.get(tag).ok_or_else(|| {
                        invalid(format!("ParDo '{}' declares output tag '{tag}' but has no output PCollection for it", t.unique_name))
                    }).and_then(lookup)
                })
                .collect::<Result<_>>()?,
            _ => t.outputs.values().map(lookup).collect::<Result<_>>()?,
        };
        let node = Node {
            name: t.unique_name.clone(),
            uid: uids
                .get(t.unique_name.as_str())
                .cloned()
                .unwrap_or_else(|| t.unique_name.clone()),
            kind,
            inputs,
            outputs,
        };
        check_shape(&node, &pcollections)?;
        nodes.push(node);
    }
    let order = topological_order(&nodes, &pcollections)?;
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    let nodes: Vec<Node> = order
        .iter()
        .map(|&i| slots[i].take().expect("each node once"))
        .collect();
    for pc in &mut pcollections {
        pc.consumers.clear();
    }
    for (i, n) in nodes.iter().enumerate() {
        for &o in &n.outputs {
            pcollections[o].producer = i;
        }
        // A Flatten may consume the same PCollection twice; each occurrence delivers
        // the elements once.
        for &inp in &n.inputs {
            pcollections[inp].consumers.push(i);
        }
    }
    Ok(ExecutablePlan {
        nodes,
        pcollections,
        plan_hash: crate::snapshot::plan_hash(plan),
    })
}

/// Each transform's state id: the uid of the nearest transform around it (itself
/// included) that has one, followed by the rest of its name; else its name. Two
/// transforms with one id are refused: their state could not be told apart.
fn uids(c: &tidewater::plan::Components) -> Result<BTreeMap<&str, String>> {
    let mut parent: BTreeMap<&str, &TransformSpec> = BTreeMap::new();
    for t in c.transforms.values() {
        for sub in &t.subtransforms {
            if let Some(s) = c.transforms.get(sub) {
                parent.insert(s.unique_name.as_str(), t);
            }
        }
    }
    let mut out = BTreeMap::new();
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    for t in c.transforms.values().filter(|t| t.spec.is_some()) {
        let mut at = Some(t);
        let id = loop {
            match at {
                Some(a) => match &a.uid {
                    Some(uid) => {
                        break format!(
                            "{uid}{}",
                            t.unique_name.get(a.unique_name.len()..).unwrap_or_default()
                        )
                    }
                    None => at = parent.get(a.unique_name.as_str()).copied(),
                },
                None => break t.unique_name.clone(),
            }
        };
        if let Some(other) = seen.insert(id.clone(), &t.unique_name) {
            return Err(invalid(format!(
                "transforms '{other}' and '{}' both keep their state under the id '{id}': give one another uid",
                t.unique_name
            )));
        }
        out.insert(t.unique_name.as_str(), id);
    }
    Ok(out)
}

fn topological_order(nodes: &[Node], pcs: &[PCollectionInfo]) -> Result<Vec<usize>> {
    let mut producer = vec![usize::MAX; pcs.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &o in &n.outputs {
            producer[o] = i;
        }
    }
    let mut indegree = vec![0usize; nodes.len()];
    let mut consumers = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &inp in &n.inputs {
            let p = producer[inp];
            if p == usize::MAX {
                return Err(invalid(format!(
                    "transform '{}' consumes '{}', which no primitive produces",
                    n.name, pcs[inp].name
                )));
            }
            indegree[i] += 1;
            consumers[p].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..nodes.len())
        .filter(|&i| indegree[i] == 0)
        .rev()
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop() {
        order.push(i);
        for &c in consumers[i].iter().rev() {
            indegree[c] -= 1;
            if indegree[c] == 0 {
                ready.push(c);
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck: Vec<&str> = (0..nodes.len())
            .filter(|i| !order.contains(i))
            .map(|i| nodes[i].name.as_str())
            .collect();
        return Err(invalid(format!(
            "the graph has a cycle through: {}",
            stuck.join(", ")
        )));
    }
    Ok(order)
}
