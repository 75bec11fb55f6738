use crate::Event;
use serde::{Deserialize, Serialize};
use tidewater::{
    BoundedWindow, DoFn, PCollection, ParDo, ProcessContext, UserError, Window, WindowFn,
};
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

fn person_name(e: Event) -> Option<(usize, String)> {
    match e {
        Event::Person(p) => Some((p.id, p.name)),
        _ => None,
    }
}

fn seller_reserve(e: Event) -> Option<(usize, usize)> {
    match e {
        Event::Auction(a) => Some((a.seller, a.reserve)),
        _ => None,
    }
}

/// Window start of the element being processed (0 in the global window).
pub(crate) fn window_start(w: BoundedWindow) -> i64 {
    match w {
        BoundedWindow::Interval { start, .. } => start.millis(),
        BoundedWindow::Global => 0,
    }
}

/// Per person and window: one output per auction they opened in it.
#[derive(Serialize, Deserialize)]
struct NewUsers;

impl DoFn for NewUsers {
    type In = (usize, (Vec<String>, Vec<usize>));
    type Out = IdNameReserve;
    fn process(
        &mut self,
        (id, (names, reserves)): Self::In,
        ctx: &mut ProcessContext<'_, IdNameReserve>,
    ) -> Result<(), UserError> {
        // Person ids are unique: at most one name (Beam's `getOnly`).
        let Some(name) = names.into_iter().next() else {
            return Ok(());
        };
        let window_start = window_start(ctx.window());
        for reserve in reserves {
            ctx.output(IdNameReserve {
                window_start,
                id,
                name: name.clone(),
                reserve,
            });
        }
        Ok(())
    }
}

/// Q8 with fixed windows of `window_ms`: persons (keyed by id) and auctions (keyed by
/// seller) in the same window, CoGroupByKey, then one output per auction of a person
/// who registered in that window.
pub fn q8_windowed(events: &PCollection<Event>, window_ms: i64) -> PCollection<IdNameReserve> {
    let windowed = events.apply("Q8.Window", Window::into(WindowFn::fixed(window_ms)));
    let persons = windowed.flat_map("Q8.Persons", person_name);
    let auctions = windowed.flat_map("Q8.Auctions", seller_reserve);
    (persons, auctions)
        .apply_cogroup("Q8.Join")
        .apply("Q8.Output", ParDo::of(NewUsers))
}

/// Q8, new users: persons who opened auctions in the fixed window ([`Q8_WINDOW_MS`])
/// they registered in, as (window start, person id, name, reserve) per auction.
pub fn q8(events: &PCollection<Event>) -> PCollection<IdNameReserve> {
    q8_windowed(events, Q8_WINDOW_MS)
}
