//! Link-time registration works in a test binary for every kind `tidewater::register!`
//! takes: a name this binary never applied resolves from its fields alone, registering
//! the function and its element types; wrong fields are an error that says why.

use serde::{Deserialize, Serialize};
use tidewater::registry;
use tidewater::{
    BoundedWindow, CombineFn, CustomWindowFn, DoFn, ElementWindowFn, ProcessContext, ReadStatus,
    Sink, StateContext, StatefulDoFn, Timestamp, Txn, UserError, WindowedValue,
};

#[derive(Serialize, Deserialize)]
pub struct Twice {
    factor: i64,
}
tidewater::register!(DoFn Twice);
impl DoFn for Twice {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        ctx.output(x * self.factor);
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
pub struct Tally;
tidewater::register!(StatefulDoFn Tally);
impl StatefulDoFn for Tally {
    type Key = u8;
    type Value = u16;
    type Out = u32;
    fn process(&mut self, _: &u8, _: u16, _: &mut StateContext<'_, u32>) -> Result<(), UserError> {
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
pub struct Nothing;
tidewater::register!(Source Nothing);
impl tidewater::Source for Nothing {
    type Output = i8;
    type Position = ();
    fn is_bounded(&self) -> bool {
        true
    }
    fn initial_position(&self, _: usize, _: usize) {}
    fn read(
        &mut self,
        _: usize,
        _: usize,
        _: &mut (),
        _: usize,
        _: Timestamp,
        _: &mut Vec<(i8, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        Ok(ReadStatus::Done)
    }
    fn watermark(&self, _: usize, _: usize, _: &()) -> Timestamp {
        Timestamp::MAX
    }
}

#[derive(Serialize, Deserialize)]
pub struct Discard;
tidewater::register!(Sink Discard);
impl Sink for Discard {
    type In = u64;
    fn write(&mut self, _: &Txn, _: Vec<WindowedValue<u64>>) -> Result<(), UserError> {
        Ok(())
    }
    fn stage(&mut self, _: &Txn) -> Result<(), UserError> {
        Ok(())
    }
    fn commit(&mut self, _: &Txn) -> Result<(), UserError> {
        Ok(())
    }
    fn abort(&mut self, _: &Txn) -> Result<(), UserError> {
        Ok(())
    }
}

#[derive(Serialize, Deserialize)]
pub struct Whole;
tidewater::register!(WindowFn Whole);
impl CustomWindowFn for Whole {
    type Window = BoundedWindow;
    fn assign(&self, _: Timestamp) -> Vec<BoundedWindow> {
        vec![BoundedWindow::Global]
    }
}

/// A WindowFn that sees its elements: a window per value, linked with its element type.
#[derive(Serialize, Deserialize)]
pub struct PerValue;
tidewater::register!(WindowFn PerValue for (char, i32));
impl ElementWindowFn<(char, i32)> for PerValue {
    type Window = BoundedWindow;
    fn assign(&self, e: &(char, i32), _: Timestamp) -> Vec<BoundedWindow> {
        let start = Timestamp(i64::from(e.1));
        vec![BoundedWindow::Interval {
            start,
            end: Timestamp(start.millis() + 1),
        }]
    }
}

fn link(name: &str, fields: &str) -> Result<bool, String> {
    registry::link(name, &mut serde_json::Deserializer::from_str(fields))
}

#[test]
fn every_kind_links_in_a_test_binary() {
    let name = std::any::type_name::<Twice>();
    assert_eq!(name, "linked::Twice");
    assert!(!registry::has_do_fn(name));
    assert_eq!(link(name, r#"{"factor": 2}"#), Ok(true));
    assert!(registry::has_do_fn(name));
    assert!(registry::element_type("i64").is_some());
    assert_eq!(link("linked::Tally", "null"), Ok(true));
    assert!(registry::stateful_do_fn("linked::Tally").is_some());
    assert!(registry::element_type("(u8, u16)").is_some());
    assert_eq!(link("linked::Nothing", "null"), Ok(true));
    assert!(registry::source("linked::Nothing").is_some());
    assert_eq!(link("linked::Discard", "null"), Ok(true));
    assert!(registry::sink("linked::Discard").is_some());
    assert_eq!(link("linked::Whole", "null"), Ok(true));
    assert!(registry::window_fn("linked::Whole").is_some());
    assert!(registry::element_type("(char, i32)").is_none());
    assert_eq!(link("linked::PerValue", "null"), Ok(true));
    assert!(registry::window_fn("linked::PerValue").is_some());
    assert!(registry::element_type("(char, i32)").is_some());
    // Not linked: left to the caller to report.
    assert_eq!(link("linked::Missing", "null"), Ok(false));
    assert_eq!(link("linked::Twice<u8>", "null"), Ok(false));
}

#[derive(Serialize, Deserialize)]
pub struct Scaled {
    factor: i64,
}
tidewater::register!(DoFn Scaled);
impl DoFn for Scaled {
    type In = i64;
    type Out = i64;
    fn process(&mut self, x: i64, ctx: &mut ProcessContext<'_, i64>) -> Result<(), UserError> {
        ctx.output(x * self.factor);
        Ok(())
    }
}

#[test]
fn fields_that_do_not_decode_say_why() {
    let e = link("linked::Scaled", r#"{"factor": "two"}"#).unwrap_err();
    assert!(
        e.contains("invalid type: string \"two\", expected i64"),
        "{e}"
    );
    assert!(!registry::has_do_fn("linked::Scaled"));
}

#[derive(Serialize, Deserialize)]
pub struct Longest {
    at_least: usize,
}
tidewater::register!(CombineFn Longest keys: String, (u8, u16));
impl CombineFn for Longest {
    type In = String;
    type Acc = usize;
    type Out = usize;
    fn create_accumulator(&self) -> usize {
        self.at_least
    }
    fn add_input(&self, acc: &mut usize, s: String) {
        *acc = (*acc).max(s.len());
    }
    fn merge_accumulators(&self, acc: &mut usize, other: usize) {
        *acc = (*acc).max(other);
    }
    fn extract_output(&self, acc: usize) -> usize {
        acc
    }
}

#[test]
fn a_linked_combine_fn_registers_its_groupings_for_the_keys_it_names() {
    let combine = "tidewater::primitives::combine::CombineOps";
    let globally = format!("{combine}<tidewater::primitives::combine::Globally, linked::Longest>");
    let per_key = |k: &str| {
        format!("{combine}<tidewater::primitives::combine::PerKey<{k}>, linked::Longest>")
    };
    assert_eq!(registry::combine_fn_of(&globally), Some("linked::Longest"));
    assert!(registry::grouping(&globally).is_none());
    assert_eq!(link("linked::Longest", r#"{"at_least": 1}"#), Ok(true));
    assert!(registry::grouping(&globally).is_some());
    assert!(registry::grouping(&per_key("alloc::string::String")).is_some());
    assert!(registry::grouping(&per_key("(u8, u16)")).is_some());
    assert!(registry::grouping(&per_key("u64")).is_none());
    assert!(registry::element_type("(alloc::string::String, usize)").is_some());
}
