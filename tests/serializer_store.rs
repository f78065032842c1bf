//! The serializer over a store (`StoreSerializer`), natively, on a manual clock and a
//! deterministic executor: two "isolates" are two lock managers over one `MemoryStore`.

mod common;

#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::{run, Executor};
use common::{Faults, FaultyStore, Lag, Record};
use keyturn::{
    Clock, Coalesce, LockError, LockManager, LockOptions, ManualClock, MemoryStore, SeededRandom,
    SerializeError, SerializerOptions, StoreSerializer, SERIALIZE_PREFIX,
};

type Serializer = StoreSerializer<FaultyStore, ManualClock, SeededRandom>;

fn isolate(store: &FaultyStore, timeout_ms: f64, stale_ms: f64, seed: u64) -> Rc<Serializer> {
    let options = SerializerOptions::new(timeout_ms, f64::INFINITY).unwrap();
    isolate_with(store, options, stale_ms, seed)
}

/// An isolate over `store` whose serializer has `options`, its leases `stale_ms` long.
fn isolate_with(
    store: &FaultyStore,
    options: SerializerOptions,
    stale_ms: f64,
    seed: u64,
) -> Rc<Serializer> {
    let locks = LockManager::new(store.clone(), store.clock.clone(), SeededRandom::new(seed));
    Rc::new(StoreSerializer::new(options, lease(stale_ms), locks).unwrap())
}

/// `count` isolates over `store` (seeds 1 up) whose serializers have `options` — a deadline of
/// 10 s and more as `more` says — and leases of 500 ms.
fn isolates(
    store: &FaultyStore,
    count: u64,
    more: impl Fn(SerializerOptions) -> Result<SerializerOptions, keyturn::SerializerOptionError>,
) -> Vec<Rc<Serializer>> {
    let options = SerializerOptions::new(10_000.0, f64::INFINITY)
        .and_then(more)
        .unwrap();
    (1..=count)
        .map(|seed| isolate_with(store, options, 500.0, seed))
        .collect()
}

/// The lease options of a serializer's turns: leases of `stale_ms`, the rest by default.
fn lease(stale_ms: f64) -> LockOptions {
    LockOptions {
        stale_ms,
        ..LockOptions::default()
    }
}

/// One store shared by the isolates: its calls lag 1, 2, 0, 1, 2, 0, … ms (the first 1 ms:
/// calls made at once are all queued before it answers), and can be made to fail.
fn world() -> (FaultyStore, Rc<Executor>) {
    let faults = Faults::new().lagging(Lag::Cycle);
    let store = FaultyStore::new(&Rc::new(MemoryStore::new()), &ManualClock::new(), faults);
    (store, Executor::new())
}

fn record(store: &FaultyStore, key: &str) -> Record {
    let name = format!("{SERIALIZE_PREFIX}{key}");
    Record::decode(&store.memory.get(&name).expect("a record").value).expect("ours")
}

/// Read-modify-write increments with a pause in between, watched for overlaps and fences.
#[derive(Default)]
struct Watch {
    total: Cell<u32>,
    live: Cell<u32>,
    max_live: Cell<u32>,
    fences: RefCell<Vec<u64>>,
}

#[test]
fn two_isolates_increment_one_key_without_overlap_and_with_rising_fences() {
    let (store, executor) = world();
    let isolates = [
        isolate(&store, 10_000.0, 500.0, 1),
        isolate(&store, 10_000.0, 500.0, 2),
    ];
    let watch = Rc::new(Watch::default());
    for i in 0..200 {
        let (serializer, watch, clock) =
            (isolates[i % 2].clone(), watch.clone(), store.clock.clone());
        executor.spawn(async move {
            serializer
                .run("counter", |_signal, fence| async move {
                    watch.live.set(watch.live.get() + 1);
                    watch
                        .max_live
                        .set(watch.max_live.get().max(watch.live.get()));
                    watch.fences.borrow_mut().push(fence);
                    let read = watch.total.get();
                    clock.after(1.0).await;
                    watch.total.set(read + 1);
                    watch.live.set(watch.live.get() - 1);
                })
                .await
                .unwrap();
        });
    }
    run(&executor, &store.clock);
    assert_eq!(watch.total.get(), 200);
    assert_eq!(watch.max_live.get(), 1);
    let fences = watch.fences.borrow();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    assert!(!record(&store, "counter").held, "freed at the end");
    for serializer in &isolates {
        assert_eq!(serializer.pending(), 0);
    }
}

