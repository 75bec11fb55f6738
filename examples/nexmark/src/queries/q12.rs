use super::bids_of;
use crate::{Bid, Event};
use tidewater::{PCollection, TestStream, Timestamp, Trigger, Window};
use tidewater_transforms::Count;

/// Q12's processing-time pane length (Beam's window size: 10 s).
pub const Q12_DELAY_MS: i64 = 10_000;

/// Q12 with panes of `delay_ms` of processing time: bids per bidder in the global
/// window, a pane firing `delay_ms` of processing time after its first bid (Beam's
/// `Repeatedly(AfterProcessingTime.pastFirstElementInPane().plusDelayOf(..))`,
/// discarding), counted per bidder: (bidder, bids in the pane).
pub fn q12_with_delay(events: &PCollection<Event>, delay_ms: i64) -> PCollection<(usize, u64)> {
    events
        .flat_map("Q12.Bids", bids_of)
        .map("Q12.Bidder", |b: Bid| b.bidder)
        .apply(
            "Q12.ProcessingTimePanes",
            Window::configure()
                .triggering(Trigger::repeatedly(
                    Trigger::after_processing_time().plus_delay_of(delay_ms),
                ))
                .discarding_fired_panes()
                .with_allowed_lateness(0),
        )
        .apply("Q12.Count", Count::per_element())
}

/// Q12, processing-time windows: bids per bidder per processing-time pane of
/// [`Q12_DELAY_MS`]. Its output depends on the processing clock: tests and `--verify`
/// run it on [`q12_test_stream`], where the clock is scripted.
pub fn q12(events: &PCollection<Event>) -> PCollection<(usize, u64)> {
    q12_with_delay(events, Q12_DELAY_MS)
}

/// The events as a TestStream: `batch` events at a time, each batch followed by the
/// watermark at the earliest event time still to come (so out-of-order events are not
/// late) and `step_ms` of processing time; then the end.
pub fn q12_test_stream(events: &[Event], batch: usize, step_ms: i64) -> TestStream<Event> {
    let mut stream = TestStream::new();
    // min_after[i]: the earliest event time from event i on.
    let mut min_after = vec![u64::MAX; events.len() + 1];
    for i in (0..events.len()).rev() {
        min_after[i] = min_after[i + 1].min(events[i].timestamp());
    }
    let mut done = 0usize;
    let mut watermark = 0u64;
    for chunk in events.chunks(batch.max(1)) {
        let elements = chunk
            .iter()
            .map(|e| (e.clone(), Timestamp(e.timestamp() as i64)))
            .collect();
        done += chunk.len();
        watermark = watermark.max(min_after[done].min(chunk[chunk.len() - 1].timestamp()));
        stream = stream
            .add_elements(elements)
            .advance_watermark_to(Timestamp(watermark as i64))
            .advance_processing_time(step_ms);
    }
    stream.advance_watermark_to_infinity()
}
