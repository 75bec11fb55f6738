//! Logs. The runners, the SDK and the connectors log through `tracing`; a pipeline's
//! run installs one subscriber for the process (unless the program installed its own
//! first), which writes one line per event to stderr:
//!
//! - filtered as `RUST_LOG` says (`tidewater_runners_timely=debug`, `warn`, ...; by
//!   default Tidewater's own messages from `info` up and everything else's warnings);
//! - with the job, the process and the worker of each line, from the spans the runners
//!   open (`job{job=j… process=0}:worker{worker=1}: …`);
//! - as text, or as one JSON object per line for log shippers (`--log-format json`).
//!
//! A job's first line (its status URL), its progress line and its end-of-run summary
//! are its output, not logs: they are printed as they are.

use std::io::IsTerminal;
use std::sync::OnceLock;

/// How log lines look.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `2026-12-05T10:29:02.123Z  WARN job{job=j1 process=0}: message`.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, fields (the message), and the spans
    /// (job, process, worker).
    Json,
}

/// The filter when `RUST_LOG` is not set.
pub const DEFAULT_FILTER: &str = "warn,tidewater=info";

/// Installs the process's log subscriber in `format`, once (later calls, and a
/// subscriber the program installed itself, win: nothing changes).
pub fn init(format: LogFormat) {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        use tracing_subscriber::EnvFilter;
        // Unset or empty: the default. A directive that does not parse is dropped (with
        // its own message), as tracing does.
        let filter = match std::env::var("RUST_LOG") {
            Ok(v) if !v.trim().is_empty() => EnvFilter::new(v),
            _ => EnvFilter::new(DEFAULT_FILTER),
        };
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_target(false);
        let _ = match format {
            LogFormat::Text => builder
                .with_ansi(std::io::stderr().is_terminal())
                .try_init(),
            LogFormat::Json => builder.json().with_current_span(false).try_init(),
        };
    });
}
