use crate::{Auction, Event, Person};
use serde::{Deserialize, Serialize};
use tidewater::{FlattenExt, PCollection, StateContext, StatefulDoFn, StatefulParDo, UserError};

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

/// One side of the join, keyed by person id.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum PersonOrAuction {
    /// A person of one of the states.
    Person(Person),
    /// An auction of the category.
    Auction(Auction),
}

fn local_person(e: Event) -> Option<(usize, PersonOrAuction)> {
    match e {
        Event::Person(p) if Q3_STATES.contains(&p.state.as_str()) => {
            Some((p.id, PersonOrAuction::Person(p)))
        }
        _ => None,
    }
}

fn category_auction(e: Event) -> Option<(usize, PersonOrAuction)> {
    match e {
        Event::Auction(a) if a.category == Q3_CATEGORY => {
            Some((a.seller, PersonOrAuction::Auction(a)))
        }
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

impl StatefulDoFn for JoinPersonAuctions {
    type Key = usize;
    type Value = PersonOrAuction;
    type Out = NameCityStateId;

    fn process(
        &mut self,
        _id: &usize,
        value: PersonOrAuction,
        ctx: &mut StateContext<'_, NameCityStateId>,
    ) -> Result<(), UserError> {
        match value {
            PersonOrAuction::Person(p) => {
                for a in PENDING.read(ctx)? {
                    ctx.output(output(&p, &a));
                }
                PENDING.clear(ctx);
                PERSON.write(ctx, &p)?;
            }
            PersonOrAuction::Auction(a) => match PERSON.read(ctx)? {
                Some(p) => ctx.output(output(&p, &a)),
                None => PENDING.add(ctx, &a)?,
            },
        }
        Ok(())
    }
}

/// Q3, local item suggestion: (name, city, state, auction id) for every auction of
/// category [`Q3_CATEGORY`] whose seller lives in one of [`Q3_STATES`]. A stateful join
/// in the global window over the tagged union of both sides, keyed by person id.
pub fn q3(events: &PCollection<Event>) -> PCollection<NameCityStateId> {
    let persons = events.flat_map("Q3.Persons", local_person);
    let auctions = events.flat_map("Q3.Auctions", category_auction);
    vec![persons, auctions]
        .apply_flatten("Q3.Both")
        .apply("Q3.Join", StatefulParDo::of(JoinPersonAuctions))
}
