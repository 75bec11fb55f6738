//! Incremental snapshots of a stateful DoFn: after a first snapshot, a delta holds the
//! windows changed since the previous one, and applied to it gives the full snapshot,
//! byte for byte, on either backend; either restores into the other.

use serde::{Deserialize, Serialize};
use tidewater::exec::Batch;
use tidewater::{
    BoundedWindow, StateContext, StatefulDoFn, StatefulInvoker, Timestamp, UserError,
    WindowedValue, Windows,
};
use tidewater_runners_core::delta::apply_delta;
use tidewater_runners_core::keyed::stateful::StatefulRunner;
use tidewater_runners_core::keyed::SnapshotKind;
use tidewater_runners_core::snapshot::{Part, Scope};
use tidewater_runners_core::state::StateChoice;

const GROUPS: u32 = 16;

/// Adds to a bag, keeps a value and, for an even value, sets a timer with an output
/// timestamp (a window with odd values only expires with no timer); for a value ending
/// in 4, sets the timer alone (a window of timers and no cells). Outputs the value
/// when the timer fires.
#[derive(Serialize, Deserialize)]
struct Keep;

impl StatefulDoFn for Keep {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        _k: &String,
        v: i64,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        let end = ctx.window().max_timestamp();
        if v % 10 == 4 {
            return ctx.set_event_timer("end", end);
        }
        ctx.bag_add("seen", &v)?;
        ctx.write_value("last", &v)?;
        if v % 2 != 0 {
            return Ok(());
        }
        ctx.set_event_timer_with_output("end", end, Timestamp(v.min(end.millis())))
    }
    fn on_timer(
        &mut self,
        _k: &String,
        _name: &str,
        ctx: &mut StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        if let Some(v) = ctx.read_value::<i64>("last")? {
            ctx.output(v);
        }
        ctx.clear("seen");
        Ok(())
    }
}

fn window(start: i64) -> BoundedWindow {
    BoundedWindow::Interval {
        start: Timestamp(start),
        end: Timestamp(start + 100),
    }
}

fn batch(items: &[(&str, i64)]) -> Box<Batch<(String, i64)>> {
    Box::new(Batch {
        items: items
            .iter()
            .map(|(k, v)| WindowedValue {
                value: (k.to_string(), *v),
                timestamp: Timestamp(*v),
                windows: Windows::One(window(v - v.rem_euclid(100))),
                pane: tidewater::PaneInfo::NO_FIRING,
            })
            .collect(),
    })
}

fn runner(state: &StateChoice) -> StatefulRunner {
    StatefulRunner::new(Box::new(StatefulInvoker::new(Keep)), state, GROUPS, 0).unwrap()
}

/// A snapshot's parts, named, and whether they are a delta.
fn snapshot(r: &mut StatefulRunner, kind: SnapshotKind) -> (Vec<Part>, bool) {
    let (later, now, delta) = r.snapshot(GROUPS, 0, kind).unwrap();
    let parts = later
        .encode()
        .unwrap()
        .into_iter()
        .chain(now)
        .map(|(scope, bytes)| Part {
            transform: "S".into(),
            scope,
            bytes,
        })
        .collect();
    (parts, delta)
}

fn restore(state: &StateChoice, parts: &[Part]) -> StatefulRunner {
    let mut r = runner(state);
    for p in parts {
        r.restore(p.scope, &p.bytes).unwrap();
    }
    r
}

fn each_pair(f: impl Fn(&StateChoice, &StateChoice)) {
    let dir = tempfile::tempdir().unwrap();
    let embedded = StateChoice::Embedded {
        dir: dir.path().to_path_buf(),
        hot_windows: 1,
        tables: None,
    };
    for (a, b) in [
        (&StateChoice::Memory, &embedded),
        (&embedded, &StateChoice::Memory),
    ] {
        f(a, b);
    }
}

#[test]
fn a_delta_applied_to_the_previous_snapshot_gives_the_full_one() {
    each_pair(a_delta_applied_to_the_previous_snapshot_gives_the_full_one_on);
}

