use super::{FunctionSpec, PLAN_VERSION, Plan, WindowingStrategySpec, urn};
use crate::{Error, Result};
use crate::{WindowFn, WindowingStrategy};

/// Reads a plan from JSON and checks that it is complete: the version matches and
/// every id it uses is defined.
///
/// ```
/// let e = tidewater::plan::decode("{\"version\": 9}").unwrap_err();
/// assert_eq!(e.to_string(), "plan format version 9 is not supported: this binary reads version 1");
/// ```
pub fn decode(json: &str) -> Result<Plan> {
    check_limits(json)?;
    // The version first, so that another version's plan is not refused for its shape;
    // read without building the document (unknown fields are skipped).
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow, default)]
        version: Option<&'a serde_json::value::RawValue>,
    }
    let malformed = |e: serde_json::Error| Error::MalformedPlan {
        message: e.to_string(),
    };
    // (A derived struct also reads an array: only an object has a `version` field.)
    let version = if json.trim_start().starts_with('{') {
        match serde_json::from_str::<Probe>(json) {
            Ok(probe) => probe.version,
            Err(e) if e.is_data() => None,
            Err(e) => return Err(malformed(e)),
        }
    } else {
        serde_json::from_str::<serde::de::IgnoredAny>(json).map_err(malformed)?;
        None
    };
    match version {
        None => {
            return Err(Error::MalformedPlan {
                message: "missing field `version` at the top level".into(),
            });
        }
        Some(v) => match serde_json::from_str::<u64>(v.get()) {
            Ok(PLAN_VERSION) => {}
            Ok(found) => {
                return Err(Error::PlanVersion {
                    found,
                    supported: PLAN_VERSION,
                });
            }
            Err(_) => {
                return Err(Error::MalformedPlan {
                    message: format!(
                        "field `version` must be an unsigned integer, found {}",
                        v.get()
                    ),
                });
            }
        },
    }
    let plan: Plan = serde_json::from_str(json).map_err(|e| Error::MalformedPlan {
        message: e.to_string(),
    })?;
    check_references(&plan)?;
    Ok(plan)
}

/// The largest plan decoded, in bytes.
pub const MAX_PLAN_BYTES: usize = 64 << 20;
/// The deepest nesting of arrays and objects in a plan (a function's fields included).
pub const MAX_PLAN_DEPTH: usize = 128;

