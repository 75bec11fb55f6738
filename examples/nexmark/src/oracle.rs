//! Plain-Rust computations of each query over the generated events: loops and maps,
//! no SDK. Tests compare the pipelines' outputs with these exactly.

use crate::queries::{
    AuctionCount, BidTimeType, BidsPerSession, CategoryPrice, IdNameReserve, NameCityStateId,
    OutputFile, Q14Bid, SellerPrice, WinningBid, Q10_SHARDS, Q10_WINDOW_MS, Q11_GAP_MS,
    Q13_SIDE_ROWS, Q3_CATEGORY, Q3_STATES, Q4_PERIOD_MS, Q4_WINDOW_MS, Q5_PERIOD_MS, Q5_WINDOW_MS,
    Q6_LAST_AUCTIONS, Q7_WINDOW_MS, Q8_WINDOW_MS, SKIP_FACTOR,
};
use crate::{Bid, Event};
use std::collections::BTreeMap;

/// Q0: the events.
pub fn q0(events: &[Event]) -> Vec<Event> {
    events.to_vec()
}

/// Q1: every bid, price * 89 / 100.
pub fn q1(events: &[Event]) -> Vec<Bid> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            let mut b = b.clone();
            b.price = b.price * 89 / 100;
            out.push(b);
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

/// The start of the fixed window of `size_ms` holding `ts`.
pub fn fixed_window_start(ts: u64, size_ms: i64) -> i64 {
    let ts = ts as i64;
    ts - ts.rem_euclid(size_ms)
}

/// Q8 with fixed windows of `window_ms`: for each auction, its seller's name if the
/// seller registered in the auction's window.
pub fn q8_windowed(events: &[Event], window_ms: i64) -> Vec<IdNameReserve> {
    let mut persons = BTreeMap::new();
    for e in events {
        if let Event::Person(p) = e {
            persons.insert((fixed_window_start(p.date_time, window_ms), p.id), p);
        }
    }
    let mut out = Vec::new();
    for e in events {
        if let Event::Auction(a) = e {
            let window_start = fixed_window_start(a.date_time, window_ms);
            if let Some(p) = persons.get(&(window_start, a.seller)) {
                out.push(IdNameReserve {
                    window_start,
                    id: p.id,
                    name: p.name.clone(),
                    reserve: a.reserve,
                });
            }
        }
    }
    out
}

/// Q8 with Beam's 10 s windows.
pub fn q8(events: &[Event]) -> Vec<IdNameReserve> {
    q8_windowed(events, Q8_WINDOW_MS)
}

/// The starts of the sliding windows (`size_ms` long, every `period_ms`) holding `ts`.
pub fn sliding_window_starts(ts: u64, size_ms: i64, period_ms: i64) -> Vec<i64> {
    let ts = ts as i64;
    let mut starts = Vec::new();
    let mut s = ts - ts.rem_euclid(period_ms);
    while s > ts - size_ms {
        starts.push(s);
        s -= period_ms;
    }
    starts
}

/// Q5 with sliding windows of `size_ms` every `period_ms`: per window, the auctions
/// with the most bids (all of them on a tie).
pub fn q5_windowed(events: &[Event], size_ms: i64, period_ms: i64) -> Vec<AuctionCount> {
    let mut counts: BTreeMap<i64, BTreeMap<usize, u64>> = BTreeMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            for s in sliding_window_starts(b.date_time, size_ms, period_ms) {
                *counts.entry(s).or_default().entry(b.auction).or_default() += 1;
            }
        }
    }
    let mut out = Vec::new();
    for (window_start, per_auction) in counts {
        let max = per_auction.values().copied().max().unwrap_or(0);
        for (auction, count) in per_auction {
            if count == max {
                out.push(AuctionCount {
                    window_start,
                    auction,
                    count,
                });
            }
        }
    }
    out
}

/// Q5 with Beam's 10 s windows every 2 s.
pub fn q5(events: &[Event]) -> Vec<AuctionCount> {
    q5_windowed(events, Q5_WINDOW_MS, Q5_PERIOD_MS)
}

/// Q11 with session gap `gap_ms`: per bidder, its bid times sorted; a bid at `t` opens
/// `[t, t + gap)` and joins the current session if it starts before that session ends.
pub fn q11_with_gap(events: &[Event], gap_ms: i64) -> Vec<BidsPerSession> {
    let mut times: BTreeMap<usize, Vec<i64>> = BTreeMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            times.entry(b.bidder).or_default().push(b.date_time as i64);
        }
    }
    let mut out = Vec::new();
    for (bidder, mut ts) in times {
        ts.sort();
        let mut session: Option<BidsPerSession> = None;
        for t in ts {
            match &mut session {
                Some(s) if t < s.end => {
                    s.end = s.end.max(t + gap_ms);
                    s.count += 1;
                }
                _ => {
                    out.extend(session.take());
                    session = Some(BidsPerSession {
                        bidder,
                        start: t,
                        end: t + gap_ms,
                        count: 1,
                    });
                }
            }
        }
        out.extend(session);
    }
    out
}

