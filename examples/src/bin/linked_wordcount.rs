//! The running word count of concrete, link-time registered functions:
//! `cargo run -p tidewater-examples --bin linked_wordcount -- --output DIR --dump-plan plan.json`,
//! then `cargo run -p tidewater-examples --bin run_plan -- --plan plan.json` runs the
//! same plan without constructing the pipeline.

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::{linked_word_count, word_count};

/// Writes `word: count so far` for every word occurrence into files in `--output`.
#[derive(Parser)]
#[command(name = "linked_wordcount")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Input file or glob; the bundled sample text if absent.
    #[arg(long)]
    input: Option<String>,
    /// Directory the committed files go to (created if missing).
    #[arg(long)]
    output: String,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    tidewater_examples::register_runners();
    let args = Args::parse();
    let input = args
        .input
        .clone()
        .unwrap_or_else(|| word_count::SAMPLE.to_string());
    std::fs::create_dir_all(&args.output)?;
    let p = Pipeline::new(args.options.clone());
    linked_word_count::build(&p, &input, &args.output);
    p.run()?;
    tidewater_examples::outln!("counts written to {}", args.output);
    Ok(())
}
