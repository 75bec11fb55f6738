//! Windows and panes carried by every element.

use crate::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The single window of the global windowing strategy.
///
/// ```
/// use tidewater::{GlobalWindow, Timestamp};
/// assert_eq!(GlobalWindow::MAX_TIMESTAMP, Timestamp::from_millis(Timestamp::MAX.millis() - 86_400_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalWindow;

impl GlobalWindow {
    /// The end of the global window: one day before [`Timestamp::MAX`], as in Beam, so
    /// that timers at the end of the window can still fire.
    pub const MAX_TIMESTAMP: Timestamp = Timestamp(Timestamp::MAX.0 - 86_400_000);
}

/// A window an element belongs to.
///
/// ```
/// use tidewater::{BoundedWindow, Timestamp};
/// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
/// assert_eq!(w.max_timestamp(), Timestamp::from_millis(9));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum BoundedWindow {
    /// The global window.
    Global,
    /// The half-open interval `[start, end)`.
    Interval {
        /// Inclusive start.
        start: Timestamp,
        /// Exclusive end.
        end: Timestamp,
    },
    /// A window of a user-defined type ([`WindowType`]), such as the per-auction window
    /// of Beam's Nexmark Q9: its bounds, and its value encoded.
    Custom(CustomWindow),
}

impl BoundedWindow {
    /// The first timestamp of the window: `start` of an interval, [`Timestamp::MIN`]
    /// for the global window.
    ///
    /// ```
    /// use tidewater::{BoundedWindow, Timestamp};
    /// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
    /// assert_eq!(w.start(), Timestamp::from_millis(0));
    /// assert_eq!(BoundedWindow::Global.start(), Timestamp::MIN);
    /// ```
    pub fn start(&self) -> Timestamp {
        match self {
            BoundedWindow::Global => Timestamp::MIN,
            BoundedWindow::Interval { start, .. } => *start,
            BoundedWindow::Custom(c) => c.0.start,
        }
    }

    /// The end of the window, exclusive: `end` of an interval; for the global window
    /// the timestamp after its [`max_timestamp`](BoundedWindow::max_timestamp).
    ///
    /// ```
    /// use tidewater::{BoundedWindow, GlobalWindow, Timestamp};
    /// let w = BoundedWindow::Interval { start: Timestamp::from_millis(0), end: Timestamp::from_millis(10) };
    /// assert_eq!(w.end(), Timestamp::from_millis(10));
    /// assert_eq!(BoundedWindow::Global.end().millis(), GlobalWindow::MAX_TIMESTAMP.millis() + 1);
    /// ```
    pub fn end(&self) -> Timestamp {
        match self {
            BoundedWindow::Global => Timestamp(GlobalWindow::MAX_TIMESTAMP.0 + 1),
            BoundedWindow::Interval { end, .. } => *end,
            BoundedWindow::Custom(c) => c.0.end,
        }
    }

    /// The largest timestamp that belongs to the window.
    pub fn max_timestamp(&self) -> Timestamp {
        match self {
            BoundedWindow::Global => GlobalWindow::MAX_TIMESTAMP,
            BoundedWindow::Interval { end, .. } => Timestamp(end.0 - 1),
            BoundedWindow::Custom(c) => Timestamp(c.0.end.0 - 1),
        }
    }

    /// The window of a user-defined type `w`, as every element carries it.
    ///
    /// ```
    /// # use serde::{Deserialize, Serialize};
    /// use tidewater::{BoundedWindow, Timestamp, WindowType};
    /// /// The window of one auction: its bounds and its id.
    /// #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    /// struct AuctionWindow { start: i64, end: i64, auction: u64 }
    /// impl WindowType for AuctionWindow {
    ///     fn start(&self) -> Timestamp { Timestamp(self.start) }
    ///     fn end(&self) -> Timestamp { Timestamp(self.end) }
    /// }
    /// let a = AuctionWindow { start: 0, end: 10, auction: 7 };
    /// let w = BoundedWindow::custom(&a);
    /// assert_eq!(w.max_timestamp(), Timestamp(9));
    /// assert_eq!(w.to_custom::<AuctionWindow>(), Some(a));
    /// assert_eq!(BoundedWindow::Global.to_custom::<AuctionWindow>(), None);
    /// ```
    pub fn custom<W: WindowType>(w: &W) -> BoundedWindow {
        BoundedWindow::custom_among(w, &[])
    }

