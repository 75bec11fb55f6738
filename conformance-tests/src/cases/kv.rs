//! tidewater_transforms::{Keys, Values, KvSwap}.

use crate::case::RunResult;
use crate::check::{succeeded, values_eq};
use crate::Case;
use tidewater::runner::Feature::{Capture, Create, ParDo};
use tidewater::Pipeline;
use tidewater_transforms::{Keys, KvSwap, Values};

pub(crate) fn cases() -> Vec<Case> {
    vec![Case {
        name: "kv/keys_values_swap",
        features: &[Create, ParDo, Capture],
        build: keys_values_swap,
        check: check_keys_values_swap,
    }]
}

fn input() -> Vec<(String, u8)> {
    vec![("a".into(), 1), ("b".into(), 2), ("a".into(), 3)]
}

fn keys_values_swap(p: &Pipeline) {
    let kvs = p.create("Kvs", input());
    kvs.apply("Keys", Keys).capture("keys");
    kvs.apply("Values", Values).capture("values");
    kvs.apply("Swap", KvSwap).capture("swapped");
}

fn check_keys_values_swap(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    values_eq(&r, "keys", vec!["a".to_string(), "a".into(), "b".into()])?;
    values_eq(&r, "values", vec![1u8, 2, 3])?;
    values_eq(
        &r,
        "swapped",
        vec![(1u8, "a".to_string()), (2, "b".into()), (3, "a".into())],
    )
}
