//! Checking a function's fields as a plan is decoded: a source's or sink's settings
//! travel in the plan, and a plan is untrusted input. A value that would hang, divide
//! by zero or overflow is refused where it is read, with an error naming the field, what
//! it must be and what was found (`docs/security.md`).
//!
//! Used through `#[serde(deserialize_with = "...")]` with a small function per field:
//!
//! ```
//! use serde::{Deserialize, Deserializer};
//! use tidewater::plan::field;
//!
//! #[derive(Deserialize)]
//! struct Settings {
//!     #[serde(deserialize_with = "timeout_ms")]
//!     timeout_ms: u64,
//! }
//!
//! fn timeout_ms<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
//!     field::check(d, "timeout_ms", "between 1 and 86400000", |ms: &u64| {
//!         (1..=86_400_000).contains(ms)
//!     })
//! }
//!
//! let err = serde_json::from_str::<Settings>(r#"{"timeout_ms": 0}"#).err().unwrap();
//! assert!(err.to_string().starts_with(
//!     "field `timeout_ms` must be between 1 and 86400000, found 0"
//! ));
//! ```

use serde::{Deserialize, Deserializer, de::Error};

/// The value of `field`, if `ok` holds for it; else an error naming the field, saying
/// what it `must` be and showing what was found.
pub fn check<'de, D: Deserializer<'de>, T: Deserialize<'de> + std::fmt::Debug>(
    d: D,
    field: &str,
    must: &str,
    ok: impl Fn(&T) -> bool,
) -> Result<T, D::Error> {
    let v = T::deserialize(d)?;
    if ok(&v) {
        Ok(v)
    } else {
        Err(D::Error::custom(format!(
            "field `{field}` must be {must}, found {v:?}"
        )))
    }
}

/// The longest a timeout in a plan may be, in milliseconds (a day).
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// Whether `ms` is a usable timeout: 1 ms to [`MAX_TIMEOUT_MS`].
pub fn is_timeout_ms(ms: &u64) -> bool {
    (1..=MAX_TIMEOUT_MS).contains(ms)
}

/// What [`is_timeout_ms`] asks, as an error message says it.
pub const TIMEOUT_MS: &str = "between 1 and 86400000 (a day)";

/// Whether `rate` is a usable rate: positive and finite.
pub fn is_rate(rate: &f64) -> bool {
    rate.is_finite() && *rate > 0.0
}