    /// [`BoundedWindow::custom`], but a window of `among` equal to it (same type, bounds
    /// and encoding) is returned instead, sharing its encoding: a merging WindowFn hands
    /// back mostly the windows it was given, and making each again allocated. (`among`
    /// is searched only when short: merges of a key's few windows.)
    pub(crate) fn custom_among<W: WindowType>(w: &W, among: &[BoundedWindow]) -> BoundedWindow {
        let (start, end) = (w.start(), w.end());
        assert!(
            start <= end,
            "a window of {} must not end ({end:?}) before it starts ({start:?})",
            std::any::type_name::<W>()
        );
        let kind = std::any::type_name::<W>();
        thread_local! {
            /// The encoding of the window being made: a window found among others
            /// allocates nothing, a new one exactly its bytes.
            static BYTES: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BYTES.with_borrow_mut(|bytes| {
            bytes.clear();
            if let Err(e) = crate::coder::encode_into(w, bytes) {
                panic!("a window of {kind} does not encode: {e}");
            }
            if among.len() <= 32 {
                let same = among.iter().find(|b| match b {
                    BoundedWindow::Custom(c) => {
                        c.0.start == start
                            && c.0.end == end
                            && *c.0.bytes == **bytes
                            && c.0.kind == kind
                    }
                    _ => false,
                });
                if let Some(same) = same {
                    return same.clone();
                }
            }
            BoundedWindow::Custom(CustomWindow(Arc::new(CustomRepr {
                start,
                end,
                kind: std::borrow::Cow::Borrowed(kind),
                bytes: Box::from(&bytes[..]),
            })))
        })
    }

    /// This window as the user-defined type `W`, if it is one (`None` for the global
    /// window, an interval or a window of another type).
    pub fn to_custom<W: WindowType>(&self) -> Option<W> {
        match self {
            BoundedWindow::Custom(c) if *c.0.kind == *std::any::type_name::<W>() => {
                crate::coder::decode(&c.0.bytes).ok()
            }
            _ => None,
        }
    }
}

/// A window type of the user's own, such as Beam's `AuctionOrBidWindow` in Nexmark Q9:
/// an interval with more fields. Windows of it travel as [`BoundedWindow::Custom`]
/// (made by [`BoundedWindow::custom`], read back by [`BoundedWindow::to_custom`]); two
/// windows are the same window when their bounds and encodings are equal. Assigned and
/// merged by a [`CustomWindowFn`](crate::CustomWindowFn) or an
/// [`ElementWindowFn`](crate::ElementWindowFn) whose `Window` it is.
///
/// [`BoundedWindow`] is a `WindowType` too: a WindowFn whose windows are intervals
/// names it as its `Window`.
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// use tidewater::{Timestamp, WindowType};
/// #[derive(Clone, Debug, Serialize, Deserialize)]
/// struct Shift { day: i64, night: bool }
/// impl WindowType for Shift {
///     fn start(&self) -> Timestamp { Timestamp(self.day * 1000 + if self.night { 500 } else { 0 }) }
///     fn end(&self) -> Timestamp { Timestamp(self.start().millis() + 500) }
/// }
/// assert_eq!(Shift { day: 1, night: true }.end(), Timestamp(2000));
/// ```
pub trait WindowType:
    Clone + std::fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The window's first timestamp.
    fn start(&self) -> Timestamp;
    /// The window's end, exclusive: its last timestamp is `end - 1`, and it fires when
    /// the watermark passes that.
    fn end(&self) -> Timestamp;
    /// The window as elements carry it. Provided; [`BoundedWindow`] keeps itself.
    fn into_bounded(self) -> BoundedWindow {
        BoundedWindow::custom(&self)
    }
    /// [`WindowType::into_bounded`], sharing the encoding of an equal window of `among`
    /// if there is one (what a merging WindowFn's result is made of). Provided;
    /// [`BoundedWindow`] keeps itself.
    fn into_bounded_among(self, among: &[BoundedWindow]) -> BoundedWindow {
        BoundedWindow::custom_among(&self, among)
    }
    /// The window back from how elements carry it: `None` if it is not of this type.
    /// Provided.
    fn from_bounded(w: &BoundedWindow) -> Option<Self> {
        w.to_custom()
    }
}

