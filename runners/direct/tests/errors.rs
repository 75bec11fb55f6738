//! Failures are typed errors naming the transform, the step and the element; nothing
//! aborts the process or hangs.

use serde::{Deserialize, Serialize};
use tidewater::{
    plan, run_plan_json, DoFn, Error, ParDo, Pipeline, PipelineOptions, ProcessContext, UserError,
};

fn setup() {
    tidewater_runner_direct::register();
    tidewater_runner_native::register();
    tidewater::runner::register_runner(std::sync::Arc::new(Nothing));
}

fn options(seed: u64) -> PipelineOptions {
    PipelineOptions {
        seed: Some(seed),
        ..Default::default()
    }
}

fn double(x: i64) -> i64 {
    2 * x
}

#[derive(Serialize, Deserialize)]
struct FailOn {
    bad: i64,
    panic: bool,
}

impl DoFn for FailOn {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        if x == self.bad {
            if self.panic {
                panic!("cannot handle {x}");
            }
            return Err(format!("{x} is not acceptable").into());
        }
        ctx.output(x);
        Ok(())
    }
}

fn failing_pipeline(options: PipelineOptions, panic: bool) -> Pipeline {
    let p = Pipeline::new(options);
    let xs = p.create("Numbers", (0..50).collect());
    xs.apply("Outer", Check { panic }).capture("out");
    p
}

struct Check {
    panic: bool,
}

impl tidewater::PTransform<tidewater::PCollection<i64>> for Check {
    type Output = tidewater::PCollection<i64>;
    fn expand(self, xs: tidewater::PCollection<i64>) -> tidewater::PCollection<i64> {
        xs.map("Double", double).apply(
            "Validate",
            ParDo::of(FailOn {
                bad: 42,
                panic: self.panic,
            }),
        )
    }
}

#[test]
fn an_erroring_do_fn_names_transform_element_and_seed() {
    setup();
    let e = failing_pipeline(options(7), false).run().unwrap_err();
    assert!(
        matches!(&e, Error::UserCode { transform, phase: "process", .. } if transform == "Outer/Validate")
    );
    insta::assert_snapshot!(e.to_string(), @"transform 'Outer/Validate' failed in process on element 42: 42 is not acceptable (direct runner seed 7; rerun with --seed=7 to replay this order)");
}

#[test]
fn a_panicking_do_fn_fails_the_pipeline_without_aborting() {
    setup();
    let e = failing_pipeline(options(3), true).run().unwrap_err();
    insta::assert_snapshot!(e.to_string(), @"transform 'Outer/Validate' failed in process on element 42: panicked: cannot handle 42 (direct runner seed 3; rerun with --seed=3 to replay this order)");
}

#[test]
fn without_validation_the_element_is_named_by_position() {
    setup();
    let o = PipelineOptions {
        no_validate: true,
        ..Default::default()
    };
    let e = failing_pipeline(o, false).run().unwrap_err();
    insta::assert_snapshot!(e.to_string(), @"transform 'Outer/Validate' failed in process on element #21 of its batch (only the direct runner with validation keeps a copy to show): 42 is not acceptable");
}

#[test]
fn an_unknown_function_name_says_how_to_register_it() {
    setup();
    let p = failing_pipeline(options(1), false);
    let json = plan::encode(&p.to_plan().unwrap());
    let json = json.replace("errors::FailOn", "errors::Missing");
    let e = run_plan_json(&json, &options(1)).unwrap_err();
    assert!(matches!(e, Error::UnknownFunction { kind: "DoFn", .. }));
    insta::assert_snapshot!(e.to_string(), @"unknown DoFn 'errors::Missing' in transform 'Outer/Validate': this binary has not registered it. Functions and types register themselves when the pipeline that uses them is constructed; a binary that runs a plan it did not build must construct the same pipeline first (or, for a concrete DoFn type, link it: tidewater::register!(DoFn T) in the module that defines T, or call tidewater::registry::register_do_fn::<T>())");
}

