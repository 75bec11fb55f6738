//! Triggers: when a grouping emits a pane for a window (Beam's triggers, as data).
//!
//! A trigger is plain data that travels in the plan; the state machines that evaluate
//! it live in `tidewater-runners-core`, once for every runner.

use serde::{Deserialize, Serialize};

/// A transformation of the processing time at which an `AfterProcessingTime` trigger's
/// first element arrived.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeTransform {
    /// Adds `ms` milliseconds.
    Delay {
        /// The delay.
        ms: i64,
    },
    /// Rounds up to the next `offset + k * period`.
    AlignTo {
        /// The period in ms (positive).
        period_ms: i64,
        /// The offset in ms, in `[0, period)`.
        offset_ms: i64,
    },
}

/// When to emit a pane (Beam's `Trigger`).
///
/// ```
/// use tidewater::{Duration, Trigger};
/// let t: Trigger = Trigger::after_watermark()
///     .with_early_firings(Trigger::after_processing_time().plus_delay_of(Duration::from_secs(1)))
///     .with_late_firings(Trigger::after_count(1))
///     .into();
/// assert!(matches!(t, Trigger::AfterWatermark { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// Fires once when the watermark passes the end of the window, then for every late
    /// element: `Repeatedly(AfterWatermark)` (Beam's `DefaultTrigger`).
    Default,
    /// Never fires; only the final pane at window expiry (with `EMIT_ALWAYS` closing) or
    /// nothing.
    Never,
    /// Fires when the watermark passes the end of the window, with optional early
    /// firings before and late firings after.
    AfterWatermark {
        /// Fires repeatedly before the on-time pane.
        early: Option<Box<Trigger>>,
        /// Fires repeatedly after the on-time pane.
        late: Option<Box<Trigger>>,
    },
    /// Fires once the processing time, transformed from the arrival of the pane's
    /// first element, has passed.
    AfterProcessingTime {
        /// Applied in order to the first element's arrival time.
        transforms: Vec<TimeTransform>,
    },
    /// Fires once the pane holds at least this many elements.
    AfterCount {
        /// The count.
        count: u64,
    },
    /// Fires whenever the sub-trigger would, forever.
    Repeatedly {
        /// The repeated trigger.
        trigger: Box<Trigger>,
    },
    /// Fires as the first sub-trigger, then as the second, and so on; finishes after
    /// the last.
    AfterEach {
        /// The sub-triggers, in order.
        triggers: Vec<Trigger>,
    },
    /// Fires when any sub-trigger fires; finishes then.
    AfterFirst {
        /// The sub-triggers.
        triggers: Vec<Trigger>,
    },
    /// Fires when every sub-trigger has fired; finishes then.
    AfterAll {
        /// The sub-triggers.
        triggers: Vec<Trigger>,
    },
    /// Fires as `main` until `until` fires, then fires a last time and finishes.
    OrFinally {
        /// The trigger firing until then.
        main: Box<Trigger>,
        /// The trigger that ends it.
        until: Box<Trigger>,
    },
}

/// `AfterWatermark.pastEndOfWindow()` while it is being built: the one trigger that
/// has early and late firings, so that they cannot be asked of another. Anything that
/// takes a trigger takes it (`impl Into<Trigger>`); in a list, write `.into()`.
///
/// ```
/// use tidewater::{Trigger, Window, WindowFn};
/// let w = Window::into(WindowFn::fixed(10))
///     .triggering(Trigger::after_watermark().with_late_firings(Trigger::after_count(1)));
/// let either = Trigger::after_first(vec![Trigger::after_watermark().into(), Trigger::after_count(5)]);
/// ```
///
/// Early firings on another trigger do not compile (they used to be ignored):
///
/// ```compile_fail
/// use tidewater::Trigger;
/// let t = Trigger::after_count(10).with_early_firings(Trigger::after_count(1));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfterWatermarkTrigger {
    early: Option<Box<Trigger>>,
    late: Option<Box<Trigger>>,
}

impl AfterWatermarkTrigger {
    /// Fires `early` repeatedly before the on-time pane.
    ///
    /// ```
    /// use tidewater::Trigger;
    /// let t: Trigger = Trigger::after_watermark().with_early_firings(Trigger::after_count(100)).into();
    /// assert!(t.may_fire_before_end_of_global_window());
    /// ```
    pub fn with_early_firings(mut self, early: impl Into<Trigger>) -> Self {
        self.early = Some(Box::new(early.into()));
        self
    }

