use super::bids_of;
use crate::{Bid, Event};
use serde::{Deserialize, Serialize};
use tidewater::{Combine, CombineFn, ElementContext, PCollection, Window, WindowFn};
use tidewater_transforms::Count;

/// Q5's sliding windows: 10 s long, a new one every 5 s (Beam's `windowSizeSec` and
/// `windowPeriodSec` defaults; Flink's Nexmark slides every 2 s).
pub const Q5_WINDOW_MS: i64 = 10_000;
/// See [`Q5_WINDOW_MS`].
pub const Q5_PERIOD_MS: i64 = 5_000;

/// Q5's output: an auction with the most bids in a window.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AuctionCount {
    /// Start of the sliding window, in ms.
    pub window_start: i64,
    /// The auction id.
    pub auction: usize,
    /// Its number of bids in the window.
    pub count: u64,
}

/// Keeps the auctions with the highest count (all of them on a tie), as Beam's Query5
/// binary combine does. Beam first lifts each (auction, count) into a singleton list
/// because its `BinaryCombineFn` needs input = output; here the input is a pair.
#[derive(Serialize, Deserialize)]
pub struct MaxAuctions;

impl CombineFn for MaxAuctions {
    type In = (usize, u64);
    type Acc = (Vec<usize>, u64);
    type Out = (Vec<usize>, u64);
    fn create_accumulator(&self) -> Self::Acc {
        (Vec::new(), 0)
    }
    fn add_input(&self, acc: &mut Self::Acc, (auction, count): Self::In) {
        self.merge_accumulators(acc, (vec![auction], count));
    }
    fn merge_accumulators(&self, acc: &mut Self::Acc, (auctions, count): Self::Acc) {
        if count > acc.1 {
            *acc = (auctions, count);
        } else if count == acc.1 {
            acc.0.extend(auctions);
        }
    }
    fn extract_output(&self, acc: Self::Acc) -> Self::Out {
        acc
    }
}

/// Q5 with sliding windows of `size_ms` every `period_ms`: bids -> sliding windows ->
/// count per auction -> Combine.globally keeping the maximal ones -> one output each.
pub fn q5_windowed(
    events: &PCollection<Event>,
    size_ms: i64,
    period_ms: i64,
) -> PCollection<AuctionCount> {
    events
        .flat_map("Q5.Bids", bids_of)
        .apply(
            "Q5.Window",
            Window::into(WindowFn::sliding(size_ms, period_ms)),
        )
        .map("Q5.Auction", |b: Bid| b.auction)
        .apply("Q5.Count", Count::per_element())
        .apply("Q5.Max", Combine::globally(MaxAuctions))
        .flat_map_with_context(
            "Q5.Output",
            |(auctions, count): (Vec<usize>, u64), c: &ElementContext| {
                let window_start = c.window().start().millis();
                auctions.into_iter().map(move |auction| AuctionCount {
                    window_start,
                    auction,
                    count,
                })
            },
        )
}

/// Q5, hot items: per sliding window ([`Q5_WINDOW_MS`] every [`Q5_PERIOD_MS`]), the
/// auction(s) with the most bids, as (window start, auction, count).
pub fn q5(events: &PCollection<Event>) -> PCollection<AuctionCount> {
    q5_windowed(events, Q5_WINDOW_MS, Q5_PERIOD_MS)
}
