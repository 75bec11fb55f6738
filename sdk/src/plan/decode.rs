use super::{Plan, PLAN_VERSION};
use crate::{Error, Result};

/// Reads a plan from JSON and checks that it is complete: the version matches and
/// every id it uses is defined.
///
/// ```
/// let e = tidewater::plan::decode("{\"version\": 9}").unwrap_err();
/// assert_eq!(e.to_string(), "plan format version 9 is not supported: this binary reads version 1");
/// ```
pub fn decode(json: &str) -> Result<Plan> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| Error::MalformedPlan {
            message: e.to_string(),
        })?;
    match value.get("version") {
        None => {
            return Err(Error::MalformedPlan {
                message: "missing field `version` at the top level".into(),
            })
        }
        Some(v) => match v.as_u64() {
            Some(PLAN_VERSION) => {}
            Some(found) => {
                return Err(Error::PlanVersion {
                    found,
                    supported: PLAN_VERSION,
                })
            }
            None => {
                return Err(Error::MalformedPlan {
                    message: format!("field `version` must be an unsigned integer, found {v}"),
                })
            }
        },
    }
    let plan: Plan = serde_json::from_str(json).map_err(|e| Error::MalformedPlan {
        message: e.to_string(),
    })?;
    check_references(&plan)?;
    Ok(plan)
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
                return invalid(format!("transform '{id}' refers to PCollection '{pc}' (as '{name}'), which is not defined"));
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
        if let Some(env) = &t.environment_id {
            if !c.environments.contains_key(env) {
                return invalid(format!(
                    "transform '{id}' uses environment '{env}', which is not defined"
                ));
            }
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
                return invalid(format!("transform '{id}' consumes PCollection '{pc}', which no primitive transform produces"));
            }
        }
    }
    Ok(())
}
