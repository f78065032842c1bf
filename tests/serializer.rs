//! The serializer: its core (deadline list, expiry) and the Rust front end on a manual clock.

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::Executor;
use keyturn::serializer::{
    validate_max_pending, validate_timeout_ms, Abandon, EnqueueError, SerializerCore,
};
use keyturn::{
    KeyError, KeyedSerializer, ManualClock, MaxPendingOutOfRange, SerializeError,
    SerializerOptionError, SerializerOptions, Stats, TimeoutOutOfRange, MAX_KEY_BYTES,
    MAX_TIMEOUT_MS,
};

// ---- the core ------------------------------------------------------------------------------

fn core<P>(timeout_ms: f64, max_pending: f64) -> SerializerCore<P> {
    SerializerCore::new(
        SerializerOptions::new(timeout_ms, max_pending).unwrap(),
        true,
    )
}

#[test]
fn core_times_works_from_their_start_and_expires_them_earliest_first() {
    let mut core: SerializerCore<&str> = core(100.0, f64::INFINITY);
    let a = core.open("a", "a1", None).unwrap();
    let b = core.open("b", "b1", None).unwrap();
    let a2 = core.enqueue_on(a.line, "a2", None).unwrap();
    assert!(a.is_head && b.is_head);
    assert_eq!(
        core.next_deadline(),
        None,
        "nothing runs before it is started"
    );
    assert_eq!(core.start_head(a.line, 0.0).unwrap().deadline, 100.0);
    assert_eq!(*core.start_head(b.line, 30.0).unwrap().payload, "b1");
    assert!(
        core.start_head(a.line, 40.0).is_none(),
        "a work starts once"
    );
    assert_eq!(core.next_deadline(), Some(100.0));
    assert_eq!(core.expire(99.9), None);
    assert_eq!(core.expire(100.0), Some(a.ticket));
    assert_eq!(core.expire(100.0), None);
    assert_eq!(core.next_deadline(), Some(130.0));
    // An abandoned work stays the head until it is finished, but counts no more.
    assert_eq!((core.keys(), core.pending_in(a.line)), (2, 1));
    let stats = core.stats();
    assert_eq!(
        (stats.running, stats.waiting, stats.started, stats.timed_out),
        (1, 1, 2, 1)
    );
    let released = core.finish_head(a.line).unwrap();
    assert_eq!(
        (released.payload, released.next, released.idle),
        ("a1", Some(a2), false)
    );
    core.start_head(a.line, 100.0).unwrap();
    // b settles in time: its deadline goes; a2 is now the earliest.
    assert!(core.finish_head(b.line).unwrap().idle);
    assert_eq!(core.next_deadline(), Some(200.0));
    assert_eq!(core.expire(250.0), Some(a2));
    assert!(core.finish_head(a.line).unwrap().idle);
    assert_eq!((core.keys(), core.next_deadline()), (0, None));
    let stats = core.stats();
    assert_eq!(
        (stats.keys, stats.running, stats.waiting, stats.timed_out),
        (0, 0, 0, 2)
    );
}

#[test]
fn core_orders_own_deadlines_with_the_serializers() {
    let mut core: SerializerCore<u32> = core(100.0, f64::INFINITY);
    let lines: Vec<_> = [None, Some(10.0), Some(500.0), None, Some(1.0)]
        .into_iter()
        .enumerate()
        .map(|(i, own)| {
            let line = core.open(&format!("k{i}"), i as u32, own).unwrap().line;
            let started = core.start_head(line, i as f64).unwrap();
            assert_eq!(started.timeout_ms, own.unwrap_or(100.0));
            line
        })
        .collect();
    // Deadlines: 100, 11, 502, 103, 5 — expired earliest first.
    let mut order = Vec::new();
    while let Some(ticket) = core.expire(1_000.0) {
        order.push(*core.payload(ticket).unwrap());
    }
    assert_eq!(order, [4, 1, 0, 3, 2]);
    for line in lines {
        assert!(core.finish_head(line).unwrap().idle);
    }
}

#[test]
fn core_settling_out_of_order_keeps_the_deadlines_whole() {
    let mut core: SerializerCore<u32> = core(10.0, f64::INFINITY);
    let pushed: Vec<_> = (0..5)
        .map(|i| core.open(&format!("k{i}"), i, None).unwrap())
        .collect();
    for (i, p) in pushed.iter().enumerate() {
        core.start_head(p.line, i as f64).unwrap();
    }
    // Finish the middle, the newest and the oldest; 1 and 3 remain, in deadline order.
    for i in [2, 4, 0] {
        core.finish(pushed[i].ticket).unwrap();
    }
    assert_eq!(core.next_deadline(), Some(11.0));
    assert_eq!(core.expire(100.0), Some(pushed[1].ticket));
    assert_eq!(core.expire(100.0), Some(pushed[3].ticket));
    assert_eq!(core.next_deadline(), None);
}

