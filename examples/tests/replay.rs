//! No silent replay of committed output (issue 33): a sink's ledger (PostgreSQL's
//! ledger table, `EpochFiles`' committed file names) says which epochs a job committed,
//! and a run that would write some of them again is refused with a message naming the
//! checkpoint, the epochs and the choices:
//!
//! - falling back past a corrupt newest checkpoint whose epoch was already committed;
//! - a checkpoint directory whose manifests were lost;
//! - a new, empty checkpoint directory over output the same pipeline committed.
//!
//! `--accept-duplicates` runs on anyway. A commit of a transaction that is gone (rolled
//! back by hand, a staged file deleted) fails naming the epoch instead of counting as
//! done.

mod common;

use common::*;
use std::path::Path;

/// Crashes the job during a snapshot (its newest complete checkpoint's epoch is
/// committed by then, as a rule), and makes sure the newest checkpoint left is one
/// whose epoch is committed: newer ones, whose commit the crash came before, go (as
/// if the crash had come before them). `committed` says the newest committed epoch.
/// Returns the epoch of the newest checkpoint left.
fn crash_after_a_commit(run: &Run, extra: &[&str], committed: impl Fn() -> Option<u64>) -> u64 {
    abort_at(run, run.command(extra), "snapshot");
    let last = committed().expect("epochs were committed before the crash");
    loop {
        let newest = newest_manifest(&run.ckpt);
        let epoch = manifest_epoch(&newest);
        if epoch <= last {
            return epoch;
        }
        std::fs::remove_file(newest).unwrap();
    }
}

fn assert_refused(err: &str, what: &str, says: &[&str]) {
    for s in says.iter().chain(&[
        "refused to write committed output again",
        "--accept-duplicates",
    ]) {
        assert!(
            err.contains(s),
            "{what}: the refusal does not say {s:?}:\n{err}"
        );
    }
}

/// Every line of the direct runner's output is there at least once.
fn assert_nothing_lost(got: &[String], what: &str) {
    let have: std::collections::BTreeSet<&String> = got.iter().collect();
    let missing = reference().iter().filter(|l| !have.contains(l)).count();
    assert_eq!(missing, 0, "{what}: {missing} lines lost");
}

#[test]
fn falling_back_past_a_committed_epoch_is_refused_and_accept_duplicates_runs_on() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        let newest = crash_after_a_commit(&run, &["--workers=2"], || {
            newest_committed_file_epoch(&run.out)
        });
        let committed = newest_committed_file_epoch(&run.out).unwrap();
        assert_eq!(corrupt_newest_checkpoint(&run.ckpt), newest);
        let before = run.lines();
        let what = format!("{runner}: fallback past committed epoch {committed}");
        let err = refused(run.command(&["--workers=2"]), &what);
        assert_refused(
            &err,
            &what,
            &[
                &format!("up to epoch {committed}"),
                &format!("checkpoint {newest} is unusable"),
                "this run restores checkpoint",
            ],
        );
        assert_eq!(run.lines(), before, "{what}: the refused run wrote output");
        // Asked to, it runs on; nothing is lost (what it wrote again may repeat).
        let err = finish(
            run.command(&["--workers=2", "--accept-duplicates"])
                .spawn()
                .unwrap(),
            &what,
        );
        assert!(
            err.lines()
                .any(|l| l.contains("WARN") && l.contains("sink 'Output' already committed")),
            "{what}: {err}"
        );
        assert_nothing_lost(&run.lines(), &what);
    });
}

/// A restart whose checkpoint directory lost its manifests starts from the beginning
/// under the same job id (derived from the directory): refused, since the job's
/// output is there.
#[test]
fn a_checkpoint_dir_that_lost_its_manifests_is_refused_over_committed_output() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        crash_after_a_commit(&run, &["--workers=2"], || {
            newest_committed_file_epoch(&run.out)
        });
        for e in std::fs::read_dir(&run.ckpt).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|e| e == "manifest") {
                std::fs::remove_file(path).unwrap();
            }
        }
        let before = run.lines();
        let what = format!("{runner}: lost manifests");
        let err = refused(run.command(&["--workers=2"]), &what);
        assert_refused(
            &err,
            &what,
            &["holds no checkpoint", "starts from the beginning"],
        );
        assert_eq!(run.lines(), before, "{what}: the refused run wrote output");
    });
}

/// The same job pointed at a new, empty checkpoint directory is, by its derived id,
/// another job of the same pipeline: over the first one's committed output, refused;
/// given its own `--job-id`, it writes beside it on purpose.
#[test]
fn a_new_empty_checkpoint_dir_over_the_pipelines_committed_output_is_refused() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        crash_after_a_commit(&run, &["--workers=2"], || {
            newest_committed_file_epoch(&run.out)
        });
        let before = run.lines();
        let mut fresh = Run::on(runner);
        fresh.out = run.out.clone();
        let what = format!("{runner}: a new checkpoint dir");
        let err = refused(fresh.command(&["--workers=2"]), &what);
        assert_refused(
            &err,
            &what,
            &["output of this same pipeline run as job", "resume that job"],
        );
        assert_eq!(run.lines(), before, "{what}: the refused run wrote output");
        finish(
            fresh
                .command(&["--workers=2", "--job-id=on-purpose"])
                .spawn()
                .unwrap(),
            &what,
        );
        let mut twice = before.clone();
        twice.extend(reference().iter().cloned());
        twice.sort();
        assert_eq!(run.lines(), twice, "{what}: a new job beside the old one");
    });
}

