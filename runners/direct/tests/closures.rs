//! Closures as light functions: named by their call site, refused when they capture or
//! when two different ones would share a name, and resolved again in a second process
//! of the same binary (this test binary re-executes itself to run a plan it wrote).

use std::collections::BTreeMap;
use tidewater::{
    plan, Create, Duration, ElementContext, Partition, Pipeline, PipelineOptions, Timestamp,
    Trigger, Window, WindowFn, WithTimestamps,
};

fn options() -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions::default()
}

/// The pipeline both processes build: every closure-taking method, a loop over one
/// call site with parameters, and the element's context.
fn build(p: &Pipeline) {
    let lines = p.create(
        "Lines",
        vec![
            "a bb ccc".to_string(),
            "dd e".to_string(),
            "ffff".to_string(),
        ],
    );
    let words = lines.flat_map("Split", |l: String| {
        l.split(' ').map(str::to_string).collect::<Vec<_>>()
    });
    let long = words.filter("Long", |w: &String| w.len() > 1);
    long.map("Len", |w: String| w.len() as i64).capture("lens");
    for min in [2usize, 3] {
        words
            .filter_with(&format!("AtLeast{min}"), min, |min: &usize, w: &String| {
                w.len() >= *min
            })
            .capture(&format!("at_least_{min}"));
    }
    let parts = words.apply(
        "ByParity",
        Partition::of(2, |w: &String, n: usize| w.len() % n),
    );
    parts[1].capture("odd");
    words
        .with_keys("ByLen", |w: &String| w.len())
        .group_by_key("Group")
        .map("Sizes", |(len, ws): (usize, Vec<String>)| (len, ws.len()))
        .capture("sizes");
    words
        .with_timestamps("Stamp", |w: &String| {
            Timestamp::from_millis(w.len() as i64 * 1000)
        })
        .apply(
            "Secs",
            Window::into(WindowFn::fixed(Duration::from_secs(2))),
        )
        .map_with_context("Start", |w: String, c: &ElementContext| {
            (w, c.window().start().millis())
        })
        .capture("starts");
}

/// Where `build` gives its "Split" closure: `file:line:column` of `flat_map`.
fn split_site() -> String {
    let source = include_str!("closures.rs");
    let (line, text) = source
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains(".flat_map(\"Split\""))
        .unwrap();
    let column = text.find("flat_map").unwrap() + 1;
    format!("{}:{}:{column}", file!(), line + 1)
}

/// What `build` captures, sorted, as text.
fn outputs(result: &tidewater::PipelineResult) -> BTreeMap<String, Vec<String>> {
    fn sorted<T: std::fmt::Debug>(v: Vec<T>) -> Vec<String> {
        let mut v: Vec<String> = v.into_iter().map(|x| format!("{x:?}")).collect();
        v.sort();
        v
    }
    let mut out = BTreeMap::new();
    out.insert(
        "lens".into(),
        sorted(result.captured_values::<i64>("lens").unwrap()),
    );
    for k in ["at_least_2", "at_least_3", "odd"] {
        out.insert(
            k.into(),
            sorted(result.captured_values::<String>(k).unwrap()),
        );
    }
    out.insert(
        "sizes".into(),
        sorted(result.captured_values::<(usize, usize)>("sizes").unwrap()),
    );
    out.insert(
        "starts".into(),
        sorted(result.captured_values::<(String, i64)>("starts").unwrap()),
    );
    out
}

#[test]
fn closures_run_and_a_call_site_in_a_loop_takes_its_parameters_from_the_plan() {
    let p = Pipeline::new(options());
    build(&p);
    let out = outputs(&p.run().unwrap());
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(out["lens"], s(&["2", "2", "3", "4"]));
    assert_eq!(
        out["at_least_2"],
        s(&["\"bb\"", "\"ccc\"", "\"dd\"", "\"ffff\""])
    );
    assert_eq!(out["at_least_3"], s(&["\"ccc\"", "\"ffff\""]));
    assert_eq!(out["odd"], s(&["\"a\"", "\"ccc\"", "\"e\""]));
    assert_eq!(out["sizes"], s(&["(1, 2)", "(2, 2)", "(3, 1)", "(4, 1)"]));
    assert_eq!(
        out["starts"],
        s(&[
            "(\"a\", 0)",
            "(\"bb\", 2000)",
            "(\"ccc\", 2000)",
            "(\"dd\", 2000)",
            "(\"e\", 0)",
            "(\"ffff\", 4000)"
        ])
    );
}

