//! What a window's trigger waits for ("why hasn't my window fired?"), asked of the
//! state machine itself: each node says, from its own state and the clocks, what would
//! make it ready, composites combine their children's answers as their `should_fire`
//! combines their readiness.

use super::{after_watermark, Kind, TriggerContext, TriggerState, TriggerStateMachine};
use serde::{Deserialize, Serialize};
use tidewater::Timestamp;

/// What a trigger waits for before its next pane.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Wait {
    /// It is ready: the next advance of the operator fires it.
    Ready,
    /// The input watermark to pass this time (a window's end: its max timestamp).
    Watermark(Timestamp),
    /// This many more elements in the window.
    Elements(u64),
    /// Processing time to pass this time.
    ProcessingTime(Timestamp),
    /// An element, which starts a processing-time delay.
    FirstElement,
    /// Any one of these.
    Any(Vec<Wait>),
    /// All of these.
    All(Vec<Wait>),
    /// Nothing fires it (a `Never` trigger): the window ends when it expires.
    Never,
    /// The trigger finished: the window is closed, its later input dropped.
    Finished,
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let join = |f: &mut std::fmt::Formatter<'_>, ws: &[Wait], word: &str| {
            for (i, w) in ws.iter().enumerate() {
                if i > 0 {
                    write!(f, " {word} ")?;
                }
                write!(f, "{w}")?;
            }
            Ok(())
        };
        match self {
            Wait::Ready => write!(f, "nothing: it fires at the operator's next step"),
            Wait::Watermark(t) => write!(f, "the watermark to pass {}", show(*t)),
            Wait::Elements(1) => write!(f, "1 more element"),
            Wait::Elements(n) => write!(f, "{n} more elements"),
            Wait::ProcessingTime(t) => write!(f, "processing time to pass {}", show(*t)),
            Wait::FirstElement => write!(f, "an element (which starts its delay)"),
            Wait::Any(ws) => join(f, ws, "or"),
            Wait::All(ws) => join(f, ws, "and"),
            Wait::Never => write!(
                f,
                "nothing (a Never trigger): the window is emitted only when it expires"
            ),
            Wait::Finished => write!(
                f,
                "nothing more: the trigger finished, the window is closed"
            ),
        }
    }
}