/// A staged file deleted before its commit: the restored checkpoint's commit finds
/// neither it nor a committed file, and the run fails naming the epoch.
#[test]
fn a_staged_file_gone_before_its_commit_fails_naming_the_epoch() {
    let _s = serial();
    on_each_runner(|runner| {
        let run = Run::on(runner);
        abort_at(&run, run.command(&["--workers=1"]), "staged");
        let staged: Vec<_> = std::fs::read_dir(&run.out)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".staged"))
            .collect();
        assert!(!staged.is_empty(), "{runner}: nothing was left staged");
        for p in &staged {
            std::fs::remove_file(p).unwrap();
        }
        let what = format!("{runner}: a staged file gone");
        let err = refused(run.command(&["--workers=1"]), &what);
        assert!(
            err.contains("was staged in") && err.contains("its lines are lost"),
            "{what}: {err}"
        );
    });
}

fn pg_count(c: &tokio_postgres::Client, table: &str) -> i64 {
    tidewater::io::runtime()
        .block_on(c.query_one(&format!("SELECT count(*) FROM {table}"), &[]))
        .unwrap()
        .get(0)
}

/// The newest epoch the PostgreSQL ledger records for `table`.
fn pg_ledger_epoch(c: &tokio_postgres::Client, table: &str) -> Option<u64> {
    tidewater::io::runtime()
        .block_on(c.query_one(
            "SELECT max(epoch) FROM tidewater_ledger WHERE target = $1",
            &[&table],
        ))
        .unwrap()
        .get::<_, Option<i64>>(0)
        .map(|e| e as u64)
}

#[test]
fn postgres_fallback_past_a_committed_epoch_is_refused() {
    let Some(url) = postgres("postgres_fallback_past_a_committed_epoch_is_refused") else {
        return;
    };
    let _s = serial();
    let c = pg_client(&url);
    on_each_runner(|runner| {
        let table = format!("replay_{runner}");
        pg_fresh_table(&c, &table);
        let [pg, pg_table] = pg_flags(&url, &table);
        let run = Run::on(runner);
        let flags = ["--workers=2", pg.as_str(), pg_table.as_str()];
        let newest = crash_after_a_commit(&run, &flags, || pg_ledger_epoch(&c, &table));
        let committed = pg_ledger_epoch(&c, &table).unwrap();
        corrupt_newest_checkpoint(&run.ckpt);
        let before = pg_count(&c, &table);
        let what = format!("{runner}: PostgreSQL fallback past committed epoch {committed}");
        let err = refused(run.command(&flags), &what);
        assert_refused(
            &err,
            &what,
            &[
                &format!("up to epoch {committed}"),
                &format!("checkpoint {newest} is unusable"),
            ],
        );
        assert_eq!(pg_count(&c, &table), before, "{what}: rows were written");
        // Restored from the newest checkpoint again (its file put back), the job ends
        // with every row exactly once.
        let fixed = newest_manifest(&run.ckpt);
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&fixed).unwrap()).unwrap();
        let file = Path::new(&run.ckpt)
            .join("parts")
            .join(v["files"][0]["name"].as_str().unwrap());
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x5a;
        std::fs::write(&file, bytes).unwrap();
        finish(run.command(&flags).spawn().unwrap(), &what);
        pg_assert_exact(&c, &table, &what);
    });
}

/// Prepared transactions of a staged epoch rolled back by hand: the restored
/// checkpoint's commit finds them gone and not in the ledger, and fails naming the
/// epoch (before, `COMMIT PREPARED` of a missing transaction counted as done).
#[test]
fn postgres_commit_of_a_transaction_rolled_back_by_hand_fails_naming_the_epoch() {
    let Some(url) =
        postgres("postgres_commit_of_a_transaction_rolled_back_by_hand_fails_naming_the_epoch")
    else {
        return;
    };
    let _s = serial();
    let c = pg_client(&url);
    let rt = tidewater::io::runtime();
    on_each_runner(|runner| {
        let table = format!("gone_{runner}");
        pg_fresh_table(&c, &table);
        let [pg, pg_table] = pg_flags(&url, &table);
        let run = Run::on(runner);
        let flags = ["--workers=1", pg.as_str(), pg_table.as_str()];
        abort_at(&run, run.command(&flags), "staged");
        let gids = pg_prepared(&c, &table);
        assert!(!gids.is_empty(), "{runner}: nothing was left prepared");
        for g in &gids {
            rt.block_on(c.batch_execute(&format!("ROLLBACK PREPARED '{g}'")))
                .unwrap();
        }
        let what = format!("{runner}: prepared transactions rolled back by hand");
        let err = refused(run.command(&flags), &what);
        assert!(
            err.contains("is lost: its transaction 'tidewater:")
                && err.contains("the ledger tidewater_ledger has no commit of it"),
            "{what}: {err}"
        );
    });
}
