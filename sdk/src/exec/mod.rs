//! The erased interface through which runners execute user code.
//!
//! Users never touch this module. Pipeline construction instantiates, for every
//! concrete element type and user function, an implementation of these traits and
//! registers a factory for it by name (see [`crate::registry`]). A runner that decodes
//! a plan looks the names up and drives the objects; elements move between them in
//! typed batches (`Vec<WindowedValue<T>>` behind one box per batch), never one box per
//! element.

mod batch;
mod grouping;
mod invoke;
mod key_index;
mod keys;
mod metrics;
mod quiet;
mod reduce_state;
mod rng;
mod sink;
mod source;
mod state;
mod view;
mod window_fn;

pub use batch::{AnyBatch, Batch, ElementType, TypedElementType, downcast_batch};
pub use grouping::{GroupingOps, GroupingPhase, GroupingTable};
pub use invoke::{
    BATCH_SIZE, DoFnInvoker, Emit, ErasedDoFn, ExecError, InvokeContext, Phase, element_type_name,
};
pub use key_index::KeyIndex;
pub use keys::{
    DEFAULT_MAX_KEY_GROUPS, KeyOps, KeyedBy, bytes_eq, encode_key, key_group, key_group_of,
    key_group_worker, key_groups_of_worker, key_hash, pair_key_ops,
};
pub use metrics::{DistributionData, GaugeData, MetricResults, StepMetrics, peak_rss_kb};
pub use quiet::catch_user;
pub use reduce_state::{Accept, AcceptFn, KeyId, ReduceFnState};
pub use rng::SplitMix64;
pub use sink::{ErasedSink, SinkInvoker};
pub use source::{ErasedSource, SourceInvoker, SourceRead};
pub use state::{ErasedStatefulDoFn, FiredTimer, MapEntries, StateAccess, StateCells, TimeDomain};
pub use view::ViewOps;
pub use window_fn::ErasedWindowFn;
