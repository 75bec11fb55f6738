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
    line.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// `word: count`, a line of the output files.
pub fn format_count(kv: (String, u64)) -> String {
    format!("{}: {}", kv.0, kv.1)
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
            .map("Format", format_count)
            .apply("WriteCounts", TextIO::write().to(prefix));
    }
    counts
}
