//! Runners: the registry of engines a pipeline can run on, what each supports, and
//! what a run returns.

use crate::exec::MetricResults;
use crate::plan::{Plan, urn};
use crate::{Element, Error, PipelineOptions, Result, WindowedValue, coder};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};

/// A feature of the model that a plan can use and a runner may or may not support.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// `Impulse`.
    Impulse,
    /// `Create`.
    Create,
    /// `ParDo` with one output.
    ParDo,
    /// `ParDo` with tagged outputs.
    MultipleOutputs,
    /// `GroupByKey`.
    GroupByKey,
    /// `Flatten`.
    Flatten,
    /// `Combine.perKey`.
    CombinePerKey,
    /// `Combine.globally`.
    CombineGlobally,
    /// Returning a PCollection's elements in the result.
    Capture,
    /// Assigning windows (`Window::into`).
    WindowInto,
    /// A scripted unbounded source.
    TestStream,
    /// A DoFn with state and timers.
    StatefulParDo,
    /// Reading a bounded source.
    ReadBounded,
    /// Reading an unbounded source.
    ReadUnbounded,
    /// Writing into an exactly-once sink (two-phase commit per epoch).
    Sink,
    /// A transform the runner does not know at all.
    UnknownTransform,
    /// Running any pipeline at all (a runner that is not implemented yet lacks it).
    AnyPipeline,
}

impl Feature {
    /// Every feature, for capability matrices.
    pub const ALL: [Feature; 17] = [
        Feature::Impulse,
        Feature::Create,
        Feature::ParDo,
        Feature::MultipleOutputs,
        Feature::GroupByKey,
        Feature::Flatten,
        Feature::CombinePerKey,
        Feature::CombineGlobally,
        Feature::Capture,
        Feature::WindowInto,
        Feature::TestStream,
        Feature::StatefulParDo,
        Feature::ReadBounded,
        Feature::ReadUnbounded,
        Feature::Sink,
        Feature::UnknownTransform,
        Feature::AnyPipeline,
    ];
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Feature::Impulse => "Impulse",
            Feature::Create => "Create",
            Feature::ParDo => "ParDo",
            Feature::MultipleOutputs => "ParDo with multiple outputs",
            Feature::GroupByKey => "GroupByKey",
            Feature::Flatten => "Flatten",
            Feature::CombinePerKey => "Combine.perKey",
            Feature::CombineGlobally => "Combine.globally",
            Feature::Capture => "Capture",
            Feature::WindowInto => "Window.into",
            Feature::TestStream => "TestStream",
            Feature::StatefulParDo => "stateful ParDo (state and timers)",
            Feature::ReadBounded => "Read (bounded)",
            Feature::ReadUnbounded => "Read (unbounded)",
            Feature::Sink => "Sink (exactly once, two-phase commit)",
            Feature::UnknownTransform => "unknown transform URN",
            Feature::AnyPipeline => "running any pipeline",
        };
        f.write_str(s)
    }
}

/// The features a plan uses, each with the first transform that uses it, in the plan's
/// order.
pub fn plan_features(plan: &Plan) -> Vec<(Feature, String)> {
    let mut out = Vec::new();
    for t in plan.components.transforms.values() {
        let Some(spec) = &t.spec else { continue };
        let f = match spec.urn.as_str() {
            urn::IMPULSE => Feature::Impulse,
            urn::CREATE => Feature::Create,
            urn::PAR_DO => {
                if t.outputs.len() > 1 {
                    out.push((Feature::MultipleOutputs, t.unique_name.clone()));
                }
                Feature::ParDo
            }
            urn::GROUP_BY_KEY => Feature::GroupByKey,
            urn::FLATTEN => Feature::Flatten,
            urn::COMBINE_PER_KEY => Feature::CombinePerKey,
            urn::COMBINE_GLOBALLY => Feature::CombineGlobally,
            urn::CAPTURE => Feature::Capture,
            urn::WINDOW_INTO => Feature::WindowInto,
            urn::TEST_STREAM => Feature::TestStream,
            urn::STATEFUL_PAR_DO => Feature::StatefulParDo,
            urn::SINK => Feature::Sink,
            urn::READ => {
                let bounded = t
                    .outputs
                    .values()
                    .next()
                    .and_then(|pc| plan.components.pcollections.get(pc))
                    .is_some_and(|pc| pc.is_bounded == crate::plan::IsBounded::Bounded);
                if bounded {
                    Feature::ReadBounded
                } else {
                    Feature::ReadUnbounded
                }
            }
            _ => Feature::UnknownTransform,
        };
        out.push((f, t.unique_name.clone()));
    }
    out
}

/// A feature a runner lacks, with the transform that uses it and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedFeature {
    /// The feature.
    pub feature: Feature,
    /// The transform that uses it.
    pub transform: String,
    /// Why the runner lacks it.
    pub reason: String,
}

impl fmt::Display for UnsupportedFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (used by '{}'): {}",
            self.feature, self.transform, self.reason
        )
    }
}

