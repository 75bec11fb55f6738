use super::{FunctionSpec, Plan, WindowingStrategySpec, urn};
use crate::{WindowFn, WindowingStrategy};

/// The plan as pretty-printed JSON. Maps are ordered, so the same pipeline gives the
/// same bytes.
///
/// ```
/// let p = tidewater::Pipeline::new(Default::default());
/// p.create("Numbers", vec![1i64, 2]);
/// let json = tidewater::plan::encode(&p.to_plan().unwrap());
/// assert!(json.contains("\"version\": 1"));
/// ```
pub fn encode(plan: &Plan) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, super::json::Pretty::new());
    plan.serialize(&mut ser)
        .expect("a plan always serializes: its maps have string keys");
    String::from_utf8(out).expect("JSON is UTF-8")
}

fn enum_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => unreachable!("unit enums serialize to strings, got {other:?}"),
    }
}

/// A WindowFn as the plan's function spec.
pub fn window_fn_to_spec(w: &WindowFn) -> FunctionSpec {
    use serde_json::json;
    let (u, payload) = match w {
        WindowFn::Global => (urn::GLOBAL_WINDOWS, serde_json::Value::Null),
        WindowFn::Fixed { size_ms, offset_ms } => (
            urn::FIXED_WINDOWS,
            json!({ "size_ms": size_ms, "offset_ms": offset_ms }),
        ),
        WindowFn::Sliding {
            size_ms,
            period_ms,
            offset_ms,
        } => (
            urn::SLIDING_WINDOWS,
            json!({ "size_ms": size_ms, "period_ms": period_ms, "offset_ms": offset_ms }),
        ),
        WindowFn::Sessions { gap_ms } => (urn::SESSION_WINDOWS, json!({ "gap_ms": gap_ms })),
        WindowFn::Custom {
            name,
            fields,
            merging,
            element_type: None,
        } => (
            urn::CUSTOM_WINDOWS,
            json!({ "name": name, "fields": fields, "merging": merging }),
        ),
        WindowFn::Custom {
            name,
            fields,
            merging,
            element_type: Some(t),
        } => (
            urn::CUSTOM_WINDOWS,
            json!({ "name": name, "fields": fields, "merging": merging, "element_type": t }),
        ),
    };
    FunctionSpec {
        urn: u.into(),
        payload: payload.into(),
    }
}

/// A windowing strategy as the plan's component.
pub fn windowing_to_spec(
    w: &WindowingStrategy,
    window_coder_id: &str,
    environment_id: &str,
) -> WindowingStrategySpec {
    WindowingStrategySpec {
        window_fn: window_fn_to_spec(&w.window_fn),
        merge_status: if w.window_fn.is_merging() {
            "NEEDS_MERGE"
        } else {
            "NON_MERGING"
        }
        .into(),
        window_coder_id: window_coder_id.into(),
        trigger: super::Json::of(&w.trigger).expect("triggers serialize"),
        accumulation_mode: enum_name(&w.accumulation_mode),
        output_time: enum_name(&w.timestamp_combiner),
        closing_behavior: enum_name(&w.closing_behavior),
        on_time_behavior: enum_name(&w.on_time_behavior),
        allowed_lateness_ms: w.allowed_lateness_ms,
        environment_id: environment_id.into(),
    }
}
