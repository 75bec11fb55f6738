//! Nexmark: queries 3, 5, 8 and 11 of `tidewater_nexmark` over a small seeded stream,
//! each compared exactly with its plain-Rust oracle.
//!
//! Every case reads [`EVENTS`] events at [`RATE`] events per second of event time
//! (20 s: several fixed and sliding windows, and sessions that close) from
//! `NexmarkSource`, builds the query as the `tidewater-nexmark` crate writes it, and
//! expects exactly what `tidewater_nexmark::oracle` computes from the same events
//! (loops and maps, no SDK), as a multiset. At this size every oracle output is
//! non-empty (Q3 6, Q5 14, Q8 126 and Q11 84 records), which the checks also require.

use crate::case::RunResult;
use crate::check::succeeded;
use crate::Case;
use std::fmt::Debug;
use tidewater::runner::Feature::{
    Capture, CombineGlobally, CombinePerKey, Flatten, GroupByKey, MultipleOutputs, ParDo,
    ReadBounded, StatefulParDo, WindowInto,
};
use tidewater::{Element, PCollection, Pipeline, Read};
use tidewater_nexmark::{oracle, queries, sorted_by_encoding, Event, NexmarkSource};

/// Events in each case's stream.
const EVENTS: u64 = 4_000;
/// Events per second of event time.
const RATE: usize = 200;

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "nexmark/q3",
            features: &[ReadBounded, ParDo, Flatten, StatefulParDo, Capture],
            build: build_q3,
            check: check_q3,
        },
        Case {
            name: "nexmark/q5",
            features: &[
                ReadBounded,
                ParDo,
                WindowInto,
                CombinePerKey,
                CombineGlobally,
                Capture,
            ],
            build: build_q5,
            check: check_q5,
        },
        Case {
            name: "nexmark/q8",
            features: &[
                ReadBounded,
                ParDo,
                MultipleOutputs,
                WindowInto,
                Flatten,
                GroupByKey,
                Capture,
            ],
            build: build_q8,
            check: check_q8,
        },
        Case {
            name: "nexmark/q11",
            features: &[ReadBounded, ParDo, WindowInto, CombinePerKey, Capture],
            build: build_q11,
            check: check_q11,
        },
    ]
}

fn source() -> NexmarkSource {
    NexmarkSource::new(EVENTS, RATE)
}

/// Reads the stream and captures `query`'s output as "out".
fn build<T: Element>(p: &Pipeline, query: fn(&PCollection<Event>) -> PCollection<T>) {
    query(&p.apply("Events", Read::from(source()))).capture("out");
}

/// "out" holds exactly what `oracle` computes from the same events.
fn check<T: Element + PartialEq + Debug>(
    r: RunResult,
    oracle: fn(&[Event]) -> Vec<T>,
) -> Result<(), String> {
    let r = succeeded(r)?;
    let expected = sorted_by_encoding(oracle(&source().all_events()));
    if expected.is_empty() {
        return Err("the oracle found nothing: the case would prove nothing".into());
    }
    let got = r
        .captured_values::<T>("out")
        .map_err(|e| format!("capture 'out': {e}"))?;
    if got == expected {
        return Ok(());
    }
    let missing: Vec<&T> = expected.iter().filter(|x| !got.contains(x)).collect();
    let unexpected: Vec<&T> = got.iter().filter(|x| !expected.contains(x)).collect();
    Err(format!(
        "capture 'out': {} records, expected {}; missing (first 3) {:?}; unexpected (first 3) {:?}",
        got.len(),
        expected.len(),
        &missing[..missing.len().min(3)],
        &unexpected[..unexpected.len().min(3)],
    ))
}

fn build_q3(p: &Pipeline) {
    build(p, queries::q3);
}

fn check_q3(r: RunResult) -> Result<(), String> {
    check(r, oracle::q3)
}

fn build_q5(p: &Pipeline) {
    build(p, queries::q5);
}

fn check_q5(r: RunResult) -> Result<(), String> {
    check(r, oracle::q5)
}

fn build_q8(p: &Pipeline) {
    build(p, queries::q8);
}

fn check_q8(r: RunResult) -> Result<(), String> {
    check(r, oracle::q8)
}

fn build_q11(p: &Pipeline) {
    build(p, queries::q11);
}

fn check_q11(r: RunResult) -> Result<(), String> {
    check(r, oracle::q11)
}