#[test]
fn a_closure_is_named_by_its_type_and_call_site_and_parameters_travel_in_the_plan() {
    let p = Pipeline::new(options());
    build(&p);
    let json = plan::encode(&p.to_plan().unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let do_fn = |t: &str| v["components"]["transforms"][t]["spec"]["payload"]["do_fn"].clone();
    let split = do_fn("Split")["name"].as_str().unwrap().to_string();
    assert!(
        split.starts_with(
            "tidewater::primitives::functions::FlatMapFn<closures::build::{{closure}}"
        ),
        "{split}"
    );
    assert!(split.ends_with(&format!("@{}", split_site())), "{split}");
    // One call site, two applications: one name, the parameters in the fields.
    assert_eq!(do_fn("AtLeast2")["name"], do_fn("AtLeast3")["name"]);
    assert_eq!(do_fn("AtLeast2")["fields"], serde_json::json!(2));
    assert_eq!(do_fn("AtLeast3")["fields"], serde_json::json!(3));
    // Building the same pipeline again gives the same plan.
    let again = Pipeline::new(options());
    build(&again);
    assert_eq!(plan::encode(&again.to_plan().unwrap()), json);
}

/// Passes its closure on to `map`: every closure is named by this line.
fn add_one_step<F: Fn(i64) -> i64 + Send + Sync + 'static>(
    p: &Pipeline,
    name: &str,
    f: F,
) -> tidewater::PCollection<i64> {
    p.create(name, vec![1i64]).map(&format!("{name}Map"), f)
}

/// The same, marked `#[track_caller]`: every closure is named by its caller's line.
#[track_caller]
fn add_one_step_tracked<F: Fn(i64) -> i64 + Send + Sync + 'static>(
    p: &Pipeline,
    name: &str,
    f: F,
) -> tidewater::PCollection<i64> {
    p.create(name, vec![1i64]).map(&format!("{name}Map"), f)
}

#[test]
fn two_closures_reaching_map_from_one_place_are_refused_unless_the_helper_tracks_its_caller() {
    let p = Pipeline::new(options());
    add_one_step(&p, "A", |x| x + 1);
    add_one_step(&p, "B", |x| x * 2);
    let errors = p.construction_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("two different functions would both be named")
            && errors[0].contains("#[track_caller]"),
        "{}",
        errors[0]
    );

    let p = Pipeline::new(options());
    add_one_step_tracked(&p, "A", |x| x + 1).capture("a");
    add_one_step_tracked(&p, "B", |x| x * 2).capture("b");
    let result = p.run().unwrap();
    assert_eq!(result.captured_values::<i64>("a").unwrap(), vec![2]);
    assert_eq!(result.captured_values::<i64>("b").unwrap(), vec![2]);
}

#[test]
fn one_closure_given_from_one_place_twice_is_one_function() {
    // A loop; the registry is per process, so no other closure of this function may
    // reach the helper's line, in any pipeline.
    let p = Pipeline::new(options());
    for name in ["C", "D"] {
        add_one_step(&p, name, |x| x + 10).capture(name);
    }
    let result = p.run().unwrap();
    assert_eq!(result.captured_values::<i64>("D").unwrap(), vec![11]);
}

#[test]
fn every_closure_taking_method_refuses_a_closure_that_captures() {
    let p = Pipeline::new(options());
    let k = 2i64;
    let xs = p.create("Xs", vec![1i64]);
    xs.map("M", move |x: i64| x * k);
    xs.flat_map("F", move |x: i64| vec![x * k]);
    xs.filter("Fi", move |x: &i64| *x > k);
    xs.with_keys("K", move |x: &i64| *x + k);
    xs.with_timestamps("T", move |x: &i64| Timestamp(*x + k));
    xs.apply(
        "P",
        Partition::of(2, move |x: &i64, _| (*x + k) as usize % 2),
    );
    xs.map_with_context("C", move |x: i64, _: &ElementContext| x + k);
    xs.map_with("W", 1i64, move |a: &i64, x: i64| x + a + k);
    let errors = p.construction_errors();
    assert_eq!(errors.len(), 8, "{errors:#?}");
    for (e, method) in errors.iter().zip([
        "map()",
        "flat_map()",
        "filter()",
        "with_keys()",
        "with_timestamps()",
        "Partition::of()",
        "map_with_context()",
        "map_with()",
    ]) {
        assert!(
            e.contains(&format!(
                "{method} was given a closure that captures values"
            )),
            "{e}"
        );
    }
}