#[test]
fn core_keeps_few_deadline_entries_however_many_works_pass() {
    let mut core: SerializerCore<u32> = core(1_000.0, f64::INFINITY);
    let line = core.open("k", 0, None).unwrap().line;
    for i in 0..100_000 {
        core.start_head(line, f64::from(i)).unwrap();
        core.enqueue_on(line, i + 1, None).unwrap();
        core.finish_head(line).unwrap();
    }
    assert!(core.deadline_entries() <= 66, "{}", core.deadline_entries());
}

#[test]
fn core_bounds_a_key_and_abandoned_works_stop_counting() {
    let mut core: SerializerCore<u32> = core(100.0, 2.0);
    let a = core.open("a", 1, None).unwrap();
    core.enqueue_on(a.line, 2, None).unwrap();
    assert_eq!(
        core.enqueue_on(a.line, 3, None),
        Err(EnqueueError::QueueFull { max_pending: 2 })
    );
    assert_eq!((core.pending_in(a.line), core.stats().refused), (2, 1));
    // Another key has its own bound.
    let b = core.open("b", 4, None).unwrap();
    core.enqueue_on(b.line, 5, None).unwrap();
    // The running head times out: it no longer counts, so one more fits.
    core.start_head(a.line, 0.0).unwrap();
    assert_eq!(core.expire(100.0), Some(a.ticket));
    assert_eq!(core.pending_in(a.line), 1);
    let third = core.enqueue_on(a.line, 3, None).unwrap();
    // A waiting work cancelled leaves the line at once and counts as aborted.
    let cancelled = core.finish(third).unwrap();
    assert_eq!(
        (cancelled.payload, cancelled.next, cancelled.idle),
        (3, None, false)
    );
    let stats = core.stats();
    assert_eq!((stats.aborted, stats.refused, stats.timed_out), (1, 1, 1));
    // A running work cancelled by its caller: abandoned, then it leaves when told.
    core.finish_head(a.line).unwrap();
    core.start_head(a.line, 100.0).unwrap();
    let head = core.head(a.line).unwrap();
    assert!(core.abandon(head, Abandon::Aborted));
    assert!(!core.abandon(head, Abandon::Aborted), "once");
    assert_eq!((core.pending_in(a.line), core.stats().aborted), (0, 2));
    assert!(core.finish_head(a.line).unwrap().idle);
    core.late_settled();
    assert_eq!(core.stats().late_settled, 1);
}

#[test]
fn core_refuses_bad_keys_and_deadlines_and_queues_nothing() {
    let mut core: SerializerCore<()> = core(10.0, f64::INFINITY);
    assert_eq!(
        core.open("", (), None).unwrap_err(),
        EnqueueError::InvalidKey(KeyError::Empty)
    );
    let long = "x".repeat(MAX_KEY_BYTES + 1);
    assert_eq!(
        core.open(&long, (), None).unwrap_err(),
        EnqueueError::InvalidKey(KeyError::TooLong(MAX_KEY_BYTES + 1))
    );
    assert_eq!(
        core.open("k", (), Some(0.0)).unwrap_err(),
        EnqueueError::InvalidTimeout(TimeoutOutOfRange(0.0))
    );
    let line = core.open("k", (), Some(5.0)).unwrap().line;
    assert!(matches!(
        core.enqueue_on(line, (), Some(f64::NAN)),
        Err(EnqueueError::InvalidTimeout(TimeoutOutOfRange(ms))) if ms.is_nan()
    ));
    assert_eq!(core.pending_in(line), 1);
    core.finish_head(line).unwrap();
    assert_eq!(
        core.enqueue_on(line, (), None),
        Err(EnqueueError::IdleLine),
        "an idle line queues nothing"
    );
    assert_eq!(
        (core.keys(), core.stats()),
        (
            0,
            Stats {
                aborted: 1,
                ..Stats::default()
            }
        )
    );
}