#[test]
fn malformed_do_fn_fields_are_named() {
    setup();
    let p = failing_pipeline(options(1), false);
    let json = plan::encode(&p.to_plan().unwrap()).replace("\"bad\": 42", "\"bad\": \"forty-two\"");
    let e = run_plan_json(&json, &options(1)).unwrap_err();
    insta::assert_snapshot!(e.to_string(), @r#"cannot decode the fields of errors::FailOn in transform 'Outer/Validate': invalid type: string "forty-two", expected i64"#);
}

#[test]
fn a_type_mismatch_in_an_edited_plan_is_caught_before_running() {
    setup();
    fn len(s: String) -> i64 {
        s.len() as i64
    }
    let p = Pipeline::new(options(1));
    p.create("Words", vec!["a".to_string()])
        .map("Len", len)
        .capture("lens");
    p.create("Numbers", vec![1i64]).capture("numbers");
    let json = plan::encode(&p.to_plan().unwrap())
        .replace("\"input\": \"Words.main\"", "\"input\": \"Numbers.main\"");
    let e = run_plan_json(&json, &options(1)).unwrap_err();
    insta::assert_snapshot!(e.to_string(), @"invalid plan: transform 'Len': the input is a PCollection of i64, but its function expects alloc::string::String");
}

#[test]
fn an_unknown_runner_lists_the_known_ones() {
    setup();
    let p = failing_pipeline(PipelineOptions::for_runner("spark"), false);
    insta::assert_snapshot!(p.run().unwrap_err().to_string(), @"unknown runner 'spark'; known runners: direct, native, nothing");
}

/// A runner that supports nothing, to see how a refusal reads.
struct Nothing;

impl tidewater::runner::Runner for Nothing {
    fn name(&self) -> &'static str {
        "nothing"
    }
    fn capabilities(&self) -> tidewater::runner::Capabilities {
        tidewater::runner::Capabilities::none("this test runner supports nothing")
    }
    fn run(
        &self,
        _: &tidewater::plan::Plan,
        _: &PipelineOptions,
    ) -> tidewater::Result<tidewater::runner::PipelineResult> {
        unreachable!("refused up front")
    }
}

#[test]
fn a_runner_refuses_unsupported_features_up_front_listing_each() {
    setup();
    let p = Pipeline::new(PipelineOptions::for_runner("nothing"));
    p.create("Numbers", vec![1i64])
        .map("Double", double)
        .capture("out");
    insta::assert_snapshot!(p.run().unwrap_err().to_string(), @r"
    runner 'nothing' cannot run this pipeline:
      - Capture (used by 'Capture[out]'): this test runner supports nothing
      - ParDo (used by 'Double'): this test runner supports nothing
      - Create (used by 'Numbers'): this test runner supports nothing
    ");
}

#[test]
fn a_closure_that_captures_is_refused_at_construction_with_a_fix() {
    let p = Pipeline::new(PipelineOptions::default());
    let offset = 3;
    p.create("Numbers", vec![1i64])
        .map("AddOffset", move |x: i64| x + offset);
    let e = p.to_plan().unwrap_err();
    insta::assert_snapshot!(e.to_string(), @"cannot construct transform 'AddOffset': map() was given a closure that captures values (errors::a_closure_that_captures_is_refused_at_construction_with_a_fix::{{closure}}, at runners/direct/tests/errors.rs:182:10). What a closure captures cannot travel in the plan: another process, a saved plan and the plan's hash would not see it. Capture nothing (constants and statics need no capture), or pass them as parameters instead, `map_with(name, params, |params, x| ...)`: params serialize with serde and travel in the plan");
}

/// Serializes without a field that deserializing requires: it cannot cross a shuffle.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Lossy {
    a: i64,
    #[serde(skip_serializing)]
    #[allow(dead_code)] // read through Debug only
    b: i64,
}

fn to_lossy(x: i64) -> Lossy {
    Lossy { a: x, b: x }
}

#[test]
fn an_element_that_does_not_survive_its_coder_is_caught() {
    setup();
    let p = Pipeline::new(options(1));
    p.create("Numbers", vec![5i64])
        .map("ToLossy", to_lossy)
        .capture("out");
    let e = p.run().unwrap_err();
    assert!(matches!(e, Error::Coder { .. }));
    insta::assert_snapshot!(e.to_string(), @"element of transform 'ToLossy' output does not round-trip through its coder: cannot decode tidewater::windowed_value::WindowedValue<errors::Lossy>: Serde Deserialization Error (element Lossy { a: 5, b: 5 })");
}

