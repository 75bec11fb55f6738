//! The job the crash tests kill: generated records (bounded, optionally paced) split
//! into words, counted per word per 1-second event-time window and as a running count
//! per word kept in state, every result line written through the exactly-once
//! [`EpochFiles`] sink. Its committed output is the same on every runner and after
//! any number of crashes and restarts: the watermark of the generator is exact (no
//! record is late), so no result depends on timing; a running count's lines are the
//! counts 1..n of each word whatever order the records took.

use crate::streaming_word_count::words_of;
use std::path::Path;
use tidewater::{
    Duration, ElementContext, FlattenExt, PCollection, Pipeline, Read, StatefulParDo, Window,
    WindowFn,
};
use tidewater_transforms::{Count, EpochFiles, GenerateSequence};

/// The job's result lines, before they are written.
pub fn lines(p: &Pipeline, records: u64, rate: f64) -> PCollection<String> {
    let mut source = GenerateSequence::new(0, Some(records)).with_event_time(0, 1);
    if rate > 0.0 {
        source = source.with_rate(rate);
    }
    let words = p.apply("Generate", Read::from(source)).flat_map_with(
        "Words",
        7u64,
        |seed: &u64, offset: u64| words_of(*seed, offset),
    );
    let per_window = words
        .apply(
            "Window",
            Window::into(WindowFn::fixed(Duration::from_secs(1))),
        )
        .apply("CountPerWindow", Count::per_element())
        .map_with_context(
            "FormatWindowCount",
            |(word, n): (String, u64), c: &ElementContext| {
                format!("window {} {word} {n}", c.window().start().millis())
            },
        );
    let totals = words
        .map("PairWithOne", |word: String| (word, 1u64))
        .apply(
            "RunningCount",
            StatefulParDo::of(crate::stateful_word_count::RunningCount),
        )
        .map("FormatTotal", |(word, n): (String, u64)| {
            format!("total {word} {n}")
        });
    vec![per_window, totals].apply_flatten("AllLines")
}

/// The whole job: its lines committed into `out` (an existing directory).
pub fn build(p: &Pipeline, records: u64, rate: f64, out: &Path) {
    lines(p, records, rate).write_to("Output", EpochFiles::to(out));
}

/// The whole job, its lines committed into column `line` of PostgreSQL table `table`
/// on the server at `url` (the PostgreSQL sink, two-phase commit by epoch).
pub fn build_postgres(p: &Pipeline, records: u64, rate: f64, url: &str, table: &str) {
    lines(p, records, rate).write_to(
        "Output",
        tidewater_postgres::PostgresSink::<String>::new(url, table, &["line"]).bridged(),
    );
}

/// Every committed line in `out`, sorted: the job's output, to compare across runs.
pub fn committed_lines(out: &Path) -> std::io::Result<Vec<String>> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if name.is_some_and(|n| n.starts_with("part-")) {
            lines.extend(std::fs::read_to_string(&path)?.lines().map(String::from));
        }
    }
    lines.sort();
    Ok(lines)
}
