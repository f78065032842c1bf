//! The serializer's Rust front end on a manual clock (its core is tested in
//! `src/serializer/core/tests.rs`).

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::Executor;
use keyturn::{
    Clock, Coalesce, KeyError, KeyedSerializer, ManualClock, SerializeError, SerializerOptions,
};

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

type SlotEvent = (usize, usize, u16, bool);

/// Logs its event when dropped.
struct Ended(Rc<RefCell<Vec<SlotEvent>>>, SlotEvent);

impl Drop for Ended {
    fn drop(&mut self) {
        self.0.borrow_mut().push(self.1);
    }
}

#[test]
fn randomized_works_at_concurrency_3_never_run_more_than_3_and_start_in_entry_order() {
    let clock = ManualClock::new();
    let options = SerializerOptions::new(40.0, f64::INFINITY)
        .and_then(|options| options.with_concurrency(3.0))
        .unwrap();
    let serializer = Rc::new(KeyedSerializer::with_options(options, clock.clone()));
    let executor = Executor::new();
    let mut rng = Rng(7);
    // (key, seq, slot, start?)
    let events: Rc<RefCell<Vec<SlotEvent>>> = Rc::new(RefCell::new(Vec::new()));
    let mut entered: Vec<Vec<usize>> = vec![Vec::new(); 16];
    for seq in 0..10_000 {
        let key = rng.below(16) as usize;
        let ms = rng.below(60) as f64; // some exceed the 40 ms deadline
        entered[key].push(seq);
        let (c, s, e) = (clock.clone(), serializer.clone(), events.clone());
        executor.spawn(async move {
            let name = format!("k{key}");
            let _ = s
                .run(&name, |signal| async move {
                    e.borrow_mut().push((key, seq, signal.slot(), true));
                    // Its end is logged when the work's future goes, done or dropped at its
                    // deadline.
                    let _end = Ended(e, (key, seq, signal.slot(), false));
                    c.after(ms).await;
                })
                .await;
        });
    }
    let mut most = 0;
    while executor.unfinished() > 0 {
        executor.run_until_stalled();
        most = most.max(serializer.stats().running);
        clock.advance(1.0);
    }
    // Per key: starts in entry order, at most 3 running, each in a slot of its own.
    let mut started: Vec<Vec<usize>> = vec![Vec::new(); 16];
    let mut slots: Vec<[Option<usize>; 3]> = vec![[None; 3]; 16];
    let mut widest = 0;
    for &(key, seq, slot, is_start) in events.borrow().iter() {
        let slot = usize::from(slot);
        assert!(slot < 3, "slot {slot} at concurrency 3");
        if is_start {
            started[key].push(seq);
            assert_eq!(
                slots[key][slot], None,
                "work {seq} started in a slot in use"
            );
            slots[key][slot] = Some(seq);
            widest = widest.max(slots[key].iter().flatten().count());
        } else {
            assert_eq!(
                slots[key][slot],
                Some(seq),
                "an end belongs to the work in its slot"
            );
            slots[key][slot] = None;
        }
    }
    assert_eq!(started, entered);
    assert_eq!(widest, 3, "keys ran three works at once");
    assert!(most <= 16 * 3);
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

// ---- coalescing calls ------------------------------------------------------------------------

type Slot<T> = Rc<RefCell<Option<Result<T, SerializeError>>>>;

/// Spawns a coalescing call under `key` whose work counts its runs and takes `ms`.
fn spawn_coalesced(
    executor: &Executor,
    clock: &ManualClock,
    serializer: &Rc<KeyedSerializer<ManualClock>>,
    runs: &Rc<RefCell<u32>>,
    coalesce: Coalesce,
    ms: f64,
) -> Slot<u32> {
    let (clock, serializer, runs) = (clock.clone(), serializer.clone(), runs.clone());
    executor.spawn_with_output(async move {
        serializer
            .run_coalesced("k", coalesce, move |_signal| async move {
                *runs.borrow_mut() += 1;
                let run = *runs.borrow();
                clock.after(ms).await;
                run
            })
            .await
    })
}

#[test]
fn a_burst_of_coalescing_calls_behind_a_running_work_is_answered_by_one_run() {
    let (executor, clock, serializer, log) = setup(1000.0);
    let runs = Rc::new(RefCell::new(0));
    let first = spawn_work(&executor, &clock, &serializer, &log, "k", "first", 10.0);
    executor.run_until_stalled();
    let burst: Vec<_> = (0..100)
        .map(|_| spawn_coalesced(&executor, &clock, &serializer, &runs, Coalesce::Yes, 5.0))
        .collect();
    let acl = Coalesce::Group("acl".into());
    let other = spawn_coalesced(&executor, &clock, &serializer, &runs, acl.clone(), 5.0);
    let after = spawn_coalesced(&executor, &clock, &serializer, &runs, Coalesce::Yes, 5.0);
    executor.run_until_stalled();
    assert_eq!(
        serializer.pending_for("k"),
        4,
        "first, the burst's run, acl, after"
    );
    assert_eq!(serializer.stats().coalesced, 99);
    clock.advance(10.0);
    executor.run_until_stalled();
    assert_eq!(first.borrow_mut().take().unwrap(), Ok("first"));
    clock.advance(5.0);
    executor.run_until_stalled();
    for slot in &burst {
        assert_eq!(
            slot.borrow_mut().take(),
            Some(Ok(1)),
            "a clone of the one run's output"
        );
    }
    for _ in 0..2 {
        clock.advance(5.0);
        executor.run_until_stalled();
    }
    assert_eq!(
        other.borrow_mut().take(),
        Some(Ok(2)),
        "another group never joins"
    );
    assert_eq!(
        after.borrow_mut().take(),
        Some(Ok(3)),
        "nor skips ahead of it"
    );
    assert_eq!((*runs.borrow(), serializer.pending()), (3, 0));
}

#[test]
fn a_coalesced_run_goes_on_while_any_caller_waits_and_stops_with_the_last() {
    let (executor, clock, serializer, log) = setup(1000.0);
    let runs = Rc::new(RefCell::new(0));
    let first = spawn_work(&executor, &clock, &serializer, &log, "k", "first", 10.0);
    executor.run_until_stalled();
    // The caller that queued the run leaves before its turn: a joined caller drives it.
    let mut queued = Box::pin(serializer.run_coalesced("k", Coalesce::Yes, |_| async { 7 }));
    assert!(common::poll_once(&mut queued).is_pending());
    let joined = {
        let serializer = serializer.clone();
        executor.spawn_with_output(async move {
            serializer
                .run_coalesced("k", Coalesce::Yes, |_| async { 0 })
                .await
        })
    };
    executor.run_until_stalled();
    drop(queued);
    clock.advance(10.0);
    executor.run_until_stalled();
    assert_eq!(first.borrow_mut().take().unwrap(), Ok("first"));
    assert_eq!(
        joined.borrow_mut().take(),
        Some(Ok(7)),
        "the queued work ran for it"
    );
    assert_eq!(serializer.stats().aborted, 0, "nobody's work was cancelled");
    // Every caller of a running run leaves: the work is dropped, the key moves on.
    {
        let ahead = spawn_work(&executor, &clock, &serializer, &log, "k", "ahead", 10.0);
        executor.run_until_stalled();
        let mut a = Box::pin(
            serializer.run_coalesced("k", Coalesce::Yes, |_| std::future::pending::<u8>()),
        );
        let mut b = Box::pin(serializer.run_coalesced("k", Coalesce::Yes, |_| async { 1u8 }));
        assert!(common::poll_once(&mut a).is_pending());
        assert!(common::poll_once(&mut b).is_pending());
        clock.advance(10.0);
        executor.run_until_stalled();
        assert_eq!(ahead.borrow_mut().take().unwrap(), Ok("ahead"));
        assert!(
            common::poll_once(&mut b).is_pending(),
            "b drives the run a queued"
        );
        assert_eq!(serializer.stats().running, 1);
        drop(a);
        assert_eq!(serializer.stats().running, 1, "b still waits for it");
    }
    let stats = serializer.stats();
    assert_eq!(
        (
            stats.running,
            stats.aborted,
            stats.coalesced,
            serializer.pending()
        ),
        (0, 1, 2, 0)
    );
    // A run past its deadline: every caller gets the same timeout.
    let (executor, clock, serializer, log) = setup(50.0);
    spawn_work(&executor, &clock, &serializer, &log, "k", "ahead", 10.0);
    let calls: Vec<_> = (0..3)
        .map(|_| spawn_coalesced(&executor, &clock, &serializer, &runs, Coalesce::Yes, 100.0))
        .collect();
    executor.run_until_stalled();
    clock.advance(10.0);
    executor.run_until_stalled();
    clock.advance(50.0);
    executor.run_until_stalled();
    for call in calls {
        assert_eq!(
            call.borrow_mut().take(),
            Some(Err(SerializeError::TimedOut {
                key: "k".into(),
                timeout_ms: 50.0
            }))
        );
    }
    assert_eq!((serializer.stats().timed_out, clock.sleepers()), (1, 0));
}

#[test]
fn a_call_joins_only_a_run_of_its_own_output_type() {
    let (executor, _clock, serializer, _log) = setup(1000.0);
    let number = {
        let serializer = serializer.clone();
        executor.spawn_with_output(async move {
            serializer
                .run_coalesced("k", Coalesce::Yes, |_| async { 1u8 })
                .await
        })
    };
    let text = {
        let serializer = serializer.clone();
        executor.spawn_with_output(async move {
            serializer
                .run_coalesced("k", Coalesce::Yes, |_| async { "text" })
                .await
        })
    };
    executor.run_until_stalled();
    assert_eq!(number.borrow_mut().take(), Some(Ok(1)));
    assert_eq!(text.borrow_mut().take(), Some(Ok("text")));
    assert_eq!(serializer.stats().coalesced, 0);
}

#[test]
fn a_work_whose_deadline_timer_is_refused_fails_with_the_refusal_and_the_key_moves_on() {
    let clock = ManualClock::new();
    let refusing = common::Refusing::new(&clock);
    let serializer = Rc::new(KeyedSerializer::with_clock(50.0, refusing.clone()).unwrap());
    let executor = Executor::new();
    refusing.refuse.set(1);
    let refused = {
        let (serializer, clock) = (serializer.clone(), clock.clone());
        executor.spawn_with_output(async move {
            serializer
                .run("k", |_| async move {
                    clock.after(10.0).await;
                    "ran"
                })
                .await
        })
    };
    let next = {
        let serializer = serializer.clone();
        executor.spawn_with_output(async move { serializer.run("k", |_| async { "next" }).await })
    };
    common::run(&executor, &clock);
    assert_eq!(
        refused.borrow_mut().take().unwrap(),
        Err(SerializeError::Timer(keyturn::TimerError {
            message: "QuotaExceededError".into()
        }))
    );
    assert_eq!(next.borrow_mut().take().unwrap(), Ok("next"));
    assert_eq!(serializer.pending(), 0);
}

#[test]
fn a_pace_holds_starts_back_and_try_run_is_refused_meanwhile() {
    let clock = ManualClock::new();
    let options = SerializerOptions::default().with_rate(2.0, 100.0).unwrap();
    let serializer = Rc::new(KeyedSerializer::with_options(options, clock.clone()));
    let executor = Executor::new();
    let starts = Rc::new(RefCell::new(Vec::new()));
    for i in 0..5 {
        let (clock, serializer, starts) = (clock.clone(), serializer.clone(), starts.clone());
        executor.spawn_with_output(async move {
            serializer
                .run("k", |_| async move {
                    starts.borrow_mut().push((i, clock.monotonic_ms()))
                })
                .await
        });
    }
    executor.run_until_stalled();
    assert_eq!(*starts.borrow(), [(0, 0.0), (1, 0.0)]);
    // Works wait in line for their pace: a call that must start at once is refused, saying so.
    let refused = {
        let serializer = serializer.clone();
        executor.spawn_with_output(async move { serializer.try_run("k", |_| async {}).await })
    };
    let free = {
        let serializer = serializer.clone();
        executor
            .spawn_with_output(async move { serializer.try_run("other", |_| async { 7 }).await })
    };
    executor.run_until_stalled();
    assert!(matches!(
        refused.borrow_mut().take(),
        Some(Err(SerializeError::Unavailable {
            retry_after_ms: None,
            ..
        }))
    ));
    assert_eq!(free.borrow_mut().take(), Some(Ok(7)));
    for _ in 0..3 {
        clock.advance(50.0);
        executor.run_until_stalled();
    }
    assert_eq!(
        *starts.borrow(),
        [(0, 0.0), (1, 0.0), (2, 100.0), (3, 100.0)]
    );
    clock.advance(50.0);
    executor.run_until_stalled();
    assert_eq!(*starts.borrow().last().unwrap(), (4, 200.0));
    // Idle at 200: one start of the last 100 ms is the one at 200, so one more may start.
    let try_run = || {
        let serializer = serializer.clone();
        executor.spawn_with_output(async move { serializer.try_run("k", |_| async {}).await })
    };
    let free_again = try_run();
    executor.run_until_stalled();
    assert_eq!(free_again.borrow_mut().take(), Some(Ok(())));
    // Two starts at 200: the pace alone holds the next up, until 300.
    clock.advance(10.0);
    let paced = try_run();
    executor.run_until_stalled();
    match paced.borrow_mut().take() {
        Some(Err(SerializeError::Unavailable {
            retry_after_ms: Some(ms),
            ..
        })) => {
            assert_eq!(ms, 90.0)
        }
        other => panic!("refused for its pace: {other:?}"),
    }
    let stats = serializer.stats();
    assert_eq!((stats.started, stats.paced, stats.unavailable), (7, 2, 2));
}
