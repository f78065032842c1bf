//! A key's pace (`SerializerOptions::with_rate`) in the engine alone, on a simulated host with a
//! manual clock: with one timer for all (Node, browsers) and with a timer per call (Workers, the
//! Rust front end), the same starts.

use std::collections::BTreeMap;

use keyturn::engine::{Config, Effect, Engine, EnqueueError, Entered, Now, Ticket};
use keyturn::{Coalesce, SeededRandom, SerializerOptions};

fn at(ms: f64) -> Now {
    Now {
        wall: 1_700_000_000_000.0 + ms,
        mono: ms,
    }
}

/// A host that does what the engine says: starts a work when told it may, lets it run `hold`
/// ms, then says its caller heard; keeps the timers asked for and fires them on time.
struct Host {
    engine: Engine<u64, u32>,
    random: SeededRandom,
    per_call: bool,
    now: f64,
    hold: f64,
    /// Tickets by handle, and each handle's key.
    tickets: BTreeMap<u32, Ticket>,
    keys: BTreeMap<u32, &'static str>,
    /// When each started work ends (its caller hears).
    ends: Vec<(f64, u32)>,
    /// Timers: one for all, or one per handle.
    wake: f64,
    armed: BTreeMap<u32, f64>,
    /// Start times by handle, in start order; the most running at once.
    starts: Vec<(u32, f64)>,
    running: usize,
    most_running: usize,
    settled: Vec<u32>,
}

impl Host {
    fn new(options: SerializerOptions, per_call: bool, hold: f64) -> Host {
        let mut engine = Engine::new(Config {
            timer_per_call: per_call,
            contexts_end: per_call,
            store_tells_changes: false,
        });
        engine.add_serializer(options, None).expect("serializer");
        Host {
            engine,
            random: SeededRandom::new(3),
            per_call,
            now: 0.0,
            hold,
            tickets: BTreeMap::new(),
            keys: BTreeMap::new(),
            ends: Vec::new(),
            wake: f64::INFINITY,
            armed: BTreeMap::new(),
            starts: Vec::new(),
            running: 0,
            most_running: 0,
            settled: Vec::new(),
        }
    }

    fn call(
        &mut self,
        key: &'static str,
        handle: u32,
        if_available: bool,
    ) -> Result<(), EnqueueError> {
        let now = at(self.now);
        match self
            .engine
            .enter(0, key, handle, None, Coalesce::Never, if_available, now)?
        {
            Entered::Queued(ticket) => {
                self.tickets.insert(handle, ticket);
                self.keys.insert(handle, key);
            }
            Entered::Joined(..) => panic!("nothing coalesces here"),
        }
        self.apply();
        Ok(())
    }

    fn apply(&mut self) {
        while let Some(effect) = self.engine.poll() {
            match effect {
                Effect::Ready { handle, line, .. } => {
                    // The JS starts a line's next work; the Rust front end, the work itself.
                    let now = at(self.now);
                    if self.per_call {
                        let ticket = self.tickets[&handle];
                        self.engine.start_work(0, ticket, now, &self.random);
                    } else {
                        self.engine.start(0, line, now, &self.random);
                    }
                }
                Effect::Start { handle, .. } => {
                    self.starts.push((handle, self.now));
                    self.running += 1;
                    self.most_running = self.most_running.max(self.running);
                    self.ends.push((self.now + self.hold, handle));
                }
                Effect::Settle { handle, .. } => {
                    // Its caller heard: its timer goes with it.
                    self.armed.remove(&handle);
                    self.settled.push(handle);
                }
                Effect::Arm {
                    handle, at, early, ..
                } => {
                    assert!(!early, "a pace never fires early");
                    self.armed.insert(handle, at);
                }
                Effect::Wake { at, early, .. } => {
                    assert!(!early, "a pace never fires early");
                    self.wake = at;
                }
                other => panic!("no such effect here: {other:?}"),
            }
        }
    }