/// Q11 with Beam's 10 s gap.
pub fn q11(events: &[Event]) -> Vec<BidsPerSession> {
    q11_with_gap(events, Q11_GAP_MS)
}

/// Q7 with fixed windows of `window_ms`: the bids whose price is their window's maximum.
pub fn q7_windowed(events: &[Event], window_ms: i64) -> Vec<Bid> {
    let mut max: BTreeMap<i64, usize> = BTreeMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            let m = max
                .entry(fixed_window_start(b.date_time, window_ms))
                .or_default();
            *m = (*m).max(b.price);
        }
    }
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            if max[&fixed_window_start(b.date_time, window_ms)] == b.price {
                out.push(b.clone());
            }
        }
    }
    out
}

/// Q7 with Beam's 10 s windows.
pub fn q7(events: &[Event]) -> Vec<Bid> {
    q7_windowed(events, Q7_WINDOW_MS)
}

/// Q14: bids with `0.908 * price` in (1,000,000, 50,000,000), with the converted price,
/// the time of day (hours 8-18 day, 0-6 and 20-23 night, else other) and the number of
/// 'c's in `extra`.
pub fn q14(events: &[Event]) -> Vec<Q14Bid> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            let price = 0.908 * b.price as f64;
            if price <= 1_000_000.0 || price >= 50_000_000.0 {
                continue;
            }
            let hour = b.date_time / 3_600_000 % 24;
            let bid_time_type = if (8..=18).contains(&hour) {
                BidTimeType::DayTime
            } else if hour <= 6 || hour >= 20 {
                BidTimeType::NightTime
            } else {
                BidTimeType::OtherTime
            };
            out.push(Q14Bid {
                auction: b.auction,
                bidder: b.bidder,
                price,
                bid_time_type,
                date_time: b.date_time,
                extra: b.extra.clone(),
                c_counts: b.extra.chars().filter(|c| *c == 'c').count(),
            });
        }
    }
    out
}

/// Q9: per auction, its highest valid bid (before expiry, at least the reserve): higher
/// price, then earlier time, then smaller bidder, then smaller extra.
pub fn q9(events: &[Event]) -> Vec<WinningBid> {
    let mut best: BTreeMap<usize, &Bid> = BTreeMap::new();
    let mut auctions = BTreeMap::new();
    for e in events {
        if let Event::Auction(a) = e {
            auctions.insert(a.id, a);
        }
    }
    for e in events {
        if let Event::Bid(b) = e {
            let Some(a) = auctions.get(&b.auction) else {
                continue;
            };
            if b.date_time >= a.expires || b.price < a.reserve {
                continue;
            }
            let key = |x: &Bid| {
                (
                    x.price,
                    std::cmp::Reverse(x.date_time),
                    std::cmp::Reverse(x.bidder),
                    std::cmp::Reverse(x.extra.clone()),
                )
            };
            match best.get(&b.auction) {
                Some(old) if key(old) >= key(b) => {}
                _ => {
                    best.insert(b.auction, b);
                }
            }
        }
    }
    best.into_iter()
        .map(|(id, b)| WinningBid {
            auction: auctions[&id].clone(),
            bid: b.clone(),
        })
        .collect()
}

/// Q4 with sliding windows of `size_ms` every `period_ms`: Q9's winners, each at its
/// auction's `expires - 1`; per window and category, the rounded mean winning price.
pub fn q4_windowed(events: &[Event], size_ms: i64, period_ms: i64) -> Vec<CategoryPrice> {
    let mut sums: BTreeMap<(i64, usize), (u64, u64)> = BTreeMap::new();
    for w in q9(events) {
        for s in sliding_window_starts(w.auction.expires - 1, size_ms, period_ms) {
            let acc = sums.entry((s, w.auction.category)).or_default();
            acc.0 += w.bid.price as u64;
            acc.1 += 1;
        }
    }
    sums.into_iter()
        .map(|((window_start, category), (sum, n))| CategoryPrice {
            window_start,
            category,
            price: (sum as f64 / n as f64).round() as u64,
        })
        .collect()
}

/// Q4 with Beam's 10 s windows every 5 s.
pub fn q4(events: &[Event]) -> Vec<CategoryPrice> {
    q4_windowed(events, Q4_WINDOW_MS, Q4_PERIOD_MS)
}

