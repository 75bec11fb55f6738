//! Bad plans give typed errors whose messages name what is wrong and where.

use tidewater::plan::decode;
use tidewater::{Error, Pipeline};

fn small_plan_json() -> String {
    fn double(x: i64) -> i64 {
        2 * x
    }
    let p = Pipeline::new(Default::default());
    p.create("Numbers", vec![1i64, 2])
        .map("Double", double)
        .capture("out");
    tidewater::plan::encode(&p.to_plan().unwrap())
}

fn message(json: &str) -> String {
    decode(json).unwrap_err().to_string()
}

#[test]
fn a_valid_plan_round_trips() {
    let json = small_plan_json();
    let plan = decode(&json).unwrap();
    assert_eq!(tidewater::plan::encode(&plan), json);
}

#[test]
fn malformed_json_names_line_and_column() {
    assert!(matches!(
        decode("{\"version\": 1,"),
        Err(Error::MalformedPlan { .. })
    ));
    insta::assert_snapshot!(message("{\"version\": 1,"), @"malformed plan: EOF while parsing a value at line 1 column 14");
    insta::assert_snapshot!(message("[1, 2]"), @"malformed plan: missing field `version` at the top level");
}

#[test]
fn another_version_is_refused() {
    let json = small_plan_json().replacen("\"version\": 1", "\"version\": 2", 1);
    assert!(matches!(
        decode(&json),
        Err(Error::PlanVersion {
            found: 2,
            supported: 1
        })
    ));
    insta::assert_snapshot!(message(&json), @"plan format version 2 is not supported: this binary reads version 1");
    insta::assert_snapshot!(message("{\"version\": \"one\"}"), @r#"malformed plan: field `version` must be an unsigned integer, found "one""#);
}

#[test]
fn unknown_and_missing_fields_are_named() {
    let json = small_plan_json().replacen("\"root_transform_ids\"", "\"roots\"", 1);
    insta::assert_snapshot!(message(&json), @"malformed plan: unknown field `roots`, expected one of `version`, `components`, `root_transform_ids` at line 106 column 9");
}

#[test]
fn dangling_references_are_named() {
    let json = small_plan_json().replacen("\"coder_id\": \"i64\"", "\"coder_id\": \"nope\"", 1);
    insta::assert_snapshot!(message(&json), @"invalid plan: PCollection 'Double.main' uses coder 'nope', which is not defined");
    let json = small_plan_json().replacen(
        "\"input\": \"Numbers.main\"",
        "\"input\": \"Ghost.main\"",
        1,
    );
    insta::assert_snapshot!(message(&json), @"invalid plan: transform 'Double' refers to PCollection 'Ghost.main' (as 'input'), which is not defined");
}

/// A plan is untrusted: a function's fields nested 100,000 levels deep (a 200 KB file)
/// made the plan hash allocate 3.2 GB and abort; 10,000 took 600 MB. Nesting anywhere
/// past the limit is refused before anything is built, naming the limit and where it
/// was passed.
#[test]
fn a_plan_nested_too_deep_is_refused_naming_the_limit_and_the_place() {
    let json = small_plan_json();
    let depth = 100_000;
    // Anywhere in the plan (a function's fields are raw JSON, kept as they are).
    let deep = format!(
        "{{\"deep\": {}1{}, {}",
        "[".repeat(depth),
        "]".repeat(depth),
        &json[1..]
    );
    let e = message(&deep);
    assert!(
        e.starts_with(
            "malformed plan: the plan nests arrays and objects deeper than 128 levels (at line "
        ),
        "{e}"
    );
}
