//! Stateful word count: the running count per word kept in state.
//! `cargo run --release -p tidewater-examples --bin stateful_wordcount -- --runner=direct`

use clap::Parser;
use tidewater::{Pipeline, PipelineOptions};
use tidewater_examples::{stateful_word_count, word_count};

/// Emits (word, count so far) for every word occurrence and prints a summary.
#[derive(Parser)]
#[command(name = "stateful_wordcount")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Input file or glob; the bundled sample text if absent.
    #[arg(long)]
    input: Option<String>,
    /// How many words to show.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Write every update as a line `WORD COUNT` into files in this directory (one per
    /// committed epoch and worker, exactly once) instead of printing a summary: a job
    /// whose only state is the running counts (the summary's combines keep a value per
    /// word of their own).
    #[arg(long, value_name = "DIR")]
    output: Option<std::path::PathBuf>,
    /// Each word's count once, at the end, from an event-time timer per word (instead
    /// of every update): a job whose state is a count and a timer per key.
    #[arg(long)]
    final_counts: bool,
    /// Keep this many bytes of state per word beside its count (the same output): a
    /// job whose state is as large as wanted, e.g. to time a checkpoint or a restore.
    #[arg(long, value_name = "N", conflicts_with = "final_counts")]
    state_value_bytes: Option<usize>,
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
    let running = if args.final_counts {
        stateful_word_count::build_final(&p, &input)
    } else if let Some(pad) = args.state_value_bytes {
        stateful_word_count::build_padded(&p, &input, pad)
    } else {
        stateful_word_count::build(&p, &input)
    };
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("cannot create --output {}: {e}", dir.display()))?;
        running
            .map("Format", |(word, count): (String, u64)| {
                format!("{word} {count}")
            })
            .write_to("Output", tidewater_transforms::EpochFiles::to(dir));
        p.run()?;
        return Ok(());
    }
    // The summary comes out of the pipeline (combines), not from a capture of every
    // update: memory stays flat at any input size.
    stateful_word_count::summarize(&running, args.top);
    let result = p.run()?;
    // Another process of a --hosts cluster: process 0 prints the summary.
    if !result.holds_captures {
        return Ok(());
    }
    tidewater_examples::outln!("{}", stateful_word_count::summary_text(&result)?.trim_end());
    Ok(())
}
