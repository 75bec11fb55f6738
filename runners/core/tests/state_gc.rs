//! State and timers of a window are dropped once it expires.

use serde::{Deserialize, Serialize};
use tidewater::exec::{Batch, StateAccess};

use tidewater::{
    BoundedWindow, StateContext, StatefulDoFn, StatefulInvoker, Timestamp, UserError,
    WindowedValue, Windows,
};
use tidewater_runners_core::keyed::stateful::StatefulRunner;
use tidewater_runners_core::keyed::SnapshotKind;
use tidewater_runners_core::state::{
    frozen_windows, restore_frozen, InMemoryStateBackend, StateBackend, StateCells, StateChoice,
};

/// Each backend: in memory, and the embedded store in a directory of its own.
fn each_backend(f: impl Fn(&StateChoice)) {
    f(&StateChoice::Memory);
    let dir = tempfile::tempdir().unwrap();
    f(&StateChoice::Embedded {
        dir: dir.path().to_path_buf(),
        hot_windows: 1,
        tables: None,
    });
}

#[derive(Serialize, Deserialize)]
struct Remember;

impl StatefulDoFn for Remember {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        ctx.bag_add("seen", &v)?;
        ctx.write_value("last", &v)?;
        ctx.set_event_timer_with_output("late", Timestamp(v + 100), Timestamp(v))
    }
}

fn element(k: &str, v: i64, w: BoundedWindow) -> WindowedValue<(String, i64)> {
    WindowedValue {
        value: (k.to_string(), v),
        timestamp: Timestamp(v),
        windows: Windows::One(w),
        pane: tidewater::PaneInfo::NO_FIRING,
    }
}

#[test]
fn expired_windows_lose_their_state_and_timers() {
    each_backend(expired_windows_lose_their_state_and_timers_on);
}