/// What a runner supports; anything else it refuses before running.
#[derive(Clone, Debug)]
pub struct Capabilities {
    supported: BTreeSet<Feature>,
    missing_reason: String,
    notes: std::collections::BTreeMap<Feature, String>,
}

impl Capabilities {
    /// Supports exactly `features`; `missing_reason` explains the rest.
    pub fn new(features: impl IntoIterator<Item = Feature>, missing_reason: &str) -> Self {
        Capabilities {
            supported: features.into_iter().collect(),
            missing_reason: missing_reason.to_string(),
            notes: std::collections::BTreeMap::new(),
        }
    }

    /// Says how the runner supports `f` where users should know it (the conformance
    /// matrix shows the note).
    ///
    /// ```
    /// use tidewater::runner::{Capabilities, Feature};
    /// let c = Capabilities::new([Feature::ParDo], "").with_note(Feature::ParDo, "slowly");
    /// assert_eq!(c.note(Feature::ParDo), Some("slowly"));
    /// ```
    pub fn with_note(mut self, f: Feature, note: &str) -> Self {
        self.notes.insert(f, note.to_string());
        self
    }

    /// The runner's note on how it supports `f`, if any.
    pub fn note(&self, f: Feature) -> Option<&str> {
        self.notes.get(&f).map(String::as_str)
    }

    /// Supports nothing (a runner that is not implemented yet).
    pub fn none(reason: &str) -> Self {
        Capabilities::new([], reason)
    }

    /// Whether `f` is supported.
    pub fn supports(&self, f: Feature) -> bool {
        self.supported.contains(&f)
    }

    /// Why unsupported features are missing.
    pub fn missing_reason(&self) -> &str {
        &self.missing_reason
    }

    /// Every use in `plan` of a feature this runner lacks, deduplicated by
    /// (feature, transform).
    pub fn check(&self, plan: &Plan) -> Vec<UnsupportedFeature> {
        let mut seen = BTreeSet::new();
        let mut unsupported: Vec<UnsupportedFeature> = plan_features(plan)
            .into_iter()
            .filter(|(f, _)| !self.supports(*f))
            .filter(|(f, t)| seen.insert((*f, t.clone())))
            .map(|(feature, transform)| UnsupportedFeature {
                feature,
                transform,
                reason: self.missing_reason.clone(),
            })
            .collect();
        // A runner that runs nothing refuses even a pipeline without transforms.
        if unsupported.is_empty() && !self.supports(Feature::AnyPipeline) {
            unsupported.push(UnsupportedFeature {
                feature: Feature::AnyPipeline,
                transform: "<pipeline>".into(),
                reason: self.missing_reason.clone(),
            });
        }
        unsupported
    }
}

/// A flag a runner takes on the command line (`--NAME VALUE`) beyond the options every
/// pipeline takes; see [`Runner::flags`].
#[derive(Clone, Copy, Debug)]
pub struct RunnerFlag {
    /// The flag's name, without `--`.
    pub name: &'static str,
    /// What its value is, in help (`DURATION`, `N`).
    pub value_name: &'static str,
    /// What it does, in help.
    pub help: &'static str,
    /// Checks a value while the flags are parsed, so that a bad one ends the program
    /// (status 2) before anything runs; the error says what was expected.
    pub check: fn(&str) -> std::result::Result<(), String>,
}

/// An engine that executes plans.
pub trait Runner: Send + Sync {
    /// The name `--runner` selects it by.
    fn name(&self) -> &'static str;
    /// The flags it takes of its own (e.g. the micro-batch runner's
    /// `--batch-interval`), in [`PipelineOptions::runner_flags`]. A binary offers the
    /// flags of the runners it registered before parsing its arguments; a run is
    /// refused when a flag given is not one of its runner's.
    fn flags(&self) -> &'static [RunnerFlag] {
        &[]
    }
    /// What it supports; checked before [`Runner::run`] is called.
    fn capabilities(&self) -> Capabilities;
    /// Executes a decoded plan to completion.
    fn run(&self, plan: &Plan, options: &PipelineOptions) -> Result<PipelineResult>;
}