impl WindowType for BoundedWindow {
    fn start(&self) -> Timestamp {
        BoundedWindow::start(self)
    }
    fn end(&self) -> Timestamp {
        BoundedWindow::end(self)
    }
    fn into_bounded(self) -> BoundedWindow {
        self
    }
    fn into_bounded_among(self, _: &[BoundedWindow]) -> BoundedWindow {
        self
    }
    fn from_bounded(w: &BoundedWindow) -> Option<Self> {
        Some(w.clone())
    }
}

/// A window of a user-defined type as elements carry it: bounds, the type's name and
/// the value's encoding, shared (cloning a window does not copy the bytes).
///
/// ```
/// # use serde::{Deserialize, Serialize};
/// use tidewater::{BoundedWindow, Timestamp, WindowType};
/// #[derive(Clone, Debug, Serialize, Deserialize)]
/// struct Tagged { start: i64, end: i64, tag: u8 }
/// impl WindowType for Tagged {
///     fn start(&self) -> Timestamp { Timestamp(self.start) }
///     fn end(&self) -> Timestamp { Timestamp(self.end) }
/// }
/// let BoundedWindow::Custom(c) = BoundedWindow::custom(&Tagged { start: 0, end: 5, tag: 7 }) else {
///     unreachable!()
/// };
/// assert_eq!(c.start_and_end(), (Timestamp(0), Timestamp(5)));
/// assert!(c.type_name().ends_with("Tagged"));
/// assert!(!c.bytes().is_empty());
/// assert!(format!("{c:?}").starts_with("Tagged[0, 5)#"));
/// ```
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CustomWindow(Arc<CustomRepr>);

impl Serialize for CustomWindow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CustomWindow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        CustomRepr::deserialize(d).map(|r| CustomWindow(Arc::new(r)))
    }
}

/// The type's name is borrowed when the window is made in this process (no allocation
/// per window), owned when decoded. Hashed without it: windows of one map are almost
/// always of one type, and equal windows still hash alike.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
struct CustomRepr {
    start: Timestamp,
    end: Timestamp,
    kind: std::borrow::Cow<'static, str>,
    bytes: Box<[u8]>,
}

impl std::hash::Hash for CustomRepr {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.start.hash(h);
        self.end.hash(h);
        self.bytes.hash(h);
    }
}

impl CustomWindow {
    /// The window's bounds: start (inclusive) and end (exclusive).
    pub fn start_and_end(&self) -> (Timestamp, Timestamp) {
        (self.0.start, self.0.end)
    }
    /// The name of the window's type.
    pub fn type_name(&self) -> &str {
        &self.0.kind
    }
    /// The window value's encoding.
    pub fn bytes(&self) -> &[u8] {
        &self.0.bytes
    }
}

impl std::fmt::Debug for CustomWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = self.0.kind.rsplit("::").next().unwrap_or(&self.0.kind);
        write!(
            f,
            "{short}[{}, {})#",
            self.0.start.millis(),
            self.0.end.millis()
        )?;
        for b in self.0.bytes.iter() {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// The windows of one element: almost always one, so one does not allocate.
///
/// ```
/// use tidewater::{BoundedWindow, Windows};
/// assert_eq!(Windows::global().iter().collect::<Vec<_>>(), vec![&BoundedWindow::Global]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Windows {
    /// Exactly one window.
    One(BoundedWindow),
    /// Several windows (sliding windows); an element is processed once per window.
    Many(Vec<BoundedWindow>),
}

