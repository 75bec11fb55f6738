//! Fault injection for the crash tests: `TIDEWATER_FAULT=POINT:AFTER_MS:FILE` makes the
//! process abort the first time it reaches `POINT` once it has run `AFTER_MS`
//! milliseconds — unless `FILE` exists, which it creates first, so that a restarted
//! cluster runs on. Points:
//!
//! - `snapshot`: a task has written its state for an epoch but not yet acknowledged
//!   it (a crash during a checkpoint);
//! - `staged`: a checkpoint's manifest is written but its staged output is not
//!   committed (a crash between staging and commit);
//! - `committed`: right after the first commit of a checkpoint's output.
//!
//! Delays for the timing tests: `TIDEWATER_DELAY=POINT:MS` makes every thread that
//! reaches `POINT` sleep `MS` milliseconds there. Points:
//!
//! - `late-source`: the first activation of a source on a worker other than 0 (a
//!   worker whose thread starts late, as under load);
//! - `snapshot-write`: the snapshot writer, before it writes each file (a slow disk).

use std::sync::OnceLock;

struct Armed {
    point: String,
    after: std::time::Duration,
    file: std::path::PathBuf,
    since: std::time::Instant,
}

fn armed() -> &'static Option<Armed> {
    static ARMED: OnceLock<Option<Armed>> = OnceLock::new();
    ARMED.get_or_init(|| {
        let v = std::env::var("TIDEWATER_FAULT").ok()?;
        let mut it = v.splitn(3, ':');
        let point = it.next()?.to_string();
        let after = std::time::Duration::from_millis(it.next()?.parse().ok()?);
        let file = it.next()?.into();
        Some(Armed {
            point,
            after,
            file,
            since: std::time::Instant::now(),
        })
    })
}

/// Aborts the process here if the fault is armed at `point` and has not fired yet.
pub fn point(point: &str) {
    if let Some(a) = armed() {
        if a.point == point
            && a.since.elapsed() >= a.after
            && std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&a.file)
                .is_ok()
        {
            tracing::error!("fault injected at '{point}': aborting");
            std::process::abort();
        }
    }
}

/// Sleeps here if a delay is set for `point` (see the module's documentation).
pub fn delay(point: &str) {
    static DELAY: OnceLock<Option<(String, std::time::Duration)>> = OnceLock::new();
    let delay = DELAY.get_or_init(|| {
        let v = std::env::var("TIDEWATER_DELAY").ok()?;
        let (point, ms) = v.split_once(':')?;
        Some((
            point.to_string(),
            std::time::Duration::from_millis(ms.parse().ok()?),
        ))
    });
    if let Some((p, d)) = delay {
        if p == point {
            std::thread::sleep(*d);
        }
    }
}
