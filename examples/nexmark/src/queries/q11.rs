use super::bids_of;
use crate::{Bid, Event};
use serde::{Deserialize, Serialize};
use tidewater::{ElementContext, PCollection, Window, WindowFn};
use tidewater_transforms::Count;

/// Q11's session gap (Beam's window size: 10 s).
pub const Q11_GAP_MS: i64 = 10_000;

/// Q11's output: the number of bids of a bidder in one session.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BidsPerSession {
    /// The bidder.
    pub bidder: usize,
    /// Session start (the first bid's time), in ms.
    pub start: i64,
    /// Session end (the last bid's time + the gap), in ms.
    pub end: i64,
    /// Bids in the session.
    pub count: u64,
}

/// Q11 with session gap `gap_ms`: bids keyed by bidder -> session windows -> count per
/// key -> (bidder, session, count).
pub fn q11_with_gap(events: &PCollection<Event>, gap_ms: i64) -> PCollection<BidsPerSession> {
    events
        .flat_map("Q11.Bids", bids_of)
        .map("Q11.ByBidder", |b: Bid| (b.bidder, ()))
        .apply("Q11.Sessions", Window::into(WindowFn::sessions(gap_ms)))
        .apply("Q11.Count", Count::per_key())
        .map_with_context(
            "Q11.Output",
            |(bidder, count): (usize, u64), c: &ElementContext| BidsPerSession {
                bidder,
                start: c.window().start().millis(),
                end: c.window().end().millis(),
                count,
            },
        )
}

/// Q11, user sessions: the number of bids of each bidder per session (gap
/// [`Q11_GAP_MS`]). Beam also fires early every `maxLogEvents` (100,000) bids; with the
/// default trigger here, which gives the same result below that many bids per session.
pub fn q11(events: &PCollection<Event>) -> PCollection<BidsPerSession> {
    q11_with_gap(events, Q11_GAP_MS)
}
