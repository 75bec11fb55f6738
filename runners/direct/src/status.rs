//! The direct runner's status (`--status-addr`): the same server, page, JSON and
//! Prometheus figures as the engine runners' (`tidewater-runners-status`), for its one
//! worker. The scheduler publishes its figures to the board about once a second
//! (`scheduler/figures.rs`): per task (a stage's head) records in and out and the
//! watermark, a grouping's windows and a stateful DoFn's timers, a source's partitions,
//! the DoFns' metrics. It takes no checkpoints, so it keeps no savepoint; stop drains
//! the job as Ctrl-C does, cancel ends it.

use std::sync::Arc;
use tidewater::{PipelineOptions, Result};
use tidewater_runners_core::translate::ExecutablePlan;
use tidewater_runners_status::control::{cancel_soon, Action, Control, Controls, Token};
use tidewater_runners_status::server::{serve, StatusServer};
use tidewater_runners_status::Board;

/// A job's status server and the board it serves.
pub struct Served {
    pub board: Arc<Board>,
    server: StatusServer,
    linger: Option<std::time::Duration>,
}

/// Serves the job's status when `--status-addr` asks (its URL is the first line).
pub fn serve_if_asked(
    options: &PipelineOptions,
    exec: &ExecutablePlan,
    lift_combiners: bool,
) -> Result<Option<Served>> {
    let Some(addr) = &options.engine.status_addr else {
        return Ok(None);
    };
    let board = Arc::new(Board::new("direct", 1, 1));
    let graph = tidewater_runners_core::job_graph::of_exec(exec, lift_combiners);
    let control = Control::new(Token::of(&options.engine)?, Arc::new(DirectControls));
    let server = serve(addr, board.clone(), graph, control)?;
    Ok(Some(Served {
        board,
        server,
        linger: options.engine.status_linger,
    }))
}

impl Served {
    /// The job ended (`error`: it failed); the server stays up for `--status-linger`.
    pub fn end(self, error: Option<String>) {
        self.board.end(error);
        if let Some(linger) = self.linger {
            std::thread::sleep(linger);
        }
        drop(self.server);
    }
}

/// What control does to a job on the direct runner.
struct DirectControls;

impl Controls for DirectControls {
    fn act(&self, action: Action) -> std::result::Result<String, String> {
        match action {
            Action::Savepoint => Err("the direct runner takes no checkpoints, so it keeps no savepoint (run the job on --runner native or microbatch with --checkpoint-dir and --savepoint-dir)".into()),
            Action::Stop => {
                tidewater::runner::request_drain();
                Ok("stopping: the sources stop, windows fire and the output is committed".into())
            }
            Action::Cancel => Ok(cancel_soon("the job")),
        }
    }
}
