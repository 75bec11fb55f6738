//! What the PostgreSQL sink's names must be (they go into SQL and transaction ids),
//! and its settings checked as a plan is decoded.

/// A plain SQL name: a letter or `_`, then letters, digits or `_`; at most 63 bytes.
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A table's name: `name` or `schema.name`, each a plain name.
pub(crate) fn is_table(s: &str) -> bool {
    s.split('.').all(is_name) && s.split('.').count() <= 2
}

/// A sink id: 1 to 80 letters, digits, `-` or `_` (it goes into transaction ids).
pub(crate) fn is_sink_id(s: &str) -> bool {
    (1..=80).contains(&s.len())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A plan's settings of a PostgreSQL sink, checked as the plan is decoded
/// ([`tidewater::plan::field`]); the column count, which depends on the row type, is
/// checked when the sink starts.
pub(crate) mod checked {
    use serde::Deserializer;
    use tidewater::plan::field::{check, is_timeout_ms, TIMEOUT_MS};

    const TABLE: &str = "a plain name (letters, digits, _; optionally schema.name)";

    pub fn table<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        check(d, "table", TABLE, |t: &String| super::is_table(t))
    }

    pub fn ledger_table<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        check(d, "ledger_table", TABLE, |t: &String| super::is_table(t))
    }

    pub fn columns<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
        check(
            d,
            "columns",
            "one or more plain names (letters, digits, _)",
            |c: &Vec<String>| !c.is_empty() && c.iter().all(|c| super::is_name(c)),
        )
    }

    pub fn sink_id<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
        check(
            d,
            "sink_id",
            "1 to 80 letters, digits, - or _ (by default the table's name)",
            |s: &String| super::is_sink_id(s),
        )
    }

    pub fn timeout_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        check(d, "timeout_ms", TIMEOUT_MS, is_timeout_ms)
    }
}
