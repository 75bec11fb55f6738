//! The bridges between async connectors and the synchronous pipeline: a slow sink
//! throttles the writer, a reader runs a bounded number of chunks ahead, a bridged
//! position splits chunks and replays exactly, and what goes wrong on the async side
//! comes back as a clear error naming it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};
use tidewater::io::{
    AsyncSink, AsyncSource, AsyncSourceReader, BridgeOptions, SinkBridge, SourceBridge,
};
use tidewater::{ReadStatus, Sink, Source, Timestamp, Txn, UserError, WindowedValue};

/// Counts its writes, each taking `write_ms`; fails a write of `fail_on` elements.
#[derive(Serialize, Deserialize, Default)]
struct SlowSink {
    write_ms: u64,
    stage_ms: u64,
    fail_on: Option<usize>,
    #[serde(skip)]
    done: Arc<AtomicUsize>,
}

#[async_trait]
impl AsyncSink for SlowSink {
    type In = u64;
    async fn write(&mut self, _txn: &Txn, xs: Vec<WindowedValue<u64>>) -> Result<(), UserError> {
        tokio::time::sleep(Duration::from_millis(self.write_ms)).await;
        if Some(xs.len()) == self.fail_on {
            return Err("boom".into());
        }
        self.done.fetch_add(1, SeqCst);
        Ok(())
    }
    async fn stage(&mut self, _txn: &Txn) -> Result<(), UserError> {
        tokio::time::sleep(Duration::from_millis(self.stage_ms)).await;
        Ok(())
    }
    async fn commit(&mut self, _txn: &Txn) -> Result<(), UserError> {
        Ok(())
    }
    async fn abort(&mut self, _txn: &Txn) -> Result<(), UserError> {
        Ok(())
    }
    fn bridge_options(&self) -> BridgeOptions {
        BridgeOptions {
            capacity: 2,
            timeout: Duration::from_millis(500),
            ..Default::default()
        }
    }
}

fn batch(n: u64) -> Vec<WindowedValue<u64>> {
    (0..n).map(WindowedValue::in_global_window).collect()
}

const TXN: Txn = Txn {
    epoch: 0,
    instance: 0,
};

#[test]
fn a_slow_sink_throttles_the_writer_instead_of_queueing_everything() {
    let done = Arc::new(AtomicUsize::new(0));
    let mut sink = SinkBridge::new(SlowSink {
        write_ms: 20,
        done: Arc::clone(&done),
        ..Default::default()
    });
    let started = Instant::now();
    let mut most_pending = 0;
    for sent in 1..=12 {
        sink.write(&TXN, batch(3)).unwrap();
        most_pending = most_pending.max(sent - done.load(SeqCst));
    }
    // Two queued, one being written, one waiting for room: never more.
    assert!(most_pending <= 4, "{most_pending} batches were pending");
    assert!(
        started.elapsed() >= Duration::from_millis(8 * 20),
        "the writer did not wait for the sink: {:?}",
        started.elapsed()
    );
    // Staging waits for every write before it.
    sink.stage(&TXN).unwrap();
    assert_eq!(done.load(SeqCst), 12);
}

#[test]
fn a_failed_write_fails_the_next_call_with_the_transaction_named() {
    let mut sink = SinkBridge::new(SlowSink {
        fail_on: Some(2),
        ..Default::default()
    });
    sink.write(&TXN, batch(2)).unwrap();
    let e = sink.stage(&TXN).unwrap_err().to_string();
    assert_eq!(e, "writing transaction e0-i0 failed: boom");
    let e = sink.write(&TXN, batch(1)).unwrap_err().to_string();
    assert_eq!(e, "writing transaction e0-i0 failed: boom");
}

