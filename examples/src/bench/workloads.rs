//! The word-count workloads of the benchmark, as the peers run them
//! (`../shared/peers/README.md`): lines split on spaces, then one of four pipelines.
//! Each is built either to count what reaches its sink (timed runs) or to capture its
//! output as text lines (the check against the direct runner).

use crate::stateful_word_count::{PaddedCount, RunningCount};
use crate::{windowed_word_count, CountingSink};
use tidewater::{PCollection, Pipeline, StatefulParDo};
use tidewater_transforms::{Count, TextIO};

use super::input::InputMeta;

/// A word-count workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WordCount {
    /// Split, pair with 1, count the records in the sink.
    Stateless,
    /// Total count per word with Count.perElement (a lifted combine): the peers'
    /// `stateful`.
    Count,
    /// A StatefulParDo keeping a running count per word: one update out per word in
    /// (Flink's `rolling`).
    Stateful,
    /// Count per word per 1 s event-time fixed window, over the stamped lines.
    Windowed,
}

/// The size of a 1 s window.
pub const WINDOW_MS: i64 = 1_000;

impl WordCount {
    /// Every word-count workload, in report order.
    pub const ALL: [WordCount; 4] = [
        WordCount::Stateless,
        WordCount::Count,
        WordCount::Stateful,
        WordCount::Windowed,
    ];

    /// The name `--workload` takes and records carry.
    pub fn name(self) -> &'static str {
        match self {
            WordCount::Stateless => "stateless",
            WordCount::Count => "count",
            WordCount::Stateful => "stateful",
            WordCount::Windowed => "windowed",
        }
    }

    /// The workload named `name`.
    pub fn from_name(name: &str) -> Option<WordCount> {
        WordCount::ALL.into_iter().find(|w| w.name() == name)
    }

    /// What it computes, for the report.
    pub fn description(self) -> &'static str {
        match self {
            WordCount::Stateless => {
                "Word count, stateless: split lines on spaces, pair each word with 1, count the records in the sink"
            }
            WordCount::Count => {
                "Word count, stateful with Count.perElement (a lifted combine): one (word, total) per word; the peers' `stateful`"
            }
            WordCount::Stateful => {
                "Word count, stateful with a StatefulParDo keeping a running count per word in value state: one (word, count so far) per word in"
            }
            WordCount::Windowed => {
                "Word count, windowed: count per word per 1 s event-time fixed window; line i carries event time 1,700,000,000,000 + floor(i * 1000 / 10,000) ms (10,000 lines, about 100,000 words, per event-time second), read in that order with the watermark at the latest event time read, as the peers read it"
            }
        }
    }

    /// The records its sink receives on `meta`'s input.
    pub fn expected_outputs(self, meta: &InputMeta) -> u64 {
        match self {
            WordCount::Stateless | WordCount::Stateful => meta.words,
            WordCount::Count => meta.distinct_words,
            WordCount::Windowed => meta.windowed_records,
        }
    }

    /// Builds the pipeline over `text` (plain lines) or `stamped` (`ts\twords` lines,
    /// for the windowed workload). With `capture`, its output is captured as text lines
    /// under [`LINES`]; otherwise it goes into a [`CountingSink`].
    pub fn build(self, p: &Pipeline, text: &str, stamped: &str, capture: bool) {
        self.build_padded(p, text, stamped, capture, None)
    }

    /// [`WordCount::build`], the `stateful` workload keeping `pad` bytes of state per
    /// word beside its count if given ([`PaddedCount`]; the same output).
    pub fn build_padded(
        self,
        p: &Pipeline,
        text: &str,
        stamped: &str,
        capture: bool,
        pad: Option<usize>,
    ) {
        match self {
            WordCount::Stateless => {
                let pairs = words(p, text).map("PairWithOne", pair_with_one);
                if capture {
                    pairs.map("Format", format_pair).capture(LINES);
                } else {
                    pairs.write_to("CountRecords", CountingSink::default());
                }
            }
            WordCount::Count => {
                let counts = words(p, text).apply("CountPerWord", Count::per_element());
                finish(counts, capture);
            }
            WordCount::Stateful => {
                let pairs = words(p, text).map("PairWithOne", pair_with_one);
                let counts = match pad {
                    Some(pad) => {
                        pairs.apply("RunningCount", StatefulParDo::of(PaddedCount { pad }))
                    }
                    None => pairs.apply("RunningCount", StatefulParDo::of(RunningCount)),
                };
                finish(counts, capture);
            }
            WordCount::Windowed => {
                let counts = windowed_word_count::counts(p, stamped, WINDOW_MS);
                if capture {
                    windowed_word_count::format(counts).capture(LINES);
                } else {
                    counts.write_to("CountRecords", CountingSink::default());
                }
            }
        }
    }
}

/// The capture that holds a workload's output lines.
pub const LINES: &str = "lines";

fn words(p: &Pipeline, text: &str) -> PCollection<String> {
    p.apply("ReadLines", TextIO::read().from(text))
        .flat_map("SplitWords", split_words)
}

fn finish(counts: PCollection<(String, u64)>, capture: bool) {
    if capture {
        counts.map("Format", format_pair).capture(LINES);
    } else {
        counts.write_to("CountRecords", CountingSink::default());
    }
}

/// A line's words: split on spaces, as every peer does.
pub fn split_words(line: String) -> Vec<String> {
    line.split(' ')
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

fn pair_with_one(word: String) -> (String, u64) {
    (word, 1)
}

fn format_pair(kv: (String, u64)) -> String {
    format!("{} {}", kv.0, kv.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in WordCount::ALL {
            assert_eq!(WordCount::from_name(w.name()), Some(w));
        }
        assert_eq!(WordCount::from_name("nexmark-q0"), None);
    }

    #[test]
    fn words_are_split_on_spaces() {
        assert_eq!(split_words("ab  cd e".into()), vec!["ab", "cd", "e"]);
    }
}
