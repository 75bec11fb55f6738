//! Streaming word count: words from the generator source, 10-second fixed event-time
//! windows with early firings every second of processing time and late firings,
//! printed pane by pane as they fire (each second, as the runner commits its output).
//!
//! The generator makes every 97th record 12 s late on purpose, so that late panes show;
//! the first such records fall before time 0, which is why the first lines can name
//! windows of negative time.
//!
//! `cargo run --release -p tidewater-examples --bin streaming_wordcount -- --runner=direct`

use clap::Parser;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::{BoundedWindow, Pipeline, PipelineOptions, Sink, Txn, UserError, WindowedValue};
use tidewater_examples::{outln, streaming_word_count};

/// Counts generated words per 10-second window, pane by pane.
#[derive(Parser)]
#[command(name = "streaming_wordcount")]
struct Args {
    #[command(flatten)]
    options: PipelineOptions,
    /// Records to generate (each a few words); unbounded if 0 (stop with --max-duration).
    #[arg(long, default_value_t = 24_000)]
    records: u64,
    /// Records per second of processing time (0: as fast as possible). Event time
    /// advances max(1, 1000/rate) ms per record: at rates above 1000/s (the default is
    /// 2000/s) it runs faster than processing time.
    #[arg(long, default_value_t = 2_000.0)]
    rate: f64,
    /// Seed of the generated words.
    #[arg(long, default_value_t = 42)]
    word_seed: u64,
    /// Words shown per pane.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// One line per word's pane (`window [0s, 10s) tide pane 2 Early 591`), as each word
    /// fires its own panes, instead of one line per window and pane.
    #[arg(long)]
    per_word: bool,
}

/// Prints the panes of each committed epoch: one line per window and pane, with the
/// number of words, their occurrences and the most frequent.
#[derive(Serialize, Deserialize)]
struct PrintPanes {
    top: usize,
    per_word: bool,
    #[serde(skip)]
    open: BTreeMap<Txn, Vec<WindowedValue<(String, u64)>>>,
}

impl Sink for PrintPanes {
    type In = (String, u64);
    fn write(&mut self, txn: &Txn, xs: Vec<WindowedValue<(String, u64)>>) -> Result<(), UserError> {
        self.open.entry(*txn).or_default().extend(xs);
        Ok(())
    }
    fn stage(&mut self, _: &Txn) -> Result<(), UserError> {
        Ok(())
    }
    fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
        // (window start, pane index, timing) -> (count, word); each word (key) fires its
        // own panes.
        let mut panes: BTreeMap<(i64, u64, String), Vec<(u64, String)>> = BTreeMap::new();
        let mut committed = self.open.remove(txn).unwrap_or_default();
        let start_of = |wv: &WindowedValue<(String, u64)>| match wv.windows.iter().next() {
            Some(BoundedWindow::Interval { start, .. }) => start.millis(),
            _ => 0,
        };
        if self.per_word {
            committed.sort_by(|a, b| {
                (start_of(a), &a.value.0, a.pane.index).cmp(&(
                    start_of(b),
                    &b.value.0,
                    b.pane.index,
                ))
            });
            for wv in committed {
                let start = start_of(&wv);
                outln!(
                    "window [{:>4}s, {:>4}s) {} pane {} {:?} {}",
                    start / 1000,
                    start / 1000 + 10,
                    wv.value.0,
                    wv.pane.index,
                    wv.pane.timing,
                    wv.value.1
                );
            }
            return Ok(());
        }
        for wv in committed {
            let start = start_of(&wv);
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
                .take(self.top)
                .map(|(c, w)| format!("{w}={c}"))
                .collect();
            outln!(
                "window [{:>4}s, {:>4}s) pane {index:<2} {timing:<7} {:>2} words, {total:>6} occurrences  {}",
                start / 1000,
                start / 1000 + 10,
                counts.len(),
                top.join(" ")
            );
        }
        Ok(())
    }
    fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.open.remove(txn);
        Ok(())
    }
}

fn main() -> std::process::ExitCode {
    tidewater_examples::report(run())
}

fn run() -> anyhow::Result<()> {
    // Runners first, so that --runner is checked against them while parsing.
    tidewater_examples::register_runners();
    let args = Args::parse();
    tidewater_examples::drain_on_ctrl_c();
    tidewater_examples::savepoints_on_sigusr1();
    eprintln!(
        "panes of 10 s windows, printed as they fire; every 97th record is 12 s late on \
         purpose, so the first windows can be of negative time. Ctrl-C drains and stops."
    );
    let p = Pipeline::new(args.options.clone());
    streaming_word_count::build(&p, args.records, args.rate, args.word_seed).write_to(
        "PrintPanes",
        PrintPanes {
            top: args.top,
            per_word: args.per_word,
            open: BTreeMap::new(),
        },
    );
    let result = p.run()?;
    if let Some(dropped) = result.metrics.steps.iter().find_map(|(s, m)| {
        m.counters
            .iter()
            .find(|(n, _)| n == "dropped_due_to_lateness")
            .map(|(_, v)| (s.clone(), *v))
    }) {
        outln!("dropped as too late in {}: {}", dropped.0, dropped.1);
    }
    Ok(())
}
