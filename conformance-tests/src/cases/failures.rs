//! Failing user code: a DoFn that returns an error or panics, in any lifecycle method,
//! a function item that panics, a CombineFn that panics. The run must fail with
//! `Error::UserCode` naming the transform's full name, the lifecycle step and the
//! element (or key); for these cases that is a pass.

use crate::case::RunResult;
use crate::check::{user_code_error, ExpectedUserError};
use crate::Case;
use serde::{Deserialize, Serialize};
use tidewater::runner::Feature::{CombinePerKey, Create, GroupByKey, MultipleOutputs, ParDo};
use tidewater::{
    Combine, CombineFn, DoFn, FinishBundleContext, PCollection, PTransform, Pipeline,
    ProcessContext, TupleTag, UserError,
};

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "failures/dofn_returns_err",
            features: &[Create, ParDo],
            build: returns_err,
            check: check_returns_err,
        },
        Case {
            name: "failures/dofn_panics",
            features: &[Create, ParDo],
            build: panics,
            check: check_panics,
        },
        Case {
            name: "failures/map_fn_panics",
            features: &[Create, ParDo],
            build: map_panics,
            check: check_map_panics,
        },
        Case {
            name: "failures/downstream_in_fused_chain",
            features: &[Create, ParDo],
            build: fused,
            check: check_fused,
        },
        Case {
            name: "failures/after_group_by_key",
            features: &[Create, GroupByKey, ParDo],
            build: after_gbk,
            check: check_after_gbk,
        },
        Case {
            name: "failures/setup_err",
            features: &[Create, ParDo],
            build: setup_err,
            check: check_setup_err,
        },
        Case {
            name: "failures/start_bundle_err",
            features: &[Create, ParDo],
            build: start_bundle_err,
            check: check_start_bundle_err,
        },
        Case {
            name: "failures/finish_bundle_panics",
            features: &[Create, ParDo],
            build: finish_bundle_panics,
            check: check_finish_bundle_panics,
        },
        Case {
            name: "failures/output_before_allowed_skew",
            features: &[Create, ParDo],
            build: before_skew,
            check: check_before_skew,
        },
        Case {
            name: "failures/output_to_undeclared_tag",
            features: &[Create, ParDo, MultipleOutputs],
            build: undeclared_tag,
            check: check_undeclared_tag,
        },
        Case {
            name: "failures/combine_fn_panics",
            features: &[Create, CombinePerKey],
            build: combine_panics,
            check: check_combine_panics,
        },
    ]
}

/// Rejects one record with an error.
#[derive(Serialize, Deserialize)]
struct Reject {
    bad: String,
}

impl DoFn for Reject {
    type In = String;
    type Out = String;
    fn process(
        &mut self,
        s: String,
        ctx: &mut ProcessContext<'_, String>,
    ) -> Result<(), UserError> {
        if s == self.bad {
            return Err(format!("rejected record {s}").into());
        }
        ctx.output(s);
        Ok(())
    }
}

/// A composite, so that the error must name the nested step `Validate/Check`.
struct Validate;

impl PTransform<PCollection<String>> for Validate {
    type Output = PCollection<String>;
    fn expand(self, input: PCollection<String>) -> PCollection<String> {
        input.apply(
            "Check",
            tidewater::ParDo::of(Reject {
                bad: "bad-record".into(),
            }),
        )
    }
}

fn records() -> Vec<String> {
    let mut v: Vec<String> = (0..200).map(|i| format!("ok-{i}")).collect();
    v.insert(120, "bad-record".into());
    v
}

fn returns_err(p: &Pipeline) {
    p.create("Records", records()).apply("Validate", Validate);
}

fn check_returns_err(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Validate/Check",
            phase: "process",
            element: Some("bad-record"),
            message: &["rejected record bad-record"],
        },
    )
}

/// Panics on one element.
#[derive(Serialize, Deserialize)]
struct Explode {
    at: i64,
}

impl DoFn for Explode {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        assert!(x != self.at, "boom at {x}");
        ctx.output(x);
        Ok(())
    }
}

fn panics(p: &Pipeline) {
    p.create("Xs", (0i64..300).collect())
        .apply("Explode", tidewater::ParDo::of(Explode { at: 217 }));
}

fn check_panics(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Explode",
            phase: "process",
            element: Some("217"),
            message: &["panicked", "boom at 217"],
        },
    )
}

fn parse(s: String) -> i64 {
    s.parse().expect("not a number")
}

fn map_panics(p: &Pipeline) {
    p.create("Texts", ["1", "2", "three", "4"].map(String::from).to_vec())
        .map("Parse", parse);
}

fn check_map_panics(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Parse",
            phase: "process",
            element: Some("three"),
            message: &["panicked", "not a number"],
        },
    )
}

fn increment(x: i64) -> i64 {
    x + 1
}

/// The failing step is the second of a fused chain: the error must name it, not the
/// stage's first step.
fn fused(p: &Pipeline) {
    p.create("Xs", (0i64..50).collect())
        .map("First", increment)
        .apply("Second", tidewater::ParDo::of(Explode { at: 30 }))
        .map("Third", increment);
}

fn check_fused(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Second",
            phase: "process",
            element: Some("30"),
            message: &["boom at 30"],
        },
    )
}

/// Fails on the group of one key.
#[derive(Serialize, Deserialize)]
struct RejectGroup;

