use super::q9::{q9, WinningBid};
use crate::Event;
use nexmark::config::NexmarkConfig;
use serde::{Deserialize, Serialize};
use tidewater::{ElementContext, PCollection, Window, WindowFn};
use tidewater_transforms::Mean;

/// Q4's sliding windows (Beam's defaults: 10 s every 5 s).
pub const Q4_WINDOW_MS: i64 = 10_000;
/// See [`Q4_WINDOW_MS`].
pub const Q4_PERIOD_MS: i64 = 5_000;

/// Q4's output: the average winning price of a category in a window.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CategoryPrice {
    /// Start of the sliding window, in ms.
    pub window_start: i64,
    /// The category.
    pub category: usize,
    /// The mean winning price, rounded (Beam's `Math.round`).
    pub price: u64,
}

/// Q4 with sliding windows of `size_ms` every `period_ms`: Q9's winning bids (stamped
/// at their auction's expiry) -> (category, price) -> sliding windows -> Mean per key.
pub fn q4_windowed(
    events: &PCollection<Event>,
    config: &NexmarkConfig,
    size_ms: i64,
    period_ms: i64,
) -> PCollection<CategoryPrice> {
    q9(events, config)
        .map("Q4.ByCategory", |w: WinningBid| {
            (w.auction.category, w.bid.price)
        })
        .apply(
            "Q4.Window",
            Window::into(WindowFn::sliding(size_ms, period_ms)),
        )
        .apply("Q4.Mean", Mean::<usize>::per_key())
        .map_with_context(
            "Q4.Project",
            |(category, mean): (usize, f64), c: &ElementContext| CategoryPrice {
                window_start: c.window().start().millis(),
                category,
                price: mean.round() as u64,
            },
        )
}

/// Q4, average price for a category: per sliding window ([`Q4_WINDOW_MS`] every
/// [`Q4_PERIOD_MS`]) of auction closing times, the mean winning price per category.
pub fn q4(events: &PCollection<Event>, config: &NexmarkConfig) -> PCollection<CategoryPrice> {
    q4_windowed(events, config, Q4_WINDOW_MS, Q4_PERIOD_MS)
}