fn a_delta_applied_to_the_previous_snapshot_gives_the_full_one_on(
    state: &StateChoice,
    other: &StateChoice,
) {
    let mut r = runner(state);
    let keys: Vec<String> = (0..200).map(|i| format!("key{i}")).collect();
    let all: Vec<(&str, i64)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), (i as i64 % 3) * 100 + 4 + (i as i64 % 4)))
        .collect();
    r.process(batch(&all)).unwrap();
    let (mut base, delta) = snapshot(&mut r, SnapshotKind::Delta);
    assert!(!delta, "the first snapshot is full");
    let full_size: usize = base.iter().map(|p| p.bytes.len()).sum();
    // Rounds of changes: one key; new keys; a window's timers firing and its state
    // expiring (deletions); nothing at all.
    type Round<'a> = (Vec<(&'a str, i64)>, Option<i64>);
    let rounds: Vec<Round<'_>> = vec![
        (vec![("key7", 6)], None),
        (vec![("new1", 250), ("new2", 5), ("key8", 107)], None),
        (Vec::new(), Some(100)),
        (Vec::new(), None),
        (vec![("key9", 299)], Some(200)),
        (Vec::new(), Some(1_000)),
    ];
    for (i, (items, watermark)) in rounds.into_iter().enumerate() {
        if !items.is_empty() {
            r.process(batch(&items)).unwrap();
        }
        if let Some(w) = watermark {
            let mut out = Vec::new();
            while {
                r.advance(Timestamp(w), Timestamp(0), &mut out).unwrap();
                r.has_due_work(Timestamp(w), Timestamp(0))
            } {}
        }
        let (d, delta) = snapshot(&mut r, SnapshotKind::Delta);
        assert!(delta, "round {i}: a delta");
        let changed = d
            .iter()
            .filter(|p| matches!(p.scope, Scope::KeyGroupDelta(_)))
            .count();
        if i == 0 {
            assert_eq!(changed, 1, "one key changed: one key group's delta");
            let size: usize = d.iter().map(|p| p.bytes.len()).sum();
            assert!(size * 20 < full_size, "{size} B of {full_size} B");
        }
        if i == 3 {
            assert_eq!(changed, 0, "nothing changed");
        }
        assert!(d.iter().all(|p| !matches!(p.scope, Scope::KeyGroup(_))));
        let (full, delta) = snapshot(&mut r, SnapshotKind::Full);
        assert!(!delta);
        let rebuilt = apply_delta(base, d).unwrap();
        assert_eq!(
            rebuilt, full,
            "round {i}: the delta applied gives the full snapshot"
        );
        // Restored into the other backend, its snapshot is the same.
        let (again, _) = snapshot(&mut restore(other, &rebuilt), SnapshotKind::Full);
        assert_eq!(again, full, "round {i}: restored into the other backend");
        base = full;
    }
    assert!(
        base.iter().all(|p| !matches!(p.scope, Scope::KeyGroup(_))),
        "every window expired: no key group is left"
    );
}

/// A restore is no base for a delta: the next snapshot is full.
#[test]
fn the_first_snapshot_after_a_restore_is_full() {
    let mut r = runner(&StateChoice::Memory);
    r.process(batch(&[("a", 1), ("b", 2)])).unwrap();
    let (parts, _) = snapshot(&mut r, SnapshotKind::Delta);
    let mut r2 = restore(&StateChoice::Memory, &parts);
    r2.process(batch(&[("a", 3)])).unwrap();
    let (again, delta) = snapshot(&mut r2, SnapshotKind::Delta);
    assert!(!delta);
    assert!(again.iter().any(|p| matches!(p.scope, Scope::KeyGroup(_))));
}

/// The key group parts of `parts`, in order.
fn key_groups(parts: &[Part]) -> Vec<&Part> {
    parts
        .iter()
        .filter(|p| matches!(p.scope, Scope::KeyGroup(_)))
        .collect()
}

