//! Windowed word count: lines `<event time ms>\t<words>`, in event-time order, counted
//! per word per fixed event-time window; the benchmark's `windowed` workload, and the
//! `windowed_wordcount` example (whose windows may be long enough to hold more state
//! than memory, with `--state-backend fjall`).

use serde::{Deserialize, Serialize};
use tidewater::{
    BoundedWindow, DoFn, PCollection, ParDo, Pipeline, ProcessContext, Timestamp, UserError,
    WatermarkEstimator, Window, WindowFn,
};
use tidewater_transforms::{Count, TextIO};

/// (word, count) per word and window of `window_ms` over the stamped lines of `input`
/// (a file or glob), read with the watermark at the latest event time read.
pub fn counts(p: &Pipeline, input: &str, window_ms: i64) -> PCollection<(String, u64)> {
    p.apply(
        "ReadStampedLines",
        TextIO::read().from(input).with_timestamps(
            stamped_line_time,
            WatermarkEstimator::MonotonicallyIncreasing,
        ),
    )
    .flat_map("SplitWords", split_stamped_words)
    .apply("Window1s", Window::into(WindowFn::fixed(window_ms)))
    .apply("CountPerWordAndWindow", Count::per_element())
}

/// Each count as a line `<window start ms> <word> <count>`.
pub fn format(counts: PCollection<(String, u64)>) -> PCollection<String> {
    counts.apply("Format", ParDo::of(FormatWindowed))
}

/// The event time of a `<event time ms>\t<words>` line. The input is in event-time
/// order, as the peers read it: the watermark is the latest time read (as theirs).
#[allow(clippy::ptr_arg)] // a timestamp function takes `&` of the record type
fn stamped_line_time(line: &String) -> Timestamp {
    let ts = line.split_once('\t').and_then(|(ts, _)| ts.parse().ok());
    Timestamp(ts.unwrap_or_else(|| panic!("no event time in line '{}'", tidewater::shorten(line))))
}

/// The words of a `<event time ms>\t<words>` line.
fn split_stamped_words(line: String) -> Vec<String> {
    let words = line.split_once('\t').map_or("", |(_, words)| words);
    words
        .split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// `<window start ms> <word> <count>`.
#[derive(Serialize, Deserialize)]
struct FormatWindowed;

impl DoFn for FormatWindowed {
    type In = (String, u64);
    type Out = String;
    fn process(
        &mut self,
        (word, n): (String, u64),
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        let start = match ctx.window() {
            BoundedWindow::Global => "global".to_string(),
            w => w.start().0.to_string(),
        };
        ctx.output(format!("{start} {word} {n}"));
        Ok(())
    }
}
