//! The sink commit protocol on the direct runner: a bounded job is one epoch, staged
//! and committed at its end; with `checkpoint_every` every checkpoint stages its epoch
//! and the restore from the snapshot commits it; a failed job aborts what it wrote.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Mutex;
use tidewater::{
    Pipeline, PipelineOptions, Sink, TestStream, Timestamp, Txn, UserError, WindowedValue,
};

/// One call of a sink: (action, transaction, elements).
type Call = (String, Txn, Vec<i64>);

/// What each test's sink did, by test name.
static LOG: Mutex<BTreeMap<String, Vec<Call>>> = Mutex::new(BTreeMap::new());

/// Records every call; the state a real sink would keep outside the process.
#[derive(Serialize, Deserialize)]
struct Recording {
    test: String,
}

impl Recording {
    fn log(&self, action: &str, txn: &Txn, xs: Vec<i64>) {
        LOG.lock()
            .unwrap()
            .entry(self.test.clone())
            .or_default()
            .push((action.to_string(), *txn, xs));
    }
}

impl Sink for Recording {
    type In = i64;
    fn write(&mut self, txn: &Txn, xs: Vec<WindowedValue<i64>>) -> Result<(), UserError> {
        self.log("write", txn, xs.into_iter().map(|x| x.value).collect());
        Ok(())
    }
    fn stage(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.log("stage", txn, vec![]);
        Ok(())
    }
    fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.log("commit", txn, vec![]);
        Ok(())
    }
    fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.log("abort", txn, vec![]);
        Ok(())
    }
}

fn log_of(test: &str) -> Vec<Call> {
    LOG.lock().unwrap().remove(test).unwrap_or_default()
}

/// The elements of every committed transaction, each committed transaction counted
/// once however often its commit is repeated; checks a commit follows its stage.
fn committed(log: &[Call]) -> Vec<i64> {
    let mut written: BTreeMap<Txn, Vec<i64>> = BTreeMap::new();
    let mut staged = std::collections::BTreeSet::new();
    let mut done = std::collections::BTreeSet::new();
    for (action, txn, xs) in log {
        match action.as_str() {
            "write" => written.entry(*txn).or_default().extend(xs),
            "stage" => {
                staged.insert(*txn);
            }
            "commit" => {
                assert!(
                    staged.contains(txn),
                    "{txn:?} committed before it was staged"
                );
                done.insert(*txn);
            }
            _ => {}
        }
    }
    let mut out: Vec<i64> = done
        .iter()
        .flat_map(|t| written.get(t).cloned().unwrap_or_default())
        .collect();
    out.sort();
    out
}

fn options(runner_options: &[(&str, &str)]) -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        seed: Some(3),
        runner_options: runner_options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

#[test]
fn a_bounded_job_is_one_epoch_committed_at_its_end() {
    let p = Pipeline::new(options(&[]));
    p.create("Xs", (0..10i64).collect()).write_to(
        "Write",
        Recording {
            test: "bounded".into(),
        },
    );
    p.run().unwrap();
    let log = log_of("bounded");
    let actions: Vec<(&str, u64)> = log
        .iter()
        .filter(|(a, _, _)| a != "write")
        .map(|(a, t, _)| (a.as_str(), t.epoch))
        .collect();
    assert_eq!(actions, vec![("stage", 0), ("commit", 0)]);
    assert_eq!(committed(&log), (0..10).collect::<Vec<_>>());
}

#[test]
fn every_checkpoint_stages_its_epoch_and_the_restore_commits_it_exactly_once() {
    let p = Pipeline::new(options(&[("checkpoint_every", "1")]));
    let mut stream = TestStream::new();
    for i in 0..5i64 {
        stream = stream
            .add_elements(vec![(2 * i, Timestamp(i)), (2 * i + 1, Timestamp(i))])
            .advance_watermark_to(Timestamp(i));
    }
    p.apply("Events", stream.advance_watermark_to_infinity())
        .write_to(
            "Write",
            Recording {
                test: "epochs".into(),
            },
        );
    p.run().unwrap();
    let log = log_of("epochs");
    let epochs: std::collections::BTreeSet<u64> = log
        .iter()
        .filter(|(a, _, _)| a == "commit")
        .map(|(_, t, _)| t.epoch)
        .collect();
    assert!(
        epochs.len() >= 5,
        "one epoch per batch of elements: {epochs:?}"
    );
    assert_eq!(committed(&log), (0..10).collect::<Vec<_>>());
}

fn fail_on_7(x: i64) -> i64 {
    assert!(x != 7, "seven");
    x
}

#[test]
fn a_failed_job_aborts_what_it_wrote_and_commits_nothing() {
    let p = Pipeline::new(options(&[("bundle_size", "1")]));
    p.create("Xs", (0..10i64).collect())
        .map("Fail", fail_on_7)
        .write_to(
            "Write",
            Recording {
                test: "failed".into(),
            },
        );
    assert!(p.run().is_err());
    let log = log_of("failed");
    assert!(committed(&log).is_empty());
    assert!(log.iter().all(|(a, _, _)| a != "commit"));
    if log.iter().any(|(a, _, _)| a == "write") {
        assert_eq!(log.last().unwrap().0, "abort");
    }
}
