//! A key's pace (`SerializerOptions::with_rate`) in the engine alone, on a simulated host with a
//! manual clock: with one timer for all (Node, browsers) and with a timer per call (Workers, the
//! Rust front end), the same starts. And, where contexts end (Workers), the work behind one whose
//! caller's context ended — told it may start, it never does — gives it up.

use std::collections::{BTreeMap, BTreeSet};

use keyturn::engine::{
    Config, Effect, Engine, EnqueueError, Entered, Now, Outcome, Ticket, ORPHAN_MS, START_GRACE_MS,
};
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
    /// Callers whose context ended: what the engine asks of them is never done.
    dead: BTreeSet<u32>,
    /// Callers told they may start from another call's context (Workers posts it): they start
    /// when `held` lets them go, their timers kept meanwhile.
    held: BTreeSet<u32>,
    never_started: Vec<u32>,
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
            dead: BTreeSet::new(),
            held: BTreeSet::new(),
            never_started: Vec::new(),
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
                Effect::Settle {
                    handle,
                    outcome: Outcome::NeverStarted,
                } => self.never_started.push(handle),
                Effect::Ready { handle, .. } | Effect::Arm { handle, .. }
                    if self.dead.contains(&handle) => {}
                Effect::Ready { handle, .. } if self.held.contains(&handle) => {}
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
                // (A hung work's signal: nothing here to abort.)
                Effect::Abort { .. } => {}
                other => panic!("no such effect here: {other:?}"),
            }
        }
    }

    /// Runs until nothing is left to do, or `until`. A host woken again and again at one time
    /// (a timer the engine keeps asking for, with nothing done) fails the test.
    fn run(&mut self, until: f64) {
        let mut steps_at_now = 0;
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
            steps_at_now = if next > self.now { 0 } else { steps_at_now + 1 };
            assert!(steps_at_now < 10_000, "the host spins at {} ms", self.now);
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

/// A contexts-end host whose works each run `hold_ms`: work 1 runs; work 2's caller's context
/// ends while it waits; work 3 waits behind it.
fn with_a_dead_waiter(options: SerializerOptions, hold_ms: f64) -> Host {
    let mut host = Host::new(options, true, hold_ms);
    host.call("k", 1, false).expect("queued");
    host.dead.insert(2);
    host.call("k", 2, false).expect("queued");
    host.call("k", 3, false).expect("queued");
    host
}

#[test]
fn a_waiting_work_whose_context_ended_is_given_up_a_grace_after_its_turn_came() {
    let mut host = with_a_dead_waiter(SerializerOptions::default(), 100.0);
    host.run(100.0 + START_GRACE_MS - 1.0);
    assert_eq!(host.starts, vec![(1, 0.0)], "work 2 may still start");
    host.run(f64::INFINITY);
    assert_eq!(host.never_started, vec![2]);
    assert_eq!(host.starts, vec![(1, 0.0), (3, 100.0 + START_GRACE_MS)]);
    assert_eq!(host.engine.stats(0).keys, 0, "the key ends idle");
}

#[test]
fn a_waiting_work_that_starts_within_the_grace_is_not_given_up() {
    // Work 2 is slow, not gone: it starts 900 ms after its turn came.
    let mut host = with_a_dead_waiter(SerializerOptions::default(), 100.0);
    host.run(1000.0);
    host.now = 1000.0;
    host.dead.remove(&2);
    let second = host.tickets[&2];
    assert!(host.engine.start_work(0, second, at(1000.0), &host.random));
    host.apply();
    host.run(f64::INFINITY);
    assert!(host.never_started.is_empty());
    assert_eq!(host.starts, vec![(1, 0.0), (2, 1000.0), (3, 1100.0)]);
}

#[test]
fn a_work_waiting_for_its_pace_whose_context_ended_is_woken_and_given_up_by_the_work_behind() {
    let mut host = with_a_dead_waiter(rate(1.0, 500.0), 10.0);
    host.run(f64::INFINITY);
    assert_eq!(host.never_started, vec![2]);
    // Work 2's own timer for its pace is gone with its context: work 3's fires a moment after
    // (ORPHAN_MS: a live work handles its own first), says work 2 may start, and gives it up a
    // grace later; the pace allows work 3 at once.
    assert_eq!(
        host.starts,
        vec![(1, 0.0), (3, 500.0 + ORPHAN_MS + START_GRACE_MS)]
    );
}

#[test]
fn behind_a_dead_running_work_and_a_dead_waiting_one_a_live_work_still_runs() {
    // Work 1 hangs and its request ended (its timer with it); work 2's request ended before its
    // turn; work 3 waits, alive: it watches work 1's deadline, then work 2's start.
    let options = SerializerOptions::new(1000.0, f64::INFINITY).expect("options");
    let mut host = Host::new(options, true, 1e9);
    host.call("k", 1, false).expect("queued");
    host.dead.insert(1);
    host.dead.insert(2);
    host.call("k", 2, false).expect("queued");
    host.call("k", 3, false).expect("queued");
    host.run(5000.0);
    assert_eq!(host.never_started, vec![2]);
    let third = host.starts.iter().find(|s| s.0 == 3).map(|s| s.1);
    assert_eq!(
        third,
        Some(1000.0 + ORPHAN_MS + START_GRACE_MS),
        "{:?}",
        host.starts
    );
}

#[test]
fn two_waiting_works_in_a_row_whose_contexts_ended_hold_the_line_a_grace_each() {
    let mut host = Host::new(SerializerOptions::default(), true, 100.0);
    host.call("k", 1, false).expect("queued");
    host.dead.insert(2);
    host.dead.insert(3);
    host.call("k", 2, false).expect("queued");
    host.call("k", 3, false).expect("queued");
    host.call("k", 4, false).expect("queued");
    host.run(f64::INFINITY);
    // Work 4, the line's last, watches work 2's start, then work 3's.
    assert_eq!(host.never_started, vec![2, 3]);
    assert_eq!(
        host.starts,
        vec![(1, 0.0), (4, 100.0 + 2.0 * START_GRACE_MS)]
    );
    assert_eq!(host.engine.stats(0).keys, 0);
}

#[test]
fn a_burst_of_calls_in_one_context_keeps_a_few_timers_not_one_a_call() {
    // workerd allows a request 10 000 timers: the works waiting behind others do not each watch.
    let mut host = Host::new(SerializerOptions::default(), true, 1.0);
    for i in 0..1000 {
        host.call("k", i, false).expect("queued");
    }
    assert!(host.armed.len() <= 3, "{} timers", host.armed.len());
    let mut most = 0;
    while host.starts.len() < 1000 {
        let before = host.starts.len();
        host.run(host.now + 1.0);
        host.now += 1.0;
        most = most.max(host.armed.len());
        assert!(host.starts.len() > before, "stalled at {}", host.now);
    }
    assert!(most <= 4, "{most} timers at once");
}

#[test]
fn a_work_told_it_may_start_by_another_calls_timer_keeps_its_own_until_it_starts() {
    // On Workers, work 2's pace came at 1000 ms, and work 3's timer fired first (both due, run
    // in either order): work 3's request tells work 2 it may start, by a reaction workerd does
    // not wait for. Work 2's own timer, firing next, must be armed again — its request, with
    // nothing pending, would be cancelled as hung before the news reached it.
    let mut host = Host::new(rate(1.0, 1000.0), true, 10.0);
    for handle in 1..=3 {
        host.call("k", handle, false).expect("queued");
    }
    host.run(999.0);
    assert_eq!(
        host.armed.get(&2),
        Some(&1000.0),
        "work 2 waits for its pace"
    );
    host.held.insert(2);
    host.now = 1001.0;
    let (second, third) = (host.tickets[&2], host.tickets[&3]);
    host.armed.remove(&3);
    host.engine.fired(Some(0), third, at(1001.0), &host.random);
    host.apply();
    host.armed.remove(&2);
    host.engine.fired(Some(0), second, at(1001.0), &host.random);
    host.apply();
    assert_eq!(
        host.armed.get(&2),
        Some(&(1001.0 + START_GRACE_MS)),
        "work 2 keeps a timer of its own until it starts"
    );
    // The news reaches it: it starts, and the line goes on.
    host.held.remove(&2);
    assert!(host.engine.start_work(0, second, at(1001.0), &host.random));
    host.apply();
    host.run(f64::INFINITY);
    assert_eq!(host.starts, vec![(1, 0.0), (2, 1001.0), (3, 2001.0)]);
    assert!(host.never_started.is_empty());
}

#[test]
fn n_at_a_time_a_first_work_never_started_lets_the_one_behind_start_when_given_up() {
    // Two at a time: work 2's context ended before it started, and work 3's turn came when
    // work 1 left (both are of the first two). Given up a grace after it was told, work 2 lets
    // work 3 start, though no turn came then.
    let options = SerializerOptions::default()
        .with_concurrency(2.0)
        .expect("concurrency");
    let mut host = with_a_dead_waiter(options, 100.0);
    host.run(f64::INFINITY);
    assert_eq!(host.never_started, vec![2]);
    assert_eq!(host.starts, vec![(1, 0.0), (3, START_GRACE_MS)]);
    assert_eq!(host.engine.stats(0).keys, 0, "the key ends idle");
}