#[test]
fn with_timestamps_moves_an_element_back_only_within_the_allowed_skew() {
    let build = |skew: Duration| {
        let p = Pipeline::new(options());
        p.apply(
            "Xs",
            Create::timestamped(vec![(7i64, Timestamp::from_millis(10_000))]),
        )
        .apply(
            "Back",
            WithTimestamps::of(|x: &i64| Timestamp::from_millis(x * 1000))
                .with_allowed_timestamp_skew(skew),
        )
        .capture("xs");
        p
    };
    let ok = build(Duration::from_secs(3)).run().unwrap();
    assert_eq!(
        ok.captured::<i64>("xs").unwrap()[0].timestamp,
        Timestamp(7000)
    );
    let err = build(Duration::from_secs(2)).run().unwrap_err().to_string();
    assert!(
        err.contains("by more than the allowed skew of 2000ms"),
        "{err}"
    );
    // The skew travels in the plan.
    let json = plan::encode(&build(Duration::from_secs(3)).to_plan().unwrap());
    assert!(
        json.contains("\"allowed_timestamp_skew_ms\": 3000"),
        "{json}"
    );
}

#[test]
fn a_trigger_given_as_the_builder_or_as_a_trigger_is_the_same_plan() {
    let p = Pipeline::new(options());
    let xs = p.create("Xs", vec![1i64]);
    xs.apply(
        "A",
        Window::into(WindowFn::fixed(Duration::from_secs(1)))
            .triggering(Trigger::after_watermark().with_late_firings(Trigger::after_count(1))),
    );
    xs.apply(
        "B",
        Window::into(WindowFn::fixed(1000)).triggering(Trigger::AfterWatermark {
            early: None,
            late: Some(Box::new(Trigger::after_count(1))),
        }),
    );
    let json = plan::encode(&p.to_plan().unwrap());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let ws = &v["components"]["windowing_strategies"];
    assert_eq!(ws.as_object().unwrap().len(), 2, "{ws}"); // global and one fixed
}

/// The environment variable that makes this binary the second process.
const CHILD_PLAN: &str = "TIDEWATER_CLOSURES_CHILD_PLAN";

/// In the second process: build the same pipeline (which registers its closures),
/// then run the plan the first process wrote, and print what it captured.
#[test]
fn child_runs_a_saved_plan() {
    let Ok(path) = std::env::var(CHILD_PLAN) else {
        return; // Only as a child.
    };
    let p = Pipeline::new(options());
    build(&p);
    let json = std::fs::read_to_string(&path).unwrap();
    match tidewater::run_plan_json(&json, p.options()) {
        Ok(result) => println!(
            "CHILD-OUTPUT {}",
            serde_json::to_string(&outputs(&result)).unwrap()
        ),
        Err(e) => println!("CHILD-ERROR {e}"),
    }
}

fn run_child(plan_path: &std::path::Path) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_runs_a_saved_plan",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_PLAN, plan_path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.find("CHILD-").map(|i| l[i..].to_string()))
        .unwrap_or_else(|| panic!("the child printed no result: {stdout}"))
}

#[test]
fn a_plan_of_closures_built_in_one_process_runs_in_another_and_an_unknown_closure_is_refused() {
    let dir = std::env::temp_dir().join(format!("tidewater-closures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = Pipeline::new(options());
    build(&p);
    let here = outputs(&p.run().unwrap());
    let json = plan::encode(&p.to_plan().unwrap());
    let path = dir.join("plan.json");
    std::fs::write(&path, &json).unwrap();
    let there = run_child(&path);
    assert_eq!(
        there,
        format!("CHILD-OUTPUT {}", serde_json::to_string(&here).unwrap())
    );

    // The same plan with a closure's line moved: the binary has no closure there.
    let moved = json.replacen(
        &format!("@{}", split_site()),
        &format!("@{}:999:9", file!()),
        1,
    );
    assert_ne!(moved, json);
    let path = dir.join("moved.json");
    std::fs::write(&path, &moved).unwrap();
    let refused = run_child(&path);
    assert!(refused.starts_with("CHILD-ERROR unknown DoFn"), "{refused}");
    assert!(
        refused.contains(&format!(
            "The plan names a closure by the place it was given ({}:999:9)",
            file!()
        )),
        "{refused}"
    );
    assert!(
        refused.contains("every process must build the same pipeline"),
        "{refused}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