#[test]
fn two_isolates_at_concurrency_3_run_at_most_3_works_of_a_key_with_fences_rising_per_slot() {
    let (store, executor) = world();
    let isolates = isolates(&store, 2, |options| options.with_concurrency(3.0));
    let slots: Rc<RefCell<[Option<u64>; 3]>> = Rc::default();
    let most = Rc::new(Cell::new(0));
    let turns: Rc<RefCell<Vec<(u16, u64)>>> = Rc::default();
    for i in 0..300 {
        let (serializer, clock) = (isolates[i % 2].clone(), store.clock.clone());
        let (slots, most, turns) = (slots.clone(), most.clone(), turns.clone());
        executor.spawn(async move {
            serializer
                .run("k", |signal, fence| async move {
                    let slot = usize::from(signal.slot());
                    {
                        let mut slots = slots.borrow_mut();
                        assert_eq!(slots[slot], None, "two works in slot {slot}");
                        slots[slot] = Some(fence);
                        most.set(most.get().max(slots.iter().flatten().count()));
                    }
                    turns.borrow_mut().push((signal.slot(), fence));
                    clock.after((i % 4) as f64).await;
                    slots.borrow_mut()[slot] = None;
                })
                .await
                .unwrap();
        });
    }
    run(&executor, &store.clock);
    assert_eq!(most.get(), 3);
    let turns = turns.borrow();
    assert_eq!(turns.len(), 300);
    for slot in 0..3 {
        let fences: Vec<u64> = turns
            .iter()
            .filter(|(s, _)| *s == slot)
            .map(|(_, fence)| *fence)
            .collect();
        assert!(!fences.is_empty(), "slot {slot} served");
        assert!(
            fences.windows(2).all(|w| w[0] < w[1]),
            "slot {slot}: {fences:?}"
        );
    }
    for slot in 0..3u16 {
        let name = keyturn::slot_name(&format!("{SERIALIZE_PREFIX}k"), slot);
        let found = Record::decode(&store.memory.get(&name).expect("a record").value).unwrap();
        assert!(!found.held, "slot {slot} freed at the end");
    }
}

#[test]
fn sixteen_works_in_one_isolate_cost_three_store_calls() {
    let (store, executor) = world();
    let serializer = isolate(&store, 10_000.0, 2_000.0, 3);
    let fences = Rc::new(RefCell::new(Vec::new()));
    for _ in 0..16 {
        let (serializer, fences) = (serializer.clone(), fences.clone());
        executor.spawn(async move {
            let fence = serializer
                .run("k", |_signal, fence| async move { fence })
                .await
                .unwrap();
            fences.borrow_mut().push(fence);
        });
    }
    run(&executor, &store.clock);
    // The first turn's create at 0 ms takes fence 1; the hand-off at 1 ms, the clock's (1000),
    // and the batch the fences after it.
    assert_eq!(
        *fences.borrow(),
        std::iter::once(1).chain(1000..1015).collect::<Vec<u64>>()
    );
    // The first turn starts as its task is polled, before the other 15 are queued: its create
    // reserves nothing, the first hand-off reserves 14 fences, the last turn frees the record.
    assert_eq!(store.faults.calls(), 3, "create, one hand-off CAS, release");
    assert!(!record(&store, "k").held);
}

#[test]
fn a_hung_work_times_out_and_the_other_isolates_work_runs_right_after() {
    let (store, executor) = world();
    let hung = isolate(&store, 100.0, 5_000.0, 4);
    let other = isolate(&store, 1_000.0, 5_000.0, 5);
    let outcome = Rc::new(RefCell::new(None));
    let ran_at = Rc::new(Cell::new(f64::NAN));
    {
        let (hung, outcome) = (hung.clone(), outcome.clone());
        executor.spawn(async move {
            let result = hung
                .run("k", |_signal, _fence| std::future::pending::<()>())
                .await;
            *outcome.borrow_mut() = Some(result);
        });
    }
    executor.run_until_stalled();
    store.clock.advance(10.0);
    {
        let (other, ran_at, clock) = (other.clone(), ran_at.clone(), store.clock.clone());
        executor.spawn(async move {
            other
                .run(
                    "k",
                    |_signal, _fence| async move { ran_at.set(clock.now_ms()) },
                )
                .await
                .unwrap();
        });
    }
    run(&executor, &store.clock);
    assert!(matches!(
        outcome.borrow().as_ref(),
        Some(Err(SerializeError::TimedOut { .. }))
    ));
    // Dropped at its deadline with nobody queued in its isolate: its lease is freed at once,
    // and the other isolate's work runs within a poll (25 ms) of that deadline.
    assert!(ran_at.get() >= 100.0, "ran at {}", ran_at.get());
    assert!(ran_at.get() < 100.0 + 30.0, "ran at {}", ran_at.get());
}