#[test]
fn a_sink_that_does_not_answer_is_an_error_not_a_hang() {
    let mut sink = SinkBridge::new(SlowSink {
        stage_ms: 10_000,
        ..Default::default()
    });
    sink.write(&TXN, batch(1)).unwrap();
    let started = Instant::now();
    let e = sink.stage(&TXN).unwrap_err().to_string();
    assert_eq!(
        e,
        "the sink, asked to stage transaction e0-i0, did not answer within 500ms"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// The numbers below `n` in partition 0 (position: the next number), read `chunk` at a
/// time; counts the reads; fails to open at `bad`.
#[derive(Serialize, Deserialize, Default)]
struct Numbers {
    n: u64,
    chunk: usize,
    bad: Option<u64>,
    #[serde(skip)]
    reads: Arc<AtomicUsize>,
}

struct NumbersReader {
    next: u64,
    n: u64,
    reads: Arc<AtomicUsize>,
}

#[async_trait]
impl AsyncSource for Numbers {
    type Output = u64;
    type Position = u64;
    type Reader = NumbersReader;
    fn is_bounded(&self) -> bool {
        true
    }
    async fn partitions(&self, _desired: usize) -> Result<usize, UserError> {
        Ok(1)
    }
    fn initial_position(&self, _p: usize, _n: usize) -> u64 {
        0
    }
    async fn open(&self, _p: usize, _n: usize, at: u64) -> Result<NumbersReader, UserError> {
        if Some(at) == self.bad {
            return Err("nope".into());
        }
        Ok(NumbersReader {
            next: at,
            n: self.n,
            reads: Arc::clone(&self.reads),
        })
    }
    fn bridge_options(&self) -> BridgeOptions {
        BridgeOptions {
            chunk: self.chunk,
            capacity: 2,
            timeout: Duration::from_secs(5),
        }
    }
}

#[async_trait]
impl AsyncSourceReader for NumbersReader {
    type Output = u64;
    type Position = u64;
    async fn read(
        &mut self,
        max: usize,
        out: &mut Vec<(u64, Timestamp)>,
    ) -> Result<ReadStatus, UserError> {
        self.reads.fetch_add(1, SeqCst);
        while out.len() < max {
            if self.next >= self.n {
                return Ok(ReadStatus::Done);
            }
            out.push((self.next, Timestamp(self.next as i64)));
            self.next += 1;
        }
        Ok(ReadStatus::More)
    }
    fn position(&self) -> u64 {
        self.next
    }
    fn watermark(&self) -> Timestamp {
        Timestamp(self.next as i64)
    }
}

type Position = <SourceBridge<Numbers> as Source>::Position;

/// Reads `bridge` from `pos` to the end, `max` at a time: the records, and after each
/// read the records taken so far, the position and the watermark.
fn read_all(
    bridge: &mut SourceBridge<Numbers>,
    mut pos: Position,
    max: usize,
) -> (Vec<u64>, Vec<(usize, Position, Timestamp)>) {
    let mut records = Vec::new();
    let mut after = Vec::new();
    loop {
        let mut out = Vec::new();
        let status = bridge
            .read(0, 1, &mut pos, max, Timestamp(0), &mut out)
            .unwrap();
        assert!(out.len() <= max);
        records.extend(out.into_iter().map(|(x, _)| x));
        after.push((records.len(), pos.clone(), bridge.watermark(0, 1, &pos)));
        if status == ReadStatus::Done {
            return (records, after);
        }
    }
}

#[test]
fn a_bridged_position_splits_chunks_and_a_reader_resumes_exactly_there() {
    let source = || Numbers {
        n: 100,
        chunk: 7,
        ..Default::default()
    };
    let mut bridge = SourceBridge::new(source());
    assert_eq!(bridge.try_partitions(4).unwrap(), 1);
    let start = bridge.initial_position(0, 1);
    let (records, after) = read_all(&mut bridge, start, 5);
    assert_eq!(records, (0..100).collect::<Vec<_>>());
    // The first read waits for the first chunk (0..7) and takes 5 of it: the position
    // is the chunk's start and 5 taken; the watermark follows whole chunks only.
    assert_eq!(
        (after[0].1.clone(), after[0].2),
        (
            tidewater::io::BridgePosition { at: 0, skip: 5 },
            Timestamp::MIN
        )
    );
    assert_eq!(after.last().unwrap().2, Timestamp(100));
    // A new reader from any position reached reads exactly the rest.
    for (taken, pos, _) in &after {
        let (rest, _) = read_all(&mut SourceBridge::new(source()), pos.clone(), 3);
        assert_eq!(
            rest,
            (*taken as u64..100).collect::<Vec<_>>(),
            "from {pos:?}"
        );
    }
}

#[test]
fn a_reader_runs_at_most_the_channel_ahead_of_the_pipeline() {
    let reads = Arc::new(AtomicUsize::new(0));
    let mut bridge = SourceBridge::new(Numbers {
        n: 1_000_000,
        chunk: 10,
        reads: Arc::clone(&reads),
        ..Default::default()
    });
    let mut pos = bridge.initial_position(0, 1);
    let mut out = Vec::new();
    bridge
        .read(0, 1, &mut pos, 5, Timestamp(0), &mut out)
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The chunk being taken, two in the channel, one waiting for room.
    let n = reads.load(SeqCst);
    assert!(n <= 4, "the reader read {n} chunks ahead");
}

#[test]
fn a_reader_that_fails_to_open_names_the_partition_and_position() {
    let mut bridge = SourceBridge::new(Numbers {
        n: 10,
        chunk: 4,
        bad: Some(0),
        ..Default::default()
    });
    let mut pos = bridge.initial_position(0, 1);
    let e = bridge
        .read(0, 1, &mut pos, 5, Timestamp(0), &mut Vec::new())
        .unwrap_err()
        .to_string();
    assert_eq!(e, "opening partition 0 at 0 failed: nope");
}

/// Knows what is available, or fails to ask.
#[derive(Serialize, Deserialize)]
struct Counted {
    end: Option<u64>,
}

#[async_trait]
impl AsyncSource for Counted {
    type Output = u64;
    type Position = u64;
    type Reader = NumbersReader;
    fn is_bounded(&self) -> bool {
        true
    }
    fn initial_position(&self, _p: usize, _n: usize) -> u64 {
        0
    }
    async fn open(&self, _p: usize, _n: usize, at: u64) -> Result<NumbersReader, UserError> {
        Ok(NumbersReader {
            next: at,
            n: 0,
            reads: Arc::default(),
        })
    }
    async fn available(&self, _p: usize, _n: usize, at: &u64) -> Result<Option<u64>, UserError> {
        match self.end {
            Some(end) => Ok(Some(end - at)),
            None => Err("the broker is away".into()),
        }
    }
}

#[test]
fn what_is_available_counts_from_the_bridged_position_and_a_failure_is_an_error() {
    let pos = tidewater::io::BridgePosition { at: 10, skip: 4 };
    let bridge = SourceBridge::new(Counted { end: Some(50) });
    assert_eq!(
        bridge.try_available(0, 1, &pos, Timestamp(0)).unwrap(),
        Some(36)
    );
    let bridge = SourceBridge::new(Counted { end: None });
    assert_eq!(
        bridge
            .try_available(0, 1, &pos, Timestamp(0))
            .unwrap_err()
            .to_string(),
        "the broker is away"
    );
}
