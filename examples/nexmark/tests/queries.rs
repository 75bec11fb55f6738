//! Every query's output equals its oracle, on several sizes and schedules.

use tidewater::{Element, PCollection, Pipeline, PipelineOptions, Read};
use tidewater_nexmark::{oracle, queries, sorted_by_encoding, Event, NexmarkConfig, NexmarkSource};

/// A query that does not read the generator's configuration, as `check` takes them.
fn plain<T>(
    query: fn(&PCollection<Event>) -> PCollection<T>,
) -> impl Fn(&PCollection<Event>, &NexmarkConfig) -> PCollection<T> + Copy {
    move |events, _| query(events)
}

fn check<T: Element + PartialEq>(
    build: impl Fn(&PCollection<Event>, &NexmarkConfig) -> PCollection<T> + Copy,
    oracle: fn(&[Event]) -> Vec<T>,
) {
    let sources = [500u64, 3_000, 6_000].map(|events| NexmarkSource::new(events, 1_000));
    check_sources(build, oracle, &sources);
}

/// Options with `seed`, `runner_options`, and the runner options in the environment
/// variable `TIDEWATER_TEST_RUNNER_OPTIONS` (`k=v,k=v`): CI runs these tests once more
/// with `checkpoint_every=1`, so that every query is also checked while the direct
/// runner snapshots and restores its whole state at every step.
fn options(seed: u64, runner_options: &[(&str, &str)]) -> PipelineOptions {
    // Every test runs alone too (`--exact`): the runners are registered here, not by
    // whichever test ran first.
    tidewater_nexmark::register_runners();
    let mut all: Vec<(String, String)> = runner_options
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if let Ok(env) = std::env::var("TIDEWATER_TEST_RUNNER_OPTIONS") {
        for kv in env.split(',').filter(|kv| !kv.is_empty()) {
            all.push(tidewater::parse_key_value(kv).expect("TIDEWATER_TEST_RUNNER_OPTIONS"));
        }
    }
    PipelineOptions {
        seed: Some(seed),
        runner_options: all,
        ..Default::default()
    }
}

/// Pipeline vs oracle on each source, with seeds 1, 2, 3, ...
fn check_sources<T: Element + PartialEq>(
    build: impl Fn(&PCollection<Event>, &NexmarkConfig) -> PCollection<T> + Copy,
    oracle: fn(&[Event]) -> Vec<T>,
    sources: &[NexmarkSource],
) {
    check_sources_seeing(build, oracle, sources, NexmarkSource::all_events, &[]);
}

/// Pipeline vs oracle on each source, with seeds 1, 2, 3, ... and these runner options;
/// the oracle sees the events `seen` gives.
fn check_sources_seeing<T: Element + PartialEq>(
    build: impl Fn(&PCollection<Event>, &NexmarkConfig) -> PCollection<T> + Copy,
    oracle: fn(&[Event]) -> Vec<T>,
    sources: &[NexmarkSource],
    seen: fn(&NexmarkSource) -> Vec<Event>,
    runner_options: &[(&str, &str)],
) {
    tidewater_nexmark::register_runners();
    let mut found = 0;
    for (source, seed) in sources.iter().zip(1u64..) {
        let events = source.events;
        let p = Pipeline::new(options(seed, runner_options));
        build(
            &p.apply("Events", Read::from(source.clone())),
            &source.config(),
        )
        .capture("out");
        let got = p.run().unwrap().captured_values::<T>("out").unwrap();
        let expected = sorted_by_encoding(oracle(&seen(source)));
        found += expected.len();
        assert!(
            got == expected,
            "{events} events, seed {seed}: {} outputs vs {} expected",
            got.len(),
            expected.len()
        );
    }
    assert!(
        found > 0,
        "the oracle found nothing on any size: the test would prove nothing"
    );
}

#[test]
fn q0_passes_every_event_through() {
    check(plain(queries::q0), oracle::q0);
}

#[test]
fn q1_converts_every_bid() {
    check(plain(queries::q1), oracle::q1);
}

