//! Word count: `cargo run --release -p tidewater-examples --bin wordcount -- --runner=direct`.

use anyhow::Context;
use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::word_count;

/// Counts the words of text files and prints the most frequent.
#[derive(Parser)]
#[command(name = "wordcount")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Input file or glob; the bundled sample text if absent.
    #[arg(long)]
    input: Option<String>,
    /// Prefix of the output files (`<prefix>-00000-of-00001`) holding every count.
    #[arg(long)]
    output: Option<String>,
    /// How many of the most frequent words to print.
    #[arg(long, default_value_t = 10)]
    top: usize,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_examples::register_runners();
    let args = Args::parse();
    let input = args
        .input
        .clone()
        .unwrap_or_else(|| word_count::SAMPLE.to_string());
    let p = Pipeline::new(args.options.clone());
    word_count::build(&p, &input, args.output.as_deref(), args.top);
    let result = p
        .run()
        .with_context(|| format!("word count on {input} failed"))?;
    // Another process of a --hosts cluster: process 0 prints the words.
    if !result.holds_captures {
        return Ok(());
    }
    let top = result.captured::<Vec<(u64, String)>>("top")?;
    tidewater_examples::outln!("Top {} words of {input}:", args.top);
    for (count, word) in top.into_iter().flat_map(|wv| wv.value) {
        tidewater_examples::outln!("{count:>8}  {word}");
    }
    if let Some(prefix) = &args.output {
        tidewater_examples::outln!("All counts written to {prefix}-*");
    }
    Ok(())
}
