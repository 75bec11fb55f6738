//! Nexmark (an online auction: people register, open auctions, place bids) on
//! Tidewater: the standard event generator as a [`Source`](tidewater::Source), the
//! queries as pipelines, and a plain-Rust oracle per query. See `docs/nexmark.md`.

pub mod oracle;
pub mod queries;
mod source;

pub use nexmark::config::NexmarkConfig;
pub use nexmark::event::{Auction, Bid, Event, Person};
pub use source::{NexmarkPosition, NexmarkSource};

/// Makes every runner selectable with `--runner`.
pub use tidewater_runners::register as register_runners;

/// `values` sorted by their encoding: the order `PipelineResult::captured_values` uses,
/// so that pipeline and oracle outputs compare exactly.
pub fn sorted_by_encoding<T: tidewater::Element>(values: Vec<T>) -> Vec<T> {
    let mut v: Vec<(Vec<u8>, T)> = values
        .into_iter()
        .map(|x| {
            let mut b = Vec::new();
            let _ = tidewater::coder::encode_into(&x, &mut b);
            (b, x)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v.into_iter().map(|(_, x)| x).collect()
}

/// An order-independent checksum of outputs: the wrapping sum of a 64-bit FNV-1a hash of
/// each output's encoding.
pub fn checksum<T: tidewater::Element>(values: &[T]) -> u64 {
    let mut sum = 0u64;
    let mut b = Vec::new();
    for x in values {
        b.clear();
        let _ = tidewater::coder::encode_into(x, &mut b);
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in &b {
            h = (h ^ *byte as u64).wrapping_mul(0x0100_0000_01b3);
        }
        sum = sum.wrapping_add(h);
    }
    sum
}