    /// Runs until nothing is left to do, or `until`.
    fn run(&mut self, until: f64) {
        loop {
            let end = self.ends.iter().map(|e| e.0).fold(f64::INFINITY, f64::min);
            let timer = if self.per_call {
                self.armed.values().copied().fold(f64::INFINITY, f64::min)
            } else {
                self.wake
            };
            let next = end.min(timer);
            if !next.is_finite() || next > until {
                return;
            }
            self.now = self.now.max(next);
            let now = at(self.now);
            if let Some(i) = self.ends.iter().position(|e| e.0 <= self.now) {
                let (_, handle) = self.ends.remove(i);
                self.running -= 1;
                self.armed.remove(&handle);
                let ticket = self.tickets[&handle];
                self.engine.done(0, ticket, now, &self.random);
            } else if self.per_call {
                let (&handle, _) = self
                    .armed
                    .iter()
                    .find(|(_, &t)| t <= self.now)
                    .expect("a timer is due");
                self.armed.remove(&handle);
                let ticket = self.tickets[&handle];
                self.engine.fired(Some(0), ticket, now, &self.random);
            } else {
                self.wake = f64::INFINITY;
                self.engine.tick(now, &self.random);
            }
            self.apply();
        }
    }

    /// Start times of `key`'s works, in start order.
    fn starts_of(&self, key: &str) -> Vec<(u32, f64)> {
        self.starts
            .iter()
            .copied()
            .filter(|(handle, _)| self.keys[handle] == key)
            .collect()
    }
}

fn rate(limit: f64, period_ms: f64) -> SerializerOptions {
    SerializerOptions::default()
        .with_rate(limit, period_ms)
        .expect("rate")
}

/// No `limit + 1` starts within `period_ms`: the start `limit` after each is a period later.
fn assert_paced(starts: &[(u32, f64)], limit: usize, period_ms: f64) {
    for (i, pair) in starts.windows(limit + 1).enumerate() {
        let (first, last) = (pair[0].1, pair[limit].1);
        assert!(
            last - first >= period_ms,
            "starts {i} and {} are {} ms apart: {starts:?}",
            i + limit,
            last - first
        );
    }
}

#[test]
fn thirty_works_on_each_of_two_keys_start_in_call_order_at_most_five_in_any_200_ms() {
    for per_call in [false, true] {
        let mut host = Host::new(rate(5.0, 200.0), per_call, 3.0);
        for i in 0..30 {
            host.call("a", 2 * i, false).expect("queued");
            host.call("b", 2 * i + 1, false).expect("queued");
        }
        host.run(f64::INFINITY);
        for key in ["a", "b"] {
            let starts = host.starts_of(key);
            assert_eq!(starts.len(), 30, "{per_call}: {starts:?}");
            let handles: Vec<u32> = starts.iter().map(|s| s.0).collect();
            let mut sorted = handles.clone();
            sorted.sort_unstable();
            assert_eq!(handles, sorted, "in call order");
            assert!(
                starts[..5].iter().all(|s| s.1 <= 5.0 * 3.0),
                "the first five at once: {starts:?}"
            );
            assert_paced(&starts, 5, 200.0);
            let last = starts[29].1;
            assert!(last <= 1350.0, "the 30th by 1.35 s: {last}");
        }
        let stats = host.engine.stats(0);
        assert_eq!(stats.started, 60);
        assert_eq!(
            stats.paced, 10,
            "the first work of each five after the first, 200 ms on"
        );
    }
}

#[test]
fn with_two_at_a_time_and_ten_per_100_ms_never_three_run() {
    for per_call in [false, true] {
        let options = rate(10.0, 100.0)
            .with_concurrency(2.0)
            .expect("concurrency");
        let mut host = Host::new(options, per_call, 7.0);
        for i in 0..40 {
            host.call("k", i, false).expect("queued");
        }
        host.run(f64::INFINITY);
        assert_eq!(host.starts.len(), 40);
        assert_eq!(host.most_running, 2, "{per_call}");
        assert_paced(&host.starts, 10, 100.0);
    }
}

#[test]
fn a_key_called_again_within_its_period_waits_as_if_it_had_stayed_busy() {
    for per_call in [false, true] {
        let mut host = Host::new(rate(2.0, 1000.0), per_call, 0.0);
        host.call("k", 1, false).expect("queued");
        host.call("k", 2, false).expect("queued");
        host.run(10.0);
        assert_eq!(host.engine.stats(0).keys, 0, "the key went idle");
        host.now = 10.0;
        host.call("k", 3, false).expect("queued");
        host.run(999.0);
        assert_eq!(
            host.starts.len(),
            2,
            "the third waits for the first's period"
        );
        host.run(f64::INFINITY);
        assert_eq!(
            host.starts,
            vec![(1, 0.0), (2, 0.0), (3, 1000.0)],
            "{per_call}"
        );
    }
}

