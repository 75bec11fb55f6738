//! Sources: a bounded `GenerateSequence` read whole, each number at its event time, and
//! counted per fixed window.
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
use tidewater::runner::Feature::{Capture, CombineGlobally, ReadBounded, WindowInto};
use tidewater::{BoundedWindow, PaneInfo, Pipeline, Read, Timestamp, Window, WindowFn};
use tidewater_transforms::{Count, GenerateSequence};

pub(crate) fn cases() -> Vec<Case> {
    vec![Case {
        name: "sources/generate_sequence_counted_per_window",
        features: &[ReadBounded, WindowInto, CombineGlobally, Capture],
        build: generate,
        check: check_generate,
    }]
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
    let counts = [
        (100, 9u64),
        (125, 8),
        (150, 8),
        (175, 9),
        (200, 8),
        (225, 8),
    ]
    .into_iter()
    .map(|(start, count)| Fired {
        value: count,
        window: iw(start, start + 25),
        timestamp: Timestamp(start + 24),
        pane: ONLY,
    })
    .collect();
    same_outputs("capture 'counts'", fired::<u64>(&r, "counts")?, counts)
}
