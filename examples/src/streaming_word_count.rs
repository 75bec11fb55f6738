//! Streaming word count: generated words, 10-second fixed windows, early firings every
//! second of processing time, late firings.

use tidewater::{Duration, PCollection, Pipeline, Read, Trigger, Window, WindowFn};
use tidewater_transforms::{Count, GenerateSequence};

/// The vocabulary.
pub const WORDS: [&str; 24] = [
    "the", "tide", "water", "river", "sea", "stream", "flow", "wave", "current", "shore", "sand",
    "salt", "moon", "ebb", "flood", "estuary", "delta", "channel", "harbour", "bay", "reef",
    "surf", "swell", "foam",
];

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The words of record `offset` under `seed`, chosen from both, so every run (and
/// runner) sees the same text.
pub fn words_of(seed: u64, offset: u64) -> Vec<String> {
    let n = 1 + mix(seed ^ offset) % 4;
    (0..n)
        .map(|j| {
            let h = mix(seed ^ offset.rotate_left(17) ^ j);
            // The smaller of two draws favours the first words, as in natural text.
            let i = ((h % WORDS.len() as u64).min((h >> 32) % WORDS.len() as u64)) as usize;
            WORDS[i].to_string()
        })
        .collect()
}

/// `records` generated records (unbounded if 0) at `rate` per second (as fast as
/// possible if 0; event time advances 1000/rate ms per record either way), counted per
/// word in 10-second windows with early, on-time and late panes.
pub fn build(p: &Pipeline, records: u64, rate: f64, seed: u64) -> PCollection<(String, u64)> {
    let pace = if rate > 0.0 { rate } else { 2_000.0 };
    let interval_ms = (1000.0 / pace).max(1.0) as i64;
    let mut source = GenerateSequence::new(0, (records > 0).then_some(records))
        .with_event_time(0, interval_ms)
        .with_late_records(97, 12_000);
    if rate > 0.0 {
        source = source.with_rate(rate);
    }
    let trigger = Trigger::after_watermark()
        .with_early_firings(Trigger::after_processing_time().plus_delay_of(Duration::from_secs(1)))
        .with_late_firings(Trigger::after_count(1));
    p.apply("Generate", Read::from(source))
        .flat_map_with("Words", seed, |seed: &u64, offset: u64| {
            words_of(*seed, offset)
        })
        .apply(
            "Window",
            Window::into(WindowFn::fixed(Duration::from_secs(10)))
                .triggering(trigger)
                .with_allowed_lateness(Duration::from_secs(30))
                .accumulating_fired_panes(),
        )
        .apply("CountWords", Count::per_element())
}
