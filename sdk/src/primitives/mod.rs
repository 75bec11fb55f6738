//! The primitive transforms every runner implements, and the function-item helpers.

mod capture;
mod combine;
mod combine_table;
mod create;
mod fanout;
mod flatten;
mod fn_names;
mod functions;
mod group_by_key;
mod pardo;
mod partition;
mod read;
mod reduce;
mod stateful_pardo;
mod test_stream;
mod window_into;

pub use capture::Capture;
pub(crate) use combine::register_combine;
pub use combine::{
    Combine, CombineFn, CombineGlobally, CombineGloballyWithoutDefaults, CombineOps,
    CombinePerElement, CombinePerKey, CombineShape, Globally, GloballyWithoutDefaults, PerElement,
    PerKey,
};
pub use create::{Create, CreateTimestamped, Impulse, ReifiedTimestampFn};
pub use fanout::CombinePerKeyWithFanout;
pub use flatten::{Flatten, FlattenExt};
pub use functions::{
    ElementContext, FilterFn, FilterWithContextFn, FilterWithFn, FlatMapFn, FlatMapWithContextFn,
    FlatMapWithFn, MapFn, MapWithContextFn, MapWithFn, WithKeysFn,
};
pub use group_by_key::{GroupByKey, GroupByKeyOps};
pub use pardo::{PCollectionTuple, ParDo, ParDoWithOutputs};
pub use partition::{
    Partition, PartitionFn, PartitionWith, PartitionWithFn, Split2, Split3, SplitFn,
};
pub use read::{Read, TimestampedPosition, TimestampedSource, WatermarkEstimator};
pub use stateful_pardo::StatefulParDo;
pub use test_stream::{TestStream, TestStreamEvent};
pub use window_into::{Window, WithTimestamps, WithTimestampsFn, WithTimestampsWithFn};