impl Windows {
    /// The global window alone.
    pub const fn global() -> Self {
        Windows::One(BoundedWindow::Global)
    }

    /// The windows, in order.
    pub fn iter(&self) -> std::slice::Iter<'_, BoundedWindow> {
        match self {
            Windows::One(w) => std::slice::from_ref(w).iter(),
            Windows::Many(ws) => ws.iter(),
        }
    }
}

/// When a pane fired relative to the watermark (Beam's `PaneInfo.Timing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Timing {
    /// Before the watermark passed the end of the window.
    Early,
    /// The pane fired when the watermark passed the end of the window.
    OnTime,
    /// After the on-time pane.
    Late,
    /// Not produced by a trigger firing (for example an element straight from a source).
    Unknown,
}

/// Which firing of a window produced an element (Beam's `PaneInfo`).
///
/// ```
/// let p = tidewater::PaneInfo::NO_FIRING;
/// assert!(p.is_first && p.is_last);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PaneInfo {
    /// Timing of the firing.
    pub timing: Timing,
    /// The first pane of its window.
    pub is_first: bool,
    /// The last pane of its window: no more will follow.
    pub is_last: bool,
    /// 0 for the first pane, counting every pane of the window.
    pub index: u64,
    /// Counting only on-time and late panes; -1 for early panes.
    pub non_speculative_index: i64,
}

impl PaneInfo {
    /// The pane of an element that no trigger produced.
    pub const NO_FIRING: PaneInfo = PaneInfo {
        timing: Timing::Unknown,
        is_first: true,
        is_last: true,
        index: 0,
        non_speculative_index: 0,
    };
    /// The single on-time pane of a bounded (batch) grouping with the default trigger.
    pub const ON_TIME_AND_ONLY_FIRING: PaneInfo = PaneInfo {
        timing: Timing::OnTime,
        is_first: true,
        is_last: true,
        index: 0,
        non_speculative_index: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Debug, Serialize, Deserialize)]
    struct Tagged {
        start: i64,
        end: i64,
        tag: u8,
    }

    impl WindowType for Tagged {
        fn start(&self) -> Timestamp {
            Timestamp(self.start)
        }
        fn end(&self) -> Timestamp {
            Timestamp(self.end)
        }
    }

    fn shared(a: &BoundedWindow, b: &BoundedWindow) -> bool {
        match (a, b) {
            (BoundedWindow::Custom(a), BoundedWindow::Custom(b)) => Arc::ptr_eq(&a.0, &b.0),
            _ => false,
        }
    }

    /// A merging WindowFn's result shares the encoding of the window it names among
    /// those it was given; a window that is not among them is made afresh.
    #[test]
    fn a_window_among_others_shares_the_equal_ones_encoding() {
        let (a, b) = (
            Tagged {
                start: 0,
                end: 5,
                tag: 1,
            },
            Tagged {
                start: 0,
                end: 5,
                tag: 2,
            },
        );
        let among = [a.clone().into_bounded(), b.clone().into_bounded()];
        assert!(shared(&b.clone().into_bounded_among(&among), &among[1]));
        assert!(shared(&a.clone().into_bounded_among(&among), &among[0]));
        let c = Tagged {
            start: 0,
            end: 6,
            tag: 2,
        }
        .into_bounded_among(&among);
        assert!(!among.iter().any(|w| shared(&c, w)));
        assert_eq!(
            c,
            Tagged {
                start: 0,
                end: 6,
                tag: 2
            }
            .into_bounded()
        );
        // Equal windows hash alike whether the type's name was borrowed or decoded.
        let decoded: BoundedWindow = crate::coder::round_trip(&among[0]).unwrap();
        let hash = |w: &BoundedWindow| {
            use std::hash::{BuildHasher, BuildHasherDefault};
            BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(w)
        };
        assert_eq!(decoded, among[0]);
        assert_eq!(hash(&decoded), hash(&among[0]));
    }
}
