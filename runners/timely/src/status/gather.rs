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
//! Every process of a job must build it or none (timely matches dataflows by their
//! order): `worker.rs` checks that with the plan hash before anything runs. A worker
//! that fails drops it with the job's dataflow (`worker_main`).

use super::{Board, WorkerStatus};
use std::sync::Arc;
use timely::dataflow::operators::{Exchange as _, Inspect};
use timely::dataflow::InputHandleVec;

/// A worker's end of the gathering dataflow.
pub struct Gather {
    input: InputHandleVec<u64, WorkerStatus>,
    round: u64,
}

impl Gather {
    /// Builds the dataflow on `worker`; what reaches worker 0 goes on `board`.
    pub fn build(worker: &mut timely::worker::Worker, board: Arc<Board>) -> Gather {
        let mut input = InputHandleVec::<u64, WorkerStatus>::new();
        worker.dataflow::<u64, _, _>(|scope| {
            input
                .to_stream(scope)
                .exchange(|_: &WorkerStatus| 0)
                .inspect(move |s: &WorkerStatus| board.put(s.clone()));
        });
        Gather { input, round: 0 }
    }

    /// Sends this worker's figures to worker 0.
    pub fn send(&mut self, status: WorkerStatus) {
        self.input.send(status);
        self.round += 1;
        self.input.advance_to(self.round);
    }
}
