//! The runner × case matrix and its rendering.

use crate::case::Outcome;
use std::fmt::Write;
use tidewater::runner::{Capabilities, Feature};

/// Outcomes of every case (rows) on every runner (columns).
#[derive(Clone, Debug)]
pub struct Matrix {
    /// Runner names, in column order.
    pub runners: Vec<String>,
    /// Each runner's capabilities, in column order.
    pub capabilities: Vec<Capabilities>,
    /// One row per case.
    pub rows: Vec<Row>,
}

/// A case's outcomes, one per runner.
#[derive(Clone, Debug)]
pub struct Row {
    /// The case's name.
    pub case: &'static str,
    /// One outcome per runner, in column order.
    pub outcomes: Vec<Outcome>,
}

impl Matrix {
    /// Whether any cell failed.
    pub fn has_failures(&self) -> bool {
        self.cells().any(|(_, _, o)| o.is_fail())
    }

    /// Every cell as (case, runner, outcome).
    pub fn cells(&self) -> impl Iterator<Item = (&'static str, &str, &Outcome)> {
        self.rows.iter().flat_map(move |row| {
            row.outcomes
                .iter()
                .zip(&self.runners)
                .map(move |(o, r)| (row.case, r.as_str(), o))
        })
    }

    /// The outcomes of `runner`'s column, by case.
    pub fn column(&self, runner: &str) -> Vec<(&'static str, &Outcome)> {
        self.cells()
            .filter(|(_, r, _)| *r == runner)
            .map(|(c, _, o)| (c, o))
            .collect()
    }

    /// The matrix as a table (rows = cases, columns = runners) and a count per runner.
    pub fn render_table(&self) -> String {
        let mut header = vec!["case".to_string()];
        header.extend(self.runners.iter().cloned());
        let mut lines = vec![header];
        for row in &self.rows {
            let mut line = vec![row.case.to_string()];
            line.extend(row.outcomes.iter().map(|o| o.label().to_string()));
            lines.push(line);
        }
        let mut totals = vec!["total (pass/FAIL/unsupported)".to_string()];
        for r in &self.runners {
            let col = self.column(r);
            let count = |f: fn(&Outcome) -> bool| col.iter().filter(|(_, o)| f(o)).count();
            totals.push(format!(
                "{}/{}/{}",
                count(Outcome::is_pass),
                count(Outcome::is_fail),
                count(Outcome::is_unsupported)
            ));
        }
        lines.push(totals);
        table(&lines)
    }

    /// Which features each runner supports (rows = features, columns = runners).
    pub fn render_capabilities(&self) -> String {
        let mut header = vec!["feature".to_string()];
        header.extend(self.runners.iter().cloned());
        let mut lines = vec![header];
        let mut notes = Vec::new();
        for f in Feature::ALL {
            let mut line = vec![f.to_string()];
            for (runner, c) in self.runners.iter().zip(&self.capabilities) {
                line.push(match (c.supports(f), c.note(f)) {
                    (false, _) => "no".to_string(),
                    (true, None) => "yes".to_string(),
                    (true, Some(note)) => {
                        notes.push(format!("({}) {runner}, {f}: {note}", notes.len() + 1));
                        format!("yes ({})", notes.len())
                    }
                });
            }
            lines.push(line);
        }
        let mut s = table(&lines);
        for note in notes {
            s.push_str(&note);
            s.push('\n');
        }
        s
    }

    /// The reason of every failed or unsupported cell, failures first.
    pub fn render_reasons(&self) -> String {
        let mut s = String::new();
        for (title, pick) in [
            ("Failures", Outcome::is_fail as fn(&Outcome) -> bool),
            ("Unsupported", Outcome::is_unsupported),
        ] {
            let cells: Vec<_> = self.cells().filter(|(_, _, o)| pick(o)).collect();
            if cells.is_empty() {
                continue;
            }
            let _ = writeln!(s, "{title}:");
            for (case, runner, outcome) in cells {
                let reason = outcome.reason().unwrap_or_default();
                let mut lines = reason.lines();
                let _ = writeln!(
                    s,
                    "  [{runner}] {case}: {}",
                    lines.next().unwrap_or_default()
                );
                for line in lines {
                    let _ = writeln!(s, "      {}", line.trim_start());
                }
            }
        }
        s
    }

    /// Everything: the matrix, the capabilities and the reasons.
    pub fn render(&self) -> String {
        let mut s = format!(
            "Conformance matrix\n\n{}\nCapabilities\n\n{}",
            self.render_table(),
            self.render_capabilities()
        );
        let reasons = self.render_reasons();
        if !reasons.is_empty() {
            s.push('\n');
            s.push_str(&reasons);
        }
        s
    }
}

/// Left-aligned columns, a rule under the header and above the last line if it is a
/// total.
fn table(lines: &[Vec<String>]) -> String {
    let cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .filter_map(|l| l.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let rule = widths
        .iter()
        .map(|w| "-".repeat(*w))
        .collect::<Vec<_>>()
        .join("  ");
    let mut s = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i == lines.len() - 1 && line.first().is_some_and(|c| c.starts_with("total")) {
            let _ = writeln!(s, "{rule}");
        }
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(s, "{}", cells.join("  ").trim_end());
        if i == 0 {
            let _ = writeln!(s, "{rule}");
        }
    }
    s
}
