//! The job the crash tests kill: generated records (bounded, optionally paced) split
//! into words, counted per word per 1-second event-time window and as a running count
//! per word kept in state, every result line written through the exactly-once
//! [`EpochFiles`] sink. Its committed output is the same on every runner and after
//! any number of crashes and restarts: the watermark of the generator is exact (no
//! record is late), so no result depends on timing; a running count's lines are the
//! counts 1..n of each word whatever order the records took.

use crate::streaming_word_count::RecordWords;
use serde::{Deserialize, Serialize};
use std::path::Path;
use tidewater::{
    DoFn, FlattenExt, PCollection, ParDo, Pipeline, ProcessContext, Read, StatefulParDo, UserError,
    Window, WindowFn,
};
use tidewater_transforms::{Count, EpochFiles, GenerateSequence};

/// Formats a count with the start of its window.
#[derive(Serialize, Deserialize)]
pub struct FormatWindowCount;

impl DoFn for FormatWindowCount {
    type In = (String, u64);
    type Out = String;
    fn process(
        &mut self,
        (word, n): (String, u64),
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        let start = match ctx.window() {
            tidewater::BoundedWindow::Interval { start, .. } => start.millis(),
            tidewater::BoundedWindow::Global => i64::MIN,
        };
        ctx.output(format!("window {start} {word} {n}"));
        Ok(())
    }
}

fn one(word: String) -> (String, u64) {
    (word, 1)
}

fn format_total((word, n): (String, u64)) -> String {
    format!("total {word} {n}")
}

/// The job's result lines, before they are written.
pub fn lines(p: &Pipeline, records: u64, rate: f64) -> PCollection<String> {
    let mut source = GenerateSequence::new(0, Some(records)).with_event_time(0, 1);
    if rate > 0.0 {
        source = source.with_rate(rate);
    }
    let words = p
        .apply("Generate", Read::from(source))
        .apply("Words", ParDo::of(RecordWords { seed: 7 }));
    let per_window = words
        .apply("Window", Window::into(WindowFn::fixed(1_000)))
        .apply("CountPerWindow", Count::per_element())
        .apply("FormatWindowCount", ParDo::of(FormatWindowCount));
    let totals = words
        .map("PairWithOne", one)
        .apply(
            "RunningCount",
            StatefulParDo::of(crate::stateful_word_count::RunningCount),
        )
        .map("FormatTotal", format_total);
    vec![per_window, totals].apply_flatten("AllLines")
}

/// The whole job: its lines committed into `out` (an existing directory).
pub fn build(p: &Pipeline, records: u64, rate: f64, out: &Path) {
    lines(p, records, rate).write_to("Output", EpochFiles::to(out));
}

/// Every committed line in `out`, sorted: the job's output, to compare across runs.
pub fn committed_lines(out: &Path) -> std::io::Result<Vec<String>> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|n| n.starts_with("part-")) {
            lines.extend(std::fs::read_to_string(&path)?.lines().map(String::from));
        }
    }
    lines.sort();
    Ok(lines)
}
