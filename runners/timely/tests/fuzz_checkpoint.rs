//! Fuzz targets of checkpoint reading (`tidewater::fuzz`): a checkpoint directory is
//! read from disk, so its manifests and part files are untrusted. Edited byte by byte,
//! or with fields of a manifest replaced (a part named `../x` or `/dev/zero`, lengths
//! and checksums of any value), reading the newest checkpoint returns one, falls back
//! to an older one, or fails with an error; it never panics, and the binary never holds
//! more than [`BOUND`] (it runs under a capped allocator: past [`CAP`] an allocation
//! fails).

use proptest::prelude::*;
use serde_json::{json, Value};
use std::path::Path;
use tidewater_runners_core::snapshot::{Part, Scope, Snapshot};
use tidewater_runners_timely::Store;

/// Memory the binary may hold at any time, checked after every case.
const BOUND: usize = 256 << 20;
/// Past this an allocation fails (and the binary aborts).
const CAP: usize = 1 << 30;

#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, CAP);

const PLAN: u64 = 7;

fn identity() -> tidewater_runners_core::compat::PlanIdentity {
    tidewater_runners_core::compat::PlanIdentity {
        hash: PLAN,
        ..Default::default()
    }
}

fn snap(epoch: u64, bytes: &[u8]) -> Snapshot {
    Snapshot {
        plan_hash: PLAN,
        max_key_groups: 4,
        epoch,
        base: Vec::new(),
        parts: vec![Part {
            transform: "T".into(),
            scope: Scope::List(0),
            bytes: bytes.to_vec(),
        }],
        stored: Default::default(),
    }
}

/// Three checkpoints of two workers' files.
fn write_checkpoints(dir: &Path) {
    let store = Store::open(dir).unwrap();
    for e in 0..3u64 {
        store
            .write_part(1, 0, e, e, &snap(e, &[e as u8; 40]))
            .unwrap();
        store
            .write_part(1, 1, e, e, &snap(e, b"second worker"))
            .unwrap();
        store.complete(e, &[1], 2, &identity(), 4).unwrap();
    }
}

/// The files of `dir` a case may edit: manifests, then part files.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .chain(std::fs::read_dir(dir.join("parts")).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    all.sort();
    all
}

fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!("../manifest")),
        Just(json!("/dev/zero")),
        Just(json!("n1-w0-0-0.snap")),
        Just(json!("n1-w9-0-99.snap")),
        Just(json!(u64::MAX)),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!([])),
        Just(json!([{"name": "/dev/zero", "len": 100, "crc": 0}])),
        Just(Value::Null),
        Just(json!("")),
    ]
}

/// Replaces the value at a pseudo-random path of `v` (steps pick keys and indices).
fn replace_at(v: &mut Value, path: &[usize], with: &Value) {
    let Some((&step, rest)) = path.split_first() else {
        *v = with.clone();
        return;
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            let k = m.keys().nth(step % m.len()).cloned().unwrap();
            replace_at(m.get_mut(&k).unwrap(), rest, with);
        }
        Value::Array(a) if !a.is_empty() => {
            let i = step % a.len();
            replace_at(&mut a[i], rest, with);
        }
        _ => *v = with.clone(),
    }
}

fn read_newest(dir: &Path) {
    if let Ok(store) = Store::open(dir) {
        // A checkpoint, a fallback, or an error: all fine; a panic is not.
        let _ = store.latest(&identity(), false);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tidewater::fuzz::cases(200)))]

    #[test]
    fn fuzz_checkpoint_bytes(
        which in any::<prop::sample::Index>(),
        edits in prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 1..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoints(dir.path());
        let all = files(dir.path());
        let file = &all[which.index(all.len())];
        let mut bytes = std::fs::read(file).unwrap();
        tidewater::fuzz::edit(&mut bytes, &edits);
        std::fs::write(file, &bytes).unwrap();
        read_newest(dir.path());
        prop_assert!(ALLOCATOR.max_allocated() < BOUND, "held {} bytes", ALLOCATOR.max_allocated());
    }

    #[test]
    fn fuzz_checkpoint_manifest_fields(
        newest in any::<bool>(),
        path in prop::collection::vec(0usize..16, 1..5),
        with in replacement(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoints(dir.path());
        let manifests: Vec<_> = files(dir.path())
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "manifest"))
            .collect();
        let file = if newest { manifests.last() } else { manifests.first() }.unwrap();
        let mut v: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
        replace_at(&mut v, &path, &with);
        std::fs::write(file, serde_json::to_vec(&v).unwrap()).unwrap();
        read_newest(dir.path());
        prop_assert!(ALLOCATOR.max_allocated() < BOUND, "held {} bytes", ALLOCATOR.max_allocated());
    }
}

/// What the manifest checks refuse, named: a part outside `parts/`, a device.
#[test]
fn a_manifest_naming_a_file_outside_the_checkpoint_is_refused() {
    for name in ["../n1-w0-2-2.snap", "/dev/zero", "/etc/passwd"] {
        let dir = tempfile::tempdir().unwrap();
        write_checkpoints(dir.path());
        let newest = dir.path().join(format!("checkpoint-{:020}.manifest", 2));
        let mut v: Value = serde_json::from_slice(&std::fs::read(&newest).unwrap()).unwrap();
        v["files"][0]["name"] = json!(name);
        std::fs::write(&newest, serde_json::to_vec(&v).unwrap()).unwrap();
        let restored = Store::open(dir.path())
            .unwrap()
            .latest(&identity(), false)
            .unwrap()
            .unwrap();
        assert_eq!(restored.manifest.epoch, 1, "{name}: fell back");
        assert!(
            restored.notes[0].contains(&format!(
                "checkpoint 2's manifest names '{name}', which is not a part file's name"
            )),
            "{name}: {:?}",
            restored.notes
        );
    }
}
