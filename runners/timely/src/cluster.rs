//! Several processes on loopback: the launcher and supervisor behind
//! `--local-cluster=N`, and what a child process hands back.
//!
//! The supervisor starts N processes of the running binary with its arguments (minus
//! `--local-cluster`), each with `--processes N --process-id I --hosts FILE` and the
//! environment variable [`CHILD_ENV`] naming the file it writes its outcome to. Process
//! 0 gathers the captures; its outcome is the job's. timely is fail-stop: when a process
//! dies the others panic, and when one hangs the others wait forever. So when any
//! process fails for a reason other than the pipeline's own error — killed, crashed, a
//! peer lost — or when the durable frontier (the newest checkpoint manifest) stops
//! moving for the watchdog's timeout, the supervisor kills them all and starts them
//! again; each resumes from the last complete checkpoint. Without a checkpoint
//! directory there is nothing to resume from, and the failure is the job's.
//!
//! [`Supervisor::run`] is the recovery logic any production supervisor can call; the
//! child pids of the current attempt are written to `pids` in the checkpoint directory
//! (for operators, and for tests that kill them).

use crate::checkpoint::store::{is_object_store, write_atomic, Store};
use crate::fleet::{kill_all, Exit, Fleet, LocalFleet, Member};
use crate::restart::{Failure, RestartStrategy, Restarts};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tidewater::exec::{MetricResults, Phase};
use tidewater::runner::{PipelineResult, PipelineState};
use tidewater::{Error, Result};

pub use crate::fleet::CHILD_ENV;

/// Exit status of a child whose pipeline failed with its own error (not restarted).
pub const PIPELINE_FAILED: i32 = 3;

/// Exit status of a child that lost an external system ([`Error::Unavailable`]), or
/// found its address taken ([`crate::connect::address_taken`]): the cluster is
/// restarted from the last checkpoint.
pub const UNAVAILABLE: i32 = 4;

/// Exit status of a child that lost a peer (its networking failed: another process
/// died or was killed): the cluster is restarted, whatever error the loss surfaced as.
pub const PEER_LOST: i32 = 5;

