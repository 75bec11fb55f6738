//! The checkpoint protocol, in one place (Flink's `CheckpointCoordinator` and
//! `SubtaskCheckpointCoordinator`, on timely's progress tracking instead of barriers):
//!
//! 1. Sources end epoch `e` at the interval's multiples on the wall clock
//!    ([`crate::epochs`]); every message of `e` travels at timely time `e`.
//! 2. A task closes `e` once its inputs' frontier passes it (alignment): sinks stage
//!    `e`'s transaction, the task's state becomes parts, full or delta, and goes to the
//!    worker's writer ([`crate::task`]'s `snapshot.rs`, the per-task snapshotter).
//! 3. The writer ([`writer`]) encodes, checksums and syncs the parts off the task's
//!    thread; the task's control capability is released when its file is durable: the
//!    acknowledgement.
//! 4. A probe after every task passing `e` means `e` is durable on every worker; worker
//!    0 writes its manifest ([`coordinator`]), which completes it and prunes old ones,
//!    and keeps a savepoint if one was asked for ([`store`] reads and writes them).
//! 5. Each worker's coordinator (`coordinator::Coordinator`, driven by the worker's
//!    loop) learns that `e` is complete (worker 0 from its manifest, the others from
//!    worker 0 or the directory) and commits its sinks through `e`: sinks commit there
//!    only. On restart the newest complete checkpoint is restored, by key group, at any
//!    parallelism ([`store`]).
//!
//! One job at a time uses a directory ([`lock`]). Where a run starts, and whether a
//! changed pipeline may restore a checkpoint's state, is [`restore`]'s.

pub mod coordinator;
pub mod handoff;
pub mod lock;
pub use tidewater_runners_core::{restore, store};
pub mod writer;
