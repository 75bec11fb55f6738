//! The output check run before anything is timed: a runner's output on a small input
//! must equal the direct runner's, line for line once sorted. A benchmark of a wrong
//! answer is worthless.

/// How an output differs from the oracle's.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// Lines in the oracle's output.
    pub expected_lines: usize,
    /// Lines in the checked output.
    pub actual_lines: usize,
    /// The first differing lines (sorted order), as a short listing.
    pub first_differences: Vec<String>,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "output differs from the direct runner's ({} lines vs {} expected); first differences:",
            self.actual_lines, self.expected_lines
        )?;
        for d in &self.first_differences {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

/// How many differing lines a [`Mismatch`] shows.
pub const SHOWN_DIFFERENCES: usize = 5;

/// Compares two outputs as sorted multisets of lines: `Ok` when equal, else the first
/// few lines only one side has (`-` expected, `+` actual), in sorted order.
pub fn compare_outputs(mut expected: Vec<String>, mut actual: Vec<String>) -> Result<(), Mismatch> {
    expected.sort_unstable();
    actual.sort_unstable();
    if expected == actual {
        return Ok(());
    }
    let mut diffs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while diffs.len() < SHOWN_DIFFERENCES && (i < expected.len() || j < actual.len()) {
        match (expected.get(i), actual.get(j)) {
            (Some(e), Some(a)) if e == a => {
                i += 1;
                j += 1;
            }
            (Some(e), Some(a)) if e < a => {
                diffs.push(format!("- {e}"));
                i += 1;
            }
            (Some(_), Some(a)) | (None, Some(a)) => {
                diffs.push(format!("+ {a}"));
                j += 1;
            }
            (Some(e), None) => {
                diffs.push(format!("- {e}"));
                i += 1;
            }
            (None, None) => break,
        }
    }
    Err(Mismatch {
        expected_lines: expected.len(),
        actual_lines: actual.len(),
        first_differences: diffs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(xs: &[&str]) -> Vec<String> {
        xs.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn order_does_not_matter() {
        assert_eq!(
            compare_outputs(lines(&["b 2", "a 1", "a 1"]), lines(&["a 1", "b 2", "a 1"])),
            Ok(())
        );
    }

    #[test]
    fn a_wrong_count_is_caught_and_shown() {
        let m = compare_outputs(lines(&["a 1", "b 2", "c 3"]), lines(&["c 3", "b 3", "a 1"]))
            .unwrap_err();
        assert_eq!(m.first_differences, lines(&["- b 2", "+ b 3"]));
        assert_eq!(
            m.to_string(),
            "output differs from the direct runner's (3 lines vs 3 expected); first differences:\n  - b 2\n  + b 3"
        );
    }

    #[test]
    fn a_missing_or_duplicated_line_is_caught() {
        let m = compare_outputs(lines(&["a 1", "b 1"]), lines(&["a 1"])).unwrap_err();
        assert_eq!(m.first_differences, lines(&["- b 1"]));
        let m = compare_outputs(lines(&["a 1"]), lines(&["a 1", "a 1"])).unwrap_err();
        assert_eq!((m.expected_lines, m.actual_lines), (1, 2));
        assert_eq!(m.first_differences, lines(&["+ a 1"]));
    }

    #[test]
    fn at_most_a_few_differences_are_shown() {
        let expected: Vec<String> = (0..100).map(|i| format!("w{i:03} 1")).collect();
        let actual: Vec<String> = (0..100).map(|i| format!("w{i:03} 2")).collect();
        let m = compare_outputs(expected, actual).unwrap_err();
        assert_eq!(m.first_differences.len(), SHOWN_DIFFERENCES);
    }
}