/// Whether this process has lost a peer ([`quiet_peer_loss`] saw timely's networking
/// fail).
static PEER_LOSS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// What timely's networking said when this process lost a peer (its first panic).
static PEER_LOSS_MESSAGE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// How this process lost a peer, if it did ([`quiet_peer_loss`] installed): timely's
/// message, e.g. "timely communication error: reading data: socket closed", or the
/// frame checker's ([`crate::frames`]).
pub fn peer_loss() -> Option<String> {
    PEER_LOSS_MESSAGE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// What a child process hands back.
#[derive(Debug, Serialize, Deserialize)]
pub enum Outcome {
    /// The job ran to the end; process 0's captures and this process's metrics.
    Done {
        /// Captures.
        captured: BTreeMap<String, (String, Vec<u8>)>,
        /// Metrics.
        metrics: MetricResults,
    },
    /// The pipeline failed.
    Failed(WireError),
}

/// An [`Error`] as it crosses from a child to the supervisor.
#[derive(Debug, Serialize, Deserialize)]
pub enum WireError {
    /// [`Error::UserCode`].
    UserCode {
        /// The transform.
        transform: String,
        /// The phase's name.
        phase: String,
        /// The element.
        element: Option<String>,
        /// The message.
        message: String,
    },
    /// [`Error::Coder`].
    Coder {
        /// The transform.
        transform: String,
        /// The element.
        element: String,
        /// The message.
        message: String,
    },
    /// [`Error::Checkpoint`].
    Checkpoint(String),
    /// [`Error::InvalidOption`].
    InvalidOption {
        /// The option.
        option: String,
        /// What is wrong.
        message: String,
    },
    /// [`Error::Unavailable`].
    Unavailable {
        /// The transform.
        transform: String,
        /// The phase's name.
        phase: String,
        /// What went away.
        message: String,
    },
    /// [`Error::Replay`].
    Replay(String),
    /// [`Error::Cluster`].
    Cluster(String),
    /// Any other error, as its message.
    Other(String),
}

const PHASES: [Phase; 10] = [
    Phase::Setup,
    Phase::StartBundle,
    Phase::Process,
    Phase::FinishBundle,
    Phase::Teardown,
    Phase::SinkWrite,
    Phase::SinkStage,
    Phase::SinkCommit,
    Phase::SinkAbort,
    Phase::SinkRecover,
];

impl WireError {
    /// `e` for the wire.
    pub fn from_error(e: &Error) -> Self {
        match e {
            Error::UserCode {
                transform,
                phase,
                element,
                message,
                ..
            } => WireError::UserCode {
                transform: transform.clone(),
                phase: phase.to_string(),
                element: element.clone(),
                message: message.clone(),
            },
            Error::Coder {
                transform,
                element,
                message,
            } => WireError::Coder {
                transform: transform.clone(),
                element: element.clone(),
                message: message.clone(),
            },
            Error::Checkpoint { message } => WireError::Checkpoint(message.clone()),
            Error::Replay { message } => WireError::Replay(message.clone()),
            Error::Cluster { message } => WireError::Cluster(message.clone()),
            Error::Unavailable {
                transform,
                phase,
                message,
            } => WireError::Unavailable {
                transform: transform.clone(),
                phase: phase.to_string(),
                message: message.clone(),
            },
            Error::InvalidOption { option, message } => WireError::InvalidOption {
                option: option.clone(),
                message: message.clone(),
            },
            other => WireError::Other(other.to_string()),
        }
    }

    /// The error again.
    pub fn into_error(self) -> Error {
        match self {
            WireError::UserCode {
                transform,
                phase,
                element,
                message,
            } => Error::UserCode {
                transform,
                phase: PHASES
                    .iter()
                    .map(|p| p.name())
                    .find(|n| *n == phase)
                    .unwrap_or("process"),
                element,
                message,
                replay: None,
            },
            WireError::Coder {
                transform,
                element,
                message,
            } => Error::Coder {
                transform,
                element,
                message,
            },
            WireError::Checkpoint(message) => Error::Checkpoint { message },
            WireError::Replay(message) => Error::Replay { message },
            WireError::Cluster(message) => Error::Cluster { message },
            WireError::Unavailable {
                transform,
                phase,
                message,
            } => Error::Unavailable {
                transform,
                phase: PHASES
                    .iter()
                    .map(|p| p.name())
                    .find(|n| *n == phase)
                    .unwrap_or("process"),
                message,
            },
            WireError::InvalidOption { option, message } => {
                Error::InvalidOption { option, message }
            }
            WireError::Other(m) => Error::Internal(format!("a process of the cluster failed: {m}")),
        }
    }
}

/// Writes a child's outcome for the supervisor, then ends the process: 0 when the job
/// is done, [`PIPELINE_FAILED`] when the pipeline failed.
pub fn finish_child(path: &Path, result: Result<PipelineResult>) -> ! {
    let (outcome, code) = match result {
        Ok(r) => (
            Outcome::Done {
                captured: r.captured,
                metrics: r.metrics,
            },
            0,
        ),
        Err(e) => {
            let code = match e {
                Error::Unavailable { .. } => UNAVAILABLE,
                Error::Cluster { .. } if crate::connect::address_taken() => UNAVAILABLE,
                // The error is what losing a peer did here (a worker that panicked on
                // a closed connection, guards that would not join): the peer's death
                // is the failure, reported in one line already.
                _ if PEER_LOSS.load(std::sync::atomic::Ordering::SeqCst) => PEER_LOST,
                _ => PIPELINE_FAILED,
            };
            if code != PEER_LOST {
                tracing::error!("{e}");
            }
            (Outcome::Failed(WireError::from_error(&e)), code)
        }
    };
    let bytes = postcard::to_allocvec(&outcome).expect("an outcome encodes");
    // Written beside and renamed into place: the supervisor never reads half of it.
    let tmp = path.with_extension("part");
    if let Err(e) = crate::private_file::write_private(&tmp, &bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("{}: {e}", path.display()))
    {
        tracing::error!("cannot hand the outcome to the supervisor: {e}");
        std::process::exit(1);
    }
    std::process::exit(code)
}

/// How a supervisor restarts a job, whatever runs its processes (a local cluster, or
/// hosts' agents for a coordinator).
#[derive(Clone, Debug)]
pub struct Supervision {
    /// The checkpoint directory, if any: failures are then recovered from.
    pub checkpoint_dir: Option<PathBuf>,
    /// When to restart after a failure, and when to give up.
    pub restart: RestartStrategy,
    /// A running cluster whose newest checkpoint does not move for this long is hung:
    /// it is restarted.
    pub watchdog: Duration,
    /// The status it serves (`--status-addr`), if any.
    pub status: Option<std::sync::Arc<crate::status::supervised::Supervised>>,
}

/// How the supervisor runs a local cluster.
#[derive(Clone, Debug)]
pub struct Supervisor {
    /// Processes.
    pub processes: usize,
    /// The binary.
    pub program: PathBuf,
    /// Its arguments, without the cluster flags.
    pub args: Vec<String>,
    /// How it restarts them.
    pub supervision: Supervision,
}

/// The arguments of the running process without the supervisor's flags
/// (`--local-cluster`, `--status-addr`, `--status-linger`, `--control-token-file`, and
/// a coordinator's and an agent's, in either spelling).
pub fn args_for_children(args: impl IntoIterator<Item = String>) -> Vec<String> {
    // The supervisor's own flags (it serves the status: the processes hand theirs over
    // in a file, [`crate::status::supervised`]).
    const OWN: [&str; 8] = [
        "--local-cluster",
        "--status-addr",
        "--status-linger",
        "--control-token-file",
        "--coordinate",
        "--coordinator",
        "--expect-hosts",
        "--min-hosts",
    ];
    let mut out = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if OWN.contains(&a.as_str()) {
            skip = true;
            continue;
        }
        if OWN.iter().any(|f| a.starts_with(&format!("{f}="))) {
            continue;
        }
        out.push(a);
    }
    out
}

