//! What a running job shows about itself (issue 35), for every runner that serves it:
//! the status types ([`JobStatus`], per worker [`WorkerStatus`] and per operator
//! [`OperatorStatus`]), a process's [`Board`] that its workers publish to about once a
//! second, the status server ([`server`], `--status-addr`: the page, `/api/job`,
//! `/metrics`), control over it ([`control`]), and the "why hasn't my window fired?"
//! answers ([`why`], whose rules are runners-core's). A runner fills the board with its
//! own figures (the engine runners: `tidewater-runners-timely`'s `status`; the direct
//! runner: its scheduler).

pub mod control;
pub mod private_file;
pub mod server;
pub mod why;

use serde::{Deserialize, Serialize};
use std::sync::Mutex;
use std::time::Instant;

/// A job's state, as the status shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Its workers run.
    Running,
    /// A local cluster's supervisor is restarting its processes from the last
    /// checkpoint; the figures are the last attempt's.
    Restarting,
    /// It ended; the figures are its last.
    Finished,
    /// It failed; `error` says why.
    Failed,
}

/// One operator (a task: the transform heading it) on one worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatorStatus {
    /// The transform heading the task.
    pub name: String,
    /// Whether it is a source.
    pub source: bool,
    /// Elements that reached it.
    pub records_in: u64,
    /// Elements it emitted.
    pub records_out: u64,
    /// Its input watermark (a source's own) in ms; `None` before any.
    pub watermark_ms: Option<i64>,
    /// Time its activations took: processing, reading, writing.
    #[serde(default)]
    pub busy_ms: u64,
    /// Time a source was held back by the epochs in flight.
    pub throttled_ms: u64,
    /// Time a source waited for its slower instances (watermark alignment).
    pub drift_paused_ms: u64,
    /// Time messages of a later epoch waited for the current one to close.
    pub alignment_ms: u64,
    /// Since the worker's previous figures: per second, records in and out, and the
    /// milliseconds throttled and paused by alignment. `None` until there are two.
    #[serde(default)]
    pub rates: Option<Rates>,
    /// A keyed operator's windows (a grouping's oldest still holding input, what its
    /// trigger waits for) or a stateful DoFn's timers; what was dropped as late.
    #[serde(default)]
    pub windows: Option<tidewater_runners_core::keyed::reduce::WindowReport>,
    /// A source's partitions: position, watermark, idle, done.
    #[serde(default)]
    pub partitions: Vec<tidewater_runners_core::explain::PartitionReport>,
}

/// An operator's figures per second, between two publications of its worker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Records in per second.
    pub records_in: f64,
    /// Records out per second.
    pub records_out: f64,
    /// Milliseconds per second its activations took (1000 is busy all the time).
    #[serde(default)]
    pub busy_ms: f64,
    /// Milliseconds per second a source was held back by the epochs in flight
    /// (backpressure: 1000 is all the time).
    pub throttled_ms: f64,
    /// Milliseconds per second a source was paused by watermark alignment.
    pub drift_paused_ms: f64,
}

impl Rates {
    /// From `before` to `now`, `seconds` apart; `None` if a count went back (another
    /// attempt's figures) or no time passed.
    pub fn between(before: &OperatorStatus, now: &OperatorStatus, seconds: f64) -> Option<Rates> {
        let per = |a: u64, b: u64| (b >= a).then(|| (b - a) as f64 / seconds);
        (seconds > 0.0).then_some(())?;
        Some(Rates {
            records_in: per(before.records_in, now.records_in)?,
            records_out: per(before.records_out, now.records_out)?,
            busy_ms: per(before.busy_ms, now.busy_ms)?,
            throttled_ms: per(before.throttled_ms, now.throttled_ms)?,
            drift_paused_ms: per(before.drift_paused_ms, now.drift_paused_ms)?,
        })
    }
}

/// A complete checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointStatus {
    /// Its epoch.
    pub epoch: u64,
    /// From the end of its epoch at the sources to its manifest, in ms.
    pub duration_ms: Option<u64>,
    /// The bytes of the files its manifest names.
    pub bytes: Option<u64>,
    /// Its parts (files).
    #[serde(default)]
    pub parts: Option<u64>,
    /// How many of its parts are deltas over an earlier checkpoint's (0: a full one).
    #[serde(default)]
    pub delta_parts: Option<u64>,
    /// The longest time a task held messages back for its epochs, in ms.
    pub alignment_ms: u64,
    /// When it completed, in ms since the job started.
    pub completed_at_ms: u64,
}

/// One worker's figures as it last published them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The worker's index in the job.
    pub worker: usize,
    /// Records its sources read.
    pub records_read: u64,
    /// Its operators.
    pub operators: Vec<OperatorStatus>,
    /// The newest checkpoints it saw complete, oldest first (worker 0's have durations
    /// and sizes).
    pub checkpoints: Vec<CheckpointStatus>,
    /// Checkpoints it saw complete in all.
    pub checkpoints_completed: u64,
    /// The metrics of its DoFns and sinks so far (user counters and distributions, per
    /// step), and the engine's per-checkpoint distributions under `(engine)`.
    pub metrics: tidewater::exec::MetricResults,
    /// When it published, in ms since the job started.
    pub updated_at_ms: u64,
}