fn runners() -> &'static RwLock<BTreeMap<&'static str, Arc<dyn Runner>>> {
    static R: OnceLock<RwLock<BTreeMap<&'static str, Arc<dyn Runner>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// Makes `runner` selectable by its name. Runner crates expose a `register()` that calls
/// this; registering the same name again replaces it.
pub fn register_runner(runner: Arc<dyn Runner>) {
    runners()
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(runner.name(), runner);
}

/// Every registered runner, by name.
pub fn registered_runners() -> Vec<Arc<dyn Runner>> {
    runners()
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect()
}

/// The runner named `name`, or an error listing the known ones.
pub fn lookup_runner(name: &str) -> Result<Arc<dyn Runner>> {
    let r = runners().read().unwrap_or_else(|e| e.into_inner());
    r.get(name).cloned().ok_or_else(|| Error::UnknownRunner {
        name: name.to_string(),
        known: r.keys().map(|k| k.to_string()).collect(),
    })
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipelineState {
    /// Finished successfully.
    Done,
}

/// What a finished run returns: its state, metrics and captured PCollections.
#[derive(Debug)]
pub struct PipelineResult {
    /// Final state.
    pub state: PipelineState,
    /// Metrics by step.
    pub metrics: MetricResults,
    /// Captured PCollections by capture name: element type name and encoded elements.
    pub captured: BTreeMap<String, (String, Vec<u8>)>,
    /// Whether this process holds the captures: not on processes other than 0 of a
    /// `--hosts` cluster, whose captures are gathered on process 0. A program that
    /// prints what it captured prints nothing there, and ends as its job did.
    pub holds_captures: bool,
}

impl PipelineResult {
    /// The elements captured under `name`, with their metadata, in no particular order.
    pub fn captured<T: Element>(&self, name: &str) -> Result<Vec<WindowedValue<T>>> {
        if !self.holds_captures {
            return Err(Error::Capture {
                message: format!(
                    "capture '{name}' is gathered on process 0 of the cluster, not on this process (check PipelineResult::holds_captures first)"
                ),
            });
        }
        let Some((ty, bytes)) = self.captured.get(name) else {
            let known: Vec<String> = self
                .captured
                .iter()
                .map(|(n, (t, _))| format!("'{n}' (of {t})"))
                .collect();
            return Err(Error::Capture {
                message: match known.is_empty() {
                    true => format!(
                        "no capture is named '{name}': the pipeline captures nothing (add .capture(\"{name}\"))"
                    ),
                    false => format!(
                        "no capture is named '{name}'; the pipeline captures {}",
                        known.join(", ")
                    ),
                },
            });
        };
        if ty != std::any::type_name::<T>() {
            return Err(Error::Capture {
                message: format!(
                    "capture '{name}' holds elements of {ty}, not {}: read it as {ty}",
                    std::any::type_name::<T>()
                ),
            });
        }
        let mut out = Vec::new();
        let mut rest = bytes.as_slice();
        while !rest.is_empty() {
            let (len, r) = postcard::take_from_bytes::<u64>(rest)
                .map_err(|e| Error::Internal(e.to_string()))?;
            let len = len as usize;
            if r.len() < len {
                return Err(Error::Internal(format!("captured '{name}' is truncated")));
            }
            out.push(coder::decode(&r[..len]).map_err(|e| Error::Internal(e.to_string()))?);
            rest = &r[len..];
        }
        Ok(out)
    }

    /// Just the values captured under `name`, sorted by their encoding so that the
    /// order is the same on every runner.
    pub fn captured_values<T: Element>(&self, name: &str) -> Result<Vec<T>> {
        let mut v: Vec<(Vec<u8>, T)> = self
            .captured::<T>(name)?
            .into_iter()
            .map(|wv| {
                let mut b = Vec::new();
                let _ = coder::encode_into(&wv.value, &mut b);
                (b, wv.value)
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(v.into_iter().map(|(_, t)| t).collect())
    }
}

static DRAIN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks the pipelines running in this process to stop reading their sources and drain,
/// as at `--max-duration`: watermarks move to the end, windows fire, sinks commit, and
/// `run` returns. What a binary does on Ctrl-C.
///
/// ```
/// assert!(!tidewater::runner::drain_requested());
/// ```
pub fn request_drain() {
    DRAIN.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`request_drain`] was called.
pub fn drain_requested() -> bool {
    DRAIN.load(std::sync::atomic::Ordering::SeqCst)
}

static SAVEPOINT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Asks the pipeline running in this process to keep its next complete checkpoint as
/// a savepoint while it goes on running (Flink's `flink savepoint`): an engine runner
/// with `--savepoint-dir DIR` copies it to `DIR/savepoint-<epoch>`, which
/// `--from-savepoint` starts a job from. What a binary does on `SIGUSR1`.
///
/// ```
/// tidewater::runner::request_savepoint();
/// assert!(tidewater::runner::take_savepoint_request());
/// assert!(!tidewater::runner::take_savepoint_request());
/// ```
pub fn request_savepoint() {
    SAVEPOINT.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`request_savepoint`] was called since the last call of this function
/// (each request is taken once, by the runner that keeps the savepoint).
pub fn take_savepoint_request() -> bool {
    SAVEPOINT.swap(false, std::sync::atomic::Ordering::SeqCst)
}

/// Renders a plan as a Graphviz graph (`--dump-plan-dot`); runners-core provides one,
/// which the runners register, since the SDK cannot see how a plan is fused.
pub type PlanRenderer = fn(&Plan) -> Result<String>;

static PLAN_RENDERER: std::sync::OnceLock<PlanRenderer> = std::sync::OnceLock::new();

/// Registers the renderer of `--dump-plan-dot` (the first registration wins).
pub fn register_plan_renderer(render: PlanRenderer) {
    let _ = PLAN_RENDERER.set(render);
}

/// The registered renderer of `--dump-plan-dot`.
pub fn plan_renderer() -> Option<PlanRenderer> {
    PLAN_RENDERER.get().copied()
}
