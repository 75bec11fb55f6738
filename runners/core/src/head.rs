//! A task's head on an engine: the part of a plan node that feeds a fused stage (or,
//! for a capture, ends the graph). One type for the seven kinds — Create/Impulse,
//! TestStream, Read, a keyed operator (grouping or stateful ParDo), Flatten, a ParDo
//! with side inputs, capture — with one interface: build (fresh or restored by
//! snapshot scope), process, advance, output watermark, idleness, snapshot parts.
//! An engine moves batches and progress between heads and stages; the rules are here
//! and in the parts each kind wraps.

use crate::checkpoint::{
    keyed_parts, keyed_parts_later, restore_keyed, restore_side_input_runner, restore_source,
    KeyedParts, LaterPartsOf,
};
use crate::create::InitialBatch;
use crate::fusion::StageGraph;
use crate::keyed::{instantiate, KeyGroups, KeyedOperator, SnapshotKind};
use crate::side_inputs::{SideInputRunner, SideInputs};
use crate::snapshot::{decode_part, encode_part, Part, Scope, Snapshot};
use crate::source_driver::SourceDriver;
use crate::stage::{attribute, unwrap_downstream};
use crate::test_stream::{TestStreamClock, TestStreamDriver};
use crate::translate::{ExecutablePlan, NodeKind};
use crate::watermarks;
use std::sync::Arc;
use tidewater::exec::{AnyBatch, StepMetrics};
use tidewater::{Error, Result, Timestamp};

/// Where a worker's heads run: which worker of how many, what it owns.
#[derive(Clone, Debug)]
pub struct Placement {
    /// This worker's index.
    pub worker: usize,
    /// Workers in all.
    pub workers: usize,
    /// Workers of the run the restored snapshot was taken by.
    pub old_workers: usize,
    /// The key groups this worker owns.
    pub key_groups: KeyGroups,
    /// Partitions a source is split into at its first start.
    pub source_partitions: usize,
    /// Where stateful DoFns keep their state.
    pub state: crate::state::StateChoice,
}

/// What heads a task.
pub enum Head {
    /// Create or Impulse: one batch, on worker 0 (none on other workers, or once sent).
    Create(InitialBatch),
    /// A TestStream, on worker 0.
    TestStream {
        /// The script (`None` on other workers).
        driver: Option<TestStreamDriver>,
        /// Its watermark and simulated processing time.
        clock: TestStreamClock,
    },
    /// A Read: the source driver over the partitions this worker owns, read as the
    /// runner's policy says.
    Read(SourceDriver),
    /// A grouping or a stateful ParDo.
    Keyed(Box<dyn KeyedOperator>),
    /// A Flatten.
    Flatten,
    /// A ParDo with side inputs (its stage runs the ParDo).
    SideInput(SideInputRunner),
    /// A capture: batches gathered on worker 0.
    Capture {
        /// Its name.
        name: String,
        /// The element type's name.
        element_type: String,
    },
}

/// What moving a head's input watermarks released.
#[derive(Default)]
pub struct Advanced {
    /// Batches for the stage the head feeds, in order.
    pub out: Vec<Box<dyn AnyBatch>>,
    /// The side-input values the released main input reads (a ParDo with side
    /// inputs): set on the stage before `out` runs through it.
    pub side_inputs: Option<Arc<SideInputs>>,
    /// Whether the head moved: a keyed operator's input watermark or due timers, or
    /// held main input released (a scheduler that runs until nothing moves counts it
    /// as progress even when nothing came out).
    pub moved: bool,
    /// A keyed operator stopped with work still due (it fires in slices, so that what
    /// fires at once does not sit in memory whole): the caller takes `out` on, then
    /// advances again.
    pub more: bool,
}

