use crate::{Auction, Bid, Event};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use tidewater::{PCollection, StateContext, Timestamp, UserError};
use tidewater_transforms::{StatefulJoinExt, StatefulJoinFn};

/// Q9's output: a closed auction and its winning bid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WinningBid {
    /// The auction.
    pub auction: Auction,
    /// Its winning bid.
    pub bid: Bid,
}

fn auction_by_id(e: Event) -> Option<(usize, Auction)> {
    match e {
        Event::Auction(a) => Some((a.id, a)),
        _ => None,
    }
}

fn bid_by_auction(e: Event) -> Option<(usize, Bid)> {
    match e {
        Event::Bid(b) => Some((b.auction, b)),
        _ => None,
    }
}

/// Whether `bid` can win `auction`: placed before it expires, at least the reserve.
pub fn is_valid(auction: &Auction, bid: &Bid) -> bool {
    bid.date_time < auction.expires && bid.price >= auction.reserve
}

/// Bids rank by price, then earlier time (Beam's `PRICE_THEN_DESCENDING_TIME`); the
/// smaller bidder, then the smaller extra break the remaining ties deterministically.
pub fn rank(bid: &Bid) -> (usize, Reverse<u64>, Reverse<usize>, Reverse<&str>) {
    (
        bid.price,
        Reverse(bid.date_time),
        Reverse(bid.bidder),
        Reverse(bid.extra.as_str()),
    )
}

/// The auction, once seen.
const AUCTION: tidewater::ValueState<Auction> = tidewater::StateSpec::value("auction");
/// Bids seen before their auction.
const PENDING: tidewater::BagState<Bid> = tidewater::StateSpec::bag("pending");
/// The best valid bid so far.
const BEST: tidewater::ValueState<Bid> = tidewater::StateSpec::value("best");
/// Fires at the auction's expiry.
const CLOSE: tidewater::EventTimer = tidewater::TimerSpec::event("close");

/// Per auction id: the auction in value state, bids that came before it in bag state,
/// the best valid bid so far in value state, and a timer at the auction's expiry that
/// emits the winner.
#[derive(Serialize, Deserialize)]
pub struct WinningBids;

impl WinningBids {
    fn consider(
        ctx: &mut StateContext<'_, WinningBid>,
        auction: &Auction,
        bid: Bid,
    ) -> Result<(), UserError> {
        if !is_valid(auction, &bid) {
            return Ok(());
        }
        let better = match BEST.read(ctx)? {
            Some(best) => rank(&bid) > rank(&best),
            None => true,
        };
        if better {
            BEST.write(ctx, &bid)?;
        }
        Ok(())
    }
}

impl StatefulJoinFn for WinningBids {
    type Key = usize;
    type Left = Auction;
    type Right = Bid;
    type Out = WinningBid;

    fn left(
        &mut self,
        _id: &usize,
        auction: Auction,
        ctx: &mut StateContext<'_, WinningBid>,
    ) -> Result<(), UserError> {
        for bid in PENDING.read(ctx)? {
            Self::consider(ctx, &auction, bid)?;
        }
        PENDING.clear(ctx);
        // The auction's window is [date_time, expires): it closes once the watermark
        // passes expires - 1, and the winner is stamped there (Beam's end-of-window
        // timestamp of the auction window).
        CLOSE.set(ctx, Timestamp(auction.expires as i64 - 1))?;
        AUCTION.write(ctx, &auction)
    }

    fn right(
        &mut self,
        _id: &usize,
        bid: Bid,
        ctx: &mut StateContext<'_, WinningBid>,
    ) -> Result<(), UserError> {
        match AUCTION.read(ctx)? {
            Some(auction) => Self::consider(ctx, &auction, bid),
            None => PENDING.add(ctx, &bid),
        }
    }

    fn on_timer(
        &mut self,
        _id: &usize,
        _name: &str,
        ctx: &mut StateContext<'_, WinningBid>,
    ) -> Result<(), UserError> {
        if let (Some(auction), Some(bid)) = (AUCTION.read(ctx)?, BEST.read(ctx)?) {
            ctx.output(WinningBid { auction, bid });
        }
        // Keep the auction (so that later bids are not buffered as pending) but not
        // the best bid: later bids are past the expiry and never valid.
        BEST.clear(ctx);
        Ok(())
    }
}

/// Q9, winning bids: for every auction, the highest valid bid (placed before the
/// auction expires, at least its reserve; the earliest on a price tie), emitted when
/// the watermark passes the auction's expiry, with timestamp `expires - 1`. A stateful
/// join in the global window of auctions and bids keyed by auction id, with an
/// event-time timer per auction.
pub fn q9(events: &PCollection<Event>) -> PCollection<WinningBid> {
    let auctions = events.flat_map("Q9.Auctions", auction_by_id);
    let bids = events.flat_map("Q9.Bids", bid_by_auction);
    auctions.join_stateful("Q9.WinningBids", &bids, WinningBids)
}
