use super::Plan;

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
    serde_json::to_string_pretty(plan).expect("a plan always serializes: its maps have string keys")
}