impl DoFn for RejectGroup {
    type In = (String, Vec<i64>);
    type Out = i64;
    fn process(
        &mut self,
        (k, vs): (String, Vec<i64>),
        ctx: &mut ProcessContext<'_, i64>,
    ) -> Result<(), UserError> {
        if k == "poison" {
            return Err("poisoned group".into());
        }
        ctx.output(vs.len() as i64);
        Ok(())
    }
}

fn after_gbk(p: &Pipeline) {
    let input = vec![
        ("fine".to_string(), 1i64),
        ("poison".into(), 2),
        ("fine".into(), 3),
    ];
    p.create("Kvs", input)
        .group_by_key("Group")
        .apply("Consume", tidewater::ParDo::of(RejectGroup));
}

fn check_after_gbk(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Consume",
            phase: "process",
            element: Some("poison"),
            message: &["poisoned group"],
        },
    )
}

/// Fails in the lifecycle method named by `phase`.
#[derive(Serialize, Deserialize)]
struct FailIn {
    phase: String,
}

impl FailIn {
    fn maybe(&self, phase: &str) -> Result<(), UserError> {
        if self.phase == phase {
            Err(format!("{phase} refused").into())
        } else {
            Ok(())
        }
    }
}

impl DoFn for FailIn {
    type In = i64;
    type Out = i64;
    fn setup(&mut self) -> Result<(), UserError> {
        self.maybe("setup")
    }
    fn start_bundle(&mut self) -> Result<(), UserError> {
        self.maybe("start_bundle")
    }
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        ctx.output(x);
        Ok(())
    }
    fn finish_bundle(&mut self, _ctx: &mut FinishBundleContext<'_, i64>) -> Result<(), UserError> {
        assert!(self.phase != "finish_bundle", "finish_bundle exploded");
        Ok(())
    }
}

fn fail_in(p: &Pipeline, phase: &str) {
    p.create("Xs", (0i64..10).collect()).apply(
        "Lifecycle",
        tidewater::ParDo::of(FailIn {
            phase: phase.into(),
        }),
    );
}

fn setup_err(p: &Pipeline) {
    fail_in(p, "setup")
}

fn check_setup_err(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Lifecycle",
            phase: "setup",
            element: None,
            message: &["setup refused"],
        },
    )
}

fn start_bundle_err(p: &Pipeline) {
    fail_in(p, "start_bundle")
}

fn check_start_bundle_err(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Lifecycle",
            phase: "start_bundle",
            element: None,
            message: &["start_bundle refused"],
        },
    )
}

fn finish_bundle_panics(p: &Pipeline) {
    fail_in(p, "finish_bundle")
}

fn check_finish_bundle_panics(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Lifecycle",
            phase: "finish_bundle",
            element: None,
            message: &["panicked", "finish_bundle exploded"],
        },
    )
}

fn before_skew(p: &Pipeline) {
    super::pardo::earlier(p, vec![1_234], 9);
}

fn check_before_skew(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Earlier",
            phase: "process",
            element: Some("1234"),
            message: &["allowed skew of 9ms"],
        },
    )
}

/// Outputs to a tag it holds, which the ParDo did not declare.
#[derive(Serialize, Deserialize)]
struct ToUndeclared {
    declared: TupleTag<i64>,
    undeclared: TupleTag<i64>,
}

impl DoFn for ToUndeclared {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        match x {
            0 => ctx.output(x),
            1 => ctx.output_to(&self.declared, x),
            _ => ctx.output_to(&self.undeclared, x),
        }
        Ok(())
    }
}

fn undeclared_tag(p: &Pipeline) {
    let declared = TupleTag::<i64>::new("declared");
    let undeclared = TupleTag::<i64>::new("undeclared");
    p.create("Xs", vec![0i64, 1, 55, 0, 1]).apply(
        "Route",
        tidewater::ParDo::of(ToUndeclared {
            declared: declared.clone(),
            undeclared,
        })
        .with_outputs()
        .and(&declared),
    );
}

fn check_undeclared_tag(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Route",
            phase: "process",
            element: Some("55"),
            message: &["undeclared tag 'undeclared'"],
        },
    )
}

/// Panics when it adds a particular input.
#[derive(Serialize, Deserialize)]
struct FragileSum {
    poison: i64,
}

impl CombineFn for FragileSum {
    type In = i64;
    type Acc = i64;
    type Out = i64;
    fn create_accumulator(&self) -> i64 {
        0
    }
    fn add_input(&self, acc: &mut i64, x: i64) {
        assert!(x != self.poison, "cannot add {x}");
        *acc += x;
    }
    fn merge_accumulators(&self, acc: &mut i64, other: i64) {
        *acc += other;
    }
    fn extract_output(&self, acc: i64) -> i64 {
        acc
    }
}

fn combine_panics(p: &Pipeline) {
    let input: Vec<(String, i64)> = (0..100).map(|i| (format!("key-{}", i % 4), i)).collect();
    p.create("Kvs", input)
        .apply("Sum", Combine::per_key(FragileSum { poison: 77 }));
}

/// 77 belongs to key-1; the design asks for the element or its key in the error.
fn check_combine_panics(r: RunResult) -> Result<(), String> {
    user_code_error(
        r,
        ExpectedUserError {
            transform: "Sum",
            phase: "process",
            element: Some("key-1"),
            message: &["panicked", "cannot add 77"],
        },
    )
}
