//! The direct runner's status (`--status-addr`): the same server, page, JSON and
//! Prometheus figures as the engine runners' (`tidewater-runners-status`), for its one
//! worker. The scheduler publishes its figures to the board about once a second
//! (`scheduler/figures.rs`): per task (a stage's head) records in and out and the
//! watermark, a grouping's windows and a stateful DoFn's timers, a source's partitions,
//! the DoFns' metrics. With `--savepoint-dir`, a savepoint request keeps one between
//! rounds and stop leaves the sources where they are and keeps the job's state there
//! (`scheduler/savepoint.rs`); without, savepoints are refused and stop drains the job
//! as Ctrl-C does. Cancel ends it.

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
    let control = Control::new(
        Token::of(&options.engine)?,
        Arc::new(DirectControls {
            savepoint_dir: options.engine.savepoint_dir.clone(),
        }),
    );
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
struct DirectControls {
    savepoint_dir: Option<std::path::PathBuf>,
}

impl Controls for DirectControls {
    fn act(&self, action: Action) -> std::result::Result<String, String> {
        match (action, &self.savepoint_dir) {
            (Action::Savepoint, None) => {
                Err("the job has no --savepoint-dir to keep a savepoint in".into())
            }
            (Action::Savepoint, Some(dir)) => {
                tidewater::runner::request_savepoint();
                Ok(format!(
                    "a savepoint is kept between the next two rounds in {}/savepoint-<epoch>; /api/job lists it once written",
                    dir.display()
                ))
            }
            (Action::Stop, None) => {
                tidewater::runner::request_drain();
                Ok("stopping: the sources stop, windows fire and the output is committed".into())
            }
            (Action::Stop, Some(dir)) => {
                tidewater::runner::request_drain();
                Ok(format!(
                    "stopping: the sources stop where they are, the output is committed, and the job's state is kept as a savepoint in {} (start a job from it with --from-savepoint)",
                    dir.display()
                ))
            }
            (Action::Cancel, _) => Ok(cancel_soon("the job")),
        }
    }
}
