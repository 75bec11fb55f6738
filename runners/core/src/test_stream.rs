//! The TestStream driver: replays a scripted stream one event at a time, for every
//! runner — elements with their timestamps, watermark advances, and processing-time
//! advances (which only a simulated clock follows).

use crate::translate::{ExecutablePlan, NodeKind};
use tidewater::exec::AnyBatch;
use tidewater::{Error, Result, TestStreamEvent, Timestamp};

/// What the next event of a TestStream is.
enum TestStreamStep {
    /// Elements arrive.
    Elements(Box<dyn AnyBatch>),
    /// The watermark moves to this time (never backwards).
    Watermark(Timestamp),
    /// Processing time moves forward by this many milliseconds.
    ProcessingTime(i64),
    /// The script is over: the watermark goes to the end of time.
    End,
}

/// What replaying a TestStream's next event did.
pub enum Replayed {
    /// Elements arrive.
    Elements(Box<dyn AnyBatch>),
    /// The clock moved (or stayed: a watermark never goes backwards).
    Clock,
    /// The script is over: the watermark is at the end of time.
    End,
}

/// Where a TestStream's clocks stand: its output watermark and its (simulated)
/// processing time. A runner keeps it with its other progress, and snapshots it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TestStreamClock {
    /// The output watermark.
    pub watermark: Timestamp,
    /// The processing time, moved only by the script.
    pub processing_time: Timestamp,
}

impl Default for TestStreamClock {
    /// Before the first event: the beginning of time, processing time 0.
    fn default() -> Self {
        TestStreamClock {
            watermark: Timestamp::MIN,
            processing_time: crate::clock::SIMULATED_START,
        }
    }
}

/// Replays the TestStream of a plan node; its position is the index of the next event.
pub struct TestStreamDriver {
    events: std::sync::Arc<[TestStreamEvent]>,
    element_type: std::sync::Arc<dyn tidewater::exec::ElementType>,
    /// The next event.
    pub position: usize,
}

impl TestStreamDriver {
    /// The driver of TestStream node `node`, at its first event.
    pub fn new(plan: &ExecutablePlan, node: usize) -> Result<Self> {
        let n = &plan.nodes[node];
        let NodeKind::TestStream { events } = &n.kind else {
            return Err(Error::Internal(format!("'{}' is not a TestStream", n.name)));
        };
        Ok(TestStreamDriver {
            events: events.clone(),
            element_type: plan.pcollections[n.outputs[0]].element_type.clone(),
            position: 0,
        })
    }

    /// Replays the next event against `clock`, once for every runner: the watermark
    /// moves forward (never backwards), processing time by the step (saturating), to
    /// the end of time when the script is over; elements are returned.
    pub fn replay_next(&mut self, clock: &mut TestStreamClock) -> Result<Replayed> {
        Ok(match self.next_step()? {
            TestStreamStep::Elements(batch) => Replayed::Elements(batch),
            TestStreamStep::Watermark(t) => {
                clock.watermark = clock.watermark.max(t);
                Replayed::Clock
            }
            TestStreamStep::ProcessingTime(ms) => {
                clock.processing_time =
                    Timestamp(clock.processing_time.millis().saturating_add(ms));
                Replayed::Clock
            }
            TestStreamStep::End => {
                clock.watermark = Timestamp::MAX;
                Replayed::End
            }
        })
    }

    /// The next event, and moves past it.
    fn next_step(&mut self) -> Result<TestStreamStep> {
        let Some(event) = self.events.get(self.position) else {
            return Ok(TestStreamStep::End);
        };
        self.position += 1;
        Ok(match event {
            TestStreamEvent::Elements(values) => {
                let json: Vec<tidewater::plan::Json> =
                    values.iter().map(|(v, _)| v.clone()).collect();
                let stamps: Vec<Timestamp> = values.iter().map(|(_, t)| *t).collect();
                let mut batch = self
                    .element_type
                    .batch_from_json(&json)
                    .map_err(|m| Error::InvalidPlan { message: m })?;
                batch.set_timestamps(&stamps);
                TestStreamStep::Elements(batch)
            }
            TestStreamEvent::Watermark(t) => TestStreamStep::Watermark(*t),
            TestStreamEvent::ProcessingTime(ms) => TestStreamStep::ProcessingTime(*ms),
        })
    }
}