impl Head {
    /// Node `node`'s head at `at`, restored from `restored` if given: each kind from
    /// the parts of its scope (a source's partitions wherever they were read, keyed
    /// state by key group, side-input lists and a Create's or TestStream's record of
    /// old worker 0).
    pub fn build(
        plan: &ExecutablePlan,
        graph: &StageGraph,
        node: usize,
        at: &Placement,
        restored: Option<&Snapshot>,
    ) -> Result<Head> {
        let n = &plan.nodes[node];
        // Old worker 0's record of a head that only worker 0 runs.
        let zero_record = || -> Option<Vec<u8>> {
            restored?
                .parts_of(&n.name)
                .get(&Scope::List(0))
                .and_then(|v| v.first().map(|b| b.to_vec()))
        };
        Ok(match &n.kind {
            NodeKind::Impulse | NodeKind::Create { .. } => {
                let emitted = match zero_record() {
                    Some(b) => {
                        decode_part::<bool>(&b, "a Create's record").map_err(unwrap_downstream)?
                    }
                    None => restored.is_some(),
                };
                // Worker 0 emits it.
                Head::Create(InitialBatch::new(plan, node, at.worker != 0 || emitted)?)
            }
            NodeKind::TestStream { .. } => {
                if at.worker != 0 {
                    return Ok(Head::TestStream {
                        driver: None,
                        clock: TestStreamClock {
                            watermark: Timestamp::MAX,
                            processing_time: Timestamp::MAX,
                        },
                    });
                }
                let mut driver = TestStreamDriver::new(plan, node)?;
                let mut clock = TestStreamClock::default();
                if let Some(b) = zero_record() {
                    let (pos, w, p): (Option<usize>, Timestamp, Timestamp) =
                        decode_part(&b, "a TestStream's position").map_err(unwrap_downstream)?;
                    driver.position = pos.unwrap_or(usize::MAX);
                    clock = TestStreamClock {
                        watermark: w,
                        processing_time: p,
                    };
                }
                Head::TestStream {
                    driver: Some(driver),
                    clock,
                }
            }
            NodeKind::Read { .. } => Head::Read(match restored {
                None => SourceDriver::start(
                    n.instantiate_source()?,
                    at.source_partitions,
                    at.worker,
                    at.workers,
                )
                .map_err(|e| unwrap_downstream(attribute(e, &n.name)))?,
                Some(s) => restore_source(plan, node, s, at.worker, at.workers)?,
            }),
            NodeKind::Grouping { .. } | NodeKind::Stateful { .. } => {
                let lifted = graph.lifted[node];
                Head::Keyed(match restored {
                    Some(s) => restore_keyed(plan, node, lifted, s, &at.key_groups, &at.state)?,
                    None => instantiate(plan, node, lifted, &at.key_groups, &at.state)?,
                })
            }
            NodeKind::Flatten => Head::Flatten,
            NodeKind::ParDo { .. } => Head::SideInput(match restored {
                Some(s) => {
                    // The held main input of old instances i with i % workers == worker.
                    let lists: Vec<u32> = (0..at.old_workers as u32)
                        .filter(|i| *i as usize % at.workers.max(1) == at.worker)
                        .collect();
                    restore_side_input_runner(plan, node, s, Some(&lists))?
                }
                None => SideInputRunner::new(plan, node)?,
            }),
            NodeKind::Capture { name } => Head::Capture {
                name: name.clone(),
                element_type: plan.pcollections[n.inputs[0]]
                    .element_type
                    .name()
                    .to_string(),
            },
            _ => {
                return Err(Error::Internal(format!(
                    "'{}' heads no task: it runs inside a stage",
                    n.name
                )))
            }
        })
    }

    /// Whether the head reads input of its own rather than receiving it.
    pub fn is_source(&self) -> bool {
        matches!(
            self,
            Head::Create(_) | Head::TestStream { .. } | Head::Read(_)
        )
    }

    /// Whether the head has state that a checkpoint keeps.
    pub fn has_state(&self) -> bool {
        !matches!(self, Head::Flatten | Head::Capture { .. })
    }

    /// The head's output watermark, given its inputs' watermarks.
    pub fn output_watermark(&self, inputs: impl Iterator<Item = Timestamp>) -> Timestamp {
        match self {
            Head::Create(create) => create.watermark(),
            Head::TestStream { clock, .. } => clock.watermark,
            Head::Read(driver) => driver.watermark(),
            Head::Keyed(op) => op.output_watermark(),
            Head::Flatten => watermarks::flatten_output(inputs),
            Head::SideInput(runner) => runner.output_watermark(),
            Head::Capture { .. } => Timestamp::MAX,
        }
    }

    /// Whether the head's output is idle, given whether each input is: a source
    /// reading only idle partitions, or a step all of whose inputs are idle (Flink's
    /// idleness, passed downstream so that partitions read on several workers combine
    /// as in one source driver).
    pub fn output_idle(&self, mut inputs_idle: impl Iterator<Item = bool>) -> bool {
        match self {
            Head::Read(driver) => driver.is_idle(),
            Head::Keyed(_) | Head::Flatten | Head::SideInput(_) => {
                // Some input, and every one idle.
                inputs_idle
                    .next()
                    .is_some_and(|first| first && inputs_idle.all(|i| i))
            }
            Head::Create(_) | Head::TestStream { .. } | Head::Capture { .. } => false,
        }
    }

    /// `batch` arrived on input `port` at processing time `now`: returns what goes on
    /// into the stage the head feeds. `transform` names the head in errors.
    pub fn process(
        &mut self,
        port: usize,
        batch: Box<dyn AnyBatch>,
        now: Timestamp,
        transform: &str,
    ) -> Result<Vec<Box<dyn AnyBatch>>> {
        match self {
            Head::Keyed(op) => {
                op.process(batch, now)
                    .map_err(|e| unwrap_downstream(attribute(e, transform)))?;
                Ok(op.take_output())
            }
            Head::SideInput(runner) => {
                if port == 0 {
                    runner.add_main(batch);
                } else {
                    runner.add_side(port, batch);
                }
                Ok(Vec::new())
            }
            Head::Flatten => Ok(vec![batch]),
            _ => Err(Error::Internal(format!(
                "'{transform}' received data but has no input"
            ))),
        }
    }

