//! Sources: a bounded `GenerateSequence` read whole, each number at its event time, and
//! counted per fixed window; and a Read beside a TestStream, which on the simulated
//! clock is read out before the script's first event (`runners/core/src/clock.rs`).
//!
//! Expected values follow `docs/semantics.md` ("Sources") and the generator's contract:
//! `GenerateSequence::new(from, Some(to)).with_event_time(start, interval)` gives every
//! number `n` in `from..to` once, at event time `start + (n - from) * interval`, in the
//! global window; its watermark reaches `MAX` when it is exhausted, so with the default
//! trigger each window gets one on-time pane stamped with its max timestamp.

use crate::case::RunResult;
use crate::cases::panes::{fired, iw, same_outputs, Fired, ONLY};
use crate::check::succeeded;
use crate::Case;
use tidewater::runner::Feature::{
    Capture, CombineGlobally, Flatten, ReadBounded, TestStream as TestStreamFeature, WindowInto,
};
use tidewater::{
    BoundedWindow, FlattenExt, PaneInfo, Pipeline, Read, TestStream, Timestamp, Window, WindowFn,
};
use tidewater_transforms::{Count, GenerateSequence};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "sources/generate_sequence_counted_per_window",
            features: &[ReadBounded, WindowInto, CombineGlobally, Capture],
            build: generate,
            check: check_generate,
        },
        Case {
            name: "sources/read_beside_a_test_stream_is_read_out_first",
            features: &[
                ReadBounded,
                TestStreamFeature,
                Flatten,
                WindowInto,
                CombineGlobally,
                Capture,
            ],
            build: beside_a_script,
            check: check_beside_a_script,
        },
    ]
}

// 20,000 numbers, all at event time 12 (many reads on every runner), flattened with a
// script that, with its processing time moving a second at each step, adds 100 at 3,
// moves the watermark to 25, adds 101 at 15 and 102 at 27. The Read is read out (its
// watermark then at the end of time) before the script's first event, so the Flatten's
// watermark is the script's: 101 arrives behind it, its window [10, 20) already
// closed, and is dropped (no allowed lateness). Had the Read still been reading, its
// watermark (12) would have held [10, 20) open and 101 would have counted: which
// happened would depend on the schedule. Counts in fixed windows of 10: [0, 10) 1,
// [10, 20) 20,000, [20, 30) 1.
const BESIDE: u64 = 20_000;

fn beside_a_script(p: &Pipeline) {
    let numbers = p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(0, Some(BESIDE)).with_event_time(12, 0)),
    );
    let script = TestStream::new()
        .add_elements(vec![(100u64, Timestamp(3))])
        .advance_processing_time(1_000i64)
        .advance_watermark_to(Timestamp(25))
        .advance_processing_time(1_000i64)
        .add_elements(vec![(101u64, Timestamp(15))])
        .add_elements(vec![(102u64, Timestamp(27))])
        .advance_watermark_to_infinity();
    let scripted = p.apply("Script", script);
    vec![numbers, scripted]
        .apply_flatten("Both")
        .apply("Fixed10", Window::into(WindowFn::fixed(10)))
        .apply("Count", Count::globally())
        .capture("counts");
}

fn check_beside_a_script(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let counts = on_time_counts(10, &[(0, 1), (10, BESIDE), (20, 1)]);
    same_outputs("capture 'counts'", fired::<u64>(&r, "counts")?, counts)
}

/// One on-time pane per fixed window of `width` starting at each `start`, holding
/// `count` and stamped with the window's max timestamp.
fn on_time_counts(width: i64, counts: &[(i64, u64)]) -> Vec<Fired<u64>> {
    counts
        .iter()
        .map(|&(start, count)| Fired {
            value: count,
            window: iw(start, start + width),
            timestamp: Timestamp(start + width - 1),
            pane: ONLY,
        })
        .collect()
}

// The numbers 10..60 at 100 + 3(n - 10): 100, 103, ..., 247, in fixed windows of 25.
// [100, 125) holds the times 100..=124 (n 10..=18, 9 numbers), [125, 150) 127..=148
// (n 19..=26, 8), [150, 175) 151..=172 (n 27..=34, 8), [175, 200) 175..=199 (n 35..=43,
// 9), [200, 225) 202..=223 (n 44..=51, 8), [225, 250) 226..=247 (n 52..=59, 8): 50 in all.

fn generate(p: &Pipeline) {
    let numbers = p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(10, Some(60)).with_event_time(100, 3)),
    );
    numbers.capture("numbers");
    numbers
        .apply("Fixed25", Window::into(WindowFn::fixed(25)))
        .apply("Count", Count::globally())
        .capture("counts");
}

fn check_generate(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let numbers: Vec<Fired<u64>> = (10u64..60)
        .map(|n| Fired {
            value: n,
            window: BoundedWindow::Global,
            timestamp: Timestamp(100 + 3 * (n as i64 - 10)),
            pane: PaneInfo::NO_FIRING,
        })
        .collect();
    same_outputs("capture 'numbers'", fired::<u64>(&r, "numbers")?, numbers)?;
    let counts = on_time_counts(
        25,
        &[(100, 9), (125, 8), (150, 8), (175, 9), (200, 8), (225, 8)],
    );
    same_outputs("capture 'counts'", fired::<u64>(&r, "counts")?, counts)
}
