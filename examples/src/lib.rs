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
pub mod windowed_word_count;
pub mod word_count;

/// Makes every runner selectable with `--runner`; the signals a job's program
/// answers (Ctrl-C drains, SIGUSR1 keeps a savepoint); a program's exit code from its
/// result: what a program of one's own calls from `tidewater-runners` too.
pub use tidewater_runners::{
    exit as report, register as register_runners,
    signals::{drain_on_ctrl_c, savepoints_on_sigusr1},
};

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