#[test]
fn options_bounds() {
    assert!(SerializerOptions::new(10.0, 1.0).is_ok());
    assert_eq!(
        SerializerOptions::new(10.0, f64::INFINITY)
            .unwrap()
            .max_pending(),
        usize::MAX
    );
    for bad in [0.0, -1.0, 1.5, f64::NAN, f64::NEG_INFINITY] {
        assert!(
            matches!(
                SerializerOptions::new(10.0, bad),
                Err(SerializerOptionError::MaxPending(MaxPendingOutOfRange(got)))
                    if got.to_bits() == bad.to_bits()
            ),
            "{bad}"
        );
    }
    assert_eq!(validate_max_pending(1e300), Ok(usize::MAX));
    assert!(matches!(
        SerializerOptions::new(0.0, 1.0),
        Err(SerializerOptionError::TimeoutMs(_))
    ));
}

#[test]
fn timeout_bounds() {
    assert_eq!(validate_timeout_ms(1.0), Ok(1.0));
    assert_eq!(validate_timeout_ms(1.5), Ok(1.5));
    assert_eq!(
        validate_timeout_ms(f64::from(MAX_TIMEOUT_MS)),
        Ok(2_147_483_647.0)
    );
    for bad in [0.0, 0.5, -1.0, 2_147_483_648.0, f64::NAN, f64::INFINITY] {
        assert!(validate_timeout_ms(bad).is_err(), "{bad}");
    }
    assert_eq!(
        TimeoutOutOfRange(0.0).to_string(),
        "timeoutMs must be a finite number from 1 to 2147483647, got 0"
    );
}

// ---- the Rust front end --------------------------------------------------------------------

type Log = Rc<RefCell<Vec<String>>>;

fn setup(
    timeout_ms: f64,
) -> (
    Rc<Executor>,
    ManualClock,
    Rc<KeyedSerializer<ManualClock>>,
    Log,
) {
    let clock = ManualClock::new();
    let serializer = Rc::new(KeyedSerializer::with_clock(timeout_ms, clock.clone()).unwrap());
    (
        Executor::new(),
        clock,
        serializer,
        Rc::new(RefCell::new(Vec::new())),
    )
}

/// Spawns a work under `key` that logs its start and end and takes `ms` on the clock.
fn spawn_work(
    executor: &Executor,
    clock: &ManualClock,
    serializer: &Rc<KeyedSerializer<ManualClock>>,
    log: &Log,
    key: &'static str,
    name: &'static str,
    ms: f64,
) -> Rc<RefCell<Option<Result<&'static str, SerializeError>>>> {
    let (clock, serializer, log) = (clock.clone(), serializer.clone(), log.clone());
    executor.spawn_with_output(async move {
        serializer
            .run(key, |_signal| async move {
                log.borrow_mut().push(format!("start {name}"));
                clock.after(ms).await;
                log.borrow_mut().push(format!("end {name}"));
                name
            })
            .await
    })
}

#[test]
fn works_for_one_key_run_one_at_a_time_in_entry_order() {
    let (executor, clock, serializer, log) = setup(1000.0);
    let outputs: Vec<_> = ["w1", "w2", "w3"]
        .iter()
        .map(|name| spawn_work(&executor, &clock, &serializer, &log, "k", name, 10.0))
        .collect();
    let other = spawn_work(&executor, &clock, &serializer, &log, "other", "o1", 10.0);
    executor.run_until_stalled();
    assert_eq!(
        *log.borrow(),
        ["start w1", "start o1"],
        "different keys run concurrently"
    );
    assert_eq!(serializer.pending(), 2);
    for _ in 0..3 {
        clock.advance(10.0);
        executor.run_until_stalled();
    }
    assert_eq!(
        *log.borrow(),
        ["start w1", "start o1", "end w1", "end o1", "start w2", "end w2", "start w3", "end w3"]
    );
    let results: Vec<_> = outputs
        .iter()
        .map(|o| o.borrow_mut().take().unwrap().unwrap())
        .collect();
    assert_eq!(results, ["w1", "w2", "w3"]);
    assert_eq!(other.borrow_mut().take().unwrap(), Ok("o1"));
    assert_eq!(serializer.pending(), 0);
}

#[test]
fn a_work_past_its_deadline_is_dropped_and_the_next_one_starts() {
    let (executor, clock, serializer, log) = setup(50.0);
    let slow = spawn_work(&executor, &clock, &serializer, &log, "k", "slow", 1000.0);
    let next = spawn_work(&executor, &clock, &serializer, &log, "k", "next", 10.0);
    executor.run_until_stalled();
    clock.advance(49.0);
    executor.run_until_stalled();
    assert!(slow.borrow().is_none(), "not before the deadline");
    clock.advance(1.0);
    executor.run_until_stalled();
    assert_eq!(
        slow.borrow_mut().take().unwrap(),
        Err(SerializeError::TimedOut {
            key: "k".into(),
            timeout_ms: 50.0
        })
    );
    assert_eq!(
        *log.borrow(),
        ["start slow", "start next"],
        "the slow work never ended: it was dropped"
    );
    clock.advance(10.0);
    executor.run_until_stalled();
    assert_eq!(next.borrow_mut().take().unwrap(), Ok("next"));
    // The dropped work's own sleep was dropped too.
    assert_eq!(clock.sleepers(), 0);
    assert_eq!(
        SerializeError::TimedOut {
            key: "k".into(),
            timeout_ms: 50.0
        }
        .to_string(),
        "serialized work for k timed out after 50 ms: released, the next notification re-decides"
    );
}

