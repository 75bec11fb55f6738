use crate::{Auction, Bid, Event};
use nexmark::config::{NexmarkConfig, RateShape};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BTreeMap;
use tidewater::{
    ElementWindowFn, PCollection, Split3, Timestamp, TupleTag, Window, WindowFn, WindowType,
};
use tidewater_transforms::{CoGbkResult, CoGroupByKey, KeyedPCollectionTuple};

/// Q9's output: a closed auction and its winning bid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WinningBid {
    /// The auction.
    pub auction: Auction,
    /// Its winning bid.
    pub bid: Bid,
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

/// Beam's `AuctionOrBidWindow`: an auction's window `[date_time, expires)`, or a bid's
/// provisional window `[date_time, date_time + 2 * expected auction duration)`, both
/// naming the auction. A bid's window merges into its auction's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuctionOrBidWindow {
    start: i64,
    end: i64,
    /// The auction the window is for.
    pub auction: usize,
    /// An auction's window (not a bid's).
    pub is_auction_window: bool,
}

impl WindowType for AuctionOrBidWindow {
    fn start(&self) -> Timestamp {
        Timestamp(self.start)
    }
    fn end(&self) -> Timestamp {
        Timestamp(self.end)
    }
}

/// Beam's `AuctionOrBidWindowFn`: auctions into their own window, bids into a
/// provisional one, persons into none; per auction id, every bid window that starts
/// before the auction's window ends merges into it (a later bid's window expires
/// alone and produces nothing).
#[derive(Serialize, Deserialize)]
pub struct AuctionOrBidWindowFn {
    expected_auction_duration_ms: i64,
}

impl ElementWindowFn<Event> for AuctionOrBidWindowFn {
    type Window = AuctionOrBidWindow;

    fn assign(&self, e: &Event, ts: Timestamp) -> Vec<AuctionOrBidWindow> {
        match e {
            Event::Auction(a) => vec![AuctionOrBidWindow {
                start: ts.millis(),
                end: a.expires as i64,
                auction: a.id,
                is_auction_window: true,
            }],
            Event::Bid(b) => vec![AuctionOrBidWindow {
                start: ts.millis(),
                end: ts.millis() + 2 * self.expected_auction_duration_ms,
                auction: b.auction,
                is_auction_window: false,
            }],
            Event::Person(_) => Vec::new(),
        }
    }

    fn is_merging(&self) -> bool {
        true
    }

    fn merge(
        &self,
        windows: &[AuctionOrBidWindow],
    ) -> Vec<(Vec<AuctionOrBidWindow>, AuctionOrBidWindow)> {
        let auctions: BTreeMap<usize, &AuctionOrBidWindow> = windows
            .iter()
            .filter(|w| w.is_auction_window)
            .map(|w| (w.auction, w))
            .collect();
        let mut bids: BTreeMap<usize, Vec<AuctionOrBidWindow>> = BTreeMap::new();
        for w in windows.iter().filter(|w| !w.is_auction_window) {
            bids.entry(w.auction).or_default().push(w.clone());
        }
        let mut merges = Vec::new();
        for (id, auction) in auctions {
            let mut merged: Vec<AuctionOrBidWindow> = bids
                .remove(&id)
                .unwrap_or_default()
                .into_iter()
                .filter(|b| b.start < auction.end)
                .collect();
            if !merged.is_empty() {
                merged.push(auction.clone());
                merges.push((merged, auction.clone()));
            }
        }
        merges
    }
}

