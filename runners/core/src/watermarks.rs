//! How watermarks move through the steps that hold nothing back, once for every
//! runner. (Steps that hold the watermark compute their own: the source driver, the
//! keyed operators, the side-input runner.)

use tidewater::Timestamp;

/// A fused ParDo or WindowInto holds nothing: its outputs carry its input's watermark.
pub fn par_do_output(input: Timestamp) -> Timestamp {
    input
}

/// A Flatten's output watermark is the minimum of its inputs' (the end of time with no
/// inputs).
///
/// ```
/// use tidewater::Timestamp;
/// use tidewater_runners_core::watermarks::flatten_output;
/// assert_eq!(flatten_output([Timestamp(5), Timestamp(3)]), Timestamp(3));
/// assert_eq!(flatten_output([]), Timestamp::MAX);
/// ```
pub fn flatten_output(inputs: impl IntoIterator<Item = Timestamp>) -> Timestamp {
    inputs.into_iter().min().unwrap_or(Timestamp::MAX)
}