#[test]
fn q2_selects_the_bids_of_every_123rd_auction() {
    check(plain(queries::q2), oracle::q2);
}

#[test]
fn q3_joins_local_sellers_with_their_category_10_auctions() {
    check(plain(queries::q3), oracle::q3);
    // Few auctions match at small sizes (none at 500 events): check a larger run too.
    check_sources(
        plain(queries::q3),
        oracle::q3,
        &[NexmarkSource::new(30_000, 1_000)],
    );
}

#[test]
fn q4_averages_winning_prices_per_category_and_sliding_window() {
    check(queries::q4, oracle::q4);
}

fn q4_small(
    events: &PCollection<Event>,
    config: &NexmarkConfig,
) -> PCollection<queries::CategoryPrice> {
    queries::q4_windowed(events, config, 1_000, 500)
}

fn oracle_q4_small(events: &[Event]) -> Vec<queries::CategoryPrice> {
    oracle::q4_windowed(events, 1_000, 500)
}

#[test]
fn q4_averages_winning_prices_in_1s_windows() {
    check(q4_small, oracle_q4_small);
}

#[test]
fn q5_finds_the_hottest_auctions_per_sliding_window() {
    check(plain(queries::q5), oracle::q5);
}

fn q5_small(events: &PCollection<Event>) -> PCollection<queries::AuctionCount> {
    queries::q5_windowed(events, 3, 1)
}

fn oracle_q5_small(events: &[Event]) -> Vec<queries::AuctionCount> {
    oracle::q5_windowed(events, 3, 1)
}

#[test]
fn q5_keeps_every_tied_auction_in_small_sliding_windows() {
    // Half the bids go to one hot auction, so 10 s windows never tie; 3 ms windows
    // (about 3 events each) tie often.
    let out = oracle_q5_small(&NexmarkSource::new(3_000, 1_000).all_events());
    let windows: std::collections::BTreeSet<i64> = out.iter().map(|a| a.window_start).collect();
    assert!(out.len() > windows.len(), "no tie: ties would go unchecked");
    check(plain(q5_small), oracle_q5_small);
}

#[test]
fn q6_averages_the_last_10_selling_prices_per_seller() {
    check(queries::q6, oracle::q6);
    // Sellers with more than 10 sales, so that "the last 10" matters (at 10,000 events
    // two of 69 sellers, one with 168; 30,000 took 44 s of CI's run with
    // `checkpoint_every=1`, which snapshots the whole state at every step).
    let source = NexmarkSource::new(10_000, 1_000);
    let events = source.all_events();
    let mut sales = std::collections::BTreeMap::new();
    for w in oracle::q9(&events) {
        *sales.entry(w.auction.seller).or_insert(0) += 1;
    }
    assert!(
        sales.values().any(|n| *n > 10),
        "no seller with more than 10 sales"
    );
    check_sources(queries::q6, oracle::q6, &[source]);
}

#[test]
fn q7_keeps_the_highest_bid_per_10s_window() {
    check(plain(queries::q7), oracle::q7);
}

fn q7_100ms(events: &PCollection<Event>) -> PCollection<tidewater_nexmark::Bid> {
    queries::q7_windowed(events, 100)
}

fn oracle_q7_100ms(events: &[Event]) -> Vec<tidewater_nexmark::Bid> {
    oracle::q7_windowed(events, 100)
}

#[test]
fn q7_keeps_the_highest_bid_per_100ms_window() {
    check(plain(q7_100ms), oracle_q7_100ms);
}

#[test]
fn q8_joins_new_persons_with_their_auctions_in_10s_windows() {
    check(plain(queries::q8), oracle::q8);
}

fn q8_1s(events: &PCollection<Event>) -> PCollection<queries::IdNameReserve> {
    queries::q8_windowed(events, 1_000)
}

fn oracle_q8_1s(events: &[Event]) -> Vec<queries::IdNameReserve> {
    oracle::q8_windowed(events, 1_000)
}

