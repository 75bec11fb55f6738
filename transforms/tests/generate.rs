//! The generator source on the direct runner: bounded in windows, and unbounded until
//! --max-duration.

use tidewater::{
    BoundedWindow, PaneInfo, Pipeline, PipelineOptions, Read, Timestamp, Window, WindowFn,
};
use tidewater_transforms::{Count, GenerateSequence};

fn options() -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        seed: Some(5),
        ..Default::default()
    }
}

#[test]
fn a_bounded_sequence_counts_exactly_per_window() {
    let p = Pipeline::new(options());
    p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(0, Some(1000)).with_event_time(0, 1)),
    )
    .apply("Fixed100", Window::into(WindowFn::fixed(100)))
    .apply("Count", Count::globally())
    .capture("counts");
    let r = p.run().unwrap();
    let mut got: Vec<(i64, u64, PaneInfo, Timestamp)> = r
        .captured::<u64>("counts")
        .unwrap()
        .into_iter()
        .map(|wv| {
            let start = match wv.windows.iter().next() {
                Some(BoundedWindow::Interval { start, .. }) => start.millis(),
                other => panic!("{other:?}"),
            };
            (start, wv.value, wv.pane, wv.timestamp)
        })
        .collect();
    got.sort_by_key(|g| g.0);
    let expected: Vec<(i64, u64, PaneInfo, Timestamp)> = (0..10)
        .map(|k| {
            (
                k * 100,
                100,
                PaneInfo::ON_TIME_AND_ONLY_FIRING,
                Timestamp(k * 100 + 99),
            )
        })
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn an_unbounded_sequence_stops_at_max_duration_and_drains() {
    let o = PipelineOptions {
        max_duration: Some(std::time::Duration::from_millis(300)),
        ..options()
    };
    let p = Pipeline::new(o);
    p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(0, None).with_rate(2_000.0)),
    )
    .apply("Fixed100", Window::into(WindowFn::fixed(100)))
    .apply("Count", Count::globally())
    .capture("counts");
    let started = std::time::Instant::now();
    let r = p.run().unwrap();
    let elapsed = started.elapsed();
    assert!(
        elapsed >= std::time::Duration::from_millis(300),
        "{elapsed:?}"
    );
    let counts = r.captured_values::<u64>("counts").unwrap();
    let total: u64 = counts.iter().sum();
    // About 2 numbers per ms for 300 ms were read; every one was counted once.
    assert!(total > 100 && total < 2_000, "{total}");
    // Windows of 100 numbers (1 ms apart in event time) are full except the last.
    assert!(
        counts.iter().filter(|c| **c == 100).count() as u64 >= total / 100 - 1,
        "{counts:?}"
    );
}

#[test]
fn a_tailed_file_yields_lines_appended_while_running() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.txt");
    std::fs::write(&path, "first\nsecond\n").unwrap();
    let writer_path = path.clone();
    let writer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(150));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&writer_path)
            .unwrap();
        f.write_all(b"third\nfour").unwrap();
        f.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        f.write_all(b"th\n").unwrap();
    });
    let o = PipelineOptions {
        max_duration: Some(std::time::Duration::from_millis(1500)),
        ..options()
    };
    let p = Pipeline::new(o);
    p.apply(
        "Tail",
        Read::from_async(tidewater_transforms::TailFile::new(path.to_str().unwrap())),
    )
    .capture("lines");
    let r = p.run().unwrap();
    writer.join().unwrap();
    let mut lines = r.captured_values::<String>("lines").unwrap();
    lines.sort();
    assert_eq!(lines, vec!["first", "fourth", "second", "third"]);
}

#[test]
fn on_the_simulated_clock_an_idle_source_is_drained_not_dropped() {
    use tidewater::TestStream;
    let p = Pipeline::new(options());
    // A TestStream makes the clock simulated; the rate-limited generator then never gets
    // past its first number, and must be drained, not silently dropped.
    p.apply(
        "Script",
        TestStream::new()
            .add_elements(vec![(1u64, Timestamp(1))])
            .advance_watermark_to_infinity(),
    )
    .capture("scripted");
    p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(0, None).with_rate(10.0)),
    )
    .apply("Fixed10", Window::into(WindowFn::fixed(10)))
    .apply("Count", Count::globally())
    .capture("counts");
    let r = p.run().unwrap();
    assert_eq!(r.captured_values::<u64>("scripted").unwrap(), vec![1]);
    assert_eq!(r.captured_values::<u64>("counts").unwrap(), vec![1]);
}

/// A micro-batch fixes a batch's ranges from `available` before reading them, so a
/// rate-limited sequence must say exactly what `read` at the same processing time then
/// gives: the numbers due by then, none more, within the sequence's end, from a fresh
/// partition (whose first read starts its schedule) and from any point of it.
#[test]
fn a_rate_limited_sequence_says_what_is_due_exactly_as_read_gives_it() {
    use tidewater::{ReadStatus, Source};
    for (rate, to, partitions) in [
        (1_000.0, None, 1),
        (3_333.0, Some(500), 3),
        (0.7, Some(40), 2),
        (2_500_000.0, None, 4),
    ] {
        let mut g = GenerateSequence::new(7, to).with_rate(rate);
        for p in 0..partitions {
            let mut pos = g.initial_position(p, partitions);
            let mut now = 1_000_000i64;
            let mut total = 0u64;
            for step in [0i64, 0, 1, 2, 3, 10, 0, 17, 250, 1, 999, 4_000, 60_000] {
                now += step;
                let said = g.available(p, partitions, &pos, Timestamp(now));
                let mut out = Vec::new();
                let status = g
                    .read(
                        p,
                        partitions,
                        &mut pos,
                        usize::MAX,
                        Timestamp(now),
                        &mut out,
                    )
                    .unwrap();
                assert_eq!(
                    said,
                    Some(out.len() as u64),
                    "rate {rate}, to {to:?}, partition {p} of {partitions} at {now} ms ({status:?})"
                );
                total += out.len() as u64;
                if status != ReadStatus::Done {
                    // What was due was read: nothing is left now.
                    assert_eq!(g.available(p, partitions, &pos, Timestamp(now)), Some(0));
                }
            }
            if let Some(to) = to {
                let mine = (7 + p as u64..to).step_by(partitions).count() as u64;
                assert_eq!(total, mine, "the whole partition came due in 65 s");
            }
        }
    }
}