    /// Fires `late` repeatedly after the on-time pane.
    ///
    /// ```
    /// use tidewater::Trigger;
    /// let t: Trigger = Trigger::after_watermark().with_late_firings(Trigger::after_count(1)).into();
    /// assert!(matches!(t, Trigger::AfterWatermark { late: Some(_), .. }));
    /// ```
    pub fn with_late_firings(mut self, late: impl Into<Trigger>) -> Self {
        self.late = Some(Box::new(late.into()));
        self
    }

    /// `trigger.orFinally(until)`, as [`Trigger::or_finally`].
    ///
    /// ```
    /// use tidewater::Trigger;
    /// let t = Trigger::after_watermark().or_finally(Trigger::after_count(10));
    /// assert!(matches!(t, Trigger::OrFinally { .. }));
    /// ```
    pub fn or_finally(self, until: impl Into<Trigger>) -> Trigger {
        Trigger::from(self).or_finally(until)
    }
}

/// `AfterProcessingTime.pastFirstElementInPane()` while it is being built: the one
/// trigger with delays and alignments. Anything that takes a trigger takes it
/// (`impl Into<Trigger>`); in a list, write `.into()`.
///
/// ```compile_fail
/// use tidewater::Trigger;
/// // A delay on another trigger does not compile (it used to be ignored).
/// let t = Trigger::after_count(10).plus_delay_of(1000);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfterProcessingTimeTrigger {
    transforms: Vec<TimeTransform>,
}

impl AfterProcessingTimeTrigger {
    /// Adds a delay ([`Duration`](crate::Duration), or milliseconds).
    ///
    /// ```
    /// use tidewater::{Duration, TimeTransform, Trigger};
    /// let t: Trigger = Trigger::after_processing_time().plus_delay_of(Duration::from_secs(1)).into();
    /// assert_eq!(t, Trigger::AfterProcessingTime { transforms: vec![TimeTransform::Delay { ms: 1000 }] });
    /// ```
    pub fn plus_delay_of(mut self, delay: impl Into<crate::Duration>) -> Self {
        self.transforms.push(TimeTransform::Delay {
            ms: delay.into().millis(),
        });
        self
    }

    /// Aligns the firing time to `offset + k * period`.
    ///
    /// ```
    /// use tidewater::{Duration, Trigger};
    /// let t: Trigger = Trigger::after_processing_time()
    ///     .aligned_to(Duration::from_secs(10), Duration::ZERO)
    ///     .into();
    /// assert!(t.validate().is_ok());
    /// ```
    pub fn aligned_to(
        mut self,
        period: impl Into<crate::Duration>,
        offset: impl Into<crate::Duration>,
    ) -> Self {
        self.transforms.push(TimeTransform::AlignTo {
            period_ms: period.into().millis(),
            offset_ms: offset.into().millis(),
        });
        self
    }

    /// `trigger.orFinally(until)`, as [`Trigger::or_finally`].
    ///
    /// ```
    /// use tidewater::Trigger;
    /// let t = Trigger::after_processing_time().plus_delay_of(10).or_finally(Trigger::after_count(3));
    /// assert!(matches!(t, Trigger::OrFinally { .. }));
    /// ```
    pub fn or_finally(self, until: impl Into<Trigger>) -> Trigger {
        Trigger::from(self).or_finally(until)
    }
}

impl From<AfterProcessingTimeTrigger> for Trigger {
    fn from(t: AfterProcessingTimeTrigger) -> Trigger {
        Trigger::AfterProcessingTime {
            transforms: t.transforms,
        }
    }
}

impl From<AfterWatermarkTrigger> for Trigger {
    fn from(t: AfterWatermarkTrigger) -> Trigger {
        Trigger::AfterWatermark {
            early: t.early,
            late: t.late,
        }
    }
}

impl Trigger {
    /// `AfterWatermark.pastEndOfWindow()`; early and late firings are added to what it
    /// returns, so no other trigger can be given them.
    ///
    /// ```
    /// use tidewater::Trigger;
    /// let t: Trigger = Trigger::after_watermark().into();
    /// assert_eq!(t, Trigger::AfterWatermark { early: None, late: None });
    /// ```
    pub fn after_watermark() -> AfterWatermarkTrigger {
        AfterWatermarkTrigger {
            early: None,
            late: None,
        }
    }

