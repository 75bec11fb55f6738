//! Windowed word count: `cargo run --release -p tidewater-examples --bin
//! windowed_wordcount -- --runner=native --input=STAMPED --output=DIR`.

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::windowed_word_count;

/// Counts the words of stamped lines (`<event time ms>\t<words>`, in event-time order)
/// per fixed event-time window, and writes `<window start ms> <word> <count>` lines.
#[derive(Parser)]
#[command(name = "windowed_wordcount")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Input file or glob of stamped lines.
    #[arg(long)]
    input: String,
    /// The directory the counts go to (files per committed epoch and worker, exactly
    /// once).
    #[arg(long, value_name = "DIR")]
    output: std::path::PathBuf,
    /// The windows' length in milliseconds.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(i64).range(1..))]
    window_ms: i64,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_examples::register_runners();
    let args = Args::parse();
    std::fs::create_dir_all(&args.output)
        .map_err(|e| anyhow::anyhow!("cannot create --output {}: {e}", args.output.display()))?;
    let p = Pipeline::new(args.options.clone());
    let counts = windowed_word_count::counts(&p, &args.input, args.window_ms);
    windowed_word_count::format(counts)
        .write_to("Output", tidewater_transforms::EpochFiles::to(&args.output));
    p.run()?;
    Ok(())
}
