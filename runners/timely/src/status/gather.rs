//! Every worker's figures in process 0: a small dataflow of its own, next to the job's,
//! that each worker feeds with its [`WorkerStatus`] about once a second and that
//! exchanges them all to worker 0, which puts them on its process's [`Board`].
//!
//! It runs over the job's own channel (timely's connections, authenticated at
//! start-up: `handshake.rs`, and checked frame by frame: `frames.rs`), so a `--hosts`
//! cluster's process 0 serves the whole job's status, and a local cluster's process 0
//! hands it to the supervisor. In one process it is the same dataflow, exchanged
//! between threads.
//!
//! The other way, worker 0 broadcasts a drain to every worker once its process is
//! asked to drain (the control API's stop, Ctrl-C): a `--hosts` cluster's processes
//! then all drain, as a local cluster's do when their supervisor asks each one.
//!
//! Every process of a job must build it or none (timely matches dataflows by their
//! order): `worker.rs` checks that with the plan hash before anything runs. A worker
//! that fails drops it with the job's dataflow (`worker_main`).

use super::{Board, WorkerStatus};
use std::sync::Arc;
use timely::dataflow::operators::vec::Broadcast as _;
use timely::dataflow::operators::{Exchange as _, Inspect};
use timely::dataflow::InputHandleVec;

/// A worker's end of the gathering dataflow.
pub struct Gather {
    input: InputHandleVec<u64, WorkerStatus>,
    /// Worker 0's drain, to every worker (`true`: drain).
    drain: InputHandleVec<u64, bool>,
    drain_sent: bool,
    round: u64,
}

impl Gather {
    /// Builds the dataflow on `worker`; what reaches worker 0 goes on `board`.
    pub fn build(worker: &mut timely::worker::Worker, board: Arc<Board>) -> Gather {
        let mut input = InputHandleVec::<u64, WorkerStatus>::new();
        let mut drain = InputHandleVec::<u64, bool>::new();
        worker.dataflow::<u64, _, _>(|scope| {
            input
                .to_stream(scope)
                .exchange(|_: &WorkerStatus| 0)
                .inspect(move |s: &WorkerStatus| board.put(s.clone()));
            drain.to_stream(scope).broadcast().inspect(|&drain: &bool| {
                if drain && !tidewater::runner::drain_requested() {
                    tracing::info!("the job's process 0 asked every process to drain");
                    tidewater::runner::request_drain();
                }
            });
        });
        Gather {
            input,
            drain,
            drain_sent: false,
            round: 0,
        }
    }

    /// Sends this worker's figures to worker 0; worker 0 (`first`) passes on a drain
    /// asked of its process to every worker, once.
    pub fn send(&mut self, status: WorkerStatus, first: bool) {
        self.input.send(status);
        if first && !self.drain_sent && tidewater::runner::drain_requested() {
            self.drain.send(true);
            self.drain_sent = true;
        }
        self.round += 1;
        self.input.advance_to(self.round);
        self.drain.advance_to(self.round);
    }
}
