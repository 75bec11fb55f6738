//! Fuzz targets of plan decoding (`tidewater::fuzz`): mutated plans fed to the decoder,
//! the translator and the executor. Each returns an error or runs; none panics, and the
//! binary never holds more than [`BOUND`] (it runs under a capped allocator: past
//! [`CAP`] an allocation fails).

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use tidewater::{plan, Combine, CombineFn, FlattenExt, Partition, Pipeline, PipelineOptions};
use tidewater_runner_direct::{execute, ExecOptions};
use tidewater_runners_core::translate;

/// Memory the binary may hold at any time, checked after every case.
const BOUND: usize = 256 << 20;
/// Past this an allocation fails (and the binary aborts).
const CAP: usize = 1 << 30;

#[global_allocator]
static ALLOCATOR: cap::Cap<std::alloc::System> = cap::Cap::new(std::alloc::System, CAP);

fn double(x: i64) -> i64 {
    2 * x
}
fn key(x: &i64) -> i64 {
    x % 3
}
fn parity(x: &i64, _n: usize) -> usize {
    (*x % 2) as usize
}

#[derive(Serialize, Deserialize)]
struct Total;

impl CombineFn for Total {
    type In = i64;
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add_input(&self, a: &mut i64, x: i64) {
        *a += x;
    }
    fn merge_accumulators(&self, a: &mut i64, b: i64) {
        *a += b;
    }
    fn extract_output(&self, a: i64) -> i64 {
        a
    }
}

fn plan_json() -> String {
    let p = Pipeline::new(PipelineOptions::default());
    let xs = p.create("Numbers", (0..20).collect::<Vec<i64>>());
    let doubled = xs.map("Double", double);
    let parts = doubled.apply("Parity", Partition::of(2, parity));
    let both = parts.apply_flatten("Both");
    both.with_keys("Key", key)
        .group_by_key("Group")
        .capture("groups");
    both.with_keys("Key2", key)
        .apply("Sum", Combine::per_key(Total))
        .capture("sums");
    xs.apply("Total", Combine::globally(Total)).capture("total");
    plan::encode(&p.to_plan().unwrap())
}

/// Decodes, translates and runs; any outcome but a panic is fine.
fn survive(json: &str) {
    let Ok(decoded) = plan::decode(json) else {
        return;
    };
    let Ok(exec) = translate(&decoded) else {
        return;
    };
    let options = ExecOptions {
        shuffle_seed: Some(1),
        ..Default::default()
    };
    // An internal error is a panic the executor caught: a bug, never bad input.
    if let Err(e @ tidewater::Error::Internal(_)) = execute(&exec, &options) {
        panic!("internal error on a mutated plan: {e}");
    }
}

fn mutate_value(
    v: &mut serde_json::Value,
    path: &[usize],
    replacement: &serde_json::Value,
    remove: bool,
) {
    use serde_json::Value;
    let Some((&step, rest)) = path.split_first() else {
        *v = replacement.clone();
        return;
    };
    match v {
        Value::Object(m) if !m.is_empty() => {
            let k = m.keys().nth(step % m.len()).cloned().unwrap();
            if rest.is_empty() && remove {
                m.remove(&k);
            } else {
                mutate_value(m.get_mut(&k).unwrap(), rest, replacement, remove);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = step % a.len();
            if rest.is_empty() && remove {
                a.remove(i);
            } else {
                mutate_value(&mut a[i], rest, replacement, remove);
            }
        }
        _ => *v = replacement.clone(),
    }
}

fn replacement() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::{json, Value};
    prop_oneof![
        Just(Value::Null),
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
        Just(json!("")),
        Just(json!("Numbers.main")),
        Just(json!("Group.main")),
        Just(json!("i64")),
        Just(json!("beam:transform:group_by_key:v1")),
        Just(json!("beam:transform:pardo:v1")),
        Just(json!({})),
        Just(json!([])),
        Just(json!({"input": "Both.main"})),
        Just(json!(["main", "1", "2"])),
        "[a-z:_.]{0,12}".prop_map(Value::String),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tidewater::fuzz::cases(400)))]

    #[test]
    fn fuzz_plan_structural_mutations(path in proptest::collection::vec(0usize..64, 1..7), r in replacement(), remove in any::<bool>()) {
        let mut v: serde_json::Value = serde_json::from_str(&plan_json()).unwrap();
        mutate_value(&mut v, &path, &r, remove);
        survive(&serde_json::to_string(&v).unwrap());
        prop_assert!(ALLOCATOR.max_allocated() < BOUND, "held {} bytes", ALLOCATOR.max_allocated());
    }

    #[test]
    fn fuzz_plan_byte_mutations(edits in proptest::collection::vec((0usize..100_000, any::<u8>(), 0u8..3), 1..6)) {
        let mut bytes = plan_json().into_bytes();
        tidewater::fuzz::edit(&mut bytes, &edits);
        survive(&String::from_utf8_lossy(&bytes));
        prop_assert!(ALLOCATOR.max_allocated() < BOUND, "held {} bytes", ALLOCATOR.max_allocated());
    }
}

#[test]
fn the_unmutated_plan_runs() {
    let decoded = plan::decode(&plan_json()).unwrap();
    let r = execute(&translate(&decoded).unwrap(), &ExecOptions::default()).unwrap();
    assert_eq!(r.captured_values::<i64>("total").unwrap(), vec![190]);
    assert_eq!(
        r.captured_values::<(i64, i64)>("sums").unwrap(),
        vec![(0, 126), (1, 114), (2, 140)]
    );
}
