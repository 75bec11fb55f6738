//! A local cluster's status, served by its supervisor (`--local-cluster N
//! --status-addr ADDR`): one page for all its processes, and for the job across their
//! restarts.
//!
//! The processes gather every worker's figures in process 0 (`gather.rs`), which
//! writes the job's [`JobStatus`] about once a second to a file the supervisor names
//! in [`STATUS_FILE_ENV`] (in its private work directory; a new file for every
//! attempt). The supervisor serves the newest it read, with what only it knows: the
//! restarts and their reasons, and the job's state between and after its attempts.

use super::{Board, JobState, JobStatus, RestartStatus, StatusSource, RESTARTS_KEPT};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The environment variable naming the file process 0 of a local cluster writes the
/// job's status to.
pub const STATUS_FILE_ENV: &str = "TIDEWATER_STATUS_FILE";

/// The largest status file the supervisor reads (a job of many workers and metrics
/// stays far below).
pub const MAX_STATUS_FILE: u64 = 64 << 20;

/// How often process 0 writes the status file.
const WRITE_EVERY: Duration = Duration::from_secs(1);

/// What the supervisor serves.
#[derive(Debug)]
pub struct Supervised {
    runner: String,
    started: Instant,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The running attempt, and the file its process 0 writes the status to (none when
    /// its status is handed over instead: [`Supervised::offer`]).
    file: Option<(Option<PathBuf>, u64)>,
    last: Option<JobStatus>,
    restarting: bool,
    ended: Option<Option<String>>,
    restarts: Vec<RestartStatus>,
    restarts_total: u64,
    /// The running attempt's processes (a coordinator's change with its hosts).
    processes: usize,
}

impl Supervised {
    /// The status of a supervised job on `runner` (a local cluster of `processes`
    /// processes; a coordinator's until its first attempt says).
    pub fn new(runner: &str, processes: usize) -> Supervised {
        Supervised {
            runner: runner.to_string(),
            started: Instant::now(),
            inner: Mutex::new(Inner {
                processes,
                ..Inner::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Attempt `attempt` starts (0 the first); its process 0 writes the status to
    /// `file` (or, with none, it is handed over: [`Supervised::offer`]), on `processes`
    /// processes. Until it has, the figures shown are the last attempt's.
    pub fn attempt(&self, file: Option<&Path>, attempt: u64, processes: usize) {
        let mut inner = self.lock();
        inner.processes = processes;
        inner.file = Some((file.map(Path::to_path_buf), attempt));
        inner.restarting = false;
    }

    /// The status process 0 of attempt `attempt` wrote, handed over (by its host's agent
    /// to a coordinator): taken if it is the running attempt's and reads.
    pub fn offer(&self, attempt: u64, bytes: &[u8]) {
        let mut inner = self.lock();
        if inner.ended.is_some() || inner.restarting || bytes.len() as u64 > MAX_STATUS_FILE {
            return;
        }
        if !matches!(&inner.file, Some((None, a)) if *a == attempt) {
            return;
        }
        if let Ok(mut status) = serde_json::from_slice::<JobStatus>(bytes) {
            status.attempt = attempt;
            inner.last = Some(status);
        }
    }

    /// The processes are being restarted, for `reason`.
    pub fn restarting(&self, reason: &str) {
        let at_ms = self.started.elapsed().as_millis() as u64;
        let mut inner = self.lock();
        Self::read(&mut inner);
        inner.restarting = true;
        inner.restarts_total += 1;
        inner.restarts.push(RestartStatus {
            at_ms,
            reason: reason.to_string(),
        });
        if inner.restarts.len() > RESTARTS_KEPT {
            inner.restarts.remove(0);
        }
    }

    /// The job ended: `error` if it failed.
    pub fn end(&self, error: Option<String>) {
        let mut inner = self.lock();
        Self::read(&mut inner);
        inner.ended = Some(error);
    }

    /// The newest status in the attempt's file, if it has one that reads.
    fn read(inner: &mut Inner) {
        let Some((Some(file), attempt)) = &inner.file else {
            return;
        };
        let attempt = *attempt;
        let Ok(f) = std::fs::File::open(file) else {
            return;
        };
        let mut bytes = Vec::new();
        use std::io::Read;
        if f.take(MAX_STATUS_FILE).read_to_end(&mut bytes).is_err() {
            return;
        }
        if let Ok(mut status) = serde_json::from_slice::<JobStatus>(&bytes) {
            status.attempt = attempt;
            inner.last = Some(status);
        }
    }
}

impl StatusSource for Supervised {
    fn status(&self) -> JobStatus {
        let mut inner = self.lock();
        if inner.ended.is_none() && !inner.restarting {
            Self::read(&mut inner);
        }
        let mut status = inner.last.clone().unwrap_or_else(|| JobStatus {
            job: String::new(),
            runner: self.runner.clone(),
            state: JobState::Running,
            error: None,
            uptime_ms: 0,
            processes: inner.processes,
            workers: Vec::new(),
            restarts: Vec::new(),
            restarts_total: 0,
            attempt: 0,
            savepoints: Vec::new(),
            why: Vec::new(),
        });
        status.uptime_ms = self.started.elapsed().as_millis() as u64;
        status.processes = inner.processes;
        status.restarts = inner.restarts.clone();
        status.restarts_total = inner.restarts_total;
        match &inner.ended {
            Some(Some(error)) => {
                status.state = JobState::Failed;
                status.error = Some(error.clone());
            }
            Some(None) => status.state = JobState::Finished,
            None if inner.restarting => status.state = JobState::Restarting,
            // A process's own end is the supervisor's to judge (it may restart it).
            None => {
                status.state = JobState::Running;
                status.error = None;
            }
        }
        status
    }
}

/// Process 0 of a local cluster writes `board`'s status to `file` about once a
/// second until the returned writer is dropped, and once more then.
pub fn write_for_supervisor(board: Arc<Board>, file: PathBuf) -> Writer {
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || loop {
        write_status(&board.status(), &file);
        match stopped.recv_timeout(WRITE_EVERY) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
            _ => {
                write_status(&board.status(), &file);
                break;
            }
        }
    });
    Writer {
        stop: Some(stop),
        thread: Some(thread),
    }
}

/// Writes the status file until dropped.
pub struct Writer {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Replaces `file` with `status` (a new file renamed over it: the supervisor reads a
/// whole one or the one before). A failed write is skipped: the next one may succeed.
fn write_status(status: &JobStatus, file: &Path) {
    let Ok(bytes) = serde_json::to_vec(status) else {
        return;
    };
    let tmp = file.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    if crate::private_file::write_private(&tmp, &bytes).is_ok() {
        let _ = std::fs::rename(&tmp, file);
    }
}
