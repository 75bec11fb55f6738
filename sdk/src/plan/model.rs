//! The plan's data model: what the JSON holds. See `docs/plan-format.md`.

pub use super::json::{Json, without_position};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The version of the plan format this binary writes and reads.
pub const PLAN_VERSION: u64 = 1;

/// A pipeline as data (Beam's `Pipeline` proto): components by id plus the roots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Format version; see [`PLAN_VERSION`].
    pub version: u64,
    /// Every transform, PCollection, windowing strategy, coder and environment.
    pub components: Components,
    /// Ids of the outermost transforms, in application order.
    pub root_transform_ids: Vec<String>,
}

/// The components of a plan, each map keyed by id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Components {
    /// Transforms, primitive and composite.
    pub transforms: BTreeMap<String, TransformSpec>,
    /// PCollections.
    pub pcollections: BTreeMap<String, PCollectionSpec>,
    /// Windowing strategies.
    pub windowing_strategies: BTreeMap<String, WindowingStrategySpec>,
    /// Coders.
    pub coders: BTreeMap<String, CoderSpec>,
    /// Environments user functions run in.
    pub environments: BTreeMap<String, EnvironmentSpec>,
}

/// A URN plus a payload whose shape the URN defines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FunctionSpec {
    /// What kind of thing this is, e.g. `beam:transform:pardo:v1`.
    pub urn: String,
    /// Kind-specific data.
    #[serde(default, skip_serializing_if = "Json::is_null")]
    pub payload: Json,
}

/// One applied transform (Beam's `PTransform` proto).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformSpec {
    /// Hierarchical unique name, e.g. `WordCount/Split`.
    pub unique_name: String,
    /// The primitive it is; `None` for a composite.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<FunctionSpec>,
    /// Input PCollection ids by local name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// Output PCollection ids by tag.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub outputs: BTreeMap<String, String>,
    /// Ids of the transforms a composite expands to, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subtransforms: Vec<String>,
    /// Environment of the user code, for transforms that run user code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_id: Option<String>,
    /// The id its state is kept under in snapshots, pinned by the user
    /// (`.with_uid`); without one, its unique name. A composite's uid renames the
    /// state of the primitives in it: `uid` + the rest of their names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// Bounded or unbounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IsBounded {
    /// Finite.
    Bounded,
    /// Possibly infinite.
    Unbounded,
}

/// One PCollection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PCollectionSpec {
    /// Unique name, `<producer>.<tag>`.
    pub unique_name: String,
    /// Coder of its elements.
    pub coder_id: String,
    /// Bounded or not.
    pub is_bounded: IsBounded,
    /// How its elements are windowed.
    pub windowing_strategy_id: String,
}

/// How a PCollection is windowed and when its groupings fire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowingStrategySpec {
    /// The WindowFn, e.g. `beam:window_fn:global_windows:v1`.
    pub window_fn: FunctionSpec,
    /// `NON_MERGING` or `NEEDS_MERGE`.
    pub merge_status: String,
    /// Coder of the windows.
    pub window_coder_id: String,
    /// The trigger as a tree, e.g. `{"default": {}}`.
    pub trigger: Json,
    /// `DISCARDING` or `ACCUMULATING`.
    pub accumulation_mode: String,
    /// Timestamp combiner: `END_OF_WINDOW`, `EARLIEST_IN_PANE` or `LATEST_IN_PANE`.
    pub output_time: String,
    /// `EMIT_IF_NONEMPTY` or `EMIT_ALWAYS`.
    pub closing_behavior: String,
    /// `FIRE_IF_NONEMPTY` or `FIRE_ALWAYS`.
    pub on_time_behavior: String,
    /// Allowed lateness in milliseconds.
    pub allowed_lateness_ms: i64,
    /// Environment of a custom WindowFn.
    pub environment_id: String,
}

/// A coder: the element coder names a registered Rust type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoderSpec {
    /// e.g. `tidewater:coder:postcard:v1`.
    pub urn: String,
    /// The Rust type it encodes (`std::any::type_name`), for element coders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rust_type: Option<String>,
    /// Component coders (the key and value coders of a KV coder).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub component_coder_ids: Vec<String>,
}

/// Where user code runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSpec {
    /// `tidewater:env:rust_binary:v1`: the same binary that built the plan.
    pub urn: String,
    /// Details.
    #[serde(default, skip_serializing_if = "Json::is_null")]
    pub payload: Json,
}

