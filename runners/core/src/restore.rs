//! Where a run starts: the newest checkpoint of `--checkpoint-dir`, else the savepoint
//! of `--from-savepoint`, else the beginning; and `--check-savepoint`, which says what
//! a run would restore from a savepoint or checkpoint directory without running.
//!
//! A checkpoint restores into the plan if its stateful parts do, matched by id
//! (`tidewater_runners_core::compat`): a changed pipeline takes over the state of
//! every part it kept, starts new parts empty, and is refused (naming the ids) if it
//! dropped state, unless `--allow-non-restored-state`, or changed what state means.

use crate::compat::PlanIdentity;
use crate::store::{Restored, Store};
use std::path::Path;
use tidewater::{Error, Result};

/// The checkpoint a run restores, if any, and a sentence saying where the run starts.
pub fn restore_point(
    plan: &PlanIdentity,
    checkpoint_dir: Option<&Path>,
    from_savepoint: Option<&Path>,
    allow_non_restored: bool,
) -> Result<(Option<Restored>, String)> {
    let restored = match checkpoint_dir {
        Some(dir) => Store::open(dir)?.latest(plan, allow_non_restored)?,
        None => None,
    };
    // A savepoint starts the job; once it has a checkpoint of its own (a restart after
    // a failure), that is newer.
    if let Some(r) = restored {
        let origin = format!(
            "this run restores checkpoint {} in {}{}",
            r.manifest.epoch,
            checkpoint_dir.unwrap_or(Path::new("?")).display(),
            if r.notes.is_empty() {
                String::new()
            } else {
                format!(", the newest usable ({})", r.notes.join("; "))
            }
        );
        tracing::info!("{origin}");
        return Ok((Some(r), origin));
    }
    if let Some(savepoint) = from_savepoint {
        let r = savepoint_in(savepoint, plan, allow_non_restored)?;
        let origin = format!(
            "this run restores savepoint {} (epoch {})",
            savepoint.display(),
            r.manifest.epoch
        );
        tracing::info!("{origin}");
        return Ok((Some(r), origin));
    }
    let origin = match checkpoint_dir {
        Some(dir) => format!(
            "{} holds no checkpoint (a new or emptied checkpoint directory), so this run starts from the beginning",
            dir.display()
        ),
        None => "without --checkpoint-dir, this run starts from the beginning".to_string(),
    };
    Ok((None, origin))
}

/// The checkpoint in savepoint directory `dir`, for `plan`; the directory is only
/// read.
fn savepoint_in(dir: &Path, plan: &PlanIdentity, allow_non_restored: bool) -> Result<Restored> {
    let Some(store) = Store::existing(dir)? else {
        return Err(Error::Checkpoint {
            message: format!(
                "--from-savepoint {}: no savepoint there (a directory that --savepoint-dir wrote)",
                dir.display()
            ),
        });
    };
    store
        .latest(plan, allow_non_restored)?
        .ok_or_else(|| Error::Checkpoint {
            message: format!(
                "--from-savepoint {}: it holds no complete checkpoint",
                dir.display()
            ),
        })
}

/// If asked (`--check-savepoint`, `--inspect-savepoint`), answers instead of running
/// and ends the process: prints the answer and exits 0, or returns why the run would
/// be refused. Every runner calls it first.
pub fn answer_if_asked(plan: &tidewater::plan::Plan, e: &tidewater::EngineOptions) -> Result<()> {
    if let Some(answer) = offline_answer(plan, e) {
        print!("{}", answer?);
        std::process::exit(0);
    }
    Ok(())
}

/// What a job binary answers instead of running, if asked (`--check-savepoint`,
/// `--inspect-savepoint`): the text to print, or why the run would be refused. `None`
/// when neither is asked.
pub fn offline_answer(
    plan: &tidewater::plan::Plan,
    e: &tidewater::EngineOptions,
) -> Option<Result<String>> {
    let answer = |exec: &crate::translate::ExecutablePlan| -> Result<String> {
        if let Some(dir) = &e.inspect_savepoint {
            let reader = crate::savepoint::Reader::open(dir)?;
            let filter = crate::savepoint::Filter {
                id: e.inspect_id.clone(),
                key: e.inspect_key.clone(),
            };
            let entries = reader.entries(Some(exec), &filter)?;
            return crate::savepoint::render(&entries, &e.inspect_format);
        }
        let dir = e.check_savepoint.as_deref().expect("asked");
        let lines = check(dir, &PlanIdentity::of(exec), e.allow_non_restored_state)?;
        Ok(format!("{lines}the run would restore it\n"))
    };
    if e.inspect_savepoint.is_none() && e.check_savepoint.is_none() {
        return None;
    }
    Some(crate::translate(plan).and_then(|exec| answer(&exec)))
}

/// What restoring the newest checkpoint in `dir` (a savepoint or checkpoint
/// directory) into `plan` would do, one line per state id, and whether the run would
/// be refused (`Err`, with the lines and why). The directory is only read.
pub fn check(dir: &Path, plan: &PlanIdentity, allow_non_restored: bool) -> Result<String> {
    let Some(store) = Store::existing(dir)? else {
        return Err(Error::Checkpoint {
            message: format!(
                "--check-savepoint {}: no savepoint or checkpoint there",
                dir.display()
            ),
        });
    };
    let Some(&epoch) = store.manifests()?.last() else {
        return Err(Error::Checkpoint {
            message: format!(
                "--check-savepoint {}: it holds no complete checkpoint",
                dir.display()
            ),
        });
    };
    let manifest = store.manifest(epoch)?;
    let what = format!("checkpoint {epoch} in {}", dir.display());
    let head = format!("{what}\n");
    let report = store.report(&manifest, plan)?;
    let lines = format!("{head}{}", report.render());
    match report.refusal(allow_non_restored) {
        None => Ok(lines),
        Some(why) => Err(Error::Checkpoint {
            message: format!("{lines}the run would be refused: {why}"),
        }),
    }
}
