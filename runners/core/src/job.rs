//! A job's identity, once for every runner: what its sinks name their transactions and
//! output with, so that recovering one job never touches another's (issue: a
//! PostgreSQL sink whose transactions were named by its table rolled back another
//! job's prepared transactions, and lost their rows).
//!
//! A job restored from a checkpoint or savepoint keeps the identity recorded there (in
//! its sinks' parts, [`crate::sink_host`]); otherwise `--job-id`, or by default one
//! derived from the pipeline and where it keeps its checkpoints: the same across the
//! restarts of one job (every process of it computes the same without talking to the
//! others), another for another checkpoint directory.

use tidewater::exec::key_hash;
use tidewater::{Error, Result};

/// The id of a job: `restored` (the checkpoint's) if any, which a `given` `--job-id`
/// must then equal; else `given`; else derived from the plan's hash and `place` (an
/// engine's canonical checkpoint directory, or a name for a runner without one).
///
/// ```
/// use tidewater_runners_core::job::job_id;
/// let a = job_id(None, None, 7, "/ckpt/a").unwrap();
/// assert_eq!(a, job_id(None, None, 7, "/ckpt/a").unwrap());
/// assert_ne!(a, job_id(None, None, 7, "/ckpt/b").unwrap());
/// assert_eq!(job_id(Some("nightly"), None, 7, "/ckpt/a").unwrap(), "nightly");
/// assert_eq!(job_id(None, Some("j1".into()), 7, "/ckpt/a").unwrap(), "j1");
/// assert!(job_id(Some("j2"), Some("j1".into()), 7, "/ckpt/a").is_err());
/// ```
pub fn job_id(
    given: Option<&str>,
    restored: Option<String>,
    plan_hash: u64,
    place: &str,
) -> Result<String> {
    match (restored, given) {
        (Some(r), Some(g)) if r != g => Err(Error::InvalidOption {
            option: format!("--job-id {g}"),
            message: format!(
                "the checkpoint restored is of job {r}, and a restored job keeps its id: leave --job-id out (or give {r}), or start the job afresh with another --checkpoint-dir"
            ),
        }),
        (Some(r), _) => Ok(r),
        (None, Some(g)) => Ok(g.to_string()),
        (None, None) => Ok(format!(
            "j{:08x}{:08x}",
            plan_hash >> 32,
            key_hash(format!("{plan_hash:016x}:{place}").as_bytes()) >> 32
        )),
    }
}

/// The pipeline part of a derived job id (see [`job_id`]): two derived ids with the
/// same part are runs of one pipeline over different checkpoint directories. `None`
/// for an id a user gave (unless it looks derived).
///
/// ```
/// use tidewater_runners_core::job::{job_id, pipeline_of};
/// let a = job_id(None, None, 7 << 40, "/ckpt/a").unwrap();
/// let b = job_id(None, None, 7 << 40, "/ckpt/b").unwrap();
/// assert_eq!(pipeline_of(&a), pipeline_of(&b));
/// assert_ne!(pipeline_of(&a), pipeline_of(&job_id(None, None, 8 << 40, "/ckpt/a").unwrap()));
/// assert_eq!(pipeline_of("nightly"), None);
/// ```
pub fn pipeline_of(job: &str) -> Option<&str> {
    (job.len() == 17 && job.starts_with('j') && job[1..].chars().all(|c| c.is_ascii_hexdigit()))
        .then(|| &job[..9])
}