/// A user function in a payload: its registered name plus its serialized fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserFunction {
    /// Registered name (the Rust type's name).
    pub name: String,
    /// Its fields as JSON; `null` for a function item.
    #[serde(default, skip_serializing_if = "Json::is_null")]
    pub fields: Json,
}

/// Payload of `beam:transform:pardo:v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParDoPayload {
    /// The DoFn.
    pub do_fn: UserFunction,
    /// Output tags in output-index order; the first is the main output.
    pub output_tags: Vec<String>,
    /// Side inputs: each is also an input of the transform under its tag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub side_inputs: Vec<SideInputSpec>,
}

/// A side input of a ParDo.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideInputSpec {
    /// The input tag (and the view's tag).
    pub tag: String,
    /// The registered view function that builds the value per window.
    pub view: UserFunction,
}

/// Payload of the grouping transforms (GroupByKey, Combine.perKey, Combine.globally).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupingPayload {
    /// The registered typed operations (and for a combine, the CombineFn's fields).
    pub grouping: UserFunction,
}

/// Payload of `tidewater:transform:create:v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreatePayload {
    /// The elements as JSON values.
    pub elements: Vec<Json>,
}

/// Payload of `tidewater:transform:capture:v1`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapturePayload {
    /// The name under which the pipeline result returns the elements.
    pub name: String,
}

/// URNs of the primitive transforms.
pub mod urn {
    /// One empty element.
    pub const IMPULSE: &str = "beam:transform:impulse:v1";
    /// Fixed elements.
    pub const CREATE: &str = "tidewater:transform:create:v1";
    /// Per-element user function.
    pub const PAR_DO: &str = "beam:transform:pardo:v1";
    /// Group by key and window.
    pub const GROUP_BY_KEY: &str = "beam:transform:group_by_key:v1";
    /// Union of PCollections.
    pub const FLATTEN: &str = "beam:transform:flatten:v1";
    /// Combine per key (liftable).
    pub const COMBINE_PER_KEY: &str = "beam:transform:combine_per_key:v1";
    /// Combine globally (liftable; a default value for empty input).
    pub const COMBINE_GLOBALLY: &str = "beam:transform:combine_globally:v1";
    /// Returns the elements in the pipeline result.
    pub const CAPTURE: &str = "tidewater:transform:capture:v1";
    /// Global windows.
    pub const GLOBAL_WINDOWS: &str = "beam:window_fn:global_windows:v1";
    /// The Rust-binary environment.
    pub const RUST_ENV: &str = "tidewater:env:rust_binary:v1";
    /// Coder of global windows.
    pub const GLOBAL_WINDOW_CODER: &str = "beam:coder:global_window:v1";
    /// Coder of interval windows.
    pub const INTERVAL_WINDOW_CODER: &str = "beam:coder:interval_window:v1";
    /// Fixed windows; payload `{"size_ms", "offset_ms"}`.
    pub const FIXED_WINDOWS: &str = "beam:window_fn:fixed_windows:v1";
    /// Sliding windows; payload `{"size_ms", "period_ms", "offset_ms"}`.
    pub const SLIDING_WINDOWS: &str = "beam:window_fn:sliding_windows:v1";
    /// Session windows; payload `{"gap_ms"}`.
    pub const SESSION_WINDOWS: &str = "beam:window_fn:session_windows:v1";
    /// A registered user WindowFn; payload `{"name", "fields", "merging"}`.
    pub const CUSTOM_WINDOWS: &str = "tidewater:window_fn:custom:v1";
    /// A DoFn with state and timers per key and window; payload `{"do_fn": <UserFunction>}`.
    pub const STATEFUL_PAR_DO: &str = "tidewater:transform:stateful_pardo:v1";
    /// Writes into a registered exactly-once sink; payload `{"sink": <UserFunction>}`.
    pub const SINK: &str = "tidewater:transform:sink:v1";
    /// Reads a registered source; payload `{"source": <UserFunction>}`.
    pub const READ: &str = "beam:transform:read:v1";
    /// A scripted unbounded source; payload `{"events": [...]}`.
    pub const TEST_STREAM: &str = "beam:transform:teststream:v1";
    /// Assigns windows; payload `{"window_fn": <FunctionSpec>}` or null to keep windows.
    pub const WINDOW_INTO: &str = "beam:transform:window_into:v1";
}