fn basket(i: i64) -> (std::collections::HashMap<String, i64>, i64) {
    let items = (0..5).map(|k| (format!("item{k}"), k)).collect();
    (items, i)
}

fn signed_zero(i: i64) -> (f64, i64) {
    (if i % 2 == 0 { 0.0 } else { -0.0 }, i)
}

#[test]
fn keys_that_do_not_encode_deterministically_are_refused_before_running() {
    setup();
    // Without the check, the 50 equal HashMap keys formed up to 50 groups, and 0.0 and
    // -0.0 two: refused even with validation off.
    let no_validate = PipelineOptions {
        no_validate: true,
        ..Default::default()
    };
    let p = Pipeline::new(no_validate.clone());
    let xs = p.create("Numbers", (0..50).collect::<Vec<i64>>());
    xs.map("Basket", basket).group_by_key("Group");
    let e = p.run().unwrap_err();
    assert!(matches!(&e, Error::Construction { transform, .. } if transform == "Group"));
    insta::assert_snapshot!(e.to_string(), @"cannot construct transform 'Group': the key type HashMap<String, i64> of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: a HashMap in the key (equal ones encode their entries in different orders: use a BTreeMap instead)");

    let p = Pipeline::new(no_validate);
    let xs = p.create("Numbers", (0..50).collect::<Vec<i64>>());
    xs.map("SignedZero", signed_zero).group_by_key("Group");
    insta::assert_snapshot!(p.run().unwrap_err().to_string(), @"cannot construct transform 'Group': the key type f64 of GroupByKey does not encode deterministically, and keys are grouped by their encoded bytes: f64 at key (floats that are equal can encode differently, as 0.0 and -0.0 do: use an integer, e.g. cents, or the float's bits normalized into an integer)");
}

fn by_parity(i: i64) -> (i64, std::collections::HashMap<String, i64>) {
    (i % 2, basket(i).0)
}

#[test]
fn hash_maps_as_values_are_grouped() {
    setup();
    // With validation on: values need not encode deterministically (a decoded HashMap
    // prints its entries in another order), only keys must.
    let p = Pipeline::new(PipelineOptions {
        seed: Some(4),
        ..Default::default()
    });
    let xs = p.create("Numbers", (0..50).collect::<Vec<i64>>());
    xs.map("ByParity", by_parity)
        .group_by_key("Group")
        .capture("groups");
    let result = p.run().unwrap();
    let mut groups = result
        .captured_values::<(i64, Vec<std::collections::HashMap<String, i64>>)>("groups")
        .unwrap();
    groups.sort_by_key(|(k, _)| *k);
    let sizes: Vec<(i64, usize)> = groups.iter().map(|(k, vs)| (*k, vs.len())).collect();
    assert_eq!(sizes, [(0, 25), (1, 25)]);
    assert!(groups
        .iter()
        .all(|(_, vs)| vs.iter().all(|m| *m == basket(0).0)));
}

#[test]
fn reading_a_capture_by_a_wrong_name_or_type_names_what_there_is() {
    setup();
    let p = Pipeline::new(PipelineOptions::default());
    p.create("Words", vec!["a".to_string()]).capture("out");
    p.create("Numbers", vec![1u64]).capture("numbers");
    let r = p.run().unwrap();
    let e = r.captured_values::<String>("otu").unwrap_err();
    assert!(matches!(e, Error::Capture { .. }), "{e:?}");
    insta::assert_snapshot!(e.to_string(), @"no capture is named 'otu'; the pipeline captures 'numbers' (of u64), 'out' (of alloc::string::String)");
    let e = r.captured_values::<u32>("numbers").unwrap_err();
    insta::assert_snapshot!(e.to_string(), @"capture 'numbers' holds elements of u64, not u32: read it as u64");
}

fn reject_long(s: String) -> String {
    assert!(s.len() < 100, "too long");
    s
}