#[test]
fn q8_joins_new_persons_with_their_auctions_in_1s_windows() {
    check(plain(q8_1s), oracle_q8_1s);
}

#[test]
fn q9_finds_the_winning_bid_of_every_auction() {
    check(queries::q9, oracle::q9);
}

/// A fresh, empty directory under the system's temp dir.
fn fresh_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tidewater-nexmark-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn q10_writes_the_bids_of_each_window_into_sharded_files() {
    tidewater_nexmark::register_runners();
    // 1,000 events per second: 25,000 events span three 10 s windows.
    for (events, seed) in [(500u64, 1u64), (6_000, 2), (25_000, 3)] {
        let source = NexmarkSource::new(events, 1_000);
        let dir = fresh_dir(&format!("q10-{events}"));
        let p = Pipeline::new(options(seed, &[]));
        let stream = p.apply("Events", Read::from(source.clone()));
        queries::q10(&stream, dir.to_str().unwrap()).capture("out");
        let got = p
            .run()
            .unwrap()
            .captured_values::<queries::OutputFile>("out")
            .unwrap();
        let all = source.all_events();
        assert_eq!(
            got,
            sorted_by_encoding(oracle::q10(&all)),
            "{events} events: files"
        );
        let expected = oracle::q10_files(&all);
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        assert_eq!(
            on_disk,
            expected.keys().cloned().collect::<Vec<_>>(),
            "{events} events: names"
        );
        for (name, lines) in &expected {
            let text = std::fs::read_to_string(dir.join(name)).unwrap();
            assert_eq!(
                text.lines().collect::<Vec<_>>(),
                *lines,
                "{events} events: {name}"
            );
        }
        if events == 25_000 {
            let windows: std::collections::BTreeSet<i64> =
                got.iter().map(|f| f.window_start).collect();
            assert_eq!(windows.len(), 3, "three windows");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn q11_counts_bids_per_bidder_session() {
    check(plain(queries::q11), oracle::q11);
}

fn q11_short(events: &PCollection<Event>) -> PCollection<queries::BidsPerSession> {
    queries::q11_with_gap(events, 200)
}

fn oracle_q11_short(events: &[Event]) -> Vec<queries::BidsPerSession> {
    oracle::q11_with_gap(events, 200)
}

#[test]
fn q11_counts_bids_per_bidder_session_with_a_short_gap() {
    // With a 200 ms gap most bidders have several sessions.
    let out = oracle_q11_short(&NexmarkSource::new(3_000, 1_000).all_events());
    let bidders: std::collections::BTreeSet<usize> = out.iter().map(|s| s.bidder).collect();
    assert!(
        out.len() > bidders.len() + 10,
        "too few bidders with several sessions"
    );
    check(plain(q11_short), oracle_q11_short);
}

/// Q12 under a scripted clock: batches of `batch` events, `step_ms` of processing time
/// apart, panes of `delay_ms`.
fn check_q12(batch: usize, step_ms: i64, delay_ms: i64) {
    tidewater_nexmark::register_runners();
    let mut several = false;
    for (events, seed) in [(500u64, 1u64), (3_000, 2), (6_000, 3)] {
        let events = NexmarkSource::new(events, 1_000).all_events();
        let p = Pipeline::new(options(seed, &[]));
        let stream = p.apply("Events", queries::q12_test_stream(&events, batch, step_ms));
        queries::q12_with_delay(&stream, delay_ms).capture("out");
        let got = p
            .run()
            .unwrap()
            .captured_values::<(usize, u64)>("out")
            .unwrap();
        let expected = sorted_by_encoding(oracle::q12_scripted(&events, batch, step_ms, delay_ms));
        let bidders: std::collections::BTreeSet<usize> = expected.iter().map(|x| x.0).collect();
        several |= expected.len() > bidders.len();
        assert!(
            got == expected,
            "{} events, seed {seed}: {} outputs vs {} expected",
            events.len(),
            got.len(),
            expected.len()
        );
    }
    assert!(
        several,
        "no bidder had several panes: the trigger went unchecked"
    );
}

#[test]
fn q12_counts_bids_per_bidder_per_processing_time_pane() {
    check_q12(50, 1_000, 2_500);
    check_q12(100, 1_000, queries::Q12_DELAY_MS);
}

#[test]
fn q13_joins_bids_with_a_bounded_side_input() {
    check(plain(queries::q13), oracle::q13);
}

#[test]
fn q14_filters_and_computes_bids_at_every_time_of_day() {
    check(plain(queries::q14), oracle::q14);
    // 3,000 events at 1,000 per second across each hour boundary where the time of day
    // changes (7 -> 8, 18 -> 19, 19 -> 20, 6 -> 7), and at midnight.
    let sources = [7u64, 18, 19, 6, 0].map(|hour| {
        NexmarkSource::new(3_000, 1_000).with_base_time((hour * 3_600 + 3_599) * 1_000 - 1_500)
    });
    let kinds: std::collections::BTreeSet<_> = sources
        .iter()
        .flat_map(|s| oracle::q14(&s.all_events()))
        .map(|b| b.bid_time_type)
        .collect();
    assert_eq!(kinds.len(), 3, "every time of day occurs: {kinds:?}");
    check_sources(plain(queries::q14), oracle::q14, &sources);
}

#[test]
fn the_source_gives_the_same_events_on_any_number_of_partitions() {
    use tidewater::{ReadStatus, Source, Timestamp};
    let source = NexmarkSource::new(1_000, 1_000);
    let expected = source.all_events();
    for partitions in [1usize, 3, 7] {
        let mut s = source.clone();
        let mut got: Vec<(u64, Event, Timestamp)> = Vec::new();
        for p in 0..partitions {
            let mut pos = s.initial_position(p, partitions);
            loop {
                let mut out = Vec::new();
                let before = pos.next;
                let status = s
                    .read(p, partitions, &mut pos, 64, Timestamp(0), &mut out)
                    .unwrap();
                for (k, (e, ts)) in out.into_iter().enumerate() {
                    got.push((before + k as u64 * partitions as u64, e, ts));
                }
                if status == ReadStatus::Done {
                    break;
                }
            }
        }
        got.sort_by_key(|g| g.0);
        assert_eq!(got.len(), 1_000);
        for (n, e, ts) in got {
            assert_eq!(
                e, expected[n as usize],
                "event {n} on {partitions} partitions"
            );
            assert_eq!(ts.millis() as u64, e.timestamp());
        }
    }
    // Event times follow the rate: 1,000 events per second from time 0.
    assert_eq!(expected[999].timestamp(), 999);
}

/// 3,000 and 6,000 events at 1,000 per second, each event's time moved back by up to
/// `bound_ms` (seeded), the watermark trailing by the bound: out of order, none late.
fn out_of_order_sources(bound_ms: u64) -> Vec<NexmarkSource> {
    let sources: Vec<NexmarkSource> = [(3_000u64, 7u64), (6_000, 8)]
        .into_iter()
        .map(|(events, seed)| NexmarkSource::new(events, 1_000).with_out_of_order(bound_ms, seed))
        .collect();
    for s in &sources {
        let times: Vec<u64> = s.all_events().iter().map(Event::timestamp).collect();
        assert!(
            times.windows(2).any(|w| w[1] < w[0]),
            "the stream is out of order"
        );
    }
    sources
}

#[test]
fn out_of_order_events_are_behind_no_watermark_and_late_ones_are() {
    use tidewater::{Source, Timestamp};
    use tidewater_nexmark::NexmarkPosition;
    // From time 1,000 s, so that no time saturates at 0.
    let source = NexmarkSource::new(2_000, 1_000)
        .with_base_time(1_000_000)
        .with_out_of_order(500, 3)
        .with_late_events(50, 2_000);
    let events = source.all_events();
    let mut late = 0;
    for (n, e) in events.iter().enumerate() {
        let n = n as u64;
        let t = Timestamp(e.timestamp() as i64);
        // The watermark before event n is read, and after it (partition 0 of 1).
        let before = source.watermark(0, 1, &NexmarkPosition { next: n });
        let after = source.watermark(0, 1, &NexmarkPosition { next: n + 1 });
        if source.is_late(n) {
            late += 1;
            assert!(t < before, "late event {n} at {t:?} is behind {before:?}");
            assert!(t < after);
        } else {
            assert!(t >= before, "event {n} at {t:?} is behind {before:?}");
        }
    }
    assert_eq!(late, 39);
    // The same events at the same times on any number of partitions.
    let p = Pipeline::new(options(5, &[]));
    p.apply("Events", Read::from(source.clone())).capture("out");
    let got = p.run().unwrap().captured_values::<Event>("out").unwrap();
    assert!(got == sorted_by_encoding(events));
}

#[test]
fn q5_out_of_order() {
    let sources = out_of_order_sources(2_000);
    check_sources(plain(queries::q5), oracle::q5, &sources);
    check_sources(plain(q5_small), oracle_q5_small, &sources);
}

#[test]
fn q7_out_of_order() {
    let sources = out_of_order_sources(2_000);
    check_sources(plain(queries::q7), oracle::q7, &sources);
    check_sources(plain(q7_100ms), oracle_q7_100ms, &sources);
}

#[test]
fn q8_out_of_order() {
    let sources = out_of_order_sources(2_000);
    check_sources(plain(queries::q8), oracle::q8, &sources);
    check_sources(plain(q8_1s), oracle_q8_1s, &sources);
}

#[test]
fn q11_out_of_order() {
    let sources = out_of_order_sources(2_000);
    check_sources(plain(queries::q11), oracle::q11, &sources);
    check_sources(plain(q11_short), oracle_q11_short, &sources);
}

/// Late events (every 40th, 3 s behind its time, 1 s of out-of-orderness) reach a query
/// in the global window like any other: nothing expires there, so the oracle keeps them.
#[test]
fn global_window_queries_keep_late_events() {
    let sources: Vec<NexmarkSource> = [(6_000u64, 11u64), (12_000, 12)]
        .into_iter()
        .map(|(events, seed)| {
            NexmarkSource::new(events, 1_000)
                .with_out_of_order(1_000, seed)
                .with_late_events(40, 3_000)
        })
        .collect();
    check_sources(plain(queries::q1), oracle::q1, &sources);
    check_sources(plain(queries::q3), oracle::q3, &sources);
}

/// 6,000 and 3,000 events at 1,000 per second from time 1,000 s, up to 500 ms out of
/// order, and every 40th event 5 s late: behind the watermark by more than 4 s.
fn late_sources() -> Vec<NexmarkSource> {
    [(6_000u64, 21u64), (3_000, 22)]
        .into_iter()
        .map(|(events, seed)| {
            NexmarkSource::new(events, 1_000)
                .with_base_time(1_000_000)
                .with_out_of_order(500, seed)
                .with_late_events(40, 5_000)
        })
        .collect()
}

/// With no allowed lateness, a late event's windows (of at most 1 s, or sessions with a
/// 200 ms gap) have expired when it arrives 5 s late: grouping drops it, and the oracle
/// sees only the on-time events. On bundles of the default size and of 10,000.
#[test]
fn windowed_queries_drop_late_events() {
    let sources = late_sources();
    for options in [&[][..], &[("bundle_size", "10000")][..]] {
        let on_time = NexmarkSource::on_time_events;
        check_sources_seeing(plain(q5_small), oracle_q5_small, &sources, on_time, options);
        check_sources_seeing(plain(q8_1s), oracle_q8_1s, &sources, on_time, options);
        check_sources_seeing(
            plain(q11_short),
            oracle_q11_short,
            &sources,
            on_time,
            options,
        );
        check_sources_seeing(plain(q7_100ms), oracle_q7_100ms, &sources, on_time, options);
    }
}