/// Beam's expected auction duration (`WinningBids`), in ms: the longest inter-event
/// delay of the configuration's rate shape (per generator, times the number of
/// generators), scaled by the events per auction (`proportion_denominator /
/// auction_proportion`) and by the number of auctions in flight, rounded up. It is the
/// time the generator takes to produce `in_flight_auctions` auctions at its slowest
/// rate, which is also about how long its auctions last. A bid's provisional window
/// lasts twice that, so a bid for an auction the generator has yet to produce (bids
/// name up to `auction_id_lead` auctions ahead) still finds it open when the auction
/// arrives. With 1 generator at 10,000 events/s that is 167 ms; at 2 events/s, 833,334
/// ms.
///
/// ```
/// use tidewater_nexmark::{queries::expected_auction_duration_ms, NexmarkSource};
/// assert_eq!(expected_auction_duration_ms(&NexmarkSource::new(1, 10_000).config()), 167);
/// assert_eq!(expected_auction_duration_ms(&NexmarkSource::new(1, 2).config()), 833_334);
/// ```
pub fn expected_auction_duration_ms(config: &NexmarkConfig) -> i64 {
    let slowest_rate = rates(config).into_iter().min().unwrap_or(1).max(1) as u64;
    let longest_delay_us =
        config.us_per_unit as u64 * config.num_event_generators.max(1) as u64 / slowest_rate;
    let denominator =
        (config.person_proportion + config.auction_proportion + config.bid_proportion) as u64;
    let per_auction_us = longest_delay_us * denominator / config.auction_proportion.max(1) as u64;
    let all_in_flight_us = per_auction_us * config.in_flight_auctions as u64;
    i64::try_from(all_in_flight_us.div_ceil(1000)).unwrap_or(i64::MAX)
}

/// The event rates the configuration's shape steps through (as the generator and
/// Beam's `RateShape.interEventDelayUs` compute them).
fn rates(config: &NexmarkConfig) -> Vec<usize> {
    let (first, next) = (config.first_rate, config.next_rate);
    if first == next {
        return vec![first];
    }
    match config.rate_shape {
        RateShape::Square => vec![first, next],
        RateShape::Sine => {
            let mid = (first + next) as f64 / 2.0;
            let amp = (first as f64 - next as f64) / 2.0;
            let steps = config.sine_approx_steps.max(1);
            (0..steps)
                .map(|i| {
                    let r = 2.0 * std::f64::consts::PI * i as f64 / steps as f64;
                    (mid + amp * r.cos()).round() as usize
                })
                .collect()
        }
    }
}

/// Q9, winning bids (Beam's `WinningBids`): for every auction, the highest valid bid
/// (placed before the auction expires, at least its reserve; the earliest on a price
/// tie), emitted when the watermark passes the auction's expiry, with timestamp
/// `expires - 1`, in the auction's [`AuctionOrBidWindow`]. The bids' provisional
/// windows last twice the [`expected_auction_duration_ms`] of the events'
/// configuration.
pub fn q9(events: &PCollection<Event>, config: &NexmarkConfig) -> PCollection<WinningBid> {
    q9_with_expected_auction_duration(events, expected_auction_duration_ms(config))
}

/// Q9 with the expected auction duration of another configuration.
pub fn q9_with_expected_auction_duration(
    events: &PCollection<Event>,
    expected_auction_duration_ms: i64,
) -> PCollection<WinningBid> {
    let windowed = events.apply(
        "Q9.Window",
        Window::into(WindowFn::by_element(AuctionOrBidWindowFn {
            expected_auction_duration_ms,
        })),
    );
    // Persons are in no window: the WindowFn dropped them.
    let (_, auctions, bids) = windowed.split3("Q9.ByKind", |e: Event| match e {
        Event::Person(_) => Split3::First(()),
        Event::Auction(a) => Split3::Second((a.id, a)),
        Event::Bid(b) => Split3::Third((b.auction, b)),
    });
    let auction: TupleTag<Auction> = TupleTag::new("auction");
    let bid: TupleTag<Bid> = TupleTag::new("bid");
    KeyedPCollectionTuple::of(&auction, auctions)
        .and(&bid, bids)
        .apply("Q9.CoGroup", CoGroupByKey)
        .flat_map("Q9.Join", |(_, r): (usize, CoGbkResult)| {
            // Bids without their auction (their window never merged) give nothing.
            let auction = r.only(&TupleTag::<Auction>::new("auction"))?;
            let bid = r
                .all(&TupleTag::<Bid>::new("bid"))
                .into_iter()
                .filter(|b| is_valid(&auction, b))
                .max_by(|x, y| rank(x).cmp(&rank(y)))?;
            Some(WinningBid { auction, bid })
        })
}