#[test]
fn a_work_dropped_at_its_deadline_hands_its_lease_to_the_next_here_without_a_store_call() {
    let (store, executor) = world();
    let serializer = isolate(&store, 100.0, 5_000.0, 6);
    let results = Rc::new(RefCell::new(Vec::new()));
    for i in 0..2 {
        let (serializer, results) = (serializer.clone(), results.clone());
        executor.spawn(async move {
            let result = serializer
                .run("k", move |_signal, fence| async move {
                    if i == 0 {
                        std::future::pending::<()>().await;
                    }
                    fence
                })
                .await;
            results.borrow_mut().push((i, result));
        });
    }
    run(&executor, &store.clock);
    let results = results.borrow();
    assert!(matches!(
        results[0],
        (0, Err(SerializeError::TimedOut { .. }))
    ));
    // The hand-off at the deadline (100 ms) takes the clock's fence.
    assert_eq!(results[1], (1, Ok(100_000)));
    // The first turn started before the second was queued, so its create reserved nothing:
    // the hand-off is one CAS.
    assert_eq!(
        store.faults.calls(),
        3,
        "the create, the hand-off, and the last release"
    );
}

#[test]
fn a_store_failure_fails_that_work_and_the_key_moves_on() {
    let (store, executor) = world();
    let serializer = isolate(&store, 1_000.0, 2_000.0, 7);
    store.faults.fail_next(1);
    let results = Rc::new(RefCell::new(Vec::new()));
    for i in 0..2 {
        let (serializer, results) = (serializer.clone(), results.clone());
        executor.spawn(async move {
            let result = serializer
                .run("k", |_signal, fence| async move { fence })
                .await;
            results.borrow_mut().push((i, result));
        });
    }
    run(&executor, &store.clock);
    let results = results.borrow();
    assert!(
        matches!(
            &results[0],
            (0, Err(SerializeError::Lock(LockError::Store(_))))
        ),
        "{results:?}"
    );
    // The failed create took nothing: the next turn's fence is the clock's at 3 ms.
    assert_eq!(results[1], (1, Ok(3000)));
    assert_eq!(serializer.pending(), 0);
    assert!(!record(&store, "k").held);
}

#[test]
fn a_long_work_keeps_its_lease_by_renewal() {
    let (store, executor) = world();
    let first = isolate(&store, 10_000.0, 300.0, 8);
    let second = isolate(&store, 10_000.0, 300.0, 9);
    let watch = Rc::new(Watch::default());
    for (i, serializer) in [first.clone(), second.clone()].into_iter().enumerate() {
        let (watch, clock) = (watch.clone(), store.clock.clone());
        executor.spawn(async move {
            serializer
                .run("k", |signal, _fence| async move {
                    watch.live.set(watch.live.get() + 1);
                    watch
                        .max_live
                        .set(watch.max_live.get().max(watch.live.get()));
                    // Three leases long: renewed, never taken over.
                    clock.after(if i == 0 { 900.0 } else { 1.0 }).await;
                    assert!(!signal.is_aborted());
                    watch.live.set(watch.live.get() - 1);
                })
                .await
                .unwrap();
        });
        executor.run_until_stalled();
        store.clock.advance(5.0);
    }
    run(&executor, &store.clock);
    assert_eq!(watch.max_live.get(), 1);
    assert!(store.clock.now_ms() >= 900.0);
}

#[test]
fn a_bad_stale_ms_is_refused() {
    let (store, _executor) = world();
    let locks = LockManager::new(store.clone(), store.clock.clone(), SeededRandom::new(1));
    assert!(StoreSerializer::new(SerializerOptions::default(), lease(0.0), locks).is_err());
}

