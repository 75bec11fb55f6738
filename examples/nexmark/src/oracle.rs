//! Plain-Rust computations of each query over the generated events: loops and maps,
//! no SDK. Tests compare the pipelines' outputs with these exactly.

use crate::queries::{ConvertedBid, SKIP_FACTOR};
use crate::Event;

/// Q0: the events.
pub fn q0(events: &[Event]) -> Vec<Event> {
    events.to_vec()
}

/// Q1: every bid, price * 89 / 100.
pub fn q1(events: &[Event]) -> Vec<ConvertedBid> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            out.push(ConvertedBid {
                auction: b.auction,
                bidder: b.bidder,
                price: b.price * 89 / 100,
                date_time: b.date_time,
            });
        }
    }
    out
}

/// Q2: (auction, price) of bids on auctions divisible by the skip factor.
pub fn q2(events: &[Event]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            if b.auction % SKIP_FACTOR == 0 {
                out.push((b.auction, b.price));
            }
        }
    }
    out
}
