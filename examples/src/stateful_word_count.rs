//! The running count per word kept in state: (word, count so far) for every occurrence,
//! the map-with-state example of Spark Streaming, Samza and Flink, in our API.

use crate::word_count::extract_words;
use serde::{Deserialize, Serialize};
use tidewater::{PCollection, Pipeline, StateContext, StatefulDoFn, StatefulParDo, UserError};
use tidewater_transforms::TextIO;

/// Keeps the count of each word in value state.
#[derive(Serialize, Deserialize)]
pub struct RunningCount;

impl StatefulDoFn for RunningCount {
    type Key = String;
    type Value = u64;
    type Out = (String, u64);
    fn process(
        &mut self,
        word: &String,
        n: u64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let count = COUNT.read(ctx)?.unwrap_or(0) + n;
        COUNT.write(ctx, &count)?;
        ctx.output((word.clone(), count));
        Ok(())
    }
    fn state_cells(&self) -> Vec<tidewater::StateCell> {
        vec![COUNT.cell()]
    }
}

/// Reads `input` and emits (word, count so far) per word occurrence.
pub fn build(p: &Pipeline, input: &str) -> PCollection<(String, u64)> {
    p.apply("ReadLines", TextIO::read().from(input))
        .flat_map("ExtractWords", extract_words)
        .map("PairWithOne", |word: String| (word, 1u64))
        .apply("RunningCount", StatefulParDo::of(RunningCount))
}

/// The count so far of a word. (Below `build`, so that its closure keeps its line.)
const COUNT: tidewater::ValueState<u64> = tidewater::StateSpec::value("count");

// Linked: `run_plan` runs a saved plan naming it without constructing the pipeline.
// (Below `build`, so that its closure keeps its line, which names it in the plan.)
tidewater::register!(StatefulDoFn RunningCount);

/// Keeps the count of each word in value state and writes it once, when its window
/// ends, from an event-time timer each word sets on its first occurrence: a job with a
/// timer per key (Flink's "emit on timer" pattern).
#[derive(Serialize, Deserialize)]
pub struct FinalCount;

impl StatefulDoFn for FinalCount {
    type Key = String;
    type Value = u64;
    type Out = (String, u64);
    fn process(
        &mut self,
        _word: &String,
        n: u64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let before = COUNT.read(ctx)?.unwrap_or(0);
        COUNT.write(ctx, &(before + n))?;
        if before == 0 {
            let end = ctx.window().max_timestamp();
            ctx.set_event_timer("final", end)?;
        }
        Ok(())
    }
    fn on_timer(
        &mut self,
        word: &String,
        _name: &str,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        if let Some(count) = COUNT.read(ctx)? {
            ctx.output((word.clone(), count));
        }
        Ok(())
    }
    fn state_cells(&self) -> Vec<tidewater::StateCell> {
        vec![COUNT.cell()]
    }
}

/// Reads `input` and emits (word, count) once per word, at the end ([`FinalCount`]).
/// (Its own chain, not `build`'s: a plan names a closure by its function and line.)
pub fn build_final(p: &Pipeline, input: &str) -> PCollection<(String, u64)> {
    p.apply("ReadLines", TextIO::read().from(input))
        .flat_map("ExtractWords", extract_words)
        .map("PairWithOne", |word: String| (word, 1u64))
        .apply("FinalCount", StatefulParDo::of(FinalCount))
}

tidewater::register!(StatefulDoFn FinalCount);

/// [`RunningCount`] with `pad` more bytes of state per word: the same output, its
/// state as large as the benchmark asks (`bench --state-value-bytes`).
#[derive(Serialize, Deserialize)]
pub struct PaddedCount {
    /// Bytes held beside each word's count.
    pub pad: usize,
}

impl StatefulDoFn for PaddedCount {
    type Key = String;
    type Value = u64;
    type Out = (String, u64);
    fn process(
        &mut self,
        word: &String,
        n: u64,
        ctx: &mut StateContext<'_, (String, u64)>,
    ) -> Result<(), UserError> {
        let (count, pad) = PADDED
            .read(ctx)?
            .unwrap_or_else(|| (0, "0".repeat(self.pad)));
        let count = count + n;
        // The padding changes with the count, as a real value would: one digit, a
        // string (its bytes encode as one run, not a number each as a `Vec<u8>`'s do).
        let mut pad = pad.into_bytes();
        if let Some(b) = pad.get_mut(count as usize % self.pad.max(1)) {
            *b = b'0' + b.wrapping_sub(b'0').wrapping_add(1) % 10;
        }
        let pad = String::from_utf8(pad).map_err(|e| UserError::from(e.to_string()))?;
        PADDED.write(ctx, &(count, pad))?;
        ctx.output((word.clone(), count));
        Ok(())
    }
    fn state_cells(&self) -> Vec<tidewater::StateCell> {
        vec![PADDED.cell()]
    }
}

/// A word's count and its padding ([`PaddedCount`]).
const PADDED: tidewater::ValueState<(u64, String)> = tidewater::StateSpec::value("padded");

tidewater::register!(StatefulDoFn PaddedCount);

/// What a run of the running count comes to, computed in the pipeline (combines, so no
/// stage holds more than a word's count): the updates in all (`"updates"`), the words
/// (`"words"`), and the `top` words by the count they reached, largest first
/// (`"top"`, as (count, word)). A capture of every update would hold the whole stream
/// in memory (2.4 GB for 10 million words).
pub fn summarize(running: &PCollection<(String, u64)>, top: usize) {
    use tidewater_transforms::{Count, KvSwap, Max, Top};
    running
        .apply("Updates", Count::globally())
        .capture("updates");
    let reached = running.apply("Reached", Max::per_key());
    reached.apply("Words", Count::globally()).capture("words");
    reached
        .apply("ByCount", KvSwap)
        .apply("TopWords", Top::largest(top))
        .capture("top");
}

/// The summary [`summarize`] captured, as the example prints it.
pub fn summary_text(result: &tidewater::PipelineResult) -> tidewater::Result<String> {
    let one = |name: &str| -> tidewater::Result<u64> {
        Ok(result
            .captured_values::<u64>(name)?
            .first()
            .copied()
            .unwrap_or(0))
    };
    let mut out = format!(
        "{} updates for {} words; running counts reached:\n",
        one("updates")?,
        one("words")?
    );
    for top in result.captured_values::<Vec<(u64, String)>>("top")? {
        for (c, w) in top {
            out.push_str(&format!("{c:>8}  {w}\n"));
        }
    }
    Ok(out)
}

/// [`build`] keeping `pad` bytes of state per word beside its count ([`PaddedCount`]:
/// the same output, a state of a chosen size). (At the end of the file, so that the
/// closures above keep their lines, which name them in plans.)
pub fn build_padded(p: &Pipeline, input: &str, pad: usize) -> PCollection<(String, u64)> {
    p.apply("ReadLines", TextIO::read().from(input))
        .flat_map("ExtractWords", extract_words)
        .map("PairWithOne", |word: String| (word, 1u64))
        .apply("RunningCount", StatefulParDo::of(PaddedCount { pad }))
}