#[test]
fn a_work_that_timed_out_waiting_for_its_lease_counts_as_timed_out_not_started() {
    let (store, executor) = world();
    let holder = isolate(&store, 1_000.0, 5_000.0, 10);
    let waiter = isolate(&store, 50.0, 5_000.0, 11);
    {
        let (holder, clock) = (holder.clone(), store.clock.clone());
        executor.spawn(async move {
            holder
                .run(
                    "k",
                    |_signal, _fence| async move { clock.after(200.0).await },
                )
                .await
                .unwrap();
        });
    }
    executor.run_until_stalled();
    store.clock.advance(5.0);
    let outcome = {
        let waiter = waiter.clone();
        executor.spawn_with_output(async move { waiter.run("k", |_signal, _fence| async {}).await })
    };
    run(&executor, &store.clock);
    assert!(matches!(
        outcome.borrow().as_ref(),
        Some(Err(SerializeError::TimedOut { .. }))
    ));
    let stats = waiter.stats();
    assert_eq!((stats.started, stats.timed_out), (0, 1));
    assert_eq!(holder.stats().started, 1);
}

#[test]
fn coalescing_calls_share_runs_in_each_isolate_and_every_run_holds_the_lease() {
    let (store, executor) = world();
    let isolates = [
        isolate(&store, 10_000.0, 500.0, 5),
        isolate(&store, 10_000.0, 500.0, 6),
    ];
    let watch = Rc::new(Watch::default());
    let answers = Rc::new(RefCell::new(Vec::new()));
    for i in 0..300 {
        let (serializer, watch, clock, answers) = (
            isolates[i % 2].clone(),
            watch.clone(),
            store.clock.clone(),
            answers.clone(),
        );
        executor.spawn(async move {
            let fence = serializer
                .run_coalesced("acl", Coalesce::Yes, move |_signal, fence| async move {
                    watch.live.set(watch.live.get() + 1);
                    watch
                        .max_live
                        .set(watch.max_live.get().max(watch.live.get()));
                    watch.fences.borrow_mut().push(fence);
                    clock.after(3.0).await;
                    watch.total.set(watch.total.get() + 1);
                    watch.live.set(watch.live.get() - 1);
                    fence
                })
                .await
                .unwrap();
            answers.borrow_mut().push(fence);
        });
    }
    run(&executor, &store.clock);
    assert_eq!(answers.borrow().len(), 300, "every call answered");
    // Each isolate's first call starts at once; the other 149 join one run behind it.
    assert_eq!(watch.total.get(), 4, "two runs per isolate");
    assert_eq!(
        watch.max_live.get(),
        1,
        "never two at once, across isolates"
    );
    let fences = watch.fences.borrow();
    assert!(fences.windows(2).all(|w| w[0] < w[1]), "{fences:?}");
    assert!(answers.borrow().iter().all(|fence| fences.contains(fence)));
    let coalesced: u64 = isolates.iter().map(|s| s.stats().coalesced).sum();
    assert_eq!(coalesced, 296);
    assert!(!record(&store, "acl").held, "freed at the end");
}

/// Isolates over one store, each pacing its turns by `rate` (limit, period) at concurrency 1.
fn paced_isolates(
    store: &FaultyStore,
    count: u64,
    limit: f64,
    period_ms: f64,
) -> Vec<Rc<Serializer>> {
    isolates(store, count, |options| options.with_rate(limit, period_ms))
}

/// `count` works of key `k` on `serializer` that do nothing, each awaited by its own task.
fn empty_works(executor: &Executor, serializer: &Rc<Serializer>, count: usize) {
    for _ in 0..count {
        let serializer = serializer.clone();
        executor.spawn(async move {
            serializer.run("k", |_s, _f| async {}).await.unwrap();
        });
    }
}

