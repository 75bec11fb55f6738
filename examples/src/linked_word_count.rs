//! A running word count whose every function is concrete and registered at link time
//! (`tidewater::register!`): the text source, the DoFns, the custom WindowFn, the
//! stateful DoFn, the CombineFn and the file sink. A binary that links this crate — `run_plan` — runs
//! its saved plan without constructing the pipeline; the word count of `word_count.rs`,
//! with its closures and generic transforms, cannot be run that way.

use crate::stateful_word_count::RunningCount;
use serde::{Deserialize, Serialize};
use tidewater::{
    BoundedWindow, Combine, CombineFn, CustomWindowFn, DoFn, Flatten, PCollection, ParDo, Pipeline,
    ProcessContext, StatefulParDo, Timestamp, UserError, Window, WindowFn,
};
use tidewater_transforms::{EpochFiles, TextIO};

/// Splits a line into lowercase words, each paired with 1.
#[derive(Serialize, Deserialize)]
pub struct ExtractWords {
    /// Words shorter than this are dropped (a field, so that the plan carries it).
    pub min_len: usize,
}
tidewater::register!(DoFn ExtractWords);

impl DoFn for ExtractWords {
    type In = String;
    type Out = (String, u64);
    fn process(
        &mut self,
        line: String,
        ctx: &mut ProcessContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        for word in line
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() >= self.min_len)
        {
            ctx.output((word.to_lowercase(), 1));
        }
        Ok(())
    }
}

/// `word: count`.
#[derive(Serialize, Deserialize)]
pub struct FormatCount;
tidewater::register!(DoFn FormatCount);

impl DoFn for FormatCount {
    type In = (String, u64);
    type Out = String;
    fn process(
        &mut self,
        (word, count): (String, u64),
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        ctx.output(format!("{word}: {count}"));
        Ok(())
    }
}

/// The total of each word's counts: a CombineFn, linked with the key type it is applied
/// with per key.
#[derive(Serialize, Deserialize)]
pub struct SumCounts;
tidewater::register!(CombineFn SumCounts keys: String);

impl CombineFn for SumCounts {
    type In = u64;
    type Acc = u64;
    type Out = u64;
    fn create_accumulator(&self) -> u64 {
        0
    }
    fn add_input(&self, acc: &mut u64, n: u64) {
        *acc += n;
    }
    fn merge_accumulators(&self, acc: &mut u64, other: u64) {
        *acc += other;
    }
    fn extract_output(&self, acc: u64) -> u64 {
        acc
    }
}

/// `total word: count`.
#[derive(Serialize, Deserialize)]
pub struct FormatTotal;
tidewater::register!(DoFn FormatTotal);

impl DoFn for FormatTotal {
    type In = (String, u64);
    type Out = String;
    fn process(
        &mut self,
        (word, count): (String, u64),
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        ctx.output(format!("total {word}: {count}"));
        Ok(())
    }
}

/// Every element in the global window: a custom WindowFn, linked like the functions.
#[derive(Serialize, Deserialize)]
pub struct OneWindow;
tidewater::register!(WindowFn OneWindow);

impl CustomWindowFn for OneWindow {
    type Window = BoundedWindow;
    fn assign(&self, _ts: Timestamp) -> Vec<BoundedWindow> {
        vec![BoundedWindow::Global]
    }
}

/// Reads `input` and writes `word: count so far` for every word occurrence and
/// `total word: count` for every word into `output` (an existing directory), one file
/// per committed epoch and sink instance.
pub fn build(p: &Pipeline, input: &str, output: &str) -> PCollection<String> {
    let words = p
        .apply("ReadLines", TextIO::read().from(input))
        .apply("ExtractWords", ParDo::of(ExtractWords { min_len: 1 }))
        .apply("OneWindow", Window::into(WindowFn::custom(OneWindow)));
    let running = words
        .apply("RunningCount", StatefulParDo::of(RunningCount))
        .apply("Format", ParDo::of(FormatCount));
    let totals = words
        .apply("Total", Combine::per_key(SumCounts))
        .apply("FormatTotal", ParDo::of(FormatTotal));
    let lines = p.apply_to("Lines", vec![running, totals], Flatten);
    lines.write_to("Write", EpochFiles::to(output));
    lines
}