    /// Moves the head to its inputs' watermarks `inputs` and processing time `now`:
    /// returns what that released.
    pub fn advance(
        &mut self,
        inputs: &[Timestamp],
        now: Timestamp,
        transform: &str,
    ) -> Result<Advanced> {
        match self {
            Head::Keyed(op) => {
                let wm = inputs[0];
                if op.has_due_work(wm, now) || op.input_watermark() < wm {
                    op.advance(wm, now)
                        .map_err(|e| unwrap_downstream(attribute(e, transform)))?;
                    return Ok(Advanced {
                        out: op.take_output(),
                        side_inputs: None,
                        moved: true,
                        more: op.has_due_work(wm, now),
                    });
                }
                Ok(Advanced::default())
            }
            Head::SideInput(runner) => Ok(match runner.advance(inputs[0], &inputs[1..]) {
                Some((ready, sides)) => Advanced {
                    out: vec![ready],
                    side_inputs: Some(sides),
                    moved: true,
                    more: false,
                },
                None => Advanced::default(),
            }),
            _ => Ok(Advanced::default()),
        }
    }

    /// When a keyed head next has a processing-time timer due.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        match self {
            Head::Keyed(op) => op.next_wakeup(),
            _ => None,
        }
    }

    /// A keyed head's windows, for "why hasn't my window fired?" ([`crate::explain`]).
    pub fn window_report(
        &mut self,
        max_key_groups: u32,
    ) -> Option<crate::keyed::reduce::WindowReport> {
        match self {
            Head::Keyed(op) => op.report(max_key_groups),
            _ => None,
        }
    }

    /// A source head's partitions, as its driver stands.
    pub fn partition_report(&self) -> Vec<crate::explain::PartitionReport> {
        match self {
            Head::Read(driver) => crate::explain::partitions_of(driver),
            _ => Vec::new(),
        }
    }

    /// A keyed head's metrics since the last call.
    pub fn take_metrics(&mut self) -> Option<StepMetrics> {
        match self {
            Head::Keyed(op) => Some(op.take_metrics()).filter(|m| !m.is_empty()),
            _ => None,
        }
    }

    /// [`Head::parts`], all encoded now (a scheduler that does not hand encoding to
    /// another thread), and whether they are a delta.
    pub fn parts_now(
        &mut self,
        transform: &str,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> Result<(Vec<Part>, bool)> {
        match self {
            Head::Keyed(op) => keyed_parts(transform, op.as_mut(), max_key_groups, instance, kind),
            // Only a keyed head leaves parts to encode later.
            _ => {
                let (parts, _, delta) = self.parts(transform, max_key_groups, instance, kind)?;
                Ok((parts, delta))
            }
        }
    }

    /// The head's state as snapshot parts of instance `instance`, named `transform`,
    /// the parts a keyed head left to encode from its frozen state, and whether they
    /// are a delta over its previous snapshot (only a keyed head writes one).
    pub fn parts(
        &mut self,
        transform: &str,
        max_key_groups: u32,
        instance: u32,
        kind: SnapshotKind,
    ) -> Result<(Vec<Part>, Option<LaterPartsOf>, bool)> {
        let part = |(scope, bytes): (Scope, Vec<u8>)| Part {
            transform: transform.to_string(),
            scope,
            bytes,
        };
        Ok(match self {
            Head::Keyed(op) => {
                let keyed: KeyedParts =
                    keyed_parts_later(transform, op.as_mut(), max_key_groups, instance, kind)?;
                (keyed.parts, keyed.later, keyed.delta)
            }
            Head::SideInput(runner) => (
                runner.snapshot(instance)?.into_iter().map(part).collect(),
                None,
                false,
            ),
            Head::Read(driver) => (
                driver.snapshot().into_iter().map(part).collect(),
                None,
                false,
            ),
            Head::Create(create) => (
                vec![part((
                    Scope::List(instance),
                    encode_part(&create.emitted()),
                ))],
                None,
                false,
            ),
            Head::TestStream { driver, clock } => (
                vec![part((
                    Scope::List(instance),
                    encode_part(&(
                        driver.as_ref().map(|d| d.position),
                        clock.watermark,
                        clock.processing_time,
                    )),
                ))],
                None,
                false,
            ),
            Head::Flatten | Head::Capture { .. } => (Vec::new(), None, false),
        })
    }
}
