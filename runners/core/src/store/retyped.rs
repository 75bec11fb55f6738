//! A stateful DoFn's cell whose declared type changed restores when every value the
//! checkpoint holds for it reads as the new type (the cell's [`tidewater::CellReader`]):
//! the report of what restoring does ([`crate::compat::Report`]) is checked against
//! the checkpoint's bytes here, before a run starts or is refused.

use super::{Manifest, Store};
use crate::compat::{PlanIdentity, Report, StateId, Verdict};
use crate::snapshot::{Scope, Snapshot};
use crate::state::CellContents;
use tidewater::{Error, Result};

impl Store {
    /// What restoring checkpoint `manifest` into `plan` does with each state id; a
    /// retyped cell is read from the checkpoint's files to see whether its values read
    /// as their new type.
    pub fn report(&self, manifest: &Manifest, plan: &PlanIdentity) -> Result<Report> {
        let what = format!("checkpoint {} in {}", manifest.epoch, self.dir.display());
        let mut report = plan
            .report(manifest.plan_hash, manifest.state.as_deref(), &what)
            .map_err(|message| Error::Checkpoint { message })?;
        if report
            .entries
            .iter()
            .any(|(_, v)| matches!(v, Verdict::Retyped { .. }))
        {
            let snapshot = self.read_files(manifest, &|t| Some(t.to_string()))?;
            let old = manifest.state.as_deref().unwrap_or_default();
            read_retyped(&mut report, old, &snapshot, plan)?;
        }
        Ok(report)
    }
}

/// Marks each retyped id of `report` readable if every value its retyped cells hold in
/// `snapshot` (parts under the names of `old`) reads as the plan's new types.
fn read_retyped(
    report: &mut Report,
    old: &[StateId],
    snapshot: &Snapshot,
    plan: &PlanIdentity,
) -> Result<()> {
    for (id, verdict) in &mut report.entries {
        let Verdict::Retyped {
            cells, readable, ..
        } = verdict
        else {
            continue;
        };
        let Some(transform) = old.iter().find(|s| s.id == *id).map(|s| &s.transform) else {
            continue;
        };
        let mut all = true;
        let keyed = |scope| matches!(scope, Scope::KeyGroup(_));
        snapshot.for_each_part_of(transform, &keyed, &mut |_, bytes| {
            let corrupt = |message: String| Error::Checkpoint {
                message: format!("the state of '{id}': {message}"),
            };
            let (decoded, _) = crate::keyed::stateful::decode_key_group(bytes)
                .map_err(|e| corrupt(format!("{e:?}")))?;
            for cell in decoded {
                if !cells.iter().any(|(name, _, _)| *name == cell.name) {
                    continue;
                }
                let Some(reads) = plan.readers.get(&(id.clone(), cell.name.clone())) else {
                    all = false;
                    continue;
                };
                all &= match &cell.contents {
                    CellContents::Value(v) => (reads.value)(v),
                    CellContents::Bag(items) => items.iter().all(|b| (reads.value)(b)),
                    CellContents::Map(entries) => entries
                        .iter()
                        .all(|(k, v)| (reads.key)(k) && (v.is_empty() || (reads.value)(v))),
                };
            }
            Ok(())
        })?;
        *readable = all;
    }
    Ok(())
}
