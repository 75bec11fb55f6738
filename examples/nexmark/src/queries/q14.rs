use super::bids_of;
use crate::{Bid, Event};
use serde::{Deserialize, Serialize};
use tidewater::PCollection;

/// When in the (UTC) day a bid was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BidTimeType {
    /// Hours 8 to 18.
    DayTime,
    /// Hours 0 to 6 and 20 to 23.
    NightTime,
    /// Hours 7 and 19.
    OtherTime,
}

/// Q14's output: a bid with its price converted, its time of day and the number of
/// `'c'`s in its extra field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Q14Bid {
    /// Auction id.
    pub auction: usize,
    /// Bidder id.
    pub bidder: usize,
    /// `0.908 * price`.
    pub price: f64,
    /// Time of day of the bid.
    pub bid_time_type: BidTimeType,
    /// Event time in ms.
    pub date_time: u64,
    /// The bid's extra field.
    pub extra: String,
    /// Number of `'c'` characters in `extra`.
    pub c_counts: usize,
}

/// Q14's price conversion.
pub fn q14_price(price: usize) -> f64 {
    0.908 * price as f64
}

/// The time of day of an event time (ms since the epoch, UTC).
pub fn bid_time_type(date_time: u64) -> BidTimeType {
    match (date_time / 3_600_000) % 24 {
        8..=18 => BidTimeType::DayTime,
        0..=6 | 20..=23 => BidTimeType::NightTime,
        _ => BidTimeType::OtherTime,
    }
}

fn filter_and_compute(b: Bid) -> Option<Q14Bid> {
    let price = q14_price(b.price);
    if !(price > 1_000_000.0 && price < 50_000_000.0) {
        return None;
    }
    Some(Q14Bid {
        auction: b.auction,
        bidder: b.bidder,
        price,
        bid_time_type: bid_time_type(b.date_time),
        date_time: b.date_time,
        c_counts: b.extra.matches('c').count(),
        extra: b.extra,
    })
}

fn q14_bid(e: Event) -> Option<Q14Bid> {
    bids_of(e).and_then(filter_and_compute)
}

/// Q14, filter and compute (the Flink / RisingWave Nexmark Q14; Beam's Query14 is a
/// Reshuffle stress test instead): the bids with `0.908 * price` strictly between
/// 1,000,000 and 50,000,000, with the converted price, the time of day and the number
/// of `'c'`s in `extra`. One FlatMap.
pub fn q14(events: &PCollection<Event>) -> PCollection<Q14Bid> {
    events.flat_map("Q14.FilterAndCompute", q14_bid)
}
