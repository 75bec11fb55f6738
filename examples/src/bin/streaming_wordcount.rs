//! Streaming word count: words from the generator source, 10-second fixed event-time
//! windows with early firings every second of processing time and late firings,
//! printed per pane.
//!
//! `cargo run --release -p tidewater-examples --bin streaming_wordcount -- --runner=direct`

use clap::Parser;
use std::collections::BTreeMap;
use tidewater::{BoundedWindow, Pipeline, PipelineOptions};
use tidewater_examples::streaming_word_count;

/// Counts generated words per 10-second window, pane by pane.
#[derive(Parser)]
#[command(name = "streaming_wordcount")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Records to generate (each a few words); unbounded if 0 (stop with --max-duration).
    #[arg(long, default_value_t = 24_000)]
    records: u64,
    /// Records per second of processing time; event time advances at the same pace
    /// (0: as fast as possible, event time still 1000/2000 ms per record).
    #[arg(long, default_value_t = 2_000.0)]
    rate: f64,
    /// Seed of the generated words.
    #[arg(long, default_value_t = 42)]
    word_seed: u64,
    /// Words shown per pane.
    #[arg(long, default_value_t = 3)]
    top: usize,
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_examples::register_runners();
    let args = Args::parse();
    let p = Pipeline::new(args.options.clone());
    streaming_word_count::build(&p, args.records, args.rate, args.word_seed).capture("counts");
    let result = p.run()?;
    // Gather the panes of all words: (window start, pane index, timing) -> counts. Each
    // word (key) fires its own panes.
    let mut panes: BTreeMap<(i64, u64, String), Vec<(u64, String)>> = BTreeMap::new();
    for wv in result.captured::<(String, u64)>("counts")? {
        let start = match wv.windows.iter().next() {
            Some(BoundedWindow::Interval { start, .. }) => start.millis(),
            _ => 0,
        };
        panes
            .entry((start, wv.pane.index, format!("{:?}", wv.pane.timing)))
            .or_default()
            .push((wv.value.1, wv.value.0));
    }
    for ((start, index, timing), mut counts) in panes {
        counts.sort_by(|a, b| b.cmp(a));
        let total: u64 = counts.iter().map(|(c, _)| c).sum();
        let top: Vec<String> = counts
            .iter()
            .take(args.top)
            .map(|(c, w)| format!("{w}={c}"))
            .collect();
        tidewater_examples::outln!(
            "window [{:>4}s, {:>4}s) pane {index:<2} {timing:<7} {:>2} words, {total:>6} occurrences  {}",
            start / 1000,
            start / 1000 + 10,
            counts.len(),
            top.join(" ")
        );
    }
    if let Some(dropped) = result.metrics.steps.iter().find_map(|(s, m)| {
        m.counters
            .iter()
            .find(|(n, _)| n == "dropped_due_to_lateness")
            .map(|(_, v)| (s.clone(), *v))
    }) {
        tidewater_examples::outln!("dropped as too late in {}: {}", dropped.0, dropped.1);
    }
    Ok(())
}