#[test]
fn the_signal_is_aborted_at_the_deadline() {
    let (executor, clock, serializer, _log) = setup(20.0);
    let seen = Rc::new(RefCell::new(None));
    let kept = seen.clone();
    let c = clock.clone();
    let s = serializer.clone();
    executor.spawn(async move {
        let _ = s
            .run("k", |signal| async move {
                *kept.borrow_mut() = Some(signal.clone());
                c.after(100.0).await;
            })
            .await;
    });
    executor.run_until_stalled();
    let signal = seen.borrow().clone().unwrap();
    assert!(!signal.is_aborted());
    clock.advance(20.0);
    executor.run_until_stalled();
    assert!(signal.is_aborted());
}

#[test]
fn cancelling_a_waiting_turn_leaves_the_line_and_a_running_one_frees_the_key() {
    let (executor, clock, serializer, log) = setup(1000.0);
    let first = spawn_work(&executor, &clock, &serializer, &log, "k", "first", 10.0);
    executor.run_until_stalled();
    // A waiter dropped while it waits: it must never run, and not hold the line.
    {
        let mut waiting = Box::pin(serializer.run("k", |_| async { "never" }));
        assert!(common::poll_once(&mut waiting).is_pending());
    }
    let third = spawn_work(&executor, &clock, &serializer, &log, "k", "third", 10.0);
    clock.advance(10.0);
    executor.run_until_stalled();
    assert_eq!(first.borrow_mut().take().unwrap(), Ok("first"));
    clock.advance(10.0);
    executor.run_until_stalled();
    assert_eq!(third.borrow_mut().take().unwrap(), Ok("third"));
    // A running work dropped mid-way frees the key at once.
    {
        let mut running = Box::pin(serializer.run("k", |_| std::future::pending::<()>()));
        assert!(common::poll_once(&mut running).is_pending());
        assert_eq!(serializer.pending(), 1);
    }
    assert_eq!(serializer.pending(), 0);
    assert_eq!(
        *log.borrow(),
        ["start first", "end first", "start third", "end third"]
    );
}

#[test]
fn bad_keys_and_timeouts_are_refused() {
    let clock = ManualClock::new();
    assert!(KeyedSerializer::with_clock(0.0, clock.clone()).is_err());
    let serializer = KeyedSerializer::with_clock(10.0, clock).unwrap();
    let mut run = Box::pin(serializer.run("", |_| async {}));
    assert!(matches!(
        common::poll_once(&mut run),
        std::task::Poll::Ready(Err(SerializeError::InvalidKey(KeyError::Empty)))
    ));
    assert_eq!(serializer.pending(), 0);
}

/// xorshift64*, for the randomized test.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn randomized_works_keep_per_key_order_and_never_overlap() {
    let (executor, clock, serializer, _log) = setup(40.0);
    let mut rng = Rng(42);
    let events: Rc<RefCell<Vec<(usize, usize, bool)>>> = Rc::new(RefCell::new(Vec::new())); // (key, seq, start?)
    let mut entered: Vec<Vec<usize>> = vec![Vec::new(); 16];
    let mut timeouts = 0;
    let outputs: Vec<_> = (0..10_000)
        .map(|seq| {
            let key = rng.below(16) as usize;
            let ms = rng.below(60) as f64; // some exceed the 40 ms deadline
            entered[key].push(seq);
            let (c, s, e) = (clock.clone(), serializer.clone(), events.clone());
            executor.spawn_with_output(async move {
                let name = format!("k{key}");
                s.run(&name, |_| async move {
                    e.borrow_mut().push((key, seq, true));
                    c.after(ms).await;
                    e.borrow_mut().push((key, seq, false));
                })
                .await
            })
        })
        .collect();
    while executor.unfinished() > 0 {
        executor.run_until_stalled();
        clock.advance(1.0);
    }
    for output in &outputs {
        if let Some(Err(SerializeError::TimedOut { .. })) = &*output.borrow() {
            timeouts += 1;
        }
    }
    // Per key: starts in entry order; a start only after the previous work ended or timed out
    // (a dropped work never logs its end).
    let mut started: Vec<Vec<usize>> = vec![Vec::new(); 16];
    let mut running: Vec<Option<usize>> = vec![None; 16];
    for &(key, seq, is_start) in events.borrow().iter() {
        if is_start {
            started[key].push(seq);
            running[key] = Some(seq);
        } else {
            assert_eq!(
                running[key],
                Some(seq),
                "an end belongs to the running work"
            );
            running[key] = None;
        }
    }
    assert_eq!(started, entered);
    assert!(timeouts > 100, "the test exercises timeouts ({timeouts})");
    assert_eq!(serializer.pending(), 0);
}

