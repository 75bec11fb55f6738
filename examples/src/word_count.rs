//! Word count: the pipeline behind the `wordcount` and `bench` binaries.

use tidewater::{PCollection, PTransform, Pipeline};
use tidewater_transforms::{Count, KvSwap, TextIO, Top};

/// The sample text used when no `--input` is given.
pub const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/data/sample.txt");

/// Splits a line into words: maximal runs of letters, digits and apostrophes.
///
/// ```
/// assert_eq!(tidewater_examples::word_count::extract_words("To be, or not-to be".into()), vec!["To", "be", "or", "not", "to", "be"]);
/// ```
pub fn extract_words(line: String) -> Vec<String> {
    fn in_word(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '\'' || (!c.is_ascii() && c.is_alphanumeric())
    }
    let mut words = Vec::with_capacity(line.len() / 4 + 1);
    let mut push = |w: &str| {
        let w = w.trim_matches('\'');
        if !w.is_empty() {
            words.push(w.to_string());
        }
    };
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (in_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                push(&line[s..i]);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        push(&line[s..]);
    }
    words
}

/// Lines to (word, count).
pub struct CountWords;

impl PTransform<PCollection<String>> for CountWords {
    type Output = PCollection<(String, u64)>;
    fn expand(self, lines: PCollection<String>) -> PCollection<(String, u64)> {
        lines
            .flat_map("ExtractWords", extract_words)
            .apply("CountPerWord", Count::per_element())
    }
}

/// Builds the word count: read `input`, count words, capture the `top` most frequent
/// as `"top"`, and write all counts to `output` if given.
pub fn build(
    p: &Pipeline,
    input: &str,
    output: Option<&str>,
    top: usize,
) -> PCollection<(String, u64)> {
    let counts = p
        .apply("ReadLines", TextIO::read().from(input))
        .apply("CountWords", CountWords);
    counts
        .apply("ByCount", KvSwap)
        .apply("TopWords", Top::largest(top))
        .capture("top");
    if let Some(prefix) = output {
        counts
            .map("Format", |(word, n): (String, u64)| format!("{word}: {n}"))
            .apply("WriteCounts", TextIO::write().to(prefix));
    }
    counts
}
