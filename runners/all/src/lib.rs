//! Every Tidewater runner, for the `main` of a job's binary. One line starts a job's
//! program as the example binaries start theirs:
//!
//! ```no_run
//! use clap::Parser;
//! use tidewater::{Pipeline, PipelineOptions};
//!
//! /// My job: its own flags beside the standard ones (`--runner`, `--workers`, ...).
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     options: PipelineOptions,
//!     #[arg(long, default_value_t = 10)]
//!     top: usize,
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let args: Args = tidewater_runners::init();
//!     let p = Pipeline::new(args.options);
//!     p.create("Numbers", vec![1i64, 2, 3]);
//!     tidewater_runners::exit(p.run().map(|_| ()))
//! }
//! ```
//!
//! [`init`] registers the direct, micro-batch and native runners (so that `--runner`
//! is checked against them as the flags are parsed), parses the arguments, and
//! installs the signal handlers: the first Ctrl-C drains the job (sources stop,
//! windows fire, output is committed; with `--savepoint-dir` the sources stop where
//! they are and the state is kept), a second ends the program at once; `SIGUSR1` keeps
//! a savepoint. [`exit`] turns the job's result into the process's exit code, printing
//! an error with its causes. A program with no flags of its own parses [`JobArgs`].

use clap::Parser;
use tidewater::PipelineOptions;

pub mod signals;

/// The flags of a job that has none of its own: the standard ones.
#[derive(Debug, Parser)]
pub struct JobArgs {
    #[command(flatten)]
    pub options: PipelineOptions,
}

/// Makes every runner selectable with `--runner`: direct, microbatch and native.
pub fn register() {
    tidewater_runner_direct::register();
    tidewater_runner_microbatch::register();
    tidewater_runner_native::register();
}

/// Starts a job's program: registers every runner, installs the signal handlers
/// ([`signals::drain_on_ctrl_c`], [`signals::savepoints_on_sigusr1`]) and parses `A`
/// from the command line (exiting with its usage on a mistake, as clap does).
pub fn init<A: Parser>() -> A {
    register();
    signals::drain_on_ctrl_c();
    signals::savepoints_on_sigusr1();
    A::parse()
}

/// The exit code of a job's program: success, or the error printed with its causes
/// (`Error: ...`, then `Caused by:` lines) and failure. No backtrace is printed even
/// with `RUST_BACKTRACE` set: a mistake in a job's flags or data deserves one clean
/// message.
pub fn exit<E>(result: Result<(), E>) -> std::process::ExitCode
where
    E: std::fmt::Display,
    E: Into<Box<dyn std::error::Error>>,
{
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            let e: Box<dyn std::error::Error> = e.into();
            let mut cause = e.source();
            if cause.is_some() {
                eprintln!("\nCaused by:");
            }
            while let Some(c) = cause {
                eprintln!("    {c}");
                cause = c.source();
            }
            std::process::ExitCode::FAILURE
        }
    }
}