/// Refuses a plan over [`MAX_PLAN_BYTES`] or nesting deeper than [`MAX_PLAN_DEPTH`],
/// before anything is built from it: a plan comes from outside the process, and a
/// function's fields are kept as raw JSON, which nests without limit (10,000 levels
/// took 600 MB to hash).
///
/// ```
/// let deep = format!("{{\"version\": 1, \"x\": {}{}}}", "[".repeat(200), "]".repeat(200));
/// let e = tidewater::plan::decode(&deep).unwrap_err().to_string();
/// assert!(e.contains("nests arrays and objects deeper than 128 levels (at line 1, column 148)"), "{e}");
/// ```
fn check_limits(json: &str) -> Result<()> {
    if json.len() > MAX_PLAN_BYTES {
        return Err(Error::MalformedPlan {
            message: format!(
                "the plan is {} bytes, over the limit of {MAX_PLAN_BYTES}",
                json.len()
            ),
        });
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, b) in json.bytes().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_PLAN_DEPTH {
                    let before = &json[..i];
                    let line = before.matches('\n').count() + 1;
                    let column = i - before.rfind('\n').map_or(0, |n| n + 1) + 1;
                    return Err(Error::MalformedPlan {
                        message: format!(
                            "the plan nests arrays and objects deeper than {MAX_PLAN_DEPTH} levels (at line {line}, column {column})"
                        ),
                    });
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn check_references(plan: &Plan) -> Result<()> {
    let c = &plan.components;
    let invalid = |message: String| Err(Error::InvalidPlan { message });
    for id in &plan.root_transform_ids {
        if !c.transforms.contains_key(id) {
            return invalid(format!("root transform '{id}' is not among the transforms"));
        }
    }
    let mut parent = std::collections::BTreeMap::new();
    for (id, t) in &c.transforms {
        if *id != t.unique_name {
            return invalid(format!(
                "transform id '{id}' differs from its unique name '{}'",
                t.unique_name
            ));
        }
        for sub in &t.subtransforms {
            if let Some(other) = parent.insert(sub.as_str(), id.as_str()) {
                return invalid(format!(
                    "transform '{sub}' is a subtransform of both '{other}' and '{id}'"
                ));
            }
        }
        for (name, pc) in t.inputs.iter().chain(t.outputs.iter()) {
            if !c.pcollections.contains_key(pc) {
                return invalid(format!(
                    "transform '{id}' refers to PCollection '{pc}' (as '{name}'), which is not defined"
                ));
            }
        }
        for sub in &t.subtransforms {
            if !c.transforms.contains_key(sub) {
                return invalid(format!(
                    "transform '{id}' has subtransform '{sub}', which is not defined"
                ));
            }
            if sub == id {
                return invalid(format!("transform '{id}' contains itself"));
            }
        }
        if t.spec.is_some() && !t.subtransforms.is_empty() {
            return invalid(format!(
                "transform '{id}' is both a primitive and a composite"
            ));
        }
        if let Some(env) = &t.environment_id
            && !c.environments.contains_key(env)
        {
            return invalid(format!(
                "transform '{id}' uses environment '{env}', which is not defined"
            ));
        }
    }
    for (id, pc) in &c.pcollections {
        if !c.coders.contains_key(&pc.coder_id) {
            return invalid(format!(
                "PCollection '{id}' uses coder '{}', which is not defined",
                pc.coder_id
            ));
        }
        if !c
            .windowing_strategies
            .contains_key(&pc.windowing_strategy_id)
        {
            return invalid(format!(
                "PCollection '{id}' uses windowing strategy '{}', which is not defined",
                pc.windowing_strategy_id
            ));
        }
    }
    for (id, coder) in &c.coders {
        for comp in &coder.component_coder_ids {
            if !c.coders.contains_key(comp) {
                return invalid(format!(
                    "coder '{id}' has component coder '{comp}', which is not defined"
                ));
            }
        }
    }
    for (id, ws) in &c.windowing_strategies {
        if !c.coders.contains_key(&ws.window_coder_id) {
            return invalid(format!(
                "windowing strategy '{id}' uses window coder '{}', which is not defined",
                ws.window_coder_id
            ));
        }
    }
    // Every PCollection has exactly one producer among the primitives.
    let mut producer = std::collections::BTreeMap::new();
    for (id, t) in &c.transforms {
        if t.spec.is_none() {
            continue;
        }
        for pc in t.outputs.values() {
            if let Some(other) = producer.insert(pc.as_str(), id.as_str()) {
                return invalid(format!(
                    "PCollection '{pc}' is produced by both '{other}' and '{id}'"
                ));
            }
        }
    }
    for (id, t) in &c.transforms {
        if t.spec.is_none() {
            continue;
        }
        for pc in t.inputs.values() {
            if !producer.contains_key(pc.as_str()) {
                return invalid(format!(
                    "transform '{id}' consumes PCollection '{pc}', which no primitive transform produces"
                ));
            }
        }
    }
    Ok(())
}

fn enum_from<T: serde::de::DeserializeOwned>(what: &str, id: &str, s: &str) -> Result<T> {
    use serde::de::IntoDeserializer;
    let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> = s.into_deserializer();
    T::deserialize(de).map_err(|_| Error::InvalidPlan {
        message: format!(
            "windowing strategy '{id}' has {what} '{s}', which is not one this binary knows"
        ),
    })
}

/// Reads a WindowFn spec.
pub fn window_fn_from_spec(spec: &FunctionSpec, id: &str) -> Result<WindowFn> {
    let bad = |e: serde_json::Error| Error::InvalidPlan {
        message: format!("window fn of '{id}' ({}) is malformed: {e}", spec.urn),
    };
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Fixed {
        size_ms: i64,
        offset_ms: i64,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sliding {
        size_ms: i64,
        period_ms: i64,
        offset_ms: i64,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Sessions {
        gap_ms: i64,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Custom {
        name: String,
        fields: super::Json,
        merging: bool,
        #[serde(default)]
        element_type: Option<String>,
    }
    let p = &spec.payload;
    let w = match spec.urn.as_str() {
        urn::GLOBAL_WINDOWS => WindowFn::Global,
        urn::FIXED_WINDOWS => {
            let f: Fixed = p.parse().map_err(bad)?;
            WindowFn::Fixed {
                size_ms: f.size_ms,
                offset_ms: f.offset_ms,
            }
        }
        urn::SLIDING_WINDOWS => {
            let f: Sliding = p.parse().map_err(bad)?;
            WindowFn::Sliding {
                size_ms: f.size_ms,
                period_ms: f.period_ms,
                offset_ms: f.offset_ms,
            }
        }
        urn::SESSION_WINDOWS => WindowFn::Sessions {
            gap_ms: p.parse::<Sessions>().map_err(bad)?.gap_ms,
        },
        urn::CUSTOM_WINDOWS => {
            let f: Custom = p.parse().map_err(bad)?;
            WindowFn::Custom {
                name: f.name,
                fields: f.fields,
                merging: f.merging,
                element_type: f.element_type,
            }
        }
        other => {
            return Err(Error::InvalidPlan {
                message: format!("window fn of '{id}' has unknown URN '{other}'"),
            });
        }
    };
    w.validate().map_err(|m| Error::InvalidPlan {
        message: format!("window fn of '{id}': {m}"),
    })?;
    Ok(w)
}

/// Reads a windowing strategy; `id` names it in errors.
pub fn windowing_from_spec(spec: &WindowingStrategySpec, id: &str) -> Result<WindowingStrategy> {
    let window_fn = window_fn_from_spec(&spec.window_fn, id)?;
    let trigger: crate::Trigger = spec.trigger.parse().map_err(|e| Error::InvalidPlan {
        message: format!("trigger of windowing strategy '{id}' is malformed: {e}"),
    })?;
    trigger.validate().map_err(|m| Error::InvalidPlan {
        message: format!("trigger of windowing strategy '{id}': {m}"),
    })?;
    if spec.allowed_lateness_ms < 0 {
        return Err(Error::InvalidPlan {
            message: format!(
                "windowing strategy '{id}' has negative allowed lateness {}",
                spec.allowed_lateness_ms
            ),
        });
    }
    Ok(WindowingStrategy {
        window_fn,
        trigger,
        accumulation_mode: enum_from("accumulation mode", id, &spec.accumulation_mode)?,
        allowed_lateness_ms: spec.allowed_lateness_ms,
        timestamp_combiner: enum_from("output time", id, &spec.output_time)?,
        closing_behavior: enum_from("closing behavior", id, &spec.closing_behavior)?,
        on_time_behavior: enum_from("on-time behavior", id, &spec.on_time_behavior)?,
    })
}
