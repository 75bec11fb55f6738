//! Tidewater's library of composite transforms and IO, built only on the SDK's model.
//!
//! ```
//! use tidewater::{Pipeline, PipelineOptions};
//! use tidewater_transforms::Count;
//! tidewater_runner_direct::register();
//!
//! let p = Pipeline::new(PipelineOptions::default());
//! let words = p.create("Words", vec!["a".to_string(), "b".to_string(), "a".to_string()]);
//! words.apply("Count", Count::per_element()).capture("counts");
//! let r = p.run().unwrap();
//! assert_eq!(r.captured_values::<(String, u64)>("counts").unwrap(), vec![("a".into(), 2), ("b".into(), 1)]);
//! ```
#![deny(missing_docs)]

mod approx;
mod batches;
mod cogroup;
mod count;
mod dedup;
mod distinct;
mod epoch_files;
mod generate;
mod join;
mod kv;
mod numeric;
mod reify;
mod reshuffle;
mod sample;
mod strings;
mod tail;
pub mod text_io;
mod top;
mod wait;

pub use approx::{
    ApproximateQuantiles, ApproximateQuantilesFn, ApproximateUnique, ApproximateUniqueFn,
    QuantileSketch,
};
pub use batches::GroupIntoBatches;
pub use cogroup::{CoGbkResult, CoGroupByKey, CoGroupExt, CoGrouped, KeyedPCollectionTuple, Union};
pub use count::{Count, CountFn};
pub use dedup::{Deduplicate, DeduplicateKeyed};
pub use distinct::Distinct;
pub use epoch_files::EpochFiles;
pub use generate::{GenerateSequence, SequencePosition};
pub use join::{StatefulJoinExt, StatefulJoinFn};
pub use kv::{Keys, KvSwap, Values};
pub use numeric::{Max, Mean, Min, Numeric, Sum};
pub use reify::{
    Latest, LatestFn, LatestGlobally, LatestPerKey, Reify, ReifyTimestamps, ReifyWindows,
    TimestampedValue, ValueInSingleWindow,
};
pub use reshuffle::{Reshuffle, ReshuffleViaRandomKey};
pub use sample::Sample;
pub use strings::{
    Regex, RegexTransform, ToString, ToStringElements, ToStringIterables, ToStringKvs,
};
pub use tail::{TailFile, TailPosition};
pub use text_io::TextIO;
pub use top::Top;
pub use wait::{Wait, WaitOn};
