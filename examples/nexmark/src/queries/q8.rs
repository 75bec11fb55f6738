use crate::Event;
use serde::{Deserialize, Serialize};
use tidewater::{ElementContext, PCollection, Split3, Window, WindowFn};
use tidewater_transforms::CoGroupExt;

/// Q8's window size (Beam's default: 10 s).
pub const Q8_WINDOW_MS: i64 = 10_000;

/// Q8's output: a person who opened an auction in the window they registered in.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct IdNameReserve {
    /// Start of the fixed window, in ms.
    pub window_start: i64,
    /// The person's id.
    pub id: usize,
    /// The person's name.
    pub name: String,
    /// The auction's reserve price.
    pub reserve: usize,
}

/// Q8 with fixed windows of `window_ms`: persons (keyed by id) and auctions (keyed by
/// seller) in the same window, CoGroupByKey, then one output per auction of a person
/// who registered in that window.
pub fn q8_windowed(events: &PCollection<Event>, window_ms: i64) -> PCollection<IdNameReserve> {
    let windowed = events.apply("Q8.Window", Window::into(WindowFn::fixed(window_ms)));
    let (persons, auctions, _bids) = windowed.split3("Q8.ByKind", |e: Event| match e {
        Event::Person(p) => Split3::First((p.id, p.name)),
        Event::Auction(a) => Split3::Second((a.seller, a.reserve)),
        Event::Bid(_) => Split3::Third(()),
    });
    type Joined = (usize, (Vec<String>, Vec<usize>));
    (persons, auctions)
        .apply_cogroup("Q8.Join")
        .flat_map_with_context(
            "Q8.Output",
            |(id, (names, reserves)): Joined, c: &ElementContext| {
                // Person ids are unique: at most one name (Beam's `getOnly`).
                let name = names.into_iter().next();
                let window_start = c.window().start().millis();
                reserves.into_iter().filter_map(move |reserve| {
                    let name = name.clone()?;
                    Some(IdNameReserve {
                        window_start,
                        id,
                        name,
                        reserve,
                    })
                })
            },
        )
}

/// Q8, new users: persons who opened auctions in the fixed window ([`Q8_WINDOW_MS`])
/// they registered in, as (window start, person id, name, reserve) per auction.
pub fn q8(events: &PCollection<Event>) -> PCollection<IdNameReserve> {
    q8_windowed(events, Q8_WINDOW_MS)
}
