//! Plain-Rust computations of each query over the generated events: loops and maps,
//! no SDK. Tests compare the pipelines' outputs with these exactly.

use crate::queries::{ConvertedBid, NameCityStateId, Q3_CATEGORY, Q3_STATES, SKIP_FACTOR};
use crate::Event;
use std::collections::BTreeMap;

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

/// Q3: every auction of the category whose seller lives in one of the states, wherever
/// in the stream the seller registers.
pub fn q3(events: &[Event]) -> Vec<NameCityStateId> {
    let mut persons = BTreeMap::new();
    for e in events {
        if let Event::Person(p) = e {
            if Q3_STATES.contains(&p.state.as_str()) {
                persons.insert(p.id, p);
            }
        }
    }
    let mut out = Vec::new();
    for e in events {
        if let Event::Auction(a) = e {
            if a.category == Q3_CATEGORY {
                if let Some(p) = persons.get(&a.seller) {
                    out.push(NameCityStateId {
                        name: p.name.clone(),
                        city: p.city.clone(),
                        state: p.state.clone(),
                        id: a.id,
                    });
                }
            }
        }
    }
    out
}
