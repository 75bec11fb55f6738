//! Stopping a local cluster cleanly: SIGTERM to its supervisor (what a service manager
//! or `kill` sends) drains the job, as Ctrl-C drains a single process, and as Flink's
//! `stop --drain` does. The supervisor asks each process over the pipe it already holds
//! to its standard input ([`crate::cluster::exit_with_supervisor`] watches it): one
//! byte, [`DRAIN`]. The processes stop reading their sources, fire their windows,
//! commit their output and end; the supervisor returns the job's result. A second
//! SIGTERM stops everything at once (the processes die with the supervisor; the next
//! run on the checkpoint directory resumes from its last checkpoint).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The byte a supervisor writes to a process's standard input to have it drain.
pub const DRAIN: u8 = b'd';

/// SIGTERMs received while a supervisor runs.
static TERMS: AtomicUsize = AtomicUsize::new(0);
/// Whether a supervisor is running in this process.
static SUPERVISING: AtomicBool = AtomicBool::new(false);
/// Whether the control API asked the supervisor to drain.
static ASKED: AtomicBool = AtomicBool::new(false);

/// Has the local cluster this process supervises drain, as a SIGTERM does (the
/// control API's stop).
pub fn ask_supervisor_to_drain() {
    ASKED.store(true, Ordering::SeqCst);
}

/// Whether [`ask_supervisor_to_drain`] was called.
pub fn asked_over_api() -> bool {
    ASKED.load(Ordering::SeqCst)
}

/// From now on (until the guard drops) SIGTERM drains the job this process
/// supervises; outside that, SIGTERM ends the process as it would by default.
pub fn supervising() -> Supervising {
    static WATCH: OnceLock<()> = OnceLock::new();
    WATCH.get_or_init(|| {
        let mut signals = match signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM])
        {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("SIGTERM will stop the local cluster without draining: {e}");
                return;
            }
        };
        std::thread::spawn(move || {
            for _ in signals.forever() {
                let earlier = TERMS.fetch_add(1, Ordering::SeqCst);
                if !SUPERVISING.load(Ordering::SeqCst) || earlier > 0 {
                    if earlier > 0 {
                        tracing::warn!("local cluster: SIGTERM again: stopping at once");
                    }
                    // Its processes see their pipe close and end with it.
                    std::process::exit(143);
                }
            }
        });
    });
    TERMS.store(0, Ordering::SeqCst);
    SUPERVISING.store(true, Ordering::SeqCst);
    Supervising(())
}

/// While it lives, SIGTERM drains (see [`supervising`]).
pub struct Supervising(());

impl Supervising {
    /// Whether a SIGTERM (or the control API) asked the job to drain.
    pub fn drain_asked(&self) -> bool {
        TERMS.load(Ordering::SeqCst) > 0 || ASKED.load(Ordering::SeqCst)
    }
}

impl Drop for Supervising {
    fn drop(&mut self) {
        SUPERVISING.store(false, Ordering::SeqCst);
    }
}

/// Asks the processes behind `lifelines` (their standard inputs) to drain.
pub fn ask_to_drain(lifelines: &mut [std::process::ChildStdin]) {
    for l in lifelines {
        // A process that is gone cannot drain; the supervisor sees it exit.
        let _ = l.write_all(&[DRAIN]).and_then(|()| l.flush());
    }
}