/// The most starts in any window of `period_ms` (a start `period_ms` after another is outside
/// its window).
fn most_in_a_window(starts: &[f64], period_ms: f64) -> usize {
    (0..starts.len())
        .map(|i| {
            starts[i..]
                .iter()
                .take_while(|&&at| at < starts[i] + period_ms)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn a_pace_holds_across_isolates_through_the_lease_record() {
    let (store, executor) = world();
    let isolates = paced_isolates(&store, 2, 4.0, 200.0);
    let starts: Rc<RefCell<Vec<f64>>> = Rc::default();
    let live = Rc::new(Cell::new(0));
    for i in 0..40 {
        let (serializer, clock) = (isolates[i % 2].clone(), store.clock.clone());
        let (starts, live) = (starts.clone(), live.clone());
        executor.spawn(async move {
            serializer
                .run("k", |_signal, _fence| async move {
                    assert_eq!(live.get(), 0, "two works of the key at once");
                    live.set(1);
                    starts.borrow_mut().push(clock.monotonic_ms());
                    clock.after(3.0).await;
                    live.set(0);
                })
                .await
                .unwrap();
        });
    }
    run(&executor, &store.clock);
    let starts = starts.borrow();
    assert_eq!(starts.len(), 40);
    assert_eq!(most_in_a_window(&starts, 200.0), 4, "{starts:?}");
    assert!(starts[39] <= 1_850.0, "the last started at {}", starts[39]);
    let paced: u64 = isolates.iter().map(|s| s.stats().paced).sum();
    assert!(
        paced >= 9,
        "one a window at least waits for the record's pace: {paced}"
    );
    assert!(!record(&store, "k").held, "freed at the end");
}

#[test]
fn a_paced_batch_costs_no_store_call_beyond_an_unpaced_one_and_leaves_its_starts_behind() {
    let (store, executor) = world();
    let isolates = paced_isolates(&store, 2, 16.0, 1_000.0);
    empty_works(&executor, &isolates[0], 16);
    run(&executor, &store.clock);
    assert_eq!(store.faults.calls(), 3, "create, one hand-off CAS, release");
    // A second isolate, a moment later, finds 16 starts in the record: its work waits out the
    // period from the first.
    let started = Rc::new(Cell::new(f64::NAN));
    let (serializer, clock, at) = (isolates[1].clone(), store.clock.clone(), started.clone());
    executor.spawn(async move {
        serializer
            .run("k", |_s, _f| async move { at.set(clock.monotonic_ms()) })
            .await
            .unwrap();
    });
    let first = store.clock.monotonic_ms();
    run(&executor, &store.clock);
    assert!(
        started.get() >= 1_000.0 && started.get() <= first + 1_000.0 + 20.0,
        "started at {} (first batch ended by {first})",
        started.get()
    );
}

#[test]
fn try_run_is_refused_with_the_time_the_records_pace_gives_and_never_runs() {
    let (store, executor) = world();
    let isolates = paced_isolates(&store, 2, 2.0, 1_000.0);
    empty_works(&executor, &isolates[0], 2);
    run(&executor, &store.clock);
    let (serializer, ran) = (isolates[1].clone(), Rc::new(Cell::new(false)));
    let refused = executor.spawn_with_output({
        let ran = ran.clone();
        async move {
            serializer
                .try_run("k", |_s, _f| async move { ran.set(true) })
                .await
        }
    });
    run(&executor, &store.clock);
    let refused = refused.borrow_mut().take().expect("settled");
    let Err(SerializeError::Unavailable {
        retry_after_ms: Some(ms),
        ..
    }) = refused
    else {
        panic!("{refused:?}");
    };
    assert!(ms > 900.0 && ms <= 1_000.0, "retry after {ms} ms");
    assert!(!ran.get(), "the work never ran");
    assert_eq!(isolates[1].stats().unavailable, 1);
    // The lease it took went back: the next call here takes it, and waits out the pace.
    let serializer = isolates[1].clone();
    let later =
        executor.spawn_with_output(async move { serializer.run("k", |_s, _f| async { 7 }).await });
    run(&executor, &store.clock);
    assert_eq!(later.borrow_mut().take().expect("settled").unwrap(), 7);
    assert!(store.clock.monotonic_ms() >= 1_000.0);
}

/// With the key's `concurrency` slots all held in one isolate, `try_run` in another is refused
/// after one look at the record, with no time to give, and never runs; once the key is free it
/// runs at once.
fn try_run_is_refused_at_once_while_another_isolate_holds_the_key(concurrency: u32) {
    let (store, executor) = world();
    let isolates = isolates(&store, 2, |options| {
        options.with_concurrency(concurrency.into())
    });
    for _ in 0..concurrency {
        let (holder, clock) = (isolates[0].clone(), store.clock.clone());
        executor.spawn(async move {
            let held = holder.run("k", |_s, _f| async move { clock.after(1_000.0).await });
            held.await.unwrap();
        });
    }
    let ran = Rc::new(Cell::new(false));
    let (serializer, clock, called) = (isolates[1].clone(), store.clock.clone(), ran.clone());
    let refused = executor.spawn_with_output(async move {
        clock.after(100.0).await;
        let asked = clock.monotonic_ms();
        let result = serializer
            .try_run("k", |_s, _f| async move { called.set(true) })
            .await;
        (result, clock.monotonic_ms() - asked)
    });
    run(&executor, &store.clock);
    let (result, took) = refused.borrow_mut().take().expect("settled");
    assert!(
        matches!(
            result,
            Err(SerializeError::Unavailable {
                retry_after_ms: None,
                ..
            })
        ),
        "{result:?}"
    );
    // The store's calls lag 2 ms at most: a few round trips, not the holder's second.
    assert!(took <= 10.0, "refused after {took} ms");
    assert!(!ran.get(), "the work never ran");
    assert_eq!(isolates[1].stats().unavailable, 1);
    assert!(store.clock.monotonic_ms() >= 1_000.0, "the holder ran on");
    let serializer = isolates[1].clone();
    let later = executor
        .spawn_with_output(async move { serializer.try_run("k", |_s, _f| async { 7 }).await });
    run(&executor, &store.clock);
    assert_eq!(later.borrow_mut().take().expect("settled").unwrap(), 7);
}

#[test]
fn try_run_is_refused_at_once_while_another_isolate_holds_the_key_at_concurrency_1() {
    try_run_is_refused_at_once_while_another_isolate_holds_the_key(1);
}

#[test]
fn try_run_is_refused_at_once_while_another_isolate_holds_the_key_at_concurrency_2() {
    try_run_is_refused_at_once_while_another_isolate_holds_the_key(2);
}

#[test]
fn a_pace_holds_across_isolates_at_concurrency_2_through_the_keys_pace_record() {
    let (store, executor) = world();
    let isolates = isolates(&store, 2, |options| {
        options.with_concurrency(2.0)?.with_rate(3.0, 200.0)
    });
    let starts: Rc<RefCell<Vec<f64>>> = Rc::default();
    let (live, most) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    for i in 0..30 {
        let (serializer, clock) = (isolates[i % 2].clone(), store.clock.clone());
        let (starts, live, most) = (starts.clone(), live.clone(), most.clone());
        executor.spawn(async move {
            serializer
                .run("k", |_signal, _fence| async move {
                    live.set(live.get() + 1);
                    most.set(most.get().max(live.get()));
                    starts.borrow_mut().push(clock.monotonic_ms());
                    clock.after(50.0).await;
                    live.set(live.get() - 1);
                })
                .await
                .unwrap();
        });
    }
    run(&executor, &store.clock);
    let starts = starts.borrow();
    assert_eq!(starts.len(), 30);
    // A start is written when its write is sent and called when it took: up to one store round
    // trip (here at most 2 ms) after the time the record carries.
    let mut sorted = starts.clone();
    sorted.sort_by(f64::total_cmp);
    let span = (0..sorted.len() - 3)
        .map(|i| sorted[i + 3] - sorted[i])
        .fold(f64::INFINITY, f64::min);
    assert!(span >= 198.0, "4 starts within {span} ms: {sorted:?}");
    assert_eq!(most.get(), 2, "at most 2 at once, and 2 reached");
    assert!(sorted[29] <= 2_100.0, "the last started at {}", sorted[29]);
    let paced: u64 = isolates.iter().map(|s| s.stats().paced).sum();
    assert!(paced >= 9, "{paced}");
}

#[test]
fn at_concurrency_2_a_paced_start_costs_one_store_call_beyond_an_unpaced_one() {
    let calls = |rate: bool| {
        let (store, executor) = world();
        let serializer = isolates(&store, 1, |options| {
            let options = options.with_concurrency(2.0)?;
            match rate {
                true => options.with_rate(1_000.0, 10.0),
                false => Ok(options),
            }
        })
        .remove(0);
        for _ in 0..20 {
            let (serializer, clock) = (serializer.clone(), store.clock.clone());
            executor.spawn(async move {
                serializer
                    .run("k", |_s, _f| async move { clock.after(5.0).await })
                    .await
                    .unwrap();
            });
        }
        run(&executor, &store.clock);
        store.faults.calls()
    };
    let (paced, unpaced) = (calls(true), calls(false));
    // One read of the pace record (it is not known yet), then one write per start.
    assert_eq!(
        paced - unpaced,
        1 + 20,
        "{paced} calls paced, {unpaced} not"
    );
}
