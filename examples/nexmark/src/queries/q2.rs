use super::bids_of;
use crate::Event;
use tidewater::PCollection;

/// Q2 keeps the bids on auctions whose id is a multiple of this.
pub const SKIP_FACTOR: usize = 123;

/// The (auction, price) of a bid on a selected auction.
pub fn select(e: Event) -> Option<(usize, usize)> {
    bids_of(e)
        .filter(|b| b.auction % SKIP_FACTOR == 0)
        .map(|b| (b.auction, b.price))
}

/// Q2, selection: (auction, price) of the bids on auctions with ids divisible by
/// [`SKIP_FACTOR`].
pub fn q2(events: &PCollection<Event>) -> PCollection<(usize, usize)> {
    events.flat_map("Q2.Select", select)
}