#[test]
fn a_bound_refuses_calls_past_it_and_the_counters_say_what_happened() {
    let clock = ManualClock::new();
    let options = SerializerOptions::new(50.0, 2.0).unwrap();
    let serializer = Rc::new(KeyedSerializer::with_options(options, clock.clone()));
    let executor = Executor::new();
    let spawn = |ms: f64| {
        let (s, c) = (serializer.clone(), clock.clone());
        executor.spawn_with_output(async move {
            s.run("k", |_| async move {
                c.after(ms).await;
            })
            .await
        })
    };
    let first = spawn(100.0); // outlives its 50 ms deadline
    let second = spawn(10.0);
    let third = spawn(10.0);
    executor.run_until_stalled();
    assert_eq!(serializer.pending_for("k"), 2);
    assert_eq!(serializer.pending_for("other"), 0);
    assert_eq!(
        third.borrow_mut().take(),
        Some(Err(SerializeError::QueueFull {
            key: "k".into(),
            max_pending: 2
        }))
    );
    assert_eq!(
        SerializeError::QueueFull {
            key: "k".into(),
            max_pending: 2
        }
        .to_string(),
        "serialized work for k refused: 2 works are queued or running for it already"
    );
    let stats = serializer.stats();
    assert_eq!(
        (stats.keys, stats.running, stats.waiting, stats.refused),
        (1, 1, 1, 1)
    );
    clock.advance(50.0);
    executor.run_until_stalled();
    assert!(matches!(
        first.borrow_mut().take(),
        Some(Err(SerializeError::TimedOut { .. }))
    ));
    clock.advance(10.0);
    executor.run_until_stalled();
    assert_eq!(second.borrow_mut().take(), Some(Ok(())));
    let stats = serializer.stats();
    assert_eq!(
        (
            stats.started,
            stats.timed_out,
            stats.running,
            stats.waiting,
            stats.keys
        ),
        (2, 1, 0, 0, 0)
    );
}

#[test]
fn a_call_can_bring_its_own_deadline() {
    let (executor, clock, serializer, _log) = setup(1_000.0);
    let short = {
        let s = serializer.clone();
        executor.spawn_with_output(async move {
            s.run_with_timeout("k", 5.0, |_| std::future::pending::<()>())
                .await
        })
    };
    executor.run_until_stalled();
    clock.advance(5.0);
    executor.run_until_stalled();
    assert_eq!(
        short.borrow_mut().take(),
        Some(Err(SerializeError::TimedOut {
            key: "k".into(),
            timeout_ms: 5.0
        }))
    );
    let mut bad = Box::pin(serializer.run_with_timeout("k", 0.0, |_| async {}));
    assert!(matches!(
        common::poll_once(&mut bad),
        std::task::Poll::Ready(Err(SerializeError::InvalidTimeout(_)))
    ));
    assert_eq!(serializer.pending(), 0);
}

#[test]
fn cancelled_turns_count_as_aborted() {
    let (executor, clock, serializer, log) = setup(1_000.0);
    let _first = spawn_work(&executor, &clock, &serializer, &log, "k", "first", 10.0);
    executor.run_until_stalled();
    {
        let mut waiting = Box::pin(serializer.run("k", |_| async { "never" }));
        assert!(common::poll_once(&mut waiting).is_pending());
        assert_eq!(serializer.stats().waiting, 1);
    }
    assert_eq!(serializer.stats().aborted, 1);
    clock.advance(10.0);
    executor.run_until_stalled();
    {
        let mut running = Box::pin(serializer.run("k", |_| std::future::pending::<()>()));
        assert!(common::poll_once(&mut running).is_pending());
        assert_eq!(serializer.stats().running, 1);
    }
    let stats = serializer.stats();
    assert_eq!((stats.aborted, stats.running, stats.keys), (2, 0, 0));
}
