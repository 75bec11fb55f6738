use crate::{Auction, Event, Person};
use serde::{Deserialize, Serialize};
use tidewater::{PCollection, StateContext, UserError};
use tidewater_transforms::{StatefulJoinExt, StatefulJoinFn};

/// Q3 keeps the persons of these states (the generator spells them in lower case;
/// Beam's generator in upper case).
pub const Q3_STATES: [&str; 3] = ["or", "id", "ca"];
/// Q3 keeps the auctions of this category.
pub const Q3_CATEGORY: usize = 10;

/// Q3's output: a seller in one of the states and an auction of theirs in the category.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NameCityStateId {
    /// The seller's name.
    pub name: String,
    /// The seller's city.
    pub city: String,
    /// The seller's state.
    pub state: String,
    /// The auction id.
    pub id: usize,
}

fn local_person(e: Event) -> Option<(usize, Person)> {
    match e {
        Event::Person(p) if Q3_STATES.contains(&p.state.as_str()) => Some((p.id, p)),
        _ => None,
    }
}

fn category_auction(e: Event) -> Option<(usize, Auction)> {
    match e {
        Event::Auction(a) if a.category == Q3_CATEGORY => Some((a.seller, a)),
        _ => None,
    }
}

fn output(p: &Person, a: &Auction) -> NameCityStateId {
    NameCityStateId {
        name: p.name.clone(),
        city: p.city.clone(),
        state: p.state.clone(),
        id: a.id,
    }
}

/// The seller, once seen.
const PERSON: tidewater::ValueState<Person> = tidewater::StateSpec::value("person");
/// The seller's auctions seen before the seller.
const PENDING: tidewater::BagState<Auction> = tidewater::StateSpec::bag("pending");

/// The join per person id: the person in value state, auctions that arrived before
/// their seller in bag state until the seller arrives.
#[derive(Serialize, Deserialize)]
pub struct JoinPersonAuctions;

impl StatefulJoinFn for JoinPersonAuctions {
    type Key = usize;
    type Left = Person;
    type Right = Auction;
    type Out = NameCityStateId;

    fn left(
        &mut self,
        _id: &usize,
        p: Person,
        ctx: &mut StateContext<'_, NameCityStateId>,
    ) -> Result<(), UserError> {
        for a in PENDING.read(ctx)? {
            ctx.output(output(&p, &a));
        }
        PENDING.clear(ctx);
        PERSON.write(ctx, &p)
    }

    fn right(
        &mut self,
        _id: &usize,
        a: Auction,
        ctx: &mut StateContext<'_, NameCityStateId>,
    ) -> Result<(), UserError> {
        match PERSON.read(ctx)? {
            Some(p) => ctx.output(output(&p, &a)),
            None => PENDING.add(ctx, &a)?,
        }
        Ok(())
    }
}

/// Q3, local item suggestion: (name, city, state, auction id) for every auction of
/// category [`Q3_CATEGORY`] whose seller lives in one of [`Q3_STATES`]. A stateful join
/// in the global window of persons and auctions, keyed by person id
/// ([`StatefulJoinExt::join_stateful`]).
pub fn q3(events: &PCollection<Event>) -> PCollection<NameCityStateId> {
    let persons = events.flat_map("Q3.Persons", local_person);
    let auctions = events.flat_map("Q3.Auctions", category_auction);
    persons.join_stateful("Q3.Join", &auctions, JoinPersonAuctions)
}
