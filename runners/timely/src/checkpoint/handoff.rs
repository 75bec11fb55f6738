//! Parts encoded on a worker's thread, handed to its snapshot writer as they come:
//! when no core is spare for the writer to encode on (see [`super::writer`]), the
//! worker encodes a frozen state itself, and the writer writes each part into the file
//! as it arrives, so the parts waiting between them stay under a bound
//! ([`HANDOFF_BYTES`]) rather than the whole state gathered first. The worker waits
//! only when that many bytes are waiting, for a writer busy with the files before.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use tidewater::{Error, Result};
use tidewater_runners_core::checkpoint::{LaterPartsOf, PartsSink};
use tidewater_runners_core::snapshot::Part;

/// The most bytes of parts waiting for the writer before the worker waits.
pub const HANDOFF_BYTES: usize = 64 << 20;

#[derive(Default)]
struct State {
    parts: VecDeque<Part>,
    bytes: usize,
    /// The encoding is over: how it ended.
    done: Option<std::result::Result<(), String>>,
    /// The writer stopped reading (the file failed, or the job was dropped).
    reader_gone: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The worker's end: parts go in as they are encoded.
pub struct Feed {
    shared: Arc<Shared>,
    limit: usize,
}

/// A handoff of at most `limit` waiting bytes: the worker's end, and the parts as the
/// writer takes them (a [`LaterPartsOf`] to hand it with the snapshot).
pub fn handoff(limit: usize) -> (Feed, LaterPartsOf) {
    let shared = Arc::new(Shared::default());
    let relay = Relay {
        shared: Arc::clone(&shared),
    };
    (
        Feed { shared, limit },
        Box::new(move |sink: &mut PartsSink<'_>| relay.pass(sink)),
    )
}

impl Feed {
    /// Hands `part` over, once fewer than the limit's bytes are waiting; an error if
    /// the writer stopped reading.
    pub fn send(&self, part: Part) -> Result<()> {
        let mut st = self.shared.lock();
        while st.bytes >= self.limit && !st.reader_gone {
            st = self
                .shared
                .changed
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
        if st.reader_gone {
            return Err(Error::Internal(
                "the snapshot writer stopped taking the parts of a snapshot".into(),
            ));
        }
        st.bytes += part.bytes.len();
        st.parts.push_back(part);
        self.shared.changed.notify_all();
        Ok(())
    }

    /// The encoding is over, with `result` (an error makes the writer's file fail).
    pub fn finish(self, result: std::result::Result<(), String>) {
        self.shared.lock().done = Some(result);
        self.shared.changed.notify_all();
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if st.done.is_none() {
            st.done = Some(Err("the encoding of a snapshot stopped".into()));
            self.shared.changed.notify_all();
        }
    }
}

/// The writer's end.
struct Relay {
    shared: Arc<Shared>,
}

impl Relay {
    /// Every part to `sink` as it comes, until the encoding is over.
    fn pass(self, sink: &mut PartsSink<'_>) -> Result<()> {
        loop {
            let mut st = self.shared.lock();
            while st.parts.is_empty() && st.done.is_none() {
                st = self
                    .shared
                    .changed
                    .wait(st)
                    .unwrap_or_else(|e| e.into_inner());
            }
            let Some(part) = st.parts.pop_front() else {
                let done = st.done.clone().expect("over");
                return done.map_err(|message| Error::Checkpoint { message });
            };
            st.bytes -= part.bytes.len();
            self.shared.changed.notify_all();
            drop(st);
            sink(part)?;
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.lock().reader_gone = true;
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidewater_runners_core::snapshot::Scope;

    fn part(g: u32, len: usize) -> Part {
        Part {
            transform: "G".into(),
            scope: Scope::KeyGroup(g),
            bytes: vec![g as u8; len],
        }
    }

    /// The writer gets every part in order while the worker never has more than the
    /// limit's bytes waiting (beyond the part it hands over).
    #[test]
    fn parts_pass_in_order_and_the_worker_waits_at_the_limit() {
        let (feed, relay) = handoff(250);
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            relay(&mut |p| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                got.push(p);
                Ok(())
            })
            .map(|()| got)
        });
        let mut most = 0;
        for g in 0..20 {
            feed.send(part(g, 100)).unwrap();
            most = most.max(feed.shared.lock().bytes);
        }
        feed.finish(Ok(()));
        let got = reader.join().unwrap().unwrap();
        assert_eq!(got, (0..20).map(|g| part(g, 100)).collect::<Vec<_>>());
        assert!(most <= 350, "{most} bytes waited");
    }

    /// An encoding that fails fails the writer's file; a writer that stops reading
    /// stops the encoding.
    #[test]
    fn a_failure_at_either_end_reaches_the_other() {
        let (feed, relay) = handoff(1 << 20);
        feed.send(part(0, 10)).unwrap();
        feed.finish(Err("the frozen state does not decode".into()));
        let e = relay(&mut |_| Ok(())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "checkpoint cannot be restored: the frozen state does not decode"
        );
        let (feed, relay) = handoff(10);
        let reader =
            std::thread::spawn(move || relay(&mut |_| Err(Error::Internal("disk full".into()))));
        feed.send(part(0, 10)).unwrap();
        let stopped = (1..100).find_map(|g| feed.send(part(g, 10)).err());
        assert!(
            stopped.is_some(),
            "the worker stops once the writer is gone"
        );
        assert!(reader.join().unwrap().is_err());
    }
}
