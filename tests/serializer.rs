//! The serializer: its core (deadline list, expiry) and the Rust front end on a manual clock.

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

mod common;

use std::cell::RefCell;
use std::rc::Rc;

use common::Executor;
use keyturn::serializer::{validate_timeout_ms, SerializerCore, TimeoutOutOfRange};
use keyturn::{
    Clock, KeyError, KeyedSerializer, ManualClock, SerializeError, MAX_KEY_BYTES, MAX_TIMEOUT_MS,
};

// ---- the core ------------------------------------------------------------------------------

#[test]
fn core_times_works_from_their_start_and_expires_them_oldest_first() {
    let mut core: SerializerCore<&str> = SerializerCore::new(100.0);
    let a = core.open("a", "a1").unwrap();
    let b = core.open("b", "b1").unwrap();
    let a2 = core.submit_on(a.line, "a2").unwrap();
    assert!(a.is_head && b.is_head);
    assert_eq!(
        core.next_deadline(),
        None,
        "nothing runs before it is started"
    );
    core.start(a.ticket, 0.0).unwrap();
    core.start(b.ticket, 30.0).unwrap();
    assert!(core.start(a2, 30.0).is_none(), "only a head starts");
    assert!(core.start(a.ticket, 40.0).is_none(), "a work starts once");
    assert_eq!(core.next_deadline(), Some(100.0));
    assert!(core.expire(99.9).is_empty());
    assert_eq!(core.expire(100.0), vec![a.ticket]);
    assert!(core.is_expired(a.ticket));
    assert_eq!(core.next_deadline(), Some(130.0));
    // An expired work stays the head until it is finished; then the next one's turn comes.
    assert_eq!(core.pending(), 2);
    let released = core.finish_head(a.line).unwrap();
    assert_eq!(
        (released.payload, released.next, released.idle),
        ("a1", Some(a2), false)
    );
    core.start(a2, 100.0).unwrap();
    // b settles in time: it leaves the deadline list; a2 is now the oldest running work.
    let released = core.finish_head(b.line).unwrap();
    assert!(released.idle);
    assert_eq!(core.next_deadline(), Some(200.0));
    assert_eq!(core.expire(250.0), vec![a2]);
    assert!(core.finish_head(a.line).unwrap().idle);
    assert_eq!(
        (core.pending(), core.works(), core.next_deadline()),
        (0, 0, None)
    );
}

#[test]
fn core_settling_out_of_order_keeps_the_deadline_list_whole() {
    let mut core: SerializerCore<u32> = SerializerCore::new(10.0);
    let pushed: Vec<_> = (0..5)
        .map(|i| core.open(&format!("k{i}"), i).unwrap())
        .collect();
    for (i, p) in pushed.iter().enumerate() {
        core.start(p.ticket, i as f64).unwrap();
    }
    // Finish the middle, the newest and the oldest; 1 and 3 remain, in start order.
    for i in [2, 4, 0] {
        core.finish(pushed[i].ticket).unwrap();
    }
    assert_eq!(core.next_deadline(), Some(11.0));
    assert_eq!(core.expire(100.0), vec![pushed[1].ticket, pushed[3].ticket]);
    assert_eq!(core.next_deadline(), None);
}

#[test]
fn core_refuses_bad_keys_and_queues_nothing() {
    let mut core: SerializerCore<()> = SerializerCore::new(10.0);
    assert_eq!(core.open("", ()).unwrap_err(), KeyError::Empty);
    let long = "x".repeat(MAX_KEY_BYTES + 1);
    assert_eq!(
        core.open(&long, ()).unwrap_err(),
        KeyError::TooLong(MAX_KEY_BYTES + 1)
    );
    assert_eq!((core.pending(), core.works()), (0, 0));
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
                clock.sleep(ms).await;
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
                c.sleep(100.0).await;
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
                    c.sleep(ms).await;
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
