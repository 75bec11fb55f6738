//! Semantics every Tidewater runner shares, like Beam's runners-core, as the parts an
//! engine hosts: the plan translated ([`mod@translate`]) and fused into a stage graph
//! ([`fusion`]); fused stages built once per worker ([`stage`]); keyed operators behind
//! one interface ([`keyed`]: group-also-by-window over the `keyed::reduce`r and the
//! [`triggers`], the `keyed::stateful` DoFn runner, sharing one [`timers`] service); the
//! [`side_inputs`] runner; the [`source_driver`] and the [`test_stream`] driver;
//! Create and Impulse ([`create`]); the [`head`] of every engine task, built and
//! restored in one place; where processing time comes from ([`clock`]); the
//! watermark rules of steps that hold nothing ([`watermarks`]); keys and key groups
//! (in `tidewater::exec`); and the runner-neutral [`snapshot`] format with the
//! [`checkpoint`] helpers that split and merge keyed state by key group, and the
//! [`delta`] snapshots that write only what changed. A runner
//! decides only scheduling, parallelism, data movement and recovery.

pub mod checkpoint;
pub mod clock;
pub mod compat;
pub mod create;
pub mod delta;
pub mod dot;
pub mod explain;
pub mod fusion;
pub mod head;
pub mod job;
pub mod job_graph;
pub mod keyed;
pub mod restore;
pub mod savepoint;
pub mod side_inputs;
pub mod sink_host;
pub mod snapshot;
pub mod source_driver;
pub mod stage;
pub mod state;
pub mod store;
pub mod test_stream;
pub mod timers;
pub mod translate;
pub mod triggers;
pub mod watermarks;
pub mod windowing;

pub use translate::{translate, ExecutablePlan};
