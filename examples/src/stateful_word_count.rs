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
