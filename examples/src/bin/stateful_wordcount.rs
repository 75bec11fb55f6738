//! Stateful word count: the running count per word kept in state.
//! `cargo run --release -p tidewater-examples --bin stateful_wordcount -- --runner=direct`

use clap::Parser;
use std::collections::BTreeMap;
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
    stateful_word_count::build(&p, &input).capture("running");
    let result = p.run()?;
    // Another process of a --hosts cluster: process 0 prints the summary.
    if !result.holds_captures {
        return Ok(());
    }
    let updates = result.captured_values::<(String, u64)>("running")?;
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    for (w, c) in &updates {
        let e = last.entry(w.clone()).or_insert(0);
        *e = (*e).max(*c);
    }
    tidewater_examples::outln!(
        "{} updates for {} words; running counts reached:",
        updates.len(),
        last.len()
    );
    let mut top: Vec<(u64, String)> = last.into_iter().map(|(w, c)| (c, w)).collect();
    top.sort_by(|a, b| b.cmp(a));
    for (c, w) in top.into_iter().take(args.top) {
        tidewater_examples::outln!("{c:>8}  {w}");
    }
    Ok(())
}
