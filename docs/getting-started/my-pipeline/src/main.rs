//! A pipeline of one's own (docs/getting-started.md): counts the words of a text,
//! writes every count to files and prints the most frequent, on the runner `--runner`
//! names (direct, microbatch or native).

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_transforms::{Count, KvSwap, TextIO, Top};

/// Counts the words of a text.
#[derive(Parser)]
struct Args {
    /// The standard flags: --runner, --workers, --checkpoint-dir, ...
    #[command(flatten)]
    options: PipelineOptions,
    /// The text to count (a file or a glob).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/poem.txt"))]
    input: String,
    /// Where every count goes: files `<prefix>-NNNNN-of-NNNNN`.
    #[arg(long)]
    output: Option<String>,
    /// How many of the most frequent words to print.
    #[arg(long, default_value_t = 5)]
    top: usize,
}

fn main() -> std::process::ExitCode {
    // Every runner, the standard flags, Ctrl-C (drain) and SIGUSR1 (savepoint).
    let args: Args = tidewater_runners::init();
    tidewater_runners::exit(run(args))
}

fn run(args: Args) -> tidewater::Result<()> {
    let p = Pipeline::new(args.options);
    let counts = p
        .apply("Read", TextIO::read().from(&args.input))
        .flat_map("Words", |line: String| {
            line.split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .map(|w| w.to_lowercase())
                .collect::<Vec<_>>()
        })
        .apply("CountWords", Count::per_element());
    counts
        .apply("ByCount", KvSwap)
        .apply("Top", Top::largest(args.top))
        .capture("top");
    if let Some(prefix) = &args.output {
        counts
            .map("Format", |(word, n): (String, u64)| format!("{word}: {n}"))
            .apply("Write", TextIO::write().to(prefix));
    }
    let result = p.run()?;
    // Only process 0 of a cluster started by hand (--hosts) holds what was captured.
    if result.holds_captures {
        for top in result.captured_values::<Vec<(u64, String)>>("top")? {
            for (n, word) in top {
                println!("{n:>4} {word}");
            }
        }
    }
    Ok(())
}