/// In a process of a local cluster: ends the process when its supervisor is gone, so
/// that killing a supervisor leaves no process of its cluster behind (a SIGKILL
/// included, which no handler sees). The supervisor holds the write end of the
/// process's standard input and writes to it only to ask for a drain
/// ([`crate::stop::DRAIN`]); when the supervisor ends the read here ends, and the
/// process exits. What it had not committed is recovered from the
/// checkpoint by the job's next run.
pub fn exit_with_supervisor() {
    let watch = std::thread::Builder::new()
        .name("supervisor-watch".into())
        .spawn(|| {
            let mut stdin = std::io::stdin().lock();
            let mut buf = [0u8; 64];
            loop {
                match std::io::Read::read(&mut stdin, &mut buf) {
                    Ok(0) => break,
                    // The supervisor was asked to stop the job (SIGTERM): drain.
                    Ok(n) if buf[..n].contains(&crate::stop::DRAIN) => {
                        tidewater::runner::request_drain();
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            tracing::error!(
                "cluster process {}: its supervisor is gone; stopping",
                std::process::id()
            );
            std::process::exit(1);
        });
    if let Err(e) = watch {
        tracing::warn!(
            "cluster process {}: cannot watch the supervisor: {e}",
            std::process::id()
        );
    }
}

/// In a process of a cluster: a panic of timely's networking (a peer is gone, or sent a
/// malformed frame) is reported once, in one line, without a backtrace, and kept for
/// [`peer_loss`]; the panics it sets off in timely's other threads (the send and receive
/// threads, a poisoned merge queue) say nothing more. `supervised`: a local cluster's
/// process, whose supervisor restarts the cluster. `TIDEWATER_PEER_PANICS=1` shows them
/// all as usual, with backtraces as `RUST_BACKTRACE` says.
pub fn quiet_peer_loss(supervised: bool) {
    let verbose = std::env::var_os("TIDEWATER_PEER_PANICS").is_some_and(|v| v == "1");
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| info.payload().downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        let of_networking = message.starts_with("timely communication error")
            || message == "MergeQueue poisoned."
            || message.starts_with("Send thread panic")
            || message.starts_with("Recv thread panic");
        if of_networking {
            PEER_LOSS_MESSAGE
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| message.clone());
        }
        if !of_networking || verbose {
            // Noted either way: the error the loss surfaces as is not the pipeline's.
            if of_networking {
                PEER_LOSS.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            default(info);
        } else if !PEER_LOSS.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let then = match supervised {
                true => "; the supervisor restarts the cluster",
                false => "",
            };
            tracing::warn!(
                "cluster process {}: lost a peer ({message}){then}",
                std::process::id()
            );
        }
    }));
}

enum Attempt {
    Done(PipelineResult),
    Failed(Error),
    /// Why, and how many processes the attempt had.
    Restart(String, usize),
}

