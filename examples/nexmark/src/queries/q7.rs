use super::bids_of;
use crate::{Bid, Event};
use serde::{Deserialize, Serialize};
use tidewater::{
    DoFn, PCollection, PCollectionView, ParDo, ProcessContext, UserError, Window, WindowFn,
};
use tidewater_transforms::Max;

/// Q7's window size (Beam's default: 10 s).
pub const Q7_WINDOW_MS: i64 = 10_000;

/// Keeps the bids whose price is the window's maximum (a singleton side input).
#[derive(Serialize, Deserialize)]
struct HighestBids {
    max_price: PCollectionView<usize>,
}

impl DoFn for HighestBids {
    type In = Bid;
    type Out = Bid;
    fn process(&mut self, bid: Bid, ctx: &mut ProcessContext<'_, Bid>) -> Result<(), UserError> {
        if bid.price == *ctx.side_input(&self.max_price)? {
            ctx.output(bid);
        }
        Ok(())
    }
}

/// Q7 with fixed windows of `window_ms`: the window's maximum price (Combine.globally
/// Max) as a singleton side input of a ParDo over the window's bids.
pub fn q7_windowed(events: &PCollection<Event>, window_ms: i64) -> PCollection<Bid> {
    let bids = events
        .flat_map("Q7.Bids", bids_of)
        .apply("Q7.Window", Window::into(WindowFn::fixed(window_ms)));
    let max_price = bids
        .map("Q7.Price", |b: Bid| b.price)
        .apply("Q7.MaxPrice", Max::<usize>::globally())
        // A late bid alone in an expired window finds no maximum there (the Combine
        // dropped it as late): with the default 0 it matches nothing, as if dropped too.
        .as_singleton_with_default(0);
    bids.apply("Q7.Highest", ParDo::of(HighestBids { max_price }))
}

/// Q7, highest bid: the bid(s) with the highest price in each fixed window
/// ([`Q7_WINDOW_MS`]).
pub fn q7(events: &PCollection<Event>) -> PCollection<Bid> {
    q7_windowed(events, Q7_WINDOW_MS)
}
