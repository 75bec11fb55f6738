//! Runnable Tidewater pipelines. Each binary takes `--runner` and the other
//! [`PipelineOptions`](tidewater::PipelineOptions).

/// Every example binary (the benchmarks' and Nexmark's too) allocates with mimalloc: a
/// pipeline's user functions allocate per record (a `String` per word), where glibc's
/// malloc and free cost about a quarter of a word count's time. Measured on the 10M-word
/// workloads at one worker, native runner: windowed 2.9M -> 3.7M, count 4.4M -> 5.3M,
/// stateful 2.8M -> 3.8M words/s. A program of one's own picks its allocator the same
/// way, with one `#[global_allocator]` line.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod bench;
pub mod crash_job;
pub mod held_window;
pub mod latency;
pub mod linked_word_count;
pub mod spill;
pub mod stateful_word_count;
pub mod streaming_word_count;
pub mod tally;
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

/// Calls `handle` with the count of earlier deliveries each time `signal` arrives, on
/// a thread of its own; if the signal cannot be caught, warns that `otherwise`.
fn on_signal(signal: i32, otherwise: &str, mut handle: impl FnMut(usize) + Send + 'static) {
    let mut signals = match signal_hook::iterator::Signals::new([signal]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warning: {otherwise}: {e}");
            return;
        }
    };
    std::thread::spawn(move || {
        for (earlier, _) in signals.forever().enumerate() {
            handle(earlier);
        }
    });
}

/// On the first Ctrl-C the running pipeline drains (stops reading its sources, fires
/// its windows, commits its output) and `run` returns; a second Ctrl-C ends the program
/// at once.
pub fn drain_on_ctrl_c() {
    on_signal(
        signal_hook::consts::SIGINT,
        "Ctrl-C will stop the program without draining",
        |presses| {
            if presses == 0 {
                eprintln!(
                    "draining: windows fire and output is committed; Ctrl-C again stops at once"
                );
                tidewater::runner::request_drain();
            } else {
                std::process::exit(130);
            }
        },
    );
}

/// On `SIGUSR1` the running pipeline keeps its next complete checkpoint as a savepoint
/// and goes on (with `--savepoint-dir DIR`, in `DIR/savepoint-<epoch>`: Flink's
/// `flink savepoint`); under `--local-cluster`, signal the supervisor or process 0.
pub fn savepoints_on_sigusr1() {
    on_signal(
        signal_hook::consts::SIGUSR1,
        "SIGUSR1 will not take a savepoint",
        |_| tidewater::runner::request_savepoint(),
    );
}

/// Elements committed by every [`CountingSink`] in this process.
static COMMITTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The elements [`CountingSink`]s have committed so far.
pub fn committed_count() -> u64 {
    COMMITTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// A sink that counts what it commits and keeps nothing: the output of long or
/// unbounded runs (soak, unbounded Nexmark). [`CountingSink::spilling`] also appends
/// each commit's count to its process's file (for a local cluster's supervisor: see
/// [`spill`] and [`spilled_count`]).
#[derive(serde::Serialize, serde::Deserialize)]
pub struct CountingSink<T> {
    #[serde(default)]
    spill: Option<std::path::PathBuf>,
    #[serde(skip)]
    open: u64,
    #[serde(skip)]
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T> Default for CountingSink<T> {
    fn default() -> Self {
        CountingSink {
            spill: None,
            open: 0,
            _t: std::marker::PhantomData,
        }
    }
}

impl<T> CountingSink<T> {
    /// A sink that also spills each commit's count to `spill` (see [`spill`]).
    pub fn spilling(spill: std::path::PathBuf) -> Self {
        CountingSink {
            spill: Some(spill),
            ..Self::default()
        }
    }
}

/// The elements the [`CountingSink`]s spilling to `spill` committed, in every process;
/// their files are removed.
pub fn spilled_count(spill: &std::path::Path) -> std::io::Result<u64> {
    Ok(spill::take(spill)?
        .iter()
        .flat_map(|bytes| bytes.chunks_exact(8))
        .map(|b| u64::from_le_bytes(b.try_into().expect("chunks of 8")))
        .sum())
}

impl<T: tidewater::Element> tidewater::Sink for CountingSink<T> {
    type In = T;
    fn write(
        &mut self,
        _: &tidewater::Txn,
        xs: Vec<tidewater::WindowedValue<T>>,
    ) -> Result<(), tidewater::UserError> {
        self.open += xs.len() as u64;
        Ok(())
    }
    fn stage(&mut self, _: &tidewater::Txn) -> Result<(), tidewater::UserError> {
        Ok(())
    }
    fn commit(&mut self, _: &tidewater::Txn) -> Result<(), tidewater::UserError> {
        let n = std::mem::take(&mut self.open);
        if let (Some(spill), true) = (&self.spill, n > 0) {
            spill::append(spill, &n.to_le_bytes())?;
        }
        COMMITTED.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
    fn abort(&mut self, _: &tidewater::Txn) -> Result<(), tidewater::UserError> {
        self.open = 0;
        Ok(())
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