    /// `AfterProcessingTime.pastFirstElementInPane()`; delays and alignments are
    /// added to what it returns, so no other trigger can be given them.
    ///
    /// ```
    /// use tidewater::Trigger;
    /// let t: Trigger = Trigger::after_processing_time().into();
    /// assert_eq!(t, Trigger::AfterProcessingTime { transforms: vec![] });
    /// ```
    pub fn after_processing_time() -> AfterProcessingTimeTrigger {
        AfterProcessingTimeTrigger {
            transforms: Vec::new(),
        }
    }

    /// `AfterPane.elementCountAtLeast(count)`.
    pub fn after_count(count: u64) -> Trigger {
        Trigger::AfterCount { count }
    }

    /// `Repeatedly.forever(trigger)`.
    pub fn repeatedly(trigger: impl Into<Trigger>) -> Trigger {
        Trigger::Repeatedly {
            trigger: Box::new(trigger.into()),
        }
    }

    /// `AfterEach.inOrder(triggers)`.
    pub fn after_each(triggers: Vec<Trigger>) -> Trigger {
        Trigger::AfterEach { triggers }
    }

    /// `AfterFirst.of(triggers)`.
    pub fn after_first(triggers: Vec<Trigger>) -> Trigger {
        Trigger::AfterFirst { triggers }
    }

    /// `AfterAll.of(triggers)`.
    pub fn after_all(triggers: Vec<Trigger>) -> Trigger {
        Trigger::AfterAll { triggers }
    }

    /// `trigger.orFinally(until)`.
    pub fn or_finally(self, until: impl Into<Trigger>) -> Trigger {
        Trigger::OrFinally {
            main: Box::new(self),
            until: Box::new(until.into()),
        }
    }

    /// Whether the trigger can ever fire more than the final pane; `Never` cannot.
    /// A GroupByKey of an unbounded input in the global window needs a trigger that
    /// fires before the end of time.
    pub fn may_fire_before_end_of_global_window(&self) -> bool {
        match self {
            Trigger::Default | Trigger::Never => false,
            Trigger::AfterWatermark { early, late: _ } => early
                .as_ref()
                .is_some_and(|e| e.may_fire_before_end_of_global_window()),
            Trigger::AfterProcessingTime { .. } | Trigger::AfterCount { .. } => true,
            Trigger::Repeatedly { trigger } => trigger.may_fire_before_end_of_global_window(),
            Trigger::AfterEach { triggers } => triggers
                .first()
                .is_some_and(|t| t.may_fire_before_end_of_global_window()),
            Trigger::AfterFirst { triggers } => triggers
                .iter()
                .any(|t| t.may_fire_before_end_of_global_window()),
            Trigger::AfterAll { triggers } => triggers
                .iter()
                .all(|t| t.may_fire_before_end_of_global_window()),
            Trigger::OrFinally { main, until } => {
                main.may_fire_before_end_of_global_window()
                    || until.may_fire_before_end_of_global_window()
            }
        }
    }

    /// Checks the trigger's parameters: counts and periods positive, composites not
    /// empty. The error names the offending part.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Trigger::Default | Trigger::Never => Ok(()),
            Trigger::AfterWatermark { early, late } => {
                early.iter().chain(late.iter()).try_for_each(|t| t.validate())
            }
            Trigger::AfterProcessingTime { transforms } => transforms.iter().try_for_each(|t| match t {
                TimeTransform::Delay { ms } if *ms < 0 => Err(format!("AfterProcessingTime delay must not be negative, got {ms} ms")),
                TimeTransform::AlignTo { period_ms, .. } if *period_ms <= 0 => Err(format!("AfterProcessingTime alignment period must be positive, got {period_ms} ms")),
                TimeTransform::AlignTo { period_ms, offset_ms } if *offset_ms < 0 || offset_ms >= period_ms => {
                    Err(format!("AfterProcessingTime alignment offset must be in [0, {period_ms}), got {offset_ms} ms"))
                }
                _ => Ok(()),
            }),
            Trigger::AfterCount { count: 0 } => Err("AfterCount needs a count of at least 1".into()),
            Trigger::AfterCount { .. } => Ok(()),
            Trigger::Repeatedly { trigger } => trigger.validate(),
            Trigger::AfterEach { triggers } | Trigger::AfterFirst { triggers } | Trigger::AfterAll { triggers } => {
                if triggers.is_empty() {
                    return Err("a composite trigger (AfterEach, AfterFirst, AfterAll) needs at least one sub-trigger".into());
                }
                triggers.iter().try_for_each(|t| t.validate())
            }
            Trigger::OrFinally { main, until } => main.validate().and(until.validate()),
        }
    }
}
