use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn failure(at_ms: u64, ran_ms: u64, checkpointed: bool) -> Failure {
    Failure {
        at: ms(at_ms),
        ran: ms(ran_ms),
        checkpointed,
    }
}

fn no_jitter() -> RestartStrategy {
    RestartStrategy::parse("exponential-delay:jitter=0").unwrap()
}

#[test]
fn a_crash_loop_backs_off_exponentially_up_to_the_max_and_never_gives_up() {
    let mut r = Restarts::new(no_jitter(), 1);
    let delays: Vec<u64> = (0..12)
        .map(|i| {
            r.on_failure(failure(i * 10, 10, false))
                .unwrap()
                .as_millis() as u64
        })
        .collect();
    assert_eq!(
        delays,
        [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000, 30000]
    );
    for i in 0..1000 {
        assert_eq!(
            r.on_failure(failure(i, 10, false)),
            Ok(ms(30_000)),
            "failure {i}"
        );
    }
    assert_eq!(r.restarts(), 1012);
}

#[test]
fn an_attempt_that_checkpointed_or_ran_long_enough_resets_the_delay() {
    let mut r = Restarts::new(no_jitter(), 1);
    for _ in 0..5 {
        r.on_failure(failure(0, 10, false)).unwrap();
    }
    assert_eq!(r.on_failure(failure(0, 10, false)), Ok(ms(3200)));
    assert_eq!(r.on_failure(failure(0, 10, true)), Ok(ms(100)));
    assert_eq!(r.on_failure(failure(0, 10, false)), Ok(ms(200)));
    assert_eq!(r.on_failure(failure(0, 60_000, false)), Ok(ms(100)));
}

/// The case: a healthy job killed every 700 ms, 30 times (21 in its first 20 s
/// ended the job before), each attempt having completed a checkpoint: every restart
/// comes after the initial delay.
#[test]
fn a_job_that_keeps_checkpointing_survives_thirty_kills_in_a_minute() {
    let mut r = Restarts::new(RestartStrategy::default(), 7);
    for i in 0..30 {
        let d = r.on_failure(failure(i * 2_000, 700, true)).unwrap();
        assert!(d >= ms(90) && d <= ms(110), "restart {i} after {d:?}");
    }
}

/// A 3-second database outage: the supervisor's restarts in the outage fail at once
/// (no checkpoint); with the default strategy the delays add up past the outage within
/// a few restarts instead of burning 20 in 3 s.
#[test]
fn a_three_second_outage_is_waited_out_in_a_few_restarts() {
    let mut r = Restarts::new(no_jitter(), 1);
    let mut waited = Duration::ZERO;
    let mut restarts = 0;
    while waited < Duration::from_secs(3) {
        waited += r
            .on_failure(failure(waited.as_millis() as u64, 5, false))
            .unwrap();
        restarts += 1;
    }
    assert_eq!(restarts, 5);
    assert_eq!(waited, ms(3100));
}

#[test]
fn jitter_moves_each_delay_by_at_most_its_fraction() {
    let mut r = Restarts::new(
        RestartStrategy::parse("exponential-delay:initial=1s,multiplier=1,jitter=0.25").unwrap(),
        3,
    );
    let delays: Vec<Duration> = (0..200)
        .map(|i| r.on_failure(failure(i, 1, false)).unwrap())
        .collect();
    assert!(delays.iter().all(|d| *d >= ms(750) && *d <= ms(1250)));
    // Spread, not one value.
    assert!(delays.iter().any(|d| *d < ms(900)) && delays.iter().any(|d| *d > ms(1100)));
}

#[test]
fn fixed_delay_gives_up_after_its_attempts() {
    let mut r = Restarts::new(
        RestartStrategy::parse("fixed-delay:attempts=3,delay=250ms").unwrap(),
        1,
    );
    for i in 0..3 {
        assert_eq!(r.on_failure(failure(i, 1, true)), Ok(ms(250)));
    }
    assert_eq!(
        r.on_failure(failure(4, 1, true)),
        Err("gave up after 3 restarts (fixed-delay attempts=3)".into())
    );
}

#[test]
fn failure_rate_gives_up_only_when_too_many_failures_fall_in_one_interval() {
    let strategy =
        RestartStrategy::parse("failure-rate:failures=2,interval=10s,delay=0ms").unwrap();
    // Spread out: every failure is the only one in its interval.
    let mut r = Restarts::new(strategy.clone(), 1);
    for i in 0..100 {
        assert_eq!(r.on_failure(failure(i * 10_000, 1, false)), Ok(ms(0)));
    }
    // Two in 10 s are allowed; a third within 10 s of the first is not.
    let mut r = Restarts::new(strategy, 1);
    assert!(r.on_failure(failure(0, 1, false)).is_ok());
    assert!(r.on_failure(failure(9_000, 1, false)).is_ok());
    assert!(r.on_failure(failure(10_000, 1, false)).is_ok());
    assert_eq!(
        r.on_failure(failure(12_000, 1, false)),
        Err("3 failures within 10s (failure-rate failures=2)".into())
    );
}

#[test]
fn none_never_restarts() {
    let mut r = Restarts::new(RestartStrategy::parse("none").unwrap(), 1);
    assert_eq!(
        r.on_failure(failure(0, 1, true)),
        Err("the restart strategy is none".into())
    );
}

#[test]
fn bad_specs_are_refused_saying_what_is_wrong() {
    let err = |s: &str| RestartStrategy::parse(s).unwrap_err();
    assert_eq!(
        err("exponential"),
        "unknown restart strategy 'exponential': expected exponential-delay, fixed-delay, failure-rate or none"
    );
    assert_eq!(
        err("exponential-delay:jitter=2"),
        "exponential-delay jitter=2: expected a number from 0 to 1"
    );
    assert_eq!(
        err("fixed-delay:attempts=0"),
        "fixed-delay attempts=0: expected a whole number, at least 1"
    );
    assert_eq!(
        err("failure-rate:interval"),
        "'interval': expected key=value"
    );
    assert!(err("fixed-delay:delay=soon").starts_with("fixed-delay delay=soon: "));
    assert_eq!(err("none:attempts=1"), "none has no settings");
}
