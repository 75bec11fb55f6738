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
pub mod fuzz;
pub mod io;
mod key_check;
pub mod log;
mod options;
mod pipeline;
pub mod plan;
mod primitives;
pub mod registry;
pub mod runner;
pub mod runner_flags;
mod side_input;
mod sink;
mod source;
mod state;
mod state_spec;
mod time;
mod transform;
mod trigger;
mod window;
mod windowed_value;
mod windowing;

pub use dofn::{DoFn, FinishBundleContext, MAIN_TAG, ProcessContext, TupleTag};
pub use element::{Element, KV};
pub use error::{Error, Result, UserError, shorten};
pub use exec::TimeDomain;
pub use exec::{ErasedWindowFn, ViewOps};
pub use options::{
    EngineOptions, PipelineOptions, StateBackendKind, parse_duration, parse_job_id, parse_key_value,
};
pub use pipeline::{PCollection, Pipeline, run_plan_file, run_plan_json};
pub use primitives::*;
pub use runner::{PipelineResult, Runner};
pub use side_input::{NoSideInputs, PCollectionView, SideInputReader};
pub use sink::{Committed, Recovery, Sink, Txn, WriteToSink};
pub use source::{ReadStatus, Source};
pub use state::{StateContext, StatefulDoFn, StatefulInvoker};
pub use state_spec::{
    BagState, CellReader, CombiningState, EventTimer, MapState, ProcessingTimer, SetState,
    StateCell, StateSpec, TimerSpec, ValueState,
};
pub use time::{Duration, Timestamp};
pub use transform::{PBegin, PInput, POutput, PTransform};
pub use trigger::{AfterProcessingTimeTrigger, AfterWatermarkTrigger, TimeTransform, Trigger};
pub use window::{
    BoundedWindow, CustomWindow, GlobalWindow, PaneInfo, Timing, WindowType, Windows,
};
pub use windowed_value::WindowedValue;
pub use windowing::{
    AccumulationMode, ClosingBehavior, CustomWindowFn, ElementWindowFn, OnTimeBehavior,
    TimestampCombiner, WindowFn, WindowingStrategy,
};

#[doc(hidden)]
pub mod __private {
    pub use crate::windowing::{register_element_window_fn, register_window_fn};
    pub use typetag;
}

/// Registers a concrete user function at link time, so that a binary that links it
/// runs a saved plan naming it without constructing the pipeline first (as Beam Go's
/// `register` calls in `init()` allow). Invoke it in the module that defines the type
/// (its name in the plan is `module_path!()` plus the type's name, which is the type's
/// `std::any::type_name`), once per type:
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use tidewater::{DoFn, ProcessContext, UserError};
///
/// #[derive(Serialize, Deserialize)]
/// pub struct Upper;
/// impl DoFn for Upper {
///     type In = String;
///     type Out = String;
///     fn process(&mut self, s: String, ctx: &mut ProcessContext<'_, String>) -> Result<(), UserError> {
///         ctx.output(s.to_uppercase());
///         Ok(())
///     }
/// }
/// tidewater::register!(DoFn Upper);
///
/// # fn main() {
/// // A binary that never applied `Upper` resolves it from a plan's name and fields.
/// let name = std::any::type_name::<Upper>();
/// assert!(!tidewater::registry::has_do_fn(name));
/// assert!(tidewater::registry::link(name, &serde_json::Value::Null).unwrap());
/// assert!(tidewater::registry::has_do_fn(name));
/// # }
/// ```
///
/// The kinds are `DoFn`, `StatefulDoFn`, `Source`, `Sink`, `WindowFn` and `CombineFn`.
/// A WindowFn that sees elements ([`ElementWindowFn`]) names their type:
/// `tidewater::register!(WindowFn PerAuction for Event);`.
/// A CombineFn registers Combine.globally, and Combine.perKey for the key types it
/// names (`tidewater::register!(CombineFn SumLen keys: String, u64);`): the key type is
/// a parameter of a per-key combine, which a link-time registration must spell. It expands to
/// a `#[typetag::deserialize]` impl of [`registry::Linked`]; a generic type cannot be
/// registered this way (typetag needs one constant name per impl) and keeps registering
/// when the pipeline that uses it is constructed.
#[macro_export]
macro_rules! register {
    (DoFn $ty:ident) => {
        $crate::register!(@link $ty, register_do_fn);
    };
    (StatefulDoFn $ty:ident) => {
        $crate::register!(@link $ty, register_stateful_do_fn);
    };
    (Source $ty:ident) => {
        $crate::register!(@link $ty, register_source);
    };
    (Sink $ty:ident) => {
        $crate::register!(@link $ty, register_sink);
    };
    (WindowFn $ty:ident) => {
        const _: () = {
            use $crate::__private::typetag;
            #[typetag::deserialize(name = concat!(module_path!(), "::", stringify!($ty)))]
            impl $crate::registry::Linked for $ty {
                fn register(&self) -> ::std::string::String {
                    $crate::__private::register_window_fn::<$ty>()
                }
            }
        };
    };
    (WindowFn $ty:ident for $elem:ty) => {
        const _: () = {
            use $crate::__private::typetag;
            #[typetag::deserialize(name = concat!(module_path!(), "::", stringify!($ty)))]
            impl $crate::registry::Linked for $ty {
                fn register(&self) -> ::std::string::String {
                    $crate::__private::register_element_window_fn::<$elem, $ty>()
                }
            }
        };
    };
    (CombineFn $ty:ident $(keys: $($key:ty),+)?) => {
        const _: () = {
            use $crate::__private::typetag;
            #[typetag::deserialize(name = concat!(module_path!(), "::", stringify!($ty)))]
            impl $crate::registry::Linked for $ty {
                fn register(&self) -> ::std::string::String {
                    $crate::registry::register_combine_fn_globally::<$ty>();
                    $($($crate::registry::register_combine_fn_per_key::<$key, $ty>();)+)?
                    ::std::any::type_name::<$ty>().to_string()
                }
            }
        };
    };
    (@link $ty:ident, $register:ident) => {
        const _: () = {
            use $crate::__private::typetag;
            #[typetag::deserialize(name = concat!(module_path!(), "::", stringify!($ty)))]
            impl $crate::registry::Linked for $ty {
                fn register(&self) -> ::std::string::String {
                    $crate::registry::$register::<$ty>()
                }
            }
        };
    };
}
