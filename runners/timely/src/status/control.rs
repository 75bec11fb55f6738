//! Control of an engine job over its status server: what a process (alone, or process
//! 0 of a `--hosts` cluster) or a local cluster's supervisor does when asked. The
//! endpoints, the token and the answers are `tidewater-runners-status`'s.

pub use tidewater_runners_status::control::*;

use std::path::PathBuf;
use std::sync::Arc;
use tidewater::Result;

/// Control of the job this process runs (alone, or as process 0 of `--hosts`), or
/// (`supervisor`) of the local cluster it supervises.
pub fn of(
    e: &tidewater::EngineOptions,
    config: &crate::EngineConfig,
    plan: &tidewater::plan::Plan,
    supervisor: bool,
) -> Result<Control> {
    Ok(Control::new(
        Token::of(e)?,
        Arc::new(JobControls {
            savepoint_dir: config.savepoint_dir.clone(),
            checkpoint_dir: config.checkpoint_dir.clone(),
            plan: plan.clone(),
            supervisor,
        }),
    ))
}

/// Why a savepoint cannot be taken, if it cannot.
fn savepoint_refused(savepoint_dir: &Option<PathBuf>, checkpointing: bool) -> Option<String> {
    match (savepoint_dir, checkpointing) {
        (None, _) => Some("the job has no --savepoint-dir to keep a savepoint in".into()),
        (Some(_), false) => {
            Some("the job takes no checkpoints (no --checkpoint-dir): there is none to keep".into())
        }
        _ => None,
    }
}

/// Control of a job: by the process that runs it (alone, or as process 0 of a
/// `--hosts` cluster), or by a local cluster's supervisor.
pub struct JobControls {
    /// `--savepoint-dir`.
    pub savepoint_dir: Option<PathBuf>,
    /// `--checkpoint-dir`: where its state is read from.
    pub checkpoint_dir: Option<PathBuf>,
    /// The job's plan: its keys shown as their type's `Debug`.
    pub plan: tidewater::plan::Plan,
    /// This is a local cluster's supervisor.
    pub supervisor: bool,
}

impl Controls for JobControls {
    fn act(&self, action: Action) -> std::result::Result<String, String> {
        match action {
            Action::Savepoint => {
                if let Some(why) =
                    savepoint_refused(&self.savepoint_dir, self.checkpoint_dir.is_some())
                {
                    return Err(why);
                }
                // A supervisor passes it to process 0, as it does SIGUSR1.
                tidewater::runner::request_savepoint();
                Ok(savepoint_promise(&self.savepoint_dir))
            }
            Action::Stop if self.supervisor => {
                crate::stop::ask_supervisor_to_drain();
                Ok(stop_promise(&self.savepoint_dir))
            }
            // A `--hosts` cluster's process 0 passes the drain on to every process
            // (`gather.rs`).
            Action::Stop => {
                tidewater::runner::request_drain();
                Ok(stop_promise(&self.savepoint_dir))
            }
            Action::Cancel => Ok(cancel_soon(if self.supervisor {
                "the local cluster"
            } else {
                "the job"
            })),
        }
    }

    fn query_state(&self, id: &str, key: &str) -> std::result::Result<serde_json::Value, String> {
        let Some(dir) = &self.checkpoint_dir else {
            return Err(
                "the job takes no checkpoints (no --checkpoint-dir): there is no state to read"
                    .into(),
            );
        };
        tidewater_runners_core::savepoint::query(dir, &self.plan, id, key)
            .map_err(|e| e.to_string())
    }
}

fn savepoint_promise(dir: &Option<PathBuf>) -> String {
    format!(
        "the next complete checkpoint is kept as a savepoint in {}/savepoint-<epoch>; /api/job lists it once written",
        dir.as_deref().map(|d| d.display().to_string()).unwrap_or_default()
    )
}

fn stop_promise(dir: &Option<PathBuf>) -> String {
    match dir {
        Some(d) => format!(
            "stopping: the sources stop where they are, the output is committed, and the last checkpoint is kept as a savepoint in {} (start a job from it with --from-savepoint)",
            d.display()
        ),
        None => "stopping: the sources stop, windows fire and the output is committed".into(),
    }
}
