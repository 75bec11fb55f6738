//! The timers in the embedded store against the ones in memory: any sequence of sets,
//! deletes, expiries and firings leaves the same timers pending, fires the same ones
//! (those due at one time in either's order) and holds the watermark at the same time.

use super::tests::window;
use super::*;
use crate::timers::{Timer, TimerService};
use proptest::prelude::*;
use tidewater::exec::TimeDomain;
use tidewater::Timestamp;

const GROUPS: u32 = 16;

fn domain(d: bool) -> TimeDomain {
    if d {
        TimeDomain::ProcessingTime
    } else {
        TimeDomain::EventTime
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// Key, window, name, domain, firing time, output timestamp.
    Set(u8, u8, u8, bool, i8, i8),
    Delete(u8, u8, u8, bool),
    DeleteWindow(u8, u8),
    /// Pops every timer of the domain due at the time; sets one more for each it pops
    /// (as an `on_timer` would), some of them due at once.
    Fire(bool, i8),
}

fn op() -> impl Strategy<Value = Op> {
    let (k, w, n, d, t) = (0u8..6, 0u8..3, 0u8..3, any::<bool>(), -5i8..40);
    prop_oneof![
        6 => (k.clone(), w.clone(), n.clone(), d, t.clone(), t.clone())
            .prop_map(|(k, w, n, d, at, out)| Op::Set(k, w, n, d, at, out)),
        2 => (k.clone(), w.clone(), n, d).prop_map(|(k, w, n, d)| Op::Delete(k, w, n, d)),
        1 => (k, w).prop_map(|(k, w)| Op::DeleteWindow(k, w)),
        2 => (d, t).prop_map(|(d, t)| Op::Fire(d, t)),
    ]
}

fn timer(k: u8, w: u8, n: u8, d: bool, at: i8, out: i8) -> KeyTimer {
    // An event-time timer's output timestamp is never after it (the runner refuses).
    let out = if d { out } else { out.min(at) };
    Timer {
        key: vec![k],
        window: window(w),
        name: format!("t{n}"),
        domain: domain(d),
        at: Timestamp(i64::from(at)),
        output: Timestamp(i64::from(out)),
    }
}

fn collect(timers: TimerStream) -> Vec<KeyTimer> {
    timers.collect::<Result<_, _>>().unwrap()
}

fn sorted(mut ts: Vec<KeyTimer>) -> Vec<KeyTimer> {
    ts.sort_by(|a, b| {
        (&a.key, &a.window, &a.name, a.domain, a.at)
            .cmp(&(&b.key, &b.window, &b.name, b.domain, b.at))
    });
    ts
}

/// Applies `op`; the timers it fired, sorted.
fn apply(s: &mut dyn KeyedTimers, op: &Op, i: usize) -> Vec<KeyTimer> {
    match *op {
        Op::Set(k, w, n, d, at, out) => {
            s.set(timer(k, w, n, d, at, out));
        }
        Op::Delete(k, w, n, d) => s.delete(&[k], &window(w), &format!("t{n}"), domain(d)),
        Op::DeleteWindow(k, w) => s.delete_window(&[k], &window(w)),
        Op::Fire(d, now) => {
            let mut fired = Vec::new();
            while let Some(t) = s.pop_due(domain(d), Timestamp(i64::from(now))) {
                if t.key[0] < 100 {
                    // A timer the firing sets, due at once or later: of a key and name
                    // no other timer has (a pending one it replaced might have fired
                    // first or not, as the order of those due at one time goes).
                    let mut set = t.clone();
                    set.key = vec![t.key[0] + 100];
                    set.name = format!("{}-fired-at-op-{i}", t.name);
                    set.at = Timestamp(t.at.millis() + i64::from(t.key[0] % 2));
                    s.set(set);
                }
                fired.push(t);
            }
            return sorted(fired);
        }
    }
    s.flush().expect("no error");
    Vec::new()
}

fn state(s: &dyn KeyedTimers) -> impl PartialEq + std::fmt::Debug {
    let d = [TimeDomain::EventTime, TimeDomain::ProcessingTime];
    (
        s.len(),
        d.map(|d| s.next(d)),
        d.map(|d| s.first(d).map(|t| t.at)),
        s.earliest_output(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_embedded_timers_behave_as_the_ones_in_memory(ops in proptest::collection::vec(op(), 1..150)) {
        let dir = tempfile::tempdir().unwrap();
        let mut m = TimerService::<Vec<u8>, String>::default();
        let mut e = EmbeddedTimers::open(dir.path(), GROUPS).unwrap();
        for (i, op) in ops.iter().enumerate() {
            prop_assert_eq!(apply(&mut m, op, i), apply(&mut e, op, i), "fired by {:?}", op);
            prop_assert_eq!(state(&m), state(&e), "after {:?}", op);
        }
        let frozen = e.freeze();
        let all = sorted(collect(KeyedTimers::freeze(&m).all(GROUPS)));
        // A change after the freeze is not in it.
        e.set(timer(9, 0, 0, false, 1, 1));
        prop_assert_eq!(&all, &sorted(collect(frozen.all(GROUPS))));
        // Restored by setting each: the same timers again.
        let dir2 = tempfile::tempdir().unwrap();
        let mut e2 = EmbeddedTimers::open(dir2.path(), GROUPS).unwrap();
        for t in all.iter().cloned() {
            e2.set(t);
        }
        prop_assert_eq!(state(&m), state(&e2));
    }
}
