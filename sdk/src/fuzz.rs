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
