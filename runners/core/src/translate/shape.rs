//! The shape a decoded node must have: how many inputs and outputs its kind takes, and
//! that their element types fit its functions.

use super::*;

/// Checks arity and element types of a node against its PCollections.
pub(super) fn check_shape(n: &Node, pcs: &[PCollectionInfo]) -> Result<()> {
    let ty = |i: usize| pcs[i].element_type.name();
    let arity = |ins: usize, outs: Option<usize>| -> Result<()> {
        if n.inputs.len() != ins || outs.is_some_and(|o| n.outputs.len() != o) {
            return Err(invalid(format!(
                "transform '{}' has {} inputs and {} outputs, which its kind does not allow",
                n.name,
                n.inputs.len(),
                n.outputs.len()
            )));
        }
        Ok(())
    };
    let mismatch = |what: &str, want: &str, got: &str| {
        Err(invalid(format!(
            "transform '{}': {what} is a PCollection of {got}, but its function expects {want}",
            n.name
        )))
    };
    match &n.kind {
        NodeKind::Impulse => {
            arity(0, Some(1))?;
            if ty(n.outputs[0]) != "()" {
                return mismatch("the output", "()", ty(n.outputs[0]));
            }
        }
        NodeKind::TestStream { events } => {
            arity(0, Some(1))?;
            for e in events.iter() {
                if let tidewater::TestStreamEvent::Elements(values) = e {
                    let json: Vec<Json> = values.iter().map(|(v, _)| v.clone()).collect();
                    pcs[n.outputs[0]]
                        .element_type
                        .batch_from_json(&json)
                        .map_err(|m| invalid(format!("TestStream '{}': {m}", n.name)))?;
                }
            }
        }
        NodeKind::Stateful { .. } => {
            arity(1, Some(1))?;
            let f = n.instantiate_stateful()?;
            if f.input_type() != ty(n.inputs[0]) {
                return mismatch("the input", f.input_type(), ty(n.inputs[0]));
            }
            if f.output_type() != ty(n.outputs[0]) {
                return mismatch("the output", f.output_type(), ty(n.outputs[0]));
            }
        }
        NodeKind::Read { .. } => {
            arity(0, Some(1))?;
            let s = n.instantiate_source()?;
            if s.output_type() != ty(n.outputs[0]) {
                return mismatch("the output", s.output_type(), ty(n.outputs[0]));
            }
        }
        NodeKind::WindowInto { .. } => {
            arity(1, Some(1))?;
            if ty(n.inputs[0]) != ty(n.outputs[0]) {
                return mismatch("the output", ty(n.inputs[0]), ty(n.outputs[0]));
            }
        }
        NodeKind::Create { elements } => {
            arity(0, Some(1))?;
            pcs[n.outputs[0]]
                .element_type
                .batch_from_json(elements)
                .map_err(|m| invalid(format!("Create '{}': {m}", n.name)))?;
        }
        NodeKind::Capture { .. } => arity(1, Some(0))?,
        NodeKind::Sink { .. } => {
            arity(1, Some(0))?;
            let s = n.instantiate_sink()?;
            if s.input_type() != ty(n.inputs[0]) {
                return mismatch("the input", s.input_type(), ty(n.inputs[0]));
            }
        }
        NodeKind::Flatten => {
            if n.inputs.is_empty() || n.outputs.len() != 1 {
                return arity(1, Some(1));
            }
            for &i in &n.inputs {
                if ty(i) != ty(n.outputs[0]) {
                    return mismatch("an input", ty(n.outputs[0]), ty(i));
                }
            }
        }
        NodeKind::ParDo { side_inputs, .. } => {
            arity(1 + side_inputs.len(), None)?;
            if n.outputs.is_empty() {
                return arity(1, Some(1));
            }
            let f = n.instantiate(pcs)?;
            if f.input_type() != ty(n.inputs[0]) {
                return mismatch("the input", f.input_type(), ty(n.inputs[0]));
            }
            if f.output_type() != ty(n.outputs[0]) {
                return mismatch("the main output", f.output_type(), ty(n.outputs[0]));
            }
        }
        NodeKind::Grouping { ops } => {
            arity(1, Some(1))?;
            if ops.input_type() != ty(n.inputs[0]) {
                return mismatch("the input", ops.input_type(), ty(n.inputs[0]));
            }
            if ops.output_type() != ty(n.outputs[0]) {
                return mismatch("the output", ops.output_type(), ty(n.outputs[0]));
            }
        }
    }
    Ok(())
}
