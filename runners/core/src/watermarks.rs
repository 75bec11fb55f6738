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

/// The watermark of inputs some of which may be idle (Flink's idleness: a source
/// partition with nothing to read, or a sender all of whose inputs are): the minimum
/// over the active ones, so that a quiet input does not stall every window; if all are
/// idle, the minimum over all, and the result is idle too. No inputs: the end of time,
/// active. The source driver applies it to its partitions, an engine to the senders of
/// an input, so that partitions read by several workers give the watermark one driver
/// reading all of them would.
///
/// ```
/// use tidewater::Timestamp;
/// use tidewater_runners_core::watermarks::with_idleness;
/// let t = Timestamp;
/// assert_eq!(with_idleness([(t(5), true), (t(9), false)]), (t(9), false));
/// assert_eq!(with_idleness([(t(5), true), (t(3), true)]), (t(3), true));
/// assert_eq!(with_idleness([]), (Timestamp::MAX, false));
/// ```
pub fn with_idleness(inputs: impl IntoIterator<Item = (Timestamp, bool)>) -> (Timestamp, bool) {
    let (mut active, mut idle): (Option<Timestamp>, Option<Timestamp>) = (None, None);
    for (w, is_idle) in inputs {
        let slot = if is_idle { &mut idle } else { &mut active };
        *slot = Some(slot.map_or(w, |m| m.min(w)));
    }
    match (active, idle) {
        (Some(w), _) => (w, false),
        (None, Some(w)) => (w, true),
        (None, None) => (Timestamp::MAX, false),
    }
}