fn expired_windows_lose_their_state_and_timers_on(state: &StateChoice) {
    let w = |s: i64| BoundedWindow::Interval {
        start: Timestamp(s),
        end: Timestamp(s + 10),
    };
    let mut runner =
        StatefulRunner::new(Box::new(StatefulInvoker::new(Remember)), state, 8, 100).unwrap();
    let batch = Batch {
        items: vec![
            element("a", 1, w(0)),
            element("b", 2, w(0)),
            element("a", 15, w(10)),
        ],
    };
    runner.process(Box::new(batch)).unwrap();
    assert_eq!(runner.state_cells(), 6);
    let mut out = Vec::new();
    runner
        .advance(Timestamp(50), Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(
        runner.output_watermark(),
        Timestamp(1),
        "pending timers hold the output watermark at their output times"
    );
    // [0, 10) expires once the watermark passes 9 + 100; [10, 20) once it passes 119.
    runner
        .advance(Timestamp(109), Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(runner.state_cells(), 6);
    assert_eq!(
        runner.output_watermark(),
        Timestamp(15),
        "the timers of a and b fired; a's in [10, 20) holds"
    );
    runner
        .advance(Timestamp(110), Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(runner.state_cells(), 2);
    runner
        .advance(Timestamp(120), Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(runner.state_cells(), 0);
    assert!(
        !runner.has_due_work(Timestamp::MAX, Timestamp::MAX),
        "no timers left"
    );
}

#[test]
fn a_snapshot_restores_every_cell() {
    let mut s = InMemoryStateBackend::default();
    let g = BoundedWindow::Global;
    s.put(b"k", &g, "v", &[1]);
    s.bag_add(b"k", &g, "bag", &[2]);
    s.bag_add(b"k", &g, "bag", &[3]);
    s.map_put(b"k", &g, "map", &[4], &[5]);
    s.put(b"other", &g, "v", &[6]);
    let windows = frozen_windows(s.freeze(), 2).unwrap();
    assert_eq!(windows.len(), 2);
    let (k, other): (Vec<_>, Vec<_>) = windows.into_iter().partition(|w| w.key == b"k");
    let mut t = InMemoryStateBackend::default();
    restore_frozen(&mut t, &k).unwrap();
    assert_eq!(t.get(b"other", &g, "v"), None);
    restore_frozen(&mut t, &other).unwrap();
    assert_eq!(t.get(b"other", &g, "v").as_deref(), Some(&[6u8][..]));
    assert_eq!(t.get(b"k", &g, "v").as_deref(), Some(&[1u8][..]));
    assert_eq!(t.bag(b"k", &g, "bag"), vec![&[2u8][..], &[3u8][..]]);
    let entries: Vec<(Vec<u8>, Vec<u8>)> = t
        .map_entries(b"k", &g, "map")
        .into_iter()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    assert_eq!(entries, vec![(vec![4u8], vec![5u8])]);
    assert!(t.restore_add(b"\xff\xff").is_err());
    let mut corrupt = k;
    corrupt[0].cells[0].1 = vec![0xff, 0xff];
    assert!(restore_frozen(&mut t, &corrupt).is_err());
    let _unused: Option<&dyn StateAccess> = None;
}

/// Keeps the last value in value state only: no timer makes its windows live.
#[derive(Serialize, Deserialize)]
struct Last;

impl StatefulDoFn for Last {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        let before = ctx.read_value::<i64>("last")?;
        ctx.write_value("last", &v)?;
        ctx.output(before.unwrap_or(-1));
        Ok(())
    }
}

#[test]
fn windows_with_only_state_expire_also_after_a_restore() {
    each_backend(windows_with_only_state_expire_also_after_a_restore_on);
}

fn windows_with_only_state_expire_also_after_a_restore_on(state: &StateChoice) {
    let w = |s: i64| BoundedWindow::Interval {
        start: Timestamp(s),
        end: Timestamp(s + 10),
    };
    let runner = || StatefulRunner::new(Box::new(StatefulInvoker::new(Last)), state, 8, 0).unwrap();
    let mut first = runner();
    let batch = Batch {
        items: vec![
            element("a", 1, w(0)),
            element("a", 2, w(0)),
            element("b", 3, w(0)),
            element("a", 15, w(10)),
        ],
    };
    let out = first.process(Box::new(batch)).unwrap();
    let out = tidewater::exec::downcast_batch::<i64>(out);
    assert_eq!(
        out.iter().map(|wv| wv.value).collect::<Vec<_>>(),
        vec![-1, 1, -1, -1]
    );
    assert_eq!(first.state_cells(), 3);
    let mut second = runner();
    let (later, now, delta) = first.snapshot(8, 0, SnapshotKind::Delta).unwrap();
    assert!(!delta, "a first snapshot is full");
    for (scope, bytes) in later.encode().unwrap().into_iter().chain(now) {
        second.restore(scope, &bytes).unwrap();
    }
    assert_eq!(second.state_cells(), 3);
    assert!(second.has_due_work(Timestamp(10), Timestamp(0)));
    let mut out = Vec::new();
    second
        .advance(Timestamp(10), Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(second.state_cells(), 1, "[0, 10) expired, [10, 20) holds");
    second
        .advance(Timestamp(20), Timestamp(0), &mut out)
        .unwrap();
    assert_eq!(second.state_cells(), 0);
    assert!(!second.has_due_work(Timestamp::MAX, Timestamp::MAX));
}

/// Keeps a key's value and outputs it from a timer at its window's end.
#[derive(Serialize, Deserialize)]
struct AtTheEnd;

impl StatefulDoFn for AtTheEnd {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        ctx.write_value("v", &v)?;
        ctx.set_event_timer("end", ctx.window().max_timestamp())
    }
    fn on_timer(
        &mut self,
        _k: &String,
        _name: &str,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        if let Some(v) = ctx.read_value::<i64>("v")? {
            ctx.output(v);
        }
        Ok(())
    }
}

#[test]
fn timers_due_at_once_fire_in_slices_each_once() {
    each_backend(timers_due_at_once_fire_in_slices_each_once_on);
}

/// A watermark past every key's timer fires them in slices: each call of `advance`
/// stops with timers still due, the output watermark held and no window expired, and
/// the calls together fire every timer once.
fn timers_due_at_once_fire_in_slices_each_once_on(state: &StateChoice) {
    const KEYS: i64 = 10_000;
    let w = BoundedWindow::Interval {
        start: Timestamp(0),
        end: Timestamp(10),
    };
    let mut runner =
        StatefulRunner::new(Box::new(StatefulInvoker::new(AtTheEnd)), state, 8, 0).unwrap();
    let items = (0..KEYS)
        .map(|v| element(&format!("k{v}"), v, w.clone()))
        .collect();
    runner.process(Box::new(Batch { items })).unwrap();
    let mut got: Vec<i64> = Vec::new();
    let mut calls = 0;
    loop {
        let mut out = Vec::new();
        runner
            .advance(Timestamp(50), Timestamp(0), &mut out)
            .unwrap();
        calls += 1;
        let fired: Vec<i64> = out
            .into_iter()
            .flat_map(tidewater::exec::downcast_batch::<i64>)
            .map(|v| v.value)
            .collect();
        assert!(!fired.is_empty(), "call {calls} fired nothing");
        got.extend(fired);
        if !runner.has_due_work(Timestamp(50), Timestamp(0)) {
            break;
        }
        assert!(
            runner.output_watermark() <= Timestamp(9),
            "unfired timers hold the output watermark"
        );
        assert_eq!(
            runner.state_cells(),
            KEYS as usize,
            "no window expires before its timers fired"
        );
    }
    assert!(calls >= 3, "{KEYS} timers in {calls} calls");
    got.sort_unstable();
    assert_eq!(got, (0..KEYS).collect::<Vec<_>>());
    assert_eq!(runner.state_cells(), 0);
    assert_eq!(runner.output_watermark(), Timestamp(50));
}

/// Sets an event-time timer whose output timestamp is after it.
#[derive(Serialize, Deserialize)]
struct OutputAfter;

impl StatefulDoFn for OutputAfter {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        ctx.set_event_timer_with_output("t", Timestamp(v), Timestamp(v + 1))
    }
}

/// As in Beam, an event-time timer cannot output after it fires: the error names the
/// timer and both times.
#[test]
fn an_event_timer_outputting_after_it_fires_is_refused() {
    let mut runner = StatefulRunner::new(
        Box::new(StatefulInvoker::new(OutputAfter)),
        &StateChoice::Memory,
        8,
        0,
    )
    .unwrap();
    let batch = Batch {
        items: vec![element("a", 5, BoundedWindow::Global)],
    };
    let Err(err) = runner.process(Box::new(batch)) else {
        panic!("the timer was set");
    };
    let err = format!("{err:?}");
    assert!(
        err.contains("cannot set event-time timer 't' at 5ms with output timestamp 6ms")
            && err.contains("may not be after the timer's time"),
        "{err}"
    );
}

/// A slice that ends with the last due timer leaves nothing due and the output
/// watermark where it belongs (no window expires here to call `advance` again).
#[test]
fn a_slice_ending_with_the_last_due_timer_moves_the_output_watermark() {
    let mut runner = StatefulRunner::new(
        Box::new(StatefulInvoker::new(AtTheEnd)),
        &StateChoice::Memory,
        8,
        0,
    )
    .unwrap();
    // Global-window timers at its end, due once the watermark reaches the end of time:
    // as many as one slice holds.
    let keys = 16 * tidewater::exec::BATCH_SIZE as i64;
    let items = (0..keys)
        .map(|v| element(&format!("k{v}"), v, BoundedWindow::Global))
        .collect();
    runner.process(Box::new(Batch { items })).unwrap();
    let mut out = Vec::new();
    runner
        .advance(Timestamp::MAX, Timestamp(0), &mut out)
        .unwrap();
    let fired: usize = out.iter().map(|b| b.len()).sum();
    assert_eq!(fired, keys as usize);
    assert_eq!(runner.output_watermark(), Timestamp::MAX);
}
