//! Tidewater: a Beam-style SDK for Rust.
//!
//! Write a pipeline once against the model — [`Pipeline`], [`PCollection`], [`ParDo`],
//! [`GroupByKey`], [`Combine`], windows and triggers — and pick the engine that runs it
//! with `--runner`. The pipeline becomes a portable, versioned JSON [`plan`]; runners
//! execute the decoded plan.
//!
//! ```
//! use tidewater::{Pipeline, PipelineOptions};
//! tidewater_runner_direct::register();
//!
//! fn split(line: String) -> Vec<String> {
//!     line.split_whitespace().map(str::to_string).collect()
//! }
//! fn one(word: &String) -> String { word.clone() }
//!
//! let p = Pipeline::new(PipelineOptions::default());
//! let words = p.create("Lines", vec!["a b a".to_string()]).flat_map("Split", split);
//! let grouped = words.with_keys("Key", one).group_by_key("Group");
//! grouped.capture("groups");
//! let result = p.run().unwrap();
//! let groups = result.captured_values::<(String, Vec<String>)>("groups").unwrap();
//! assert_eq!(groups.len(), 2);
//! ```
#![deny(missing_docs)]

pub mod coder;
mod dofn;
mod element;
mod error;
pub mod exec;
pub mod io;
mod key_check;
mod options;
mod pipeline;
pub mod plan;
mod primitives;
pub mod registry;
pub mod runner;
mod side_input;
mod sink;
mod source;
mod state;
mod time;
mod transform;
mod trigger;
mod window;
mod windowed_value;
mod windowing;

pub use dofn::{DoFn, FinishBundleContext, ProcessContext, TupleTag, MAIN_TAG};
pub use element::{Element, KV};
pub use error::{shorten, Error, Result, UserError};
pub use exec::TimeDomain;
pub use options::{parse_key_value, EngineOptions, PipelineOptions};
pub use pipeline::{run_plan_json, PCollection, Pipeline};
pub use primitives::*;
pub use runner::{PipelineResult, Runner};
pub use side_input::{NoSideInputs, PCollectionView, SideInputReader, ViewOps};
pub use sink::{Recovery, Sink, Txn, WriteToSink};
pub use source::{ReadStatus, Source};
pub use state::{StateContext, StatefulDoFn, StatefulInvoker};
pub use time::{Duration, Timestamp};
pub use transform::{PBegin, PInput, POutput, PTransform};
pub use trigger::{AfterProcessingTimeTrigger, AfterWatermarkTrigger, TimeTransform, Trigger};
pub use window::{BoundedWindow, GlobalWindow, PaneInfo, Timing, Windows};
pub use windowed_value::WindowedValue;
pub use windowing::{
    AccumulationMode, ClosingBehavior, CustomWindowFn, OnTimeBehavior, TimestampCombiner, WindowFn,
    WindowingStrategy,
};
