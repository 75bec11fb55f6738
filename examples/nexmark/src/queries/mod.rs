//! The Nexmark queries as Tidewater pipelines.

mod q0;
mod q1;
mod q10;
mod q11;
mod q12;
mod q13;
mod q14;
mod q2;
mod q3;
mod q4;
mod q5;
mod q6;
mod q7;
mod q8;
mod q9;

pub use q0::q0;
pub use q1::q1;
pub use q10::{bid_line, q10, q10_file_name, OutputFile, Q10_SHARDS, Q10_WINDOW_MS};
pub use q11::{q11, q11_with_gap, BidsPerSession, Q11_GAP_MS};
pub use q12::{q12, q12_test_stream, q12_with_delay, Q12_DELAY_MS};
pub use q13::{q13, q13_side_rows, Q13_SIDE_ROWS};
pub use q14::{bid_time_type, q14, q14_price, BidTimeType, Q14Bid};
pub use q2::{q2, SKIP_FACTOR};
pub use q3::{q3, NameCityStateId, Q3_CATEGORY, Q3_STATES};
pub use q4::{q4, q4_windowed, CategoryPrice, Q4_PERIOD_MS, Q4_WINDOW_MS};
pub use q5::{q5, q5_windowed, AuctionCount, MaxAuctions, Q5_PERIOD_MS, Q5_WINDOW_MS};
pub use q6::{q6, SellerPrice, Q6_LAST_AUCTIONS};
pub use q7::{q7, q7_windowed, Q7_WINDOW_MS};
pub use q8::{q8, q8_windowed, IdNameReserve, Q8_WINDOW_MS};
pub use q9::{
    expected_auction_duration_ms, q9, q9_with_expected_auction_duration, AuctionOrBidWindow,
    AuctionOrBidWindowFn, WinningBid,
};

use crate::{Bid, Event};

/// The bids of an event stream.
pub fn bids_of(e: Event) -> Option<Bid> {
    match e {
        Event::Bid(b) => Some(b),
        _ => None,
    }
}