#[test]
fn a_waiting_work_that_leaves_passes_its_wait_to_the_next() {
    for per_call in [false, true] {
        let mut host = Host::new(rate(1.0, 100.0), per_call, 0.0);
        host.call("k", 1, false).expect("queued");
        host.call("k", 2, false).expect("queued");
        host.call("k", 3, false).expect("queued");
        host.run(50.0);
        host.now = 50.0;
        let second = host.tickets[&2];
        host.engine.cancel(0, second, at(50.0), &host.random);
        host.apply();
        assert_eq!(host.settled, vec![2], "its caller is told");
        host.run(f64::INFINITY);
        assert_eq!(host.starts, vec![(1, 0.0), (3, 100.0)], "{per_call}");
        // Every work waiting for the pace gone: the key goes idle, and nothing is left armed.
        host.call("k", 4, false).expect("queued");
        let fourth = host.tickets[&4];
        host.engine.cancel(0, fourth, at(100.0), &host.random);
        host.apply();
        assert_eq!(host.engine.stats(0).keys, 0);
        host.run(f64::INFINITY);
        assert_eq!(host.starts.len(), 2);
    }
}

#[test]
fn if_available_runs_at_once_on_a_free_key_and_is_refused_at_once_otherwise() {
    let mut host = Host::new(rate(2.0, 200.0), false, 50.0);
    host.call("k", 1, true).expect("a free key: runs at once");
    assert_eq!(host.starts, vec![(1, 0.0)]);
    // A work runs: no slot is free, and the pace is not what holds it up.
    match host.call("k", 2, true) {
        Err(EnqueueError::Unavailable { retry_after_ms }) => assert_eq!(retry_after_ms, None),
        other => panic!("refused: {other:?}"),
    }
    host.run(60.0);
    host.now = 60.0;
    host.call("k", 3, true)
        .expect("free again, and the pace allows a second start");
    host.run(120.0);
    host.now = 120.0;
    // Two starts in the last 200 ms: the pace allows the next at 200.
    match host.call("k", 4, true) {
        Err(EnqueueError::Unavailable { retry_after_ms }) => assert_eq!(retry_after_ms, Some(80.0)),
        other => panic!("refused: {other:?}"),
    }
    // A work waiting in line: refused, whatever the pace says.
    host.call("k", 5, false).expect("queued");
    match host.call("k", 6, true) {
        Err(EnqueueError::Unavailable { retry_after_ms }) => assert_eq!(retry_after_ms, None),
        other => panic!("refused: {other:?}"),
    }
    let stats = host.engine.stats(0);
    assert_eq!(stats.unavailable, 3);
    assert_eq!(stats.started, 2, "a refused call's work never runs");
    host.run(f64::INFINITY);
    assert_eq!(host.starts, vec![(1, 0.0), (3, 60.0), (5, 200.0)]);
}

#[test]
fn a_rate_out_of_range_is_refused_naming_it() {
    for (limit, period) in [
        (0.0, 100.0),
        (1001.0, 100.0),
        (1.5, 100.0),
        (f64::NAN, 100.0),
    ] {
        let error = SerializerOptions::default()
            .with_rate(limit, period)
            .expect_err("limit");
        assert!(error.to_string().contains("rate.limit"), "{error}");
    }
    for period in [0.0, 0.5, f64::INFINITY, 3e9, f64::NAN] {
        let error = SerializerOptions::default()
            .with_rate(1.0, period)
            .expect_err("period");
        assert!(error.to_string().contains("rate.periodMs"), "{error}");
    }
    assert!(SerializerOptions::default()
        .with_rate(1000.0, 2_147_483_647.0)
        .is_ok());
}

#[test]
fn without_a_rate_nothing_waits_for_a_pace() {
    let mut host = Host::new(SerializerOptions::default(), false, 0.0);
    for i in 0..20 {
        host.call("k", i, false).expect("queued");
    }
    host.run(f64::INFINITY);
    assert!(host.starts.iter().all(|s| s.1 == 0.0));
    assert_eq!(host.engine.stats(0).paced, 0);
}