/// A savepoint the job kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavepointStatus {
    /// The epoch of the checkpoint it copies.
    pub epoch: u64,
    /// Where it is: start a job from it with `--from-savepoint`.
    pub path: String,
    /// When it was written, in ms since the job started.
    pub at_ms: u64,
}

/// A restart of a local cluster by its supervisor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RestartStatus {
    /// When the supervisor restarted the processes, in ms since the job started.
    pub at_ms: u64,
    /// Why.
    pub reason: String,
}

/// What `/api/job` answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobStatus {
    /// The job's id.
    pub job: String,
    /// The runner.
    pub runner: String,
    /// Running, restarting, finished or failed.
    pub state: JobState,
    /// Why it failed.
    pub error: Option<String>,
    /// How long it has run, in ms.
    pub uptime_ms: u64,
    /// The processes it runs in.
    pub processes: usize,
    /// Every worker of the job (of every process, when they gather their figures in
    /// process 0).
    pub workers: Vec<WorkerStatus>,
    /// A local cluster's restarts, oldest first (the last [`RESTARTS_KEPT`]).
    pub restarts: Vec<RestartStatus>,
    /// A local cluster's restarts in all.
    pub restarts_total: u64,
    /// The attempt of a local cluster the figures come from (0 the first, 1 after
    /// the first restart, ...).
    pub attempt: u64,
    /// The savepoints kept, oldest first: asked for while it ran, and at its stop.
    #[serde(default)]
    pub savepoints: Vec<SavepointStatus>,
    /// "Why hasn't my window fired?": per keyed task (a grouping or a stateful DoFn),
    /// the answer for the worker whose report waits for the earliest event time
    /// (filled in by the server, from the job graph).
    #[serde(default)]
    pub why: Vec<why::Why>,
}

/// The restarts a status keeps.
pub const RESTARTS_KEPT: usize = 20;

/// Whatever can answer `/api/job`: a process's [`Board`], or a local cluster's
/// supervisor (`cluster_board`).
pub trait StatusSource: Send + Sync + 'static {
    /// The job's status now.
    fn status(&self) -> JobStatus;
}

/// The process's status board: what the job's workers last published.
#[derive(Debug)]
pub struct Board {
    runner: String,
    processes: usize,
    started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    job: String,
    state: JobState,
    error: Option<String>,
    workers: Vec<WorkerStatus>,
    savepoints: Vec<SavepointStatus>,
}

impl Board {
    /// An empty board for the `workers` workers (in all) of a job on `runner` in
    /// `processes` processes (its id comes with [`Board::set_job`]).
    pub fn new(runner: &str, workers: usize, processes: usize) -> Board {
        Board {
            runner: runner.to_string(),
            processes,
            started: Instant::now(),
            inner: Mutex::new(Inner {
                job: String::new(),
                state: JobState::Running,
                error: None,
                savepoints: Vec::new(),
                workers: (0..workers)
                    .map(|w| WorkerStatus {
                        worker: w,
                        ..WorkerStatus::default()
                    })
                    .collect(),
            }),
        }
    }

    /// The job's id, once known.
    pub fn set_job(&self, job: &str) {
        self.lock().job = job.to_string();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `at`, in ms since the job started.
    pub fn since_start(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.started).as_millis() as u64
    }

    /// A worker's figures, published here or gathered from its process, with its
    /// operators' rates since its previous ones; a worker the board does not cover is
    /// ignored.
    pub fn put(&self, mut status: WorkerStatus) {
        let mut inner = self.lock();
        let Some(w) = inner.workers.get_mut(status.worker) else {
            return;
        };
        let seconds = status.updated_at_ms.saturating_sub(w.updated_at_ms) as f64 / 1000.0;
        for o in &mut status.operators {
            if let Some(before) = w.operators.iter().find(|b| b.name == o.name) {
                o.rates = Rates::between(before, o, seconds);
            }
        }
        *w = status;
    }

    /// The job kept a savepoint of checkpoint `epoch` at `path`.
    pub fn savepoint(&self, epoch: u64, path: &std::path::Path) {
        let at_ms = self.since_start(Instant::now());
        self.lock().savepoints.push(SavepointStatus {
            epoch,
            path: path.display().to_string(),
            at_ms,
        });
    }

    /// The job ended: `error` if it failed.
    pub fn end(&self, error: Option<String>) {
        let mut inner = self.lock();
        inner.state = match error {
            Some(_) => JobState::Failed,
            None => JobState::Finished,
        };
        inner.error = error;
    }
}

impl StatusSource for Board {
    fn status(&self) -> JobStatus {
        let inner = self.lock();
        JobStatus {
            job: inner.job.clone(),
            runner: self.runner.clone(),
            state: inner.state,
            error: inner.error.clone(),
            uptime_ms: self.since_start(Instant::now()),
            processes: self.processes,
            workers: inner.workers.clone(),
            restarts: Vec::new(),
            restarts_total: 0,
            attempt: 0,
            savepoints: inner.savepoints.clone(),
            why: Vec::new(),
        }
    }
}