/// With a directory of tables, an incremental snapshot is the store's files: restored
/// whole or into two instances owning half the key groups each, it gives the full
/// snapshot of the same instant; an older one still restores its own instant after the
/// store moved on; it restores into memory too; a corrupt file is an error.
#[test]
fn a_snapshot_of_the_stores_files_restores_at_any_parallelism() {
    use tidewater_runners_core::state::tables::TableDir;
    let dir = tempfile::tempdir().unwrap();
    let tables = TableDir(dir.path().join("tables"));
    let state = StateChoice::Embedded {
        dir: dir.path().join("state"),
        hot_windows: 1,
        tables: Some(tables.clone()),
    };
    let mut r = runner(&state);
    let keys: Vec<String> = (0..300).map(|i| format!("key{i}")).collect();
    let all: Vec<(&str, i64)> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_str(), (i as i64 % 3) * 100 + 4 + (i as i64 % 4)))
        .collect();
    r.process(batch(&all)).unwrap();
    let mut out = Vec::new();
    r.advance(Timestamp(100), Timestamp(0), &mut out).unwrap();
    let mut taken = Vec::new();
    for round in 0..2 {
        let (files, delta) = snapshot(&mut r, SnapshotKind::Delta);
        assert!(!delta, "files are no delta over parts");
        assert_eq!(
            files
                .iter()
                .filter(|p| matches!(p.scope, Scope::Files(0)))
                .count(),
            1,
            "{:?}",
            files.iter().map(|p| p.scope).collect::<Vec<_>>()
        );
        assert!(key_groups(&files).is_empty());
        let (full, _) = snapshot(&mut r, SnapshotKind::Full);
        assert!(!key_groups(&full).is_empty());
        taken.push((files, full));
        // The store moves on: new keys, changed ones, a window's timers fired.
        let more: Vec<(&str, i64)> = keys
            .iter()
            .take(150)
            .map(|k| (k.as_str(), 206 + round))
            .chain([("late", 250)])
            .collect();
        r.process(batch(&more)).unwrap();
        r.advance(Timestamp(200), Timestamp(0), &mut out).unwrap();
    }
    for (i, (files, full)) in taken.iter().enumerate() {
        let whole = restore(&state, files);
        let (again, _) = snapshot(&mut { whole }, SnapshotKind::Full);
        assert_eq!(&again, full, "snapshot {i} restored whole");
        let mut halves = Vec::new();
        for (n, owned) in [(0u32, 0..GROUPS / 2), (1, GROUPS / 2..GROUPS)] {
            let mut half = runner(&state).owning(owned);
            for p in files {
                half.restore(p.scope, &p.bytes).unwrap();
            }
            let (later, _, _) = half.snapshot(GROUPS, n, SnapshotKind::Full).unwrap();
            halves.extend(
                later
                    .encode()
                    .unwrap()
                    .into_iter()
                    .map(|(scope, bytes)| Part {
                        transform: "S".into(),
                        scope,
                        bytes,
                    }),
            );
        }
        assert_eq!(
            key_groups(&halves),
            key_groups(full),
            "snapshot {i} restored into two instances"
        );
    }
    // Into memory, given the directory of tables; without it, refused.
    let (files, full) = &taken[1];
    let mut memory = runner(&StateChoice::Memory).reading_tables_in(tables.clone());
    for p in files {
        memory.restore(p.scope, &p.bytes).unwrap();
    }
    let (again, _) = snapshot(&mut memory, SnapshotKind::Full);
    assert_eq!(&again, full, "restored into memory");
    let mut memory = runner(&StateChoice::Memory);
    let refused = files
        .iter()
        .find_map(|p| memory.restore(p.scope, &p.bytes).err())
        .expect("no directory of tables: refused");
    let refused = format!("{refused:?}");
    assert!(refused.contains("no directory of them"), "{refused}");
    // A table file changed on disk: an error naming it, no panic.
    let victim = std::fs::read_dir(tables.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::remove_file(&victim).unwrap();
    std::fs::write(&victim, bytes).unwrap();
    let mut fresh = runner(&state);
    let errors: Vec<String> = taken
        .iter()
        .flat_map(|(files, _)| files)
        .filter_map(|p| fresh.restore(p.scope, &p.bytes).err())
        .map(|e| format!("{e:?}"))
        .collect();
    assert!(errors.iter().any(|e| e.contains("checksum")), "{errors:?}");
}
