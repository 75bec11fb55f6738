//! What the project's fuzz targets share (`docs/security.md`, "Fuzzing"): how many
//! cases a run tries, and a meter of the memory a test binary holds.
//!
//! Every fuzz target is a proptest whose name starts with `fuzz_`, over random or
//! mutated untrusted input: plans, checkpoint manifests and snapshot parts, the cluster
//! handshake, the frames peers send. A normal test run (CI) tries each a few hundred
//! times; a long run sets `TIDEWATER_FUZZ_CASES`:
//!
//! ```text
//! TIDEWATER_FUZZ_CASES=20000 cargo test --release --workspace fuzz_
//! ```
//!
//! A target fails on a panic, on a case that does not end, and on memory past a bound:
//! the test binaries of the plan and checkpoint targets run under the `cap` crate's
//! allocator, whose limit makes an allocation past it fail, and whose peak each case
//! checks.

/// The environment variable that sets every fuzz target's number of cases.
pub const CASES_ENV: &str = "TIDEWATER_FUZZ_CASES";

/// How many cases a fuzz target tries: [`CASES_ENV`] if set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var(CASES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Applies `edits` to `bytes`, each `(at, byte, op)`: at position `at` modulo one past
/// the end, op 0 replaces the byte there with `byte`, 1 inserts `byte`, 2 removes the
/// byte there (a replace or remove past the end does nothing). The mutation of the
/// byte-level fuzz targets.
///
/// ```
/// let mut b = b"abc".to_vec();
/// tidewater::fuzz::edit(&mut b, &[(0, b'x', 0), (3, b'!', 1), (1, 0, 2)]);
/// assert_eq!(b, b"xc!");
/// ```
pub fn edit(bytes: &mut Vec<u8>, edits: &[(usize, u8, u8)]) {
    for &(at, b, op) in edits {
        let i = at % (bytes.len() + 1);
        match op % 3 {
            0 if i < bytes.len() => bytes[i] = b,
            1 => bytes.insert(i, b),
            2 if i < bytes.len() => {
                bytes.remove(i);
            }
            _ => {}
        }
    }
}
