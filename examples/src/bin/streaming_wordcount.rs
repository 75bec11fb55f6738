//! Streaming word count: words from the generator source, 10-second fixed event-time
//! windows with early firings every second of processing time and late firings,
//! printed per pane.
//!
//! `cargo run --release -p tidewater-examples --bin streaming_wordcount -- --runner=direct`

use clap::Parser;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tidewater::{
    BoundedWindow, DoFn, ParDo, Pipeline, PipelineOptions, ProcessContext, Read, Trigger,
    UserError, Window, WindowFn,
};
use tidewater_transforms::{Count, GenerateSequence};

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

const WORDS: [&str; 24] = [
    "the", "tide", "water", "river", "sea", "stream", "flow", "wave", "current", "shore", "sand",
    "salt", "moon", "ebb", "flood", "estuary", "delta", "channel", "harbour", "bay", "reef",
    "surf", "swell", "foam",
];

/// The words of one generated record, chosen from the seed and the record's offset, so
/// every run (and runner) sees the same text.
#[derive(Serialize, Deserialize)]
struct RecordWords {
    seed: u64,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl DoFn for RecordWords {
    type In = u64;
    type Out = String;
    fn process(
        &mut self,
        offset: u64,
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        let n = 1 + mix(self.seed ^ offset) % 4;
        for j in 0..n {
            let h = mix(self.seed ^ offset.rotate_left(17) ^ j);
            // The smaller of two draws favours the first words, as in natural text.
            let i = ((h % WORDS.len() as u64).min((h >> 32) % WORDS.len() as u64)) as usize;
            ctx.output(WORDS[i].to_string());
        }
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    tidewater_examples::register_runners();
    let pace = if args.rate > 0.0 { args.rate } else { 2_000.0 };
    let interval_ms = (1000.0 / pace).max(1.0) as i64;
    let mut source = GenerateSequence::new(0, (args.records > 0).then_some(args.records))
        .with_event_time(0, interval_ms)
        .with_late_records(97, 12_000);
    if args.rate > 0.0 {
        source = source.with_rate(args.rate);
    }
    let trigger = Trigger::after_watermark()
        .with_early_firings(Trigger::after_processing_time().plus_delay_of(1_000))
        .with_late_firings(Trigger::after_count(1));
    let p = Pipeline::new(args.options.clone());
    p.apply("Generate", Read::from(source))
        .apply(
            "Words",
            ParDo::of(RecordWords {
                seed: args.word_seed,
            }),
        )
        .apply(
            "Window",
            Window::into(WindowFn::fixed(10_000))
                .triggering(trigger)
                .with_allowed_lateness(30_000)
                .accumulating_fired_panes(),
        )
        .apply("CountWords", Count::per_element())
        .capture("counts");
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
        println!(
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
        println!("dropped as too late in {}: {}", dropped.0, dropped.1);
    }
    Ok(())
}
