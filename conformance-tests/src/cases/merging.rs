//! Merging windows under the interleaving that Nexmark's `WinningBids` meets: an item
//! (a "bid") before and after the window that opens its key (its "auction"), with the
//! watermark passing between them. With an element-aware merging WindowFn (Beam's
//! `AuctionOrBidWindowFn` in small: [`Spans`]) and with Beam's sessions, the panes
//! depend only on the script: which windows are active when an element arrives, and
//! which the watermark has closed.
//!
//! The rules the expected panes follow are Beam's (`ReduceFnRunner`,
//! `MergingActiveWindowSet`, `LateDataDroppingDoFnRunner`):
//! - an element's windows merge with the key's active windows when it arrives;
//! - a window whose end the watermark passed (allowed lateness 0) fires and is gone: a
//!   later window does not merge with it;
//! - an element is late when its own window (before merging) has expired, even if that
//!   window would merge into one still open;
//! - a window that merged away fires nothing at its own end: only the result does, at
//!   its end, with its max timestamp (the default END_OF_WINDOW combiner).

use crate::case::RunResult;
use crate::cases::panes::{at, counter_eq, group, groups_eq, iw, DROPPED_LATE, ONLY};
use crate::cases::windowing::{span, Spans};
use crate::check::succeeded;
use crate::Case;
use tidewater::runner::Feature::{
    Capture, GroupByKey, TestStream as TestStreamFeature, WindowInto,
};
use tidewater::{Pipeline, TestStream, Timestamp, Window, WindowFn};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "merging/bids_before_and_after_their_auction",
            features: &[TestStreamFeature, WindowInto, GroupByKey, Capture],
            build: bids_and_auctions,
            check: check_bids_and_auctions,
        },
        Case {
            name: "merging/sessions_under_the_same_interleaving",
            features: &[TestStreamFeature, WindowInto, GroupByKey, Capture],
            build: sessions,
            check: check_sessions,
        },
    ]
}

/// `(auction, n)` at `t`: `n > 0` is the auction, open for `n` ms; `n < 0` a bid, with
/// the provisional window `[t, t + 5)` ([`Spans`]).
fn e(auction: &str, n: i64, t: i64) -> ((String, i64), Timestamp) {
    ((auction.to_string(), n), Timestamp(t))
}

fn bids_and_auctions(p: &Pipeline) {
    let events = TestStream::new()
        // Two bids before their auctions: provisional windows [1, 6) and [2, 7).
        .add_elements(vec![e("a", -1, 1), e("b", -2, 2)])
        .advance_watermark_to(Timestamp(4))
        // a's auction [5, 25) arrives while a's bid window is open: the bid merges.
        .add_elements(vec![e("a", 20, 5)])
        // b's bid window [2, 7) ends before b's auction arrives: it fires alone, and
        // a's merged-away [1, 6) fires nothing.
        .advance_watermark_to(Timestamp(8))
        // b's auction [9, 19): nothing left to merge.
        .add_elements(vec![e("b", 10, 9)])
        // Bids during their auctions merge into them.
        .add_elements(vec![e("a", -3, 12), e("b", -4, 13)])
        // b's auction closes.
        .advance_watermark_to(Timestamp(20))
        // A bid for a that starts before a's auction ends merges, though its own window
        // [22, 27) reaches past it; a bid for b, whose auction is gone, stays alone.
        .add_elements(vec![e("a", -5, 22), e("b", -6, 21)])
        // Late: its own window [3, 8) expired (7 < 20), so it is dropped, although it
        // would merge into a's open auction.
        .add_elements(vec![e("a", -7, 3)])
        .advance_watermark_to(Timestamp(30))
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply("Auctions", Window::into(WindowFn::by_element(Spans)))
        .group_by_key("Group")
        .capture("auctions");
}

fn check_bids_and_auctions(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "auctions",
        vec![
            group("b", &[-2], span(2, 7, false), 6, ONLY),
            group("b", &[-4, 10], span(9, 19, true), 18, ONLY),
            group("a", &[-5, -3, -1, 20], span(5, 25, true), 24, ONLY),
            group("b", &[-6], span(21, 26, false), 25, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
}

/// The same script's shape with sessions of gap 5: every element opens `[t, t + 5)`.
fn sessions(p: &Pipeline) {
    let events = TestStream::new()
        .add_elements(vec![at("a", 1), at("b", 2)])
        .advance_watermark_to(Timestamp(4))
        // a: [1, 6) and [5, 10) merge into [1, 10).
        .add_elements(vec![at("a", 5)])
        // b's [2, 7) closes alone.
        .advance_watermark_to(Timestamp(8))
        // b's [9, 14) does not reach back to the closed [2, 7); a's [9, 14) merges into
        // [1, 10) → [1, 14); b's [13, 18) into [9, 14) → [9, 18).
        .add_elements(vec![at("b", 9), at("a", 9), at("b", 13)])
        // b's [9, 18) stays open; a's [1, 14) closes.
        .advance_watermark_to(Timestamp(16))
        // a's [15, 20) does not reach back to the closed [1, 14); b's [17, 22) extends
        // b's open session to [9, 22).
        .add_elements(vec![at("a", 15), at("b", 17)])
        // Late: [3, 8) expired (7 < 16), though it overlaps nothing open either.
        .add_elements(vec![at("a", 3)])
        .advance_watermark_to(Timestamp(30))
        .advance_watermark_to_infinity();
    p.apply("Events", events)
        .apply("Sessions", Window::into(WindowFn::sessions(5)))
        .group_by_key("Group")
        .capture("sessions");
}

fn check_sessions(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    groups_eq(
        &r,
        "sessions",
        vec![
            group("b", &[2], iw(2, 7), 6, ONLY),
            group("a", &[1, 5, 9], iw(1, 14), 13, ONLY),
            group("a", &[15], iw(15, 20), 19, ONLY),
            group("b", &[9, 13, 17], iw(9, 22), 21, ONLY),
        ],
    )?;
    counter_eq(&r, "Group", DROPPED_LATE, 1)
}
