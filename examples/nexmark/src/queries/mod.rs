//! The Nexmark queries as Tidewater pipelines.

mod q0;
mod q1;
mod q2;

pub use q0::q0;
pub use q1::{q1, ConvertedBid};
pub use q2::{q2, SKIP_FACTOR};

use crate::{Bid, Event};

/// The bids of an event stream.
pub fn bids_of(e: Event) -> Option<Bid> {
    match e {
        Event::Bid(b) => Some(b),
        _ => None,
    }
}