/// Q6: per seller, the integer mean winning price of their last 10 auctions, ordered
/// by winning bid time, then price.
pub fn q6(events: &[Event]) -> Vec<SellerPrice> {
    let mut sales: BTreeMap<usize, Vec<(u64, usize)>> = BTreeMap::new();
    for w in q9(events) {
        sales
            .entry(w.auction.seller)
            .or_default()
            .push((w.bid.date_time, w.bid.price));
    }
    let mut out = Vec::new();
    for (seller, mut s) in sales {
        s.sort();
        let last = &s[s.len().saturating_sub(Q6_LAST_AUCTIONS)..];
        let sum: u64 = last.iter().map(|x| x.1 as u64).sum();
        out.push(SellerPrice {
            seller,
            // Rounded half up, as Beam's Query6Model (`Math.round`).
            price: (2 * sum + last.len() as u64) / (2 * last.len() as u64),
        });
    }
    out
}

/// Q13: every bid with `extra` replaced by `(bidder % 500).to_string()`, the side
/// table's value for that row.
pub fn q13(events: &[Event]) -> Vec<Bid> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            let mut b = b.clone();
            b.extra = (b.bidder % Q13_SIDE_ROWS).to_string();
            out.push(b);
        }
    }
    out
}

/// Q12 on [`q12_test_stream`](crate::queries::q12_test_stream)`(events, batch, step_ms)`
/// with panes of `delay_ms`: batch `k` arrives at processing time `k * step_ms`; a
/// bidder's pane opens with its first bid and fires once the clock is past its opening
/// time + `delay_ms` (before the next batch arrives). At the end of the global window
/// every bidder gets an on-time pane: what is left, or an empty pane (count 0) under
/// the default `OnTimeBehavior::FireAlways`.
pub fn q12_scripted(
    events: &[Event],
    batch: usize,
    step_ms: i64,
    delay_ms: i64,
) -> Vec<(usize, u64)> {
    // bidder -> (pane opened at, bids in the pane)
    let mut open: BTreeMap<usize, (i64, u64)> = BTreeMap::new();
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    let mut fire_due = |open: &mut BTreeMap<usize, (i64, u64)>, now: i64| {
        open.retain(|bidder, (opened, n)| {
            let due = now > *opened + delay_ms;
            if due {
                out.push((*bidder, *n));
            }
            !due
        });
    };
    let chunks: Vec<&[Event]> = events.chunks(batch.max(1)).collect();
    for (k, chunk) in chunks.iter().enumerate() {
        let now = k as i64 * step_ms;
        fire_due(&mut open, now);
        for e in *chunk {
            if let Event::Bid(b) = e {
                open.entry(b.bidder).or_insert((now, 0)).1 += 1;
                seen.insert(b.bidder);
            }
        }
    }
    // The script advances the clock once more after the last batch.
    fire_due(&mut open, chunks.len() as i64 * step_ms);
    for bidder in seen {
        out.push((bidder, open.get(&bidder).map_or(0, |o| o.1)));
    }
    out
}

/// Q10: per (fixed window, shard = auction % shards) holding bids, the file name and
/// its lines `auction,bidder,price,date_time`, sorted.
pub fn q10_files(events: &[Event]) -> BTreeMap<String, Vec<String>> {
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        if let Event::Bid(b) = e {
            let start = fixed_window_start(b.date_time, Q10_WINDOW_MS);
            let name = format!(
                "bids-{start:013}-{:05}-of-{Q10_SHARDS:05}.csv",
                b.auction % Q10_SHARDS
            );
            files.entry(name).or_default().push(format!(
                "{},{},{},{}",
                b.auction, b.bidder, b.price, b.date_time
            ));
        }
    }
    for lines in files.values_mut() {
        lines.sort();
    }
    files
}

/// Q10's output records: one per file of [`q10_files`].
pub fn q10(events: &[Event]) -> Vec<OutputFile> {
    let mut out = Vec::new();
    for e in events {
        if let Event::Bid(b) = e {
            out.push((
                fixed_window_start(b.date_time, Q10_WINDOW_MS),
                b.auction % Q10_SHARDS,
            ));
        }
    }
    out.sort();
    out.dedup();
    let files = q10_files(events);
    out.into_iter()
        .map(|(window_start, shard)| {
            let name = format!("bids-{window_start:013}-{shard:05}-of-{Q10_SHARDS:05}.csv");
            let lines = files[&name].len();
            OutputFile {
                window_start,
                shard,
                name,
                lines,
            }
        })
        .collect()
}
