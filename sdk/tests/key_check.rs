//! Keyed transforms refuse, at construction, key types whose encoding is not a
//! function of their value (floats, hash collections); values are never refused.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use tidewater::{
    CombineFn, Element, GroupByKey, Pipeline, StateContext, StatefulDoFn, StatefulParDo, UserError,
};

/// The construction error of a GroupByKey over `(K, u8)`, if any.
fn group_by_key_error<K: Element>(key: K) -> Option<String> {
    let p = Pipeline::new(Default::default());
    p.create("Kvs", vec![(key, 1u8)]).apply("Group", GroupByKey);
    p.to_plan().err().map(|e| e.to_string())
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct Quote {
    symbol: String,
    price: f64,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct Account {
    region: String,
    id: u64,
}

#[test]
fn an_f64_key_is_refused() {
    insta::assert_snapshot!(group_by_key_error(1.5f64).unwrap(), @"cannot construct transform 'Group': the key type f64 of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: f64 at key (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer)");
}

#[test]
fn an_f32_inside_a_tuple_key_is_refused() {
    insta::assert_snapshot!(group_by_key_error(("a".to_string(), 1.5f32)).unwrap(), @"cannot construct transform 'Group': the key type (String, f32) of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: f32 at key.1 (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer)");
}

#[test]
fn a_struct_key_with_a_float_field_is_refused() {
    let quote = Quote {
        symbol: "TW".into(),
        price: 1.5,
    };
    insta::assert_snapshot!(group_by_key_error(quote).unwrap(), @"cannot construct transform 'Group': the key type Quote of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: f64 at key.price (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer)");
}

#[test]
fn an_optional_float_key_is_refused() {
    insta::assert_snapshot!(group_by_key_error(Some(1.5f64)).unwrap(), @"cannot construct transform 'Group': the key type Option<f64> of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: f64 at key.unwrap() (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer)");
}

#[test]
fn a_hash_map_key_is_refused() {
    let key: HashMap<String, u32> = [("a".to_string(), 1)].into();
    insta::assert_snapshot!(group_by_key_error(key).unwrap(), @"cannot construct transform 'Group': the key type HashMap<String, u32> of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: a HashMap in the key (equal ones encode their entries in different orders: use a BTreeMap instead)");
}

#[test]
fn a_hash_set_inside_a_tuple_key_is_refused() {
    let key: (u8, HashSet<String>) = (1, ["a".to_string()].into());
    insta::assert_snapshot!(group_by_key_error(key).unwrap(), @"cannot construct transform 'Group': the key type (u8, HashSet<String>) of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: a HashSet in the key (equal ones encode their entries in different orders: use a BTreeSet instead)");
}

#[test]
fn floats_and_hash_collections_together_are_both_named() {
    let key: (Vec<Quote>, HashMap<u8, u8>, HashSet<u8>) = Default::default();
    insta::assert_snapshot!(group_by_key_error(key).unwrap(), @"cannot construct transform 'Group': the key type (Vec<Quote>, HashMap<u8, u8>, HashSet<u8>) of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: f64 at key.0[_].price (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer); a HashMap and a HashSet in the key (equal ones encode their entries in different orders: use a BTreeMap and a BTreeSet instead)");
}

#[test]
fn hash_maps_and_floats_as_values_are_accepted() {
    let p = Pipeline::new(Default::default());
    let value: (HashMap<String, u32>, f64) = ([("a".to_string(), 1)].into(), 1.5);
    p.create("Kvs", vec![("k".to_string(), value)])
        .apply("Group", GroupByKey);
    p.to_plan().unwrap();
}

#[test]
fn exact_keys_are_accepted() {
    let account = Account {
        region: "eu".into(),
        id: 7,
    };
    assert_eq!(group_by_key_error("a".to_string()), None);
    assert_eq!(group_by_key_error(7u64), None);
    assert_eq!(group_by_key_error(-7i32), None);
    assert_eq!(group_by_key_error(("a".to_string(), 7u64, 'c')), None);
    assert_eq!(group_by_key_error(account.clone()), None);
    assert_eq!(group_by_key_error(Some(account)), None);
    assert_eq!(
        group_by_key_error(BTreeMap::from([("a".to_string(), vec![1u32])])),
        None
    );
    assert_eq!(group_by_key_error((1u8, BTreeSet::from([1u8]))), None);
    assert_eq!(group_by_key_error(vec![1u8, 2]), None);
}

#[derive(Serialize, Deserialize)]
struct Sum;

impl CombineFn for Sum {
    type In = i64;
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add_input(&self, acc: &mut i64, x: i64) {
        *acc += x
    }
    fn merge_accumulators(&self, acc: &mut i64, other: i64) {
        *acc += other
    }
    fn extract_output(&self, acc: i64) -> i64 {
        acc
    }
}

#[test]
fn combine_per_key_refuses_a_float_key() {
    let p = Pipeline::new(Default::default());
    p.create("Kvs", vec![((1u8, 0.5f32), 1i64)])
        .apply("Sum", tidewater::Combine::per_key(Sum));
    insta::assert_snapshot!(p.to_plan().unwrap_err().to_string(), @"cannot construct transform 'Sum': the key type (u8, f32) of Combine.perKey does not encode deterministically, and keys are grouped by their encoded bytes: f32 at key.1 (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer)");
}

#[derive(Serialize, Deserialize)]
struct SumF;

impl CombineFn for SumF {
    type In = f64;
    type Acc = f64;
    type Out = f64;
    fn create_accumulator(&self) -> f64 {
        0.0
    }
    fn add_input(&self, acc: &mut f64, x: f64) {
        *acc += x
    }
    fn merge_accumulators(&self, acc: &mut f64, other: f64) {
        *acc += other
    }
    fn extract_output(&self, acc: f64) -> f64 {
        acc
    }
}

#[test]
fn combine_globally_and_float_values_per_key_are_accepted() {
    let p = Pipeline::new(Default::default());
    let xs = p.create("Xs", vec![0.5f64, 1.5]);
    xs.apply("Total", tidewater::Combine::globally(SumF));
    p.create("Kvs", vec![("a".to_string(), 0.5f64)])
        .apply("PerKey", tidewater::Combine::per_key(SumF));
    p.to_plan().unwrap();
}

#[derive(Serialize, Deserialize)]
struct LastSeen;

impl StatefulDoFn for LastSeen {
    type Key = HashSet<String>;
    type Value = u64;
    type Out = u64;
    fn process(
        &mut self,
        _key: &HashSet<String>,
        n: u64,
        ctx: &mut StateContext<'_, u64>,
    ) -> Result<(), UserError> {
        ctx.output(n);
        Ok(())
    }
}

#[test]
fn a_stateful_par_do_refuses_a_hash_set_key() {
    let p = Pipeline::new(Default::default());
    p.create("Kvs", vec![(HashSet::from(["a".to_string()]), 1u64)])
        .apply("Last", StatefulParDo::of(LastSeen));
    insta::assert_snapshot!(p.to_plan().unwrap_err().to_string(), @"cannot construct transform 'Last': the key type HashSet<String> of StatefulParDo does not encode deterministically, and keys are grouped by their encoded bytes: a HashSet in the key (equal ones encode their entries in different orders: use a BTreeSet instead)");
}

/// A `HashMap` inside a field of a user struct: serde describes it as a map, like a
/// `BTreeMap`, and the type's name does not show it, so construction cannot see it.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Basket {
    items: HashMap<String, u32>,
}

#[test]
fn a_hash_map_hidden_in_a_struct_key_is_not_seen() {
    let basket = Basket {
        items: [("a".to_string(), 1)].into(),
    };
    assert_eq!(group_by_key_error(basket), None);
}