#[test]
fn a_failing_element_is_named_in_a_couple_of_hundred_characters() {
    setup();
    let p = Pipeline::new(PipelineOptions {
        seed: Some(1),
        ..Default::default()
    });
    p.create("Lines", vec!["y".repeat(5_000)])
        .map("Reject", reject_long)
        .capture("out");
    let e = p.run().unwrap_err().to_string();
    let expected = format!(
        "transform 'Reject' failed in process on element \"{} … (4802 more characters): panicked: too long (direct runner seed 1; rerun with --seed=1 to replay this order)",
        "y".repeat(199)
    );
    assert_eq!(e, expected);
}

#[test]
fn an_unknown_runner_option_is_refused_listing_the_known_ones() {
    setup();
    let p = Pipeline::new(PipelineOptions {
        runner_options: vec![("foo".into(), "bar".into())],
        ..Default::default()
    });
    p.create("Xs", vec![1i64]).capture("out");
    insta::assert_snapshot!(p.run().unwrap_err().to_string(), @r"
    invalid option --runner-option foo=bar: the direct runner has no option 'foo'; its options are:
      bundle_size: largest bundle (default 100 with validation, 10000 without)
      lift_combiners: true|false: combine partially before the shuffle (default true)
      partial_flush_groups: a partial-combine table holding more groups is flushed early (default 100000)
      max_key_groups: number of key groups keyed state is split into (default 128)
      checkpoint_every: every N rounds, snapshot, throw away and restore (rescaled) all state
      commit_every_ms: how often a job without checkpoints commits its sinks (default 1000)
    ");
}

fn explode(x: i64) -> i64 {
    assert!(x != 3, "three is not allowed");
    x
}

/// A panicking DoFn gives one clean error: Rust's own panic message and backtrace are
/// not printed on top of it (checked in a child process, where stderr is visible).
#[test]
fn a_panic_in_user_code_prints_only_the_error() {
    if std::env::var("TIDEWATER_PANIC_CHILD").is_ok() {
        setup();
        let p = Pipeline::new(PipelineOptions {
            seed: Some(1),
            ..Default::default()
        });
        p.create("Xs", vec![1i64, 2, 3])
            .map("Explode", explode)
            .capture("out");
        let e = p.run().unwrap_err();
        eprintln!("error: {e}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_panic_in_user_code_prints_only_the_error",
            "--nocapture",
        ])
        .env("TIDEWATER_PANIC_CHILD", "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("panicked at"), "{stderr}");
    assert!(
        stderr.contains("error: transform 'Explode' failed in process on element 3: panicked: three is not allowed"),
        "{stderr}"
    );
}

/// A stateful DoFn that counts per key and fails on its third "b".
#[derive(Serialize, Deserialize)]
struct CountThenFail {
    panic: bool,
}

impl tidewater::StatefulDoFn for CountThenFail {
    type Key = String;
    type Value = i64;
    type Out = i64;
    fn process(
        &mut self,
        key: &String,
        _v: i64,
        ctx: &mut tidewater::StateContext<'_, i64>,
    ) -> Result<(), UserError> {
        let n = ctx.read_value::<i64>("n")?.unwrap_or(0) + 1;
        ctx.write_value("n", &n)?;
        if key == "b" && n == 3 {
            if self.panic {
                panic!("three of {key}");
            }
            return Err(format!("three of {key}").into());
        }
        ctx.output(n);
        Ok(())
    }
}

#[test]
fn a_failing_stateful_do_fn_names_the_key_it_was_processing() {
    setup();
    for panic in [false, true] {
        let p = Pipeline::new(options(5));
        let keys = ["a", "b", "c", "b", "a", "b", "c"];
        p.create(
            "Keyed",
            keys.iter().map(|k| (k.to_string(), 1i64)).collect(),
        )
        .apply(
            "Count",
            tidewater::StatefulParDo::of(CountThenFail { panic }),
        )
        .capture("out");
        let e = p.run().unwrap_err().to_string();
        let reason = if panic {
            "panicked: three of b"
        } else {
            "three of b"
        };
        assert!(
            e.contains(&format!(
                "transform 'Count' failed in process on element key \"b\": {reason}"
            )),
            "{e}"
        );
    }
}
