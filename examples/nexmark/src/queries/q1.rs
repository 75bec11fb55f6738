use super::bids_of;
use crate::{Bid, Event};
use tidewater::PCollection;

/// Q1's conversion (Beam's `Query1`): the bid, every field kept, its price from dollars
/// to euros as `price * 89 / 100`.
pub fn convert(e: Event) -> Option<Bid> {
    bids_of(e).map(|b| Bid {
        price: b.price * 89 / 100,
        ..b
    })
}

/// Q1, currency conversion: every bid with its price in euros.
pub fn q1(events: &PCollection<Event>) -> PCollection<Bid> {
    events.flat_map("Q1.Convert", convert)
}
