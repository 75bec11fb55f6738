use super::q8::window_start;
use super::q9::{q9, WinningBid};
use crate::Event;
use serde::{Deserialize, Serialize};
use tidewater::{DoFn, PCollection, ParDo, ProcessContext, UserError, Window, WindowFn};
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

fn category_price(w: WinningBid) -> (usize, usize) {
    (w.auction.category, w.bid.price)
}

/// Rounds the mean and attaches the window.
#[derive(Serialize, Deserialize)]
struct Project;

impl DoFn for Project {
    type In = (usize, f64);
    type Out = CategoryPrice;
    fn process(
        &mut self,
        (category, mean): (usize, f64),
        ctx: &mut ProcessContext<'_, CategoryPrice>,
    ) -> Result<(), UserError> {
        ctx.output(CategoryPrice {
            window_start: window_start(ctx.window()),
            category,
            price: mean.round() as u64,
        });
        Ok(())
    }
}

/// Q4 with sliding windows of `size_ms` every `period_ms`: Q9's winning bids (stamped
/// at their auction's expiry) -> (category, price) -> sliding windows -> Mean per key.
pub fn q4_windowed(
    events: &PCollection<Event>,
    size_ms: i64,
    period_ms: i64,
) -> PCollection<CategoryPrice> {
    q9(events)
        .map("Q4.ByCategory", category_price)
        .apply(
            "Q4.Window",
            Window::into(WindowFn::sliding(size_ms, period_ms)),
        )
        .apply("Q4.Mean", Mean::<usize>::per_key())
        .apply("Q4.Project", ParDo::of(Project))
}

/// Q4, average price for a category: per sliding window ([`Q4_WINDOW_MS`] every
/// [`Q4_PERIOD_MS`]) of auction closing times, the mean winning price per category.
pub fn q4(events: &PCollection<Event>) -> PCollection<CategoryPrice> {
    q4_windowed(events, Q4_WINDOW_MS, Q4_PERIOD_MS)
}
