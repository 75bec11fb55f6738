//! Runnable Tidewater pipelines. Each binary takes `--runner` and the other
//! [`PipelineOptions`](tidewater::PipelineOptions).

pub mod stateful_word_count;
pub mod streaming_word_count;
pub mod word_count;

/// Makes every runner this binary links selectable with `--runner`.
pub fn register_runners() {
    tidewater_runner_direct::register();
    tidewater_runner_microbatch::register();
    tidewater_runner_native::register();
}

/// Writes a line to stdout; if stdout is closed (`| head`), the program ends quietly
/// instead of panicking as `println!` does.
pub fn write_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = writeln!(out, "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: cannot write to stdout: {e}");
        std::process::exit(1);
    }
}

/// Ends a binary: on error prints it with its causes (`Error: ...` then `Caused by:`
/// lines) and exits with 1. Unlike returning the error from `main`, no backtrace is
/// printed even when `RUST_BACKTRACE` is set: a user's mistake deserves one clean
/// message.
pub fn report(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e}");
            let causes: Vec<String> = e.chain().skip(1).map(|c| c.to_string()).collect();
            if !causes.is_empty() {
                eprintln!("\nCaused by:");
                for c in causes {
                    eprintln!("    {c}");
                }
            }
            std::process::ExitCode::FAILURE
        }
    }
}

/// `println!` for the example binaries, ending quietly on a closed stdout.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_line(format_args!($($arg)*))
    };
}

/// The README's example, compiled as a doctest.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