/// The pipeline error a process reports within the next half second, if any (the
/// others having failed meanwhile is what it set off).
fn pipeline_failure(members: &mut [Box<dyn Member>]) -> Option<Error> {
    let until = Instant::now() + Duration::from_millis(500);
    let mut running: Vec<usize> = (0..members.len()).collect();
    while !running.is_empty() && Instant::now() < until {
        let mut still = Vec::new();
        for i in running {
            match members[i].try_wait() {
                Some(exit) if exit.code == Some(PIPELINE_FAILED) => {
                    if let Ok(Outcome::Failed(e)) =
                        postcard::from_bytes::<Outcome>(&members[i].outcome())
                    {
                        kill_all(members);
                        return Some(e.into_error());
                    }
                }
                Some(_) => {}
                None => still.push(i),
            }
        }
        running = still;
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

impl Supervisor {
    /// Runs the local cluster to the end, restarting it from the last checkpoint after
    /// a failure; the job's result is process 0's.
    pub fn run(&self) -> Result<PipelineResult> {
        // Removed when the supervisor ends.
        let work_dir =
            crate::fleet::private_work_dir("tidewater-cluster-", "the cluster's work directory")?;
        // The job's secret, fresh: only its processes (which get it in their
        // environment, readable by this user only) can join its cluster.
        let secret = crate::handshake::Secret::fresh()
            .map_err(|e| Error::Internal(format!("cannot make the cluster's secret: {e}")))?;
        let mut fleet = LocalFleet {
            processes: self.processes,
            program: self.program.clone(),
            args: self.args.clone(),
            work: work_dir.path().to_path_buf(),
            secret,
            status: self.supervision.status.clone(),
        };
        let result = self.supervision.supervise(&mut fleet);
        drop(work_dir);
        result
    }
}

impl Supervision {
    fn durable(&self) -> Option<u64> {
        let dir = self.checkpoint_dir.as_ref()?;
        Store::open(dir).ok()?.manifests().ok()?.last().copied()
    }

    fn attempt(
        &self,
        fleet: &mut dyn Fleet,
        attempt: usize,
        stop: &crate::stop::Supervising,
    ) -> Result<Attempt> {
        let mut members = fleet.start(attempt)?;
        let n = members.len();
        // Where tests and the recovery benchmark find the processes to kill (a local
        // checkpoint directory only: an object store is no place for them).
        if let Some(dir) = self.checkpoint_dir.as_ref().filter(|d| !is_object_store(d)) {
            let pids: String = members
                .iter()
                .filter_map(|m| m.pid())
                .map(|p| format!("{p}\n"))
                .collect();
            if !pids.is_empty() {
                let _ = write_atomic(&dir.join("pids"), pids.as_bytes());
            }
        }
        let mut durable = self.durable();
        let mut moved = Instant::now();
        let mut exited: Vec<Option<Exit>> = vec![None; n];
        let mut draining = false;
        loop {
            if !draining && stop.drain_asked() {
                draining = true;
                let by = if crate::stop::asked_over_api() {
                    "stop asked over the control API"
                } else {
                    "SIGTERM"
                };
                tracing::info!(
                    "{}: {by}: draining the job (sources stop, windows fire, output is committed); SIGTERM again stops at once",
                    fleet.name()
                );
                for m in members.iter_mut() {
                    m.drain();
                }
            }
            // A savepoint asked of the supervisor goes to process 0, whose worker 0
            // writes the checkpoints' manifests (the processes run this binary, so
            // they take the signal as it did).
            if tidewater::runner::take_savepoint_request() && exited[0].is_none() {
                members[0].savepoint();
            }
            for (i, m) in members.iter_mut().enumerate() {
                if exited[i].is_none() {
                    exited[i] = m.try_wait();
                }
            }
            // A pipeline error is the job's, whatever the others do.
            for (i, exit) in exited.iter().enumerate() {
                if exit.as_ref().and_then(|e| e.code) == Some(PIPELINE_FAILED) {
                    if let Ok(Outcome::Failed(e)) =
                        postcard::from_bytes::<Outcome>(&members[i].outcome())
                    {
                        kill_all(&mut members);
                        return Ok(Attempt::Failed(e.into_error()));
                    }
                }
            }
            if let Some((i, exit)) = exited
                .iter()
                .enumerate()
                .find_map(|(i, s)| s.clone().filter(|s| !s.success()).map(|s| (i, s)))
            {
                // A process whose pipeline failed makes its peers lose it, and one of
                // them may end first: a moment for the failed one to say so, so that
                // the job fails with its error instead of restarting into it again.
                if let Some(e) = pipeline_failure(&mut members) {
                    return Ok(Attempt::Failed(e));
                }
                kill_all(&mut members);
                // An external system went away: say which, then recover.
                if exit.code == Some(UNAVAILABLE) {
                    if let Ok(Outcome::Failed(e)) =
                        postcard::from_bytes::<Outcome>(&members[i].outcome())
                    {
                        return Ok(Attempt::Restart(
                            format!("process {i}: {}", e.into_error()),
                            n,
                        ));
                    }
                }
                return Ok(Attempt::Restart(
                    format!("process {i} exited with {}", exit.shown),
                    n,
                ));
            }
            if exited.iter().all(|s| s.is_some()) {
                let bytes = members[0].outcome();
                if bytes.is_empty() {
                    return Err(Error::Internal("process 0 ended without an outcome".into()));
                }
                return match postcard::from_bytes::<Outcome>(&bytes) {
                    Ok(Outcome::Done {
                        captured,
                        mut metrics,
                    }) => {
                        for m in &mut members[1..] {
                            if let Ok(Outcome::Done { metrics: more, .. }) =
                                postcard::from_bytes::<Outcome>(&m.outcome())
                            {
                                metrics.merge(&more);
                            }
                        }
                        Ok(Attempt::Done(PipelineResult {
                            state: PipelineState::Done,
                            metrics,
                            captured,
                            holds_captures: true,
                        }))
                    }
                    Ok(Outcome::Failed(e)) => Ok(Attempt::Failed(e.into_error())),
                    Err(e) => Err(Error::Internal(format!(
                        "the outcome of process 0 does not decode: {e}"
                    ))),
                };
            }
            if let Some(why) = fleet.changed() {
                kill_all(&mut members);
                return Ok(Attempt::Restart(why, n));
            }
            if self.checkpoint_dir.is_some() {
                let now = self.durable();
                if now != durable {
                    durable = now;
                    moved = Instant::now();
                } else if moved.elapsed() >= self.watchdog {
                    kill_all(&mut members);
                    return Ok(Attempt::Restart(
                        format!(
                            "no checkpoint completed for {:?}: a process hangs",
                            self.watchdog
                        ),
                        n,
                    ));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs the job on `fleet` to the end, restarting it from the last checkpoint
    /// after a failure; the job's result is process 0's.
    pub fn supervise(&self, fleet: &mut dyn Fleet) -> Result<PipelineResult> {
        // The supervisor holds the directory for its job; its processes do not lock it.
        let _lock = match &self.checkpoint_dir {
            Some(dir) => {
                let lock = crate::checkpoint::lock::lock(dir)?;
                Store::open(dir)?;
                Some(lock)
            }
            None => None,
        };
        let job = Instant::now();
        let mut restarts = Restarts::new(self.restart.clone(), u64::from(std::process::id()));
        let stop = crate::stop::supervising();
        let result = loop {
            let started = Instant::now();
            let durable = self.durable();
            match self.attempt(fleet, restarts.restarts(), &stop) {
                Ok(Attempt::Done(r)) => break Ok(r),
                Ok(Attempt::Failed(e)) => break Err(e),
                Err(e) => break Err(e),
                Ok(Attempt::Restart(why, _)) if stop.drain_asked() => {
                    break Err(Error::Internal(format!(
                        "{why} while the job drained (SIGTERM); not restarted: the next run on its checkpoint directory resumes from the last checkpoint"
                    )))
                }
                Ok(Attempt::Restart(why, n)) => {
                    if self.checkpoint_dir.is_none() {
                        break Err(Error::Internal(format!(
                            "{why}; without --checkpoint-dir there is no checkpoint to recover from"
                        )));
                    }
                    let failure = Failure {
                        at: job.elapsed(),
                        ran: started.elapsed(),
                        checkpointed: self.durable() != durable,
                    };
                    let delay = match restarts.on_failure(failure) {
                        Ok(delay) => delay,
                        Err(give_up) => break Err(Error::Internal(format!("{why}; {give_up}"))),
                    };
                    if let Some(status) = &self.status {
                        status.restarting(&why);
                    }
                    tracing::warn!(
                        "{}: {why}; restarting all {n} processes from the last checkpoint in {} ms (restart {})",
                        fleet.name(),
                        delay.as_millis(),
                        restarts.restarts()
                    );
                    std::thread::sleep(delay);
                }
            }
        };
        if let Some(status) = &self.status {
            status.end(result.as_ref().err().map(|e| e.to_string()));
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisors_flags_are_taken_out_in_both_spellings() {
        let args = [
            "bin",
            "--local-cluster",
            "2",
            "--runner=native",
            "--local-cluster=3",
            "--status-addr",
            "127.0.0.1:0",
            "--status-linger=1s",
            "-x",
        ]
        .map(String::from);
        assert_eq!(args_for_children(args), ["bin", "--runner=native", "-x"]);
    }

    #[test]
    fn a_user_error_crosses_the_wire_whole() {
        let e = Error::UserCode {
            transform: "Parse".into(),
            phase: "finish_bundle",
            element: Some("\"x\"".into()),
            message: "boom".into(),
            replay: None,
        };
        let back = WireError::from_error(&e).into_error();
        assert_eq!(back.to_string(), e.to_string());
    }
}
