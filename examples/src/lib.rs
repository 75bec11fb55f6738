//! Runnable Tidewater pipelines. Each binary takes `--runner` and the other
//! [`PipelineOptions`](tidewater::PipelineOptions).

pub mod stateful_word_count;
pub mod streaming_word_count;
pub mod word_count;

/// Makes every runner this binary links selectable with `--runner`.
pub fn register_runners() {
    tidewater_runner_direct::register();
    tidewater_runner_microbatch::register();
    tidewater_runner_native::register();
}

/// The README's example, compiled as a doctest.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