/// A time as the explanations show it: ms since the epoch, and a UTC date for times
/// from 2000 on (before that they are rarely wall-clock times).
pub fn show(t: Timestamp) -> String {
    if t == Timestamp::MIN {
        return "the beginning of time".into();
    }
    if t == Timestamp::MAX {
        return "the end of time".into();
    }
    let ms = t.millis();
    if ms < 946_684_800_000 {
        return format!("{ms} ms");
    }
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{milli:03} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The date of day `days` since 1970-01-01 (Howard Hinnant's civil_from_days).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// `Any` or `All` of `ws`, flattened: one alone is itself; a ready one makes `Any`
/// ready; finished ones drop out.
fn combine(ws: Vec<Wait>, any: bool) -> Wait {
    let mut ws: Vec<Wait> = ws.into_iter().filter(|w| *w != Wait::Finished).collect();
    if any && ws.contains(&Wait::Ready) {
        return Wait::Ready;
    }
    if !any {
        ws.retain(|w| *w != Wait::Ready);
        if ws.is_empty() {
            return Wait::Ready;
        }
    }
    if any {
        ws.retain(|w| *w != Wait::Never);
        if ws.is_empty() {
            return Wait::Never;
        }
    }
    match ws.len() {
        0 => Wait::Finished,
        1 => ws.pop().expect("one"),
        _ if any => Wait::Any(ws),
        _ => Wait::All(ws),
    }
}

impl TriggerStateMachine {
    /// What the trigger of a window in `state` waits for before its next pane, at the
    /// clocks of `ctx` (its timers are not touched).
    pub fn waiting_for(&self, state: &TriggerState, ctx: &TriggerContext<'_>) -> Wait {
        if state.finished(0) {
            return Wait::Finished;
        }
        if self.ready(0, state, ctx) {
            return Wait::Ready;
        }
        self.wait(0, state, ctx)
    }

    fn wait(&self, node: usize, state: &TriggerState, ctx: &TriggerContext<'_>) -> Wait {
        if state.finished(node) {
            return Wait::Finished;
        }
        if self.ready(node, state, ctx) {
            return Wait::Ready;
        }
        let end = Wait::Watermark(ctx.window.max_timestamp());
        match self.kind(node) {
            // Before the end of the window, the end; after it, each late element fires.
            Kind::Default if !ctx.end_of_window_reached() => end,
            Kind::Default => Wait::Elements(1),
            Kind::Never => Wait::Never,
            Kind::AfterWatermark => end,
            Kind::AfterWatermarkEarlyAndLate => {
                let early = self.children(node)[after_watermark::EARLY];
                if !state.finished(early) {
                    combine(vec![self.wait(early, state, ctx), end], true)
                } else {
                    match self.children(node).get(after_watermark::LATE) {
                        Some(&late) => self.wait(late, state, ctx),
                        None => Wait::Finished,
                    }
                }
            }
            Kind::AfterProcessingTime(_) => match state.nodes[node].delayed_until {
                Some(at) => Wait::ProcessingTime(at),
                None => Wait::FirstElement,
            },
            Kind::AfterCount(n) => Wait::Elements(n.saturating_sub(state.nodes[node].count).max(1)),
            Kind::Repeatedly => self.wait(self.children(node)[0], state, ctx),
            Kind::AfterEach => match self.first_unfinished_child(node, state) {
                Some(c) => self.wait(c, state, ctx),
                None => Wait::Finished,
            },
            Kind::AfterFirst | Kind::OrFinally => combine(
                self.children(node)
                    .iter()
                    .map(|&c| self.wait(c, state, ctx))
                    .collect(),
                true,
            ),
            Kind::AfterAll => combine(
                self.children(node)
                    .iter()
                    .map(|&c| self.wait(c, state, ctx))
                    .collect(),
                false,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidewater::{BoundedWindow, Trigger};

    fn window() -> BoundedWindow {
        BoundedWindow::Interval {
            start: Timestamp(0),
            end: Timestamp(10_000),
        }
    }

    fn ask(trigger: impl Into<Trigger>, elements: &[i64], watermark: i64, now: i64) -> Wait {
        let m = TriggerStateMachine::new(&trigger.into());
        let mut state = m.initial_state();
        let mut timers = Vec::new();
        let mut ctx =
            TriggerContext::new(window(), Timestamp(watermark), Timestamp(now), &mut timers);
        for &e in elements {
            m.on_element(&mut state, Timestamp(e), &mut ctx);
            if m.should_fire(&state, &ctx) {
                m.on_fire(&mut state, &mut ctx);
            }
        }
        m.waiting_for(&state, &ctx)
    }

    #[test]
    fn each_trigger_says_what_it_waits_for() {
        assert_eq!(
            ask(Trigger::Default, &[5], 1_000, 0),
            Wait::Watermark(Timestamp(9_999))
        );
        assert_eq!(
            ask(Trigger::Default, &[5], 1_000, 0).to_string(),
            "the watermark to pass 9999 ms"
        );
        assert_eq!(ask(Trigger::after_count(3), &[1], 0, 0), Wait::Elements(2));
        assert_eq!(
            ask(
                Trigger::repeatedly(Trigger::after_count(2)),
                &[1, 2, 3],
                0,
                0
            ),
            Wait::Elements(1)
        );
        let early = Trigger::after_watermark()
            .with_early_firings(Trigger::after_processing_time().plus_delay_of(5_000));
        assert_eq!(
            ask(early.clone(), &[1], 0, 100),
            Wait::Any(vec![
                Wait::ProcessingTime(Timestamp(5_100)),
                Wait::Watermark(Timestamp(9_999))
            ])
        );
        assert_eq!(
            ask(early.clone(), &[1], 0, 100).to_string(),
            "processing time to pass 5100 ms or the watermark to pass 9999 ms"
        );
        assert_eq!(ask(Trigger::Never, &[1], 0, 0), Wait::Never);
        // Past the end: ready (the next step fires it); once fired, finished.
        assert_eq!(ask(Trigger::after_watermark(), &[], 10_000, 0), Wait::Ready);
        assert_eq!(
            ask(Trigger::after_watermark(), &[1], 10_000, 0),
            Wait::Finished
        );
        assert_eq!(
            show(Timestamp(1_764_936_000_123)),
            "2025-12-05 12:00:00.123 UTC"
        );
    }
}
