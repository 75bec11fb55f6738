use super::bids_of;
use crate::Event;
use serde::{Deserialize, Serialize};
use tidewater::PCollection;

/// A bid with its price converted from dollars to euros.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ConvertedBid {
    /// Auction id.
    pub auction: usize,
    /// Bidder id.
    pub bidder: usize,
    /// Price in euro cents.
    pub price: usize,
    /// Event time in ms.
    pub date_time: u64,
}

/// Q1's conversion: Beam's `price * 89 / 100`.
pub fn convert(e: Event) -> Option<ConvertedBid> {
    bids_of(e).map(|b| ConvertedBid {
        auction: b.auction,
        bidder: b.bidder,
        price: b.price * 89 / 100,
        date_time: b.date_time,
    })
}

/// Q1, currency conversion: every bid with its price in euros.
pub fn q1(events: &PCollection<Event>) -> PCollection<ConvertedBid> {
    events.flat_map("Q1.Convert", convert)
}
