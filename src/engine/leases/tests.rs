//! The lock's decision table, driven by hand: no executor, no timers — each test makes the store
//! calls the core asks for on a `MemoryStore` and says what time it is.

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::Refusal as LockError;
use super::{
    batch_fences, clock_fence, next_fence, Answer, LockCore, Now, Step, Succession, Woken,
    FENCES_PER_MS,
};
use crate::engine::options::LockOptions;
use crate::engine::options::MAX_BATCH;
use crate::engine::queue::Ticket;
use crate::engine::random::SeededRandom;
use crate::engine::record::{Record, MAX_FENCE};
use crate::store::MemoryStore;

type Core = LockCore<String, u32>;

fn options(wait_ms: f64, stale_ms: f64) -> LockOptions {
    LockOptions {
        wait_ms,
        stale_ms,
        ..LockOptions::default()
    }
}

/// `t` on both clocks: the wall clock and the monotonic one agree (a test of clocks that do not
/// says so with a `Now` of its own).
fn at(t: f64) -> Now {
    Now { wall: t, mono: t }
}

fn stored(store: &MemoryStore, name: &str) -> Record {
    Record::decode(&store.get(name).expect("a record").value).expect("ours")
}

/// Makes the store call of `step` on `store`, as a driver would, and returns the answer; `None`
/// for a step that is not a store call.
fn call(store: &MemoryStore, name: &str, step: &Step<String>) -> Option<Answer<String>> {
    Some(match step {
        Step::Create { value, .. } => Answer::Created(store.create_now(name, value)),
        Step::Read { .. } => Answer::Read(store.get(name).map(|found| {
            let record = Record::decode(&found.value);
            (found.version, record)
        })),
        Step::Replace { version, value, .. } => {
            Answer::Replaced(store.replace_now(name, version, value))
        }
        _ => return None,
    })
}

/// Drives `ticket` through store calls until it holds, waits, sleeps or gives up.
fn drive(
    core: &mut Core,
    store: &MemoryStore,
    name: &str,
    ticket: Ticket,
    mut step: Step<String>,
    now: f64,
    random: &SeededRandom,
) -> Step<String> {
    while let Some(answer) = call(store, name, &step) {
        step = core.step(ticket, answer, at(now), random);
    }
    step
}

fn acquire(
    core: &mut Core,
    store: &MemoryStore,
    name: &str,
    id: u32,
    options: LockOptions,
    now: f64,
    random: &SeededRandom,
) -> (Ticket, Step<String>) {
    let (ticket, step) = core.acquire(name, id, options, at(now), random).unwrap();
    (ticket, drive(core, store, name, ticket, step, now, random))
}

/// Drives `ticket` through store calls and its own pauses (moving `now` to their end) until it
/// holds or gives up.
fn until_held(
    core: &mut Core,
    store: &MemoryStore,
    ticket: Ticket,
    mut step: Step<String>,
    now: &mut f64,
    random: &SeededRandom,
) -> Step<String> {
    loop {
        step = drive(core, store, "k", ticket, step, *now, random);
        match step {
            Step::Sleep { until, .. } => {
                *now = until;
                step = core.step(ticket, Answer::Woke, at(*now), random);
            }
            other => return other,
        }
    }
}

fn woken(core: &mut Core) -> Vec<(bool, u32)> {
    let mut all = Vec::new();
    while let Some(woken) = core.take_woken() {
        all.push(match woken {
            Woken::Turn(ticket) => (true, *core.handle(ticket).unwrap()),
            Woken::GaveUp(id) => (false, id),
            // No driver here keeps guards: none is wanted.
            Woken::Guard => unreachable!("a guard wanted without line guards"),
        });
    }
    all
}

#[test]
fn create_hold_queue_hand_off_free_and_take_the_freed_record_with_one_cas() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(1), Core::new());
    let (a, step) = acquire(
        &mut core,
        &store,
        "k",
        1,
        options(100.0, 2000.0),
        0.0,
        &random,
    );
    assert_eq!(step, Step::Held);
    assert_eq!(core.store_calls(), 1, "one create");
    let lease = core.lease(a).unwrap();
    assert_eq!((lease.fence, lease.held_until), (1, 2000.0));
    assert_eq!(stored(&store, "k").token, lease.token);

    // Others here wait in line, with no store call.
    let (b, step) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(100.0, 2000.0),
        1.0,
        &random,
    );
    assert_eq!(step, Step::Wait { until: 101.0 });
    let (c, _) = acquire(
        &mut core,
        &store,
        "k",
        3,
        options(100.0, 2000.0),
        1.0,
        &random,
    );
    assert_eq!(core.store_calls(), 1);
    assert_eq!(core.next_timer(), Some(101.0));

    // The release hands off with one CAS that reserves the batch's fences: one owed to each
    // waiter, the rest spare.
    let step = core.release(a, at(5.0), &random);
    let Step::Replace { .. } = step else {
        panic!("{step:?}")
    };
    assert!(
        woken(&mut core).is_empty(),
        "nobody is told before the CAS lands"
    );
    assert_eq!(
        drive(&mut core, &store, "k", a, step, 5.0, &random),
        Step::Done
    );
    assert_eq!(woken(&mut core), vec![(true, 2)]);
    assert_eq!(core.step(b, Answer::Woke, at(6.0), &random), Step::Held);
    let record = stored(&store, "k");
    // Fences follow the clock: the hand-off at 5 ms takes 5000, and reserves up to 5063.
    assert_eq!((core.lease(b).unwrap().fence, record.fence), (5000, 5063));
    assert_eq!(
        core.lease(b).unwrap().held_until,
        2005.0,
        "the record's time, not the wake-up's"
    );

    // Within the batch: no store call.
    let calls = core.store_calls();
    assert_eq!(core.release(b, at(7.0), &random), Step::Done);
    assert_eq!(woken(&mut core), vec![(true, 3)]);
    assert_eq!(core.step(c, Answer::Woke, at(7.0), &random), Step::Held);
    assert_eq!(core.lease(c).unwrap().fence, 5001);
    assert_eq!(core.store_calls(), calls);

    // Nobody waits: the record is freed, and remembered.
    let step = core.release(c, at(8.0), &random);
    assert_eq!(
        drive(&mut core, &store, "k", c, step, 8.0, &random),
        Step::Done
    );
    assert!(!stored(&store, "k").held);
    assert_eq!(core.local_line("k"), 0);
    let (d, step) = core
        .acquire("k", 4, options(100.0, 2000.0), at(9.0), &random)
        .unwrap();
    let Step::Replace { ref version, .. } = step else {
        panic!("a CAS on the freed record: {step:?}")
    };
    assert_eq!(version, &store.get("k").unwrap().version);
    assert_eq!(
        drive(&mut core, &store, "k", d, step, 9.0, &random),
        Step::Held
    );
    assert_eq!(
        core.lease(d).unwrap().fence,
        9000,
        "above every fence the batch reserved, the clock's at 9 ms"
    );
}

#[test]
fn a_renewal_is_one_cas_keeping_token_and_fence_and_a_lost_lease_is_lost_for_good() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(2), Core::new());
    let (a, _) = acquire(
        &mut core,
        &store,
        "k",
        1,
        options(100.0, 1000.0),
        0.0,
        &random,
    );
    let token = core.lease(a).unwrap().token.to_owned();
    let calls = core.store_calls();
    let step = core.renew(a, at(600.0));
    let Step::Replace { .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(
        drive(&mut core, &store, "k", a, step, 600.0, &random),
        Step::Held
    );
    assert_eq!(core.store_calls(), calls + 1);
    assert_eq!(core.lease(a).unwrap().held_until, 1600.0);
    let record = stored(&store, "k");
    assert_eq!(
        (record.token.as_str(), record.fence, record.at, record.held),
        (token.as_str(), 1, 600.0, true)
    );

    // Past heldUntil: lost, with no store call, and for good.
    let calls = core.store_calls();
    assert_eq!(core.renew(a, at(1600.0)), Step::Lost);
    assert_eq!(core.store_calls(), calls);
    assert!(core.lease(a).is_none());
    assert_eq!(
        core.renew(a, at(1500.0)),
        Step::Lost,
        "for good, even with the clock back"
    );
    // Nobody took it over: a late release still frees the record.
    let step = core.release(a, at(1601.0), &random);
    assert_eq!(
        drive(&mut core, &store, "k", a, step, 1601.0, &random),
        Step::Done
    );
    assert!(!stored(&store, "k").held);

    // Taken over meanwhile: the renewal's CAS fails and the lease is lost.
    let (b, _) = acquire(
        &mut core,
        &store,
        "j",
        2,
        options(100.0, 1000.0),
        2000.0,
        &random,
    );
    let version = store.get("j").unwrap().version;
    store.replace_now("j", &version, &Record::held("f00d", 9, 2100.0).encode());
    let step = core.renew(b, at(2200.0));
    assert_eq!(
        drive(&mut core, &store, "j", b, step, 2200.0, &random),
        Step::Lost
    );
    assert!(core.lease(b).is_none());
    assert_eq!(core.local_line("j"), 0);

    // A renewal the store failed is read back; one that did not take leaves the lease as it
    // was.
    let (c, _) = acquire(
        &mut core,
        &store,
        "i",
        3,
        options(100.0, 1000.0),
        3000.0,
        &random,
    );
    let Step::Replace { .. } = core.renew(c, at(3100.0)) else {
        panic!()
    };
    let read = core.step(c, Answer::Failed, at(3100.0), &random);
    assert!(matches!(read, Step::Read { .. }), "{read:?}");
    let answer = call(&store, "i", &read).unwrap();
    assert_eq!(core.step(c, answer, at(3100.0), &random), Step::Failed);
    assert_eq!(core.lease(c).unwrap().held_until, 4000.0);
}

#[test]
fn a_lock_handed_on_within_a_batch_has_a_true_held_until_and_renews() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(3), Core::new());
    let (a, _) = acquire(
        &mut core,
        &store,
        "k",
        1,
        options(5000.0, 2000.0),
        0.0,
        &random,
    );
    let (b, _) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(5000.0, 2000.0),
        0.0,
        &random,
    );
    let (c, _) = acquire(
        &mut core,
        &store,
        "k",
        3,
        options(5000.0, 2000.0),
        0.0,
        &random,
    );
    let (d, _) = acquire(
        &mut core,
        &store,
        "k",
        4,
        options(5000.0, 2000.0),
        0.0,
        &random,
    );
    let step = core.release(a, at(10.0), &random);
    drive(&mut core, &store, "k", a, step, 10.0, &random);
    woken(&mut core);
    assert_eq!(core.step(b, Answer::Woke, at(10.0), &random), Step::Held);
    assert_eq!(
        core.release(b, at(20.0), &random),
        Step::Done,
        "from the batch"
    );
    woken(&mut core);
    assert_eq!(core.step(c, Answer::Woke, at(20.0), &random), Step::Held);
    // c's record was written at 10 by the hand-off: that is when its lease runs from.
    assert_eq!(core.lease(c).unwrap().held_until, 2010.0);
    // Renewing it is a CAS on the batch's record, keeping the batch's token and highest fence.
    let batch = stored(&store, "k");
    let step = core.renew(c, at(30.0));
    assert_eq!(
        drive(&mut core, &store, "k", c, step, 30.0, &random),
        Step::Held
    );
    let renewed = stored(&store, "k");
    assert_eq!(
        (renewed.token, renewed.fence, renewed.at),
        (batch.token, batch.fence, 30.0)
    );
    assert_eq!(core.lease(c).unwrap().held_until, 2030.0);
    // The batch follows the renewed record: the next hand-off still needs no store call.
    let calls = core.store_calls();
    assert_eq!(core.release(c, at(40.0), &random), Step::Done);
    woken(&mut core);
    assert_eq!(core.step(d, Answer::Woke, at(40.0), &random), Step::Held);
    assert_eq!(core.store_calls(), calls);
    assert_eq!(core.lease(d).unwrap().fence, 10_002);
    assert_eq!(core.lease(d).unwrap().held_until, 2030.0);
}

#[test]
fn waiters_share_one_timer_and_a_holder_past_its_lease_is_put_out_for_the_next() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(4), Core::new());
    let (a, _) = acquire(
        &mut core,
        &store,
        "k",
        1,
        options(100.0, 500.0),
        0.0,
        &random,
    );
    assert_eq!(core.next_timer(), None, "a lone holder needs no timer");
    let (_short, _) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(50.0, 500.0),
        10.0,
        &random,
    );
    let (long, _) = acquire(
        &mut core,
        &store,
        "k",
        3,
        options(5000.0, 500.0),
        10.0,
        &random,
    );
    assert_eq!(core.next_timer(), Some(60.0));
    core.expire(at(59.0));
    assert!(woken(&mut core).is_empty());
    core.expire(at(60.0));
    assert_eq!(woken(&mut core), vec![(false, 2)], "the short wait ended");
    assert_eq!(core.local_line("k"), 2);
    assert_eq!(
        core.next_timer(),
        Some(500.0),
        "the holder's lease end, then the long wait"
    );
    core.expire(at(500.0));
    assert_eq!(
        woken(&mut core),
        vec![(true, 3)],
        "the holder is put out; the next contends"
    );
    assert!(core.lease(a).is_none());
    assert_eq!(core.renew(a, at(500.0)), Step::Lost);
    // The next takes the record over once stale, as another isolate would.
    let step = core.step(long, Answer::Woke, at(500.0), &random);
    let step = drive(&mut core, &store, "k", long, step, 500.0, &random);
    let Step::Sleep { until, .. } = step else {
        panic!("{step:?}")
    };
    let step = core.step(long, Answer::Woke, at(until), &random);
    assert_eq!(
        drive(&mut core, &store, "k", long, step, until, &random),
        Step::Held
    );
    assert_eq!(core.lease(long).unwrap().fence, 501_000);
}

#[test]
fn twenty_thousand_waiters_share_one_timer_whose_heap_stays_bounded() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(5), Core::new());
    let (mut holder, _) = acquire(
        &mut core,
        &store,
        "k",
        0,
        options(100.0, 60_000.0),
        0.0,
        &random,
    );
    let tickets: Vec<Ticket> = (1..=20_000)
        .map(|id| {
            acquire(
                &mut core,
                &store,
                "k",
                id,
                options(30_000.0, 60_000.0),
                0.0,
                &random,
            )
            .0
        })
        .collect();
    let mut order = Vec::new();
    let mut now = 1.0;
    for (i, &ticket) in tickets.iter().enumerate() {
        now += 0.1;
        let step = core.release(holder, at(now), &random);
        drive(&mut core, &store, "k", holder, step, now, &random);
        for (turn, id) in woken(&mut core) {
            assert!(turn);
            order.push(id);
        }
        // Every 100 ms of local hand-offs the record is freed and the next pauses one poll first.
        let step = core.step(ticket, Answer::Woke, at(now), &random);
        assert_eq!(
            until_held(&mut core, &store, ticket, step, &mut now, &random),
            Step::Held
        );
        assert!(
            core.timer_entries() < 3 * (20_000 - i) + 200,
            "{}",
            core.timer_entries()
        );
        holder = ticket;
    }
    assert_eq!(order, (1..=20_000).collect::<Vec<_>>(), "FIFO");
    // One CAS per batch of up to 64 hand-offs (and the streaks' frees), not one per waiter.
    assert!(
        core.store_calls() < 20_000 / 8,
        "{} store calls",
        core.store_calls()
    );
}

#[test]
fn a_failed_store_call_gives_up_and_leaves_the_line() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(6), Core::new());
    let (a, step) = core
        .acquire("k", 1, options(100.0, 1000.0), at(0.0), &random)
        .unwrap();
    assert!(matches!(step, Step::Create { .. }));
    let (b, _) = core
        .acquire("k", 2, options(100.0, 1000.0), at(0.0), &random)
        .unwrap();
    // The create is read back: nothing there, so it did not take.
    let read = core.step(a, Answer::Failed, at(1.0), &random);
    assert!(matches!(read, Step::Read { .. }), "{read:?}");
    assert_eq!(
        core.step(a, Answer::Read(None), at(1.0), &random),
        Step::Failed
    );
    assert_eq!(woken(&mut core), vec![(true, 2)]);
    let step = core.step(b, Answer::Woke, at(1.0), &random);
    assert_eq!(
        drive(&mut core, &store, "k", b, step, 1.0, &random),
        Step::Held
    );
}

#[test]
fn a_release_dropped_mid_call_and_a_hand_off_whose_waiter_left() {
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(7), Core::new());
    // A release whose CAS never answers: the driver leaves; the next contends and takes the
    // record over once stale.
    let (a, _) = acquire(
        &mut core,
        &store,
        "k",
        1,
        options(100.0, 500.0),
        0.0,
        &random,
    );
    let (b, _) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(5000.0, 500.0),
        0.0,
        &random,
    );
    let Step::Replace { .. } = core.release(a, at(10.0), &random) else {
        panic!()
    };
    core.leave(a, false);
    assert_eq!(woken(&mut core), vec![(true, 2)]);
    let mut now = 10.0;
    let step = core.step(b, Answer::Woke, at(now), &random);
    assert_eq!(
        until_held(&mut core, &store, b, step, &mut now, &random),
        Step::Held
    );
    assert!(now > 500.0, "only once stale");
    assert_eq!(core.lease(b).unwrap().fence, 501_000);

    // A hand-off CAS whose waiter left while it was in flight: nobody is left, so the record
    // (held by a token nobody has) is remembered and taken back with one CAS.
    let (c, _) = acquire(
        &mut core,
        &store,
        "k",
        3,
        options(20.0, 2000.0),
        now,
        &random,
    );
    let step = core.release(b, at(now), &random);
    core.expire(at(now + 30.0));
    assert_eq!(woken(&mut core), vec![(false, 3)]);
    assert_eq!(
        core.step(c, Answer::Woke, at(now + 30.0), &random),
        Step::GiveUp
    );
    assert_eq!(
        drive(&mut core, &store, "k", b, step, now + 30.0, &random),
        Step::Done
    );
    assert!(stored(&store, "k").held, "held by a token nobody has");
    let calls = core.store_calls();
    let (d, step) = acquire(
        &mut core,
        &store,
        "k",
        4,
        options(0.0, 2000.0),
        now + 31.0,
        &random,
    );
    assert_eq!(step, Step::Held);
    assert_eq!(core.store_calls(), calls + 1);
    assert!(core.lease(d).unwrap().fence > 2);

    // A waiter handed the lease that leaves before taking it passes the record on (keep).
    let (e, _) = acquire(
        &mut core,
        &store,
        "k",
        5,
        options(5000.0, 2000.0),
        now + 32.0,
        &random,
    );
    let (f, _) = acquire(
        &mut core,
        &store,
        "k",
        6,
        options(5000.0, 2000.0),
        now + 32.0,
        &random,
    );
    let step = core.release(d, at(now + 33.0), &random);
    drive(&mut core, &store, "k", d, step, now + 33.0, &random);
    assert_eq!(woken(&mut core), vec![(true, 5)]);
    core.leave(e, true);
    assert_eq!(woken(&mut core), vec![(true, 6)]);
    let calls = core.store_calls();
    let step = core.step(f, Answer::Woke, at(now + 34.0), &random);
    assert_eq!(
        drive(&mut core, &store, "k", f, step, now + 34.0, &random),
        Step::Held
    );
    assert_eq!(
        core.store_calls(),
        calls + 1,
        "one CAS on the record passed on"
    );
}

#[test]
fn bad_names_and_options_queue_nothing() {
    let (random, mut core) = (SeededRandom::new(8), Core::new());
    assert!(core
        .acquire("", 1, options(1.0, 1.0), at(0.0), &random)
        .is_err());
    assert!(core
        .acquire("k", 1, options(-1.0, 1.0), at(0.0), &random)
        .is_err());
    assert!(core
        .acquire("k", 1, options(1.0, 0.0), at(0.0), &random)
        .is_err());
    assert!(core
        .acquire("k", 1, options(f64::NAN, 1.0), at(0.0), &random)
        .is_err());
    assert!(core.is_idle());
    assert_eq!(core.store_calls(), 0);
}

#[test]
fn announced_followers_get_fences_reserved_by_one_hand_off_and_are_handed_on_free() {
    // A serializer's works: each acquires only while the one before holds, and each release
    // announces how many more come after the next. One hand-off CAS reserves their fences; the
    // hand-offs after it write nothing. Streaks run to the serializer's bound.
    let (store, random, mut core) = (MemoryStore::new(), SeededRandom::new(7), Core::new());
    let streak = Succession::serialized(0, 400.0).streak_ms;
    assert_eq!(streak, 100.0, "a quarter of staleMs, at least 100 ms");
    assert_eq!(Succession::serialized(0, 2000.0).streak_ms, 500.0);
    let (first, step) = core
        .acquire_with("k", 0, options(100.0, 2000.0), streak, at(0.0), &random)
        .unwrap();
    assert_eq!(
        drive(&mut core, &store, "k", first, step, 0.0, &random),
        Step::Held
    );
    assert_eq!(core.lease(first).unwrap().fence, 1);
    let mut holder = first;
    let mut writes = Vec::new();
    for id in 1..=4u32 {
        let now = f64::from(id);
        let followers = 4 - id as usize;
        let (next, step) = core
            .acquire_with("k", id, options(100.0, 2000.0), streak, at(now), &random)
            .unwrap();
        assert!(matches!(step, Step::Wait { .. }), "{step:?}");
        let step = core.release_with(holder, followers, at(now), &random);
        if let Step::Replace { .. } = step {
            writes.push(id);
            drive(&mut core, &store, "k", holder, step, now, &random);
        }
        assert_eq!(woken(&mut core), vec![(true, id)]);
        assert_eq!(core.step(next, Answer::Woke, at(now), &random), Step::Held);
        // The hand-off at 1 ms takes the clock's fence (1000), the batch the ones after it.
        assert_eq!(core.lease(next).unwrap().fence, 999 + u64::from(id));
        holder = next;
    }
    assert_eq!(writes, vec![1], "one hand-off CAS for the four");
    assert_eq!(
        stored(&store, "k").fence,
        1063,
        "it reserved the batch's 64 fences: three owed to the announced works, the rest spare"
    );
    // A fifth work not announced, soon after: a spare fence, no write — nobody is known to
    // have asked, and the batch is younger than a poll's longest pause.
    let (fifth, _) = core
        .acquire_with("k", 5, options(100.0, 2000.0), streak, at(6.0), &random)
        .unwrap();
    assert_eq!(core.release_with(holder, 0, at(6.0), &random), Step::Done);
    assert_eq!(core.step(fifth, Answer::Woke, at(6.0), &random), Step::Held);
    assert_eq!(core.lease(fifth).unwrap().fence, 1004);
    // A sixth, past that pause with no guard watching the record: the hand-off writes once and
    // reserves again.
    let (sixth, _) = core
        .acquire_with("k", 6, options(100.0, 2000.0), streak, at(40.0), &random)
        .unwrap();
    let step = core.release_with(fifth, 2, at(40.0), &random);
    assert!(matches!(step, Step::Replace { .. }), "{step:?}");
    assert_eq!(
        drive(&mut core, &store, "k", fifth, step, 40.0, &random),
        Step::Done
    );
    assert_eq!(
        core.step(sixth, Answer::Woke, at(40.0), &random),
        Step::Held
    );
    assert_eq!(
        core.lease(sixth).unwrap().fence,
        40_000,
        "above every fence the last batch reserved: the clock's at 40 ms"
    );
    assert_eq!(stored(&store, "k").fence, 40_063);
    // Past the streak's bound the record is freed for other isolates, followers or not.
    let (seventh, _) = core
        .acquire_with("k", 7, options(1000.0, 2000.0), streak, at(200.0), &random)
        .unwrap();
    let step = core.release_with(sixth, 1, at(200.0), &random);
    let Step::Replace { ref value, .. } = step else {
        panic!("{step:?}")
    };
    assert!(value.contains("\"free\""), "{value}");
    drive(&mut core, &store, "k", sixth, step, 200.0, &random);
    let mut now = 200.0;
    let step = core.step(seventh, Answer::Woke, at(now), &random);
    assert!(matches!(step, Step::Sleep { .. }), "yields first: {step:?}");
    assert_eq!(
        until_held(&mut core, &store, seventh, step, &mut now, &random),
        Step::Held
    );
    assert!(core.lease(seventh).unwrap().fence > 40_063);
}

/// Drives `ticket` to its end as [`drive`] does, counting the store calls made.
fn drive_counting(
    core: &mut Core,
    store: &MemoryStore,
    ticket: Ticket,
    mut step: Step<String>,
    now: f64,
    random: &SeededRandom,
    calls: &mut u32,
) -> Step<String> {
    while let Some(answer) = call(store, "k", &step) {
        *calls += 1;
        step = core.step(ticket, answer, at(now), random);
    }
    step
}

#[test]
fn two_isolates_alternating_read_first_once_they_see_each_other() {
    // Each isolate remembers the record it freed; once the other isolate wrote it in between,
    // a CAS on the remembered version would fail, so it reads first: read, CAS, release.
    let store = MemoryStore::new();
    let random = SeededRandom::new(3);
    let mut isolates = [Core::new(), Core::new()];
    let mut per_turn = Vec::new();
    for turn in 0..8 {
        let now = f64::from(turn) * 10.0;
        let core = &mut isolates[turn as usize % 2];
        let mut calls = 0;
        let (ticket, step) = core
            .acquire("k", 0, options(100.0, 2000.0), at(now), &random)
            .unwrap();
        let step = drive_counting(core, &store, ticket, step, now, &random, &mut calls);
        assert_eq!(step, Step::Held, "turn {turn}");
        let step = core.release(ticket, at(now + 1.0), &random);
        drive_counting(core, &store, ticket, step, now + 1.0, &random, &mut calls);
        per_turn.push(calls);
    }
    // create+release; create, read, CAS, release; then CAS fails once per isolate; then 3.
    assert_eq!(per_turn, vec![2, 4, 4, 4, 3, 3, 3, 3]);
    // Alone again: it reads first until a read finds the version it freed; then one CAS.
    let core = &mut isolates[0];
    let mut counts = Vec::new();
    for turn in 0..3 {
        let now = 100.0 + f64::from(turn) * 10.0;
        let mut calls = 0;
        let (ticket, step) = core
            .acquire("k", 0, options(100.0, 2000.0), at(now), &random)
            .unwrap();
        drive_counting(core, &store, ticket, step, now, &random, &mut calls);
        let step = core.release(ticket, at(now + 1.0), &random);
        drive_counting(core, &store, ticket, step, now + 1.0, &random, &mut calls);
        counts.push(calls);
    }
    assert_eq!(counts, vec![3, 3, 2]);
}

#[test]
fn every_store_call_carries_its_bound_and_an_acquisition_ends_within_its_wait_and_one_bound() {
    let random = SeededRandom::new(11);
    let store = MemoryStore::new();
    let mut core = Core::new();
    let bounded = LockOptions {
        store_timeout_ms: Some(40.0),
        ..options(100.0, 1000.0)
    };
    // The first call of an acquisition: its bound.
    let (a, step) = core.acquire("b", 1, bounded, at(0.0), &random).unwrap();
    assert_eq!(step.bound_ms(), Some(40.0), "{step:?}");
    let answer = call(&store, "b", &step).unwrap();
    assert_eq!(core.step(a, answer, at(1.0), &random), Step::Held);
    // A holder's calls (renewal, release): the bound alone, whenever they come.
    let renewal = core.renew(a, at(900.0));
    assert_eq!(renewal.bound_ms(), Some(40.0), "{renewal:?}");
    let answer = call(&store, "b", &renewal).unwrap();
    assert_eq!(core.step(a, answer, at(901.0), &random), Step::Held);
    // With no storeTimeoutMs, a call's bound is the lease.
    let (c, step) = core
        .acquire("c", 2, options(100.0, 700.0), at(0.0), &random)
        .unwrap();
    assert_eq!(step.bound_ms(), Some(700.0));
    let answer = call(&store, "c", &step).unwrap();
    assert_eq!(core.step(c, answer, at(0.0), &random), Step::Held);
    // A contender late in its wait: no call runs past its wait's end plus one bound.
    store.put("d", &Record::held("other", 1, 0.0).encode());
    let (d, step) = core.acquire("d", 3, bounded, at(0.0), &random).unwrap();
    let answer = call(&store, "d", &step).unwrap();
    let read = core.step(d, answer, at(125.0), &random);
    assert!(matches!(read, Step::Read { .. }), "{read:?}");
    assert_eq!(read.bound_ms(), Some(15.0), "100 + 40 - 125");
    let answer = call(&store, "d", &read).unwrap();
    // Past the wait: it gives up, holding nothing.
    assert_eq!(core.step(d, answer, at(140.0), &random), Step::GiveUp);
    assert!(Step::<String>::Held.bound_ms().is_none());
}

/// `k` held by another isolate (its record written at 0 with a 2000 ms lease), and this
/// isolate's core over a store that tells changes.
fn held_elsewhere(seed: u64) -> (MemoryStore, SeededRandom, Core) {
    let (store, random) = (MemoryStore::new(), SeededRandom::new(seed));
    let mut other = Core::new();
    let (_, step) = acquire(
        &mut other,
        &store,
        "k",
        1,
        options(0.0, 2000.0),
        0.0,
        &random,
    );
    assert_eq!(step, Step::Held);
    let mut core = Core::new();
    core.set_store_tells_changes(true);
    (store, random, core)
}

#[test]
fn a_head_watches_the_version_it_read_until_the_record_turns_stale() {
    let (store, random, mut core) = held_elsewhere(9);
    let before = stored(&store, "k");
    let (b, step) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(5000.0, 2000.0),
        10.0,
        &random,
    );
    // Create (refused), read, its ask added (the holder's fields as they were): then a watch of
    // the version its ask wrote, until the record would be stale (its `at` + lease + 1, before
    // the wait's end).
    let asked = stored(&store, "k");
    assert_eq!(asked.asks.len(), 1);
    assert_eq!(
        (asked.token.as_str(), asked.fence, asked.at, asked.lease),
        (before.token.as_str(), before.fence, before.at, before.lease)
    );
    assert_eq!(
        step,
        Step::Watch {
            version: store.get("k").unwrap().version,
            until: 2001.0
        }
    );
    assert_eq!(core.store_calls(), 4, "the watch is a store call");
    // Woken (changed or not), it reads again; still held, it watches again — no poll between.
    let step = core.step(b, Answer::Woke, at(500.0), &random);
    let step = drive(&mut core, &store, "k", b, step, 500.0, &random);
    assert!(matches!(step, Step::Watch { .. }), "{step:?}");
    // A watch that failed is not the acquisition's failure: it polls next, with jitter.
    let step = core.step(b, Answer::Failed, at(600.0), &random);
    let Step::Sleep { until, .. } = step else {
        panic!("{step:?}")
    };
    assert!(until > 600.0 && until <= 600.0 + 25.0);
    // ... and keeps polling: a store whose watch fails once is not asked again.
    let step = core.step(b, Answer::Woke, at(until), &random);
    let step = drive(&mut core, &store, "k", b, step, until, &random);
    assert!(matches!(step, Step::Sleep { .. }), "{step:?}");
    // Past the record's lease the read takes the record over.
    let step = core.step(b, Answer::Woke, at(2001.0), &random);
    assert_eq!(
        drive(&mut core, &store, "k", b, step, 2001.0, &random),
        Step::Held
    );
    assert_eq!(
        core.lease(b).unwrap().fence,
        2_001_000,
        "above the record's 1, and the taker's clock in microseconds"
    );
}

#[test]
fn stats_count_watches_the_wake_ups_among_them_and_the_polls_they_saved() {
    let (store, random, mut core) = held_elsewhere(13);
    let (b, step) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(5000.0, 2000.0),
        0.0,
        &random,
    );
    assert!(matches!(step, Step::Watch { .. }), "{step:?}");
    // Its time came with nothing changed, 100 ms on: a poller from 2 ms would have read after
    // 1.5, 3, 6 and 12 ms of pause (its backoff's mean), then every 18.75 ms: 4 + 4 reads.
    let step = core.step(b, Answer::Woke, at(100.0), &random);
    let step = drive(&mut core, &store, "k", b, step, 100.0, &random);
    assert!(matches!(step, Step::Watch { .. }), "{step:?}");
    let stats = core.stats();
    assert_eq!(
        (stats.watches, stats.wake_ups, stats.polls_saved),
        (2, 0, 8)
    );
    // The store said it changed, at once: a wake-up that saved no poll.
    let step = core.step(b, Answer::Changed, at(101.0), &random);
    drive(&mut core, &store, "k", b, step, 101.0, &random);
    let stats = core.stats();
    assert_eq!(
        (stats.watches, stats.wake_ups, stats.polls_saved),
        (3, 1, 8)
    );
    assert_eq!(
        stats.store_calls, 8,
        "create, read, ask, watch, read, watch, read, watch"
    );
}

#[test]
fn a_watch_never_outlasts_the_wait() {
    let (store, random, mut core) = held_elsewhere(10);
    let (b, step) = acquire(
        &mut core,
        &store,
        "k",
        2,
        options(100.0, 2000.0),
        0.0,
        &random,
    );
    let Step::Watch { until, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(until, 100.0);
    let step = core.step(b, Answer::Woke, at(100.0), &random);
    assert_eq!(
        drive(&mut core, &store, "k", b, step, 100.0, &random),
        Step::GiveUp
    );
}

#[test]
fn a_watch_lasts_one_store_timeout_at_most() {
    let (store, random, mut core) = held_elsewhere(11);
    let bounded = LockOptions {
        store_timeout_ms: Some(50.0),
        ..options(1000.0, 2000.0)
    };
    let (_, step) = acquire(&mut core, &store, "k", 2, bounded, 5.0, &random);
    let Step::Watch { until, .. } = step else {
        panic!("{step:?}")
    };
    assert_eq!(until, 55.0);
}

/// Releases `ticket`'s lease on `k` at `now`, driving the release's store calls.
fn release(
    core: &mut Core,
    store: &MemoryStore,
    ticket: Ticket,
    now: f64,
    random: &SeededRandom,
) -> Step<String> {
    let step = core.release(ticket, at(now), random);
    drive(core, store, "k", ticket, step, now, random)
}

/// Wakes `ticket` (a sleep or a watch ended) at `now` and drives it on, on `k`.
fn wake(
    core: &mut Core,
    store: &MemoryStore,
    ticket: Ticket,
    now: f64,
    random: &SeededRandom,
) -> Step<String> {
    let step = core.step(ticket, Answer::Woke, at(now), random);
    drive(core, store, "k", ticket, step, now, random)
}

#[test]
fn isolates_take_a_name_in_the_order_they_asked() {
    let (store, random) = (MemoryStore::new(), SeededRandom::new(12));
    let (mut a, mut b, mut c) = (Core::new(), Core::new(), Core::new());
    let (held, step) = acquire(&mut a, &store, "k", 1, options(0.0, 2000.0), 0.0, &random);
    assert_eq!(step, Step::Held);
    // B asks first, then C: each one CAS adding its ask, the holder's fields untouched.
    let (tb, step) = acquire(
        &mut b,
        &store,
        "k",
        2,
        options(5000.0, 2000.0),
        1.0,
        &random,
    );
    assert!(matches!(step, Step::Sleep { .. }), "{step:?}");
    let (tc, step) = acquire(
        &mut c,
        &store,
        "k",
        3,
        options(5000.0, 2000.0),
        2.0,
        &random,
    );
    assert!(matches!(step, Step::Sleep { .. }), "{step:?}");
    assert_eq!(stored(&store, "k").asks.len(), 2);
    assert!(stored(&store, "k").held);
    // A's release is refused (the asks moved the version), reads, and frees the record for them.
    assert_eq!(release(&mut a, &store, held, 10.0, &random), Step::Done);
    let freed = stored(&store, "k");
    assert!(!freed.held);
    assert_eq!(freed.asks.len(), 2, "offered to both, in order");
    // A again: it may not take what is offered to others; it asks, behind them.
    let (ta, step) = acquire(
        &mut a,
        &store,
        "k",
        4,
        options(5000.0, 2000.0),
        11.0,
        &random,
    );
    assert!(matches!(step, Step::Sleep { .. }), "{step:?}");
    assert_eq!(stored(&store, "k").asks.len(), 3);
    // C, second in line, polls within B's offer: it waits.
    assert!(matches!(
        wake(&mut c, &store, tc, 20.0, &random),
        Step::Sleep { .. }
    ));
    // B, first, takes it at once; C and A stay queued in the record B holds.
    assert_eq!(wake(&mut b, &store, tb, 21.0, &random), Step::Held);
    assert_eq!(stored(&store, "k").asks.len(), 2);
    assert_eq!(release(&mut b, &store, tb, 30.0, &random), Step::Done);
    // C is first now: it takes; then A.
    assert_eq!(wake(&mut c, &store, tc, 31.0, &random), Step::Held);
    assert_eq!(release(&mut c, &store, tc, 40.0, &random), Step::Done);
    assert_eq!(wake(&mut a, &store, ta, 41.0, &random), Step::Held);
    assert_eq!(
        a.lease(ta).unwrap().fence,
        41_000,
        "fences rose with every turn, to the clock's"
    );
    assert!(stored(&store, "k").asks.is_empty());
}

#[test]
fn an_ask_whose_isolate_died_costs_the_name_one_offer() {
    let (store, random) = (MemoryStore::new(), SeededRandom::new(13));
    let (mut a, mut dead, mut c) = (Core::new(), Core::new(), Core::new());
    let (held, _) = acquire(&mut a, &store, "k", 1, options(0.0, 2000.0), 0.0, &random);
    // An isolate asks, then dies (its core is never called again).
    let (_, step) = acquire(
        &mut dead,
        &store,
        "k",
        2,
        options(5000.0, 2000.0),
        1.0,
        &random,
    );
    assert!(matches!(step, Step::Sleep { .. }), "{step:?}");
    assert_eq!(release(&mut a, &store, held, 10.0, &random), Step::Done);
    // C, who did not ask, asks; it may take once the dead one's offer ran: 100 ms after the
    // release, and not before.
    let (tc, step) = acquire(
        &mut c,
        &store,
        "k",
        3,
        options(5000.0, 2000.0),
        20.0,
        &random,
    );
    assert!(
        matches!(step, Step::Sleep { until, .. } if until <= 110.0),
        "{step:?}"
    );
    assert!(matches!(
        wake(&mut c, &store, tc, 109.0, &random),
        Step::Sleep { .. }
    ));
    assert_eq!(wake(&mut c, &store, tc, 110.0, &random), Step::Held);
    assert!(
        stored(&store, "k").asks.is_empty(),
        "the dead ask is dropped"
    );
}

/// One acquisition of `k` at `now` by a fresh isolate (a core of its own) over `store`, released
/// at once: its fence.
fn fence_of_a_fresh_isolate(store: &MemoryStore, now: Now, random: &SeededRandom) -> u64 {
    let mut core = Core::new();
    let (ticket, mut step) = core
        .acquire("k", 1, options(0.0, 2000.0), now, random)
        .unwrap();
    while let Some(answer) = call(store, "k", &step) {
        step = core.step(ticket, answer, now, random);
    }
    assert_eq!(step, Step::Held);
    let fence = core.lease(ticket).unwrap().fence;
    let mut step = core.release(ticket, now, random);
    while let Some(answer) = call(store, "k", &step) {
        step = core.step(ticket, answer, now, random);
    }
    assert_eq!(step, Step::Done);
    fence
}

#[test]
fn fences_follow_the_clock_so_a_lost_record_starts_above_every_fence_before() {
    let random = SeededRandom::new(7);
    let start = 1_764_452_000_000.0; // epoch milliseconds
    let store = MemoryStore::new();
    let before: Vec<u64> = (0..5)
        .map(|i| fence_of_a_fresh_isolate(&store, at(start + f64::from(i) / 5.0), &random))
        .collect();
    // Within one millisecond fences rise by one from the clock's.
    let first = (start * FENCES_PER_MS) as u64;
    assert_eq!(before, (first..first + 5).collect::<Vec<_>>());

    // The store loses the record (a fresh store): a fresh isolate on the same clock, a
    // millisecond later, starts above them all.
    let lost = MemoryStore::new();
    let after = fence_of_a_fresh_isolate(&lost, at(start + 1.0), &random);
    assert_eq!(after, first + 1000);
    // Lost again: an isolate whose wall clock is 20 ms behind, 50 ms after the last
    // acquisition (more than a 25 ms clock bound), is above them too.
    let lost = MemoryStore::new();
    let behind = Now {
        wall: start + 51.0 - 20.0,
        mono: start + 51.0,
    };
    let skewed = fence_of_a_fresh_isolate(&lost, behind, &random);
    assert!(
        skewed > after && skewed > *before.last().unwrap(),
        "{skewed}"
    );

    // An old record (fence 42, written before fences followed the clock) is read: the clock's.
    let old = MemoryStore::new();
    old.put("k", &Record::free(42, 0.0).encode());
    assert_eq!(fence_of_a_fresh_isolate(&old, at(start), &random), first);
    // A record ahead of the clock: one above it.
    assert_eq!(
        fence_of_a_fresh_isolate(&old, at(start), &random),
        first + 1
    );
}

#[test]
fn fences_stay_whole_numbers_below_2_pow_53_and_spares_stay_near_the_clock() {
    // The clock's fence: 0 before 1970, whole milliseconds, short of the limit by a batch.
    assert_eq!(clock_fence(at(-5.0)), 0);
    assert_eq!(clock_fence(at(12.9)), 12_000);
    let year_3000 = 32_503_680_000_000.0;
    assert_eq!(clock_fence(at(year_3000)), MAX_FENCE - MAX_BATCH as u64);
    assert_eq!(next_fence(0, at(-5.0)), 1);
    assert_eq!(next_fence(MAX_FENCE - 1, at(year_3000)), MAX_FENCE);
    assert_eq!(next_fence(MAX_FENCE, at(0.0)), MAX_FENCE, "the ceiling");

    // A batch: fences owed to the works behind, then spares up to a batch past the clock's.
    assert_eq!(batch_fences(5000, 2, at(5.0)), (5002, 5063));
    // A record ahead of the clock: the owed ones, no spare past the clock's batch.
    assert_eq!(batch_fences(1_000_001, 2, at(5.0)), (1_000_003, 1_000_003));
    // Spares count from the fence taken when the clock is behind it by less than a batch.
    assert_eq!(batch_fences(5010, 0, at(5.0)), (5010, 5063));
    // Near the limit, nothing passes it.
    assert_eq!(
        batch_fences(MAX_FENCE - 1, 5, at(year_3000)),
        (MAX_FENCE, MAX_FENCE)
    );
}

#[test]
fn a_name_taken_n_at_a_time_has_a_record_per_slot_each_carrying_n() {
    let (mut core, store, random) = (Core::new(), MemoryStore::new(), SeededRandom::new(5));
    let three = LockOptions {
        concurrency: 3.0,
        ..options(0.0, 2000.0)
    };
    // Slot 2 of `sem` is its own record, and says the name's concurrency.
    let (two, step) = core
        .acquire_slot("sem", 2, 2, three, 100.0, at(1.0), &random)
        .unwrap();
    let key = crate::slot_name("sem", 2);
    assert_eq!(
        drive(&mut core, &store, &key, two, step, 1.0, &random),
        Step::Held
    );
    assert_eq!(stored(&store, &key).n, 3);
    assert!(store.get("sem").is_none(), "slot 0 untouched");
    // Another concurrency in line here is refused at once; a slot past it is out of range.
    let four = LockOptions {
        concurrency: 4.0,
        ..three
    };
    assert_eq!(
        core.acquire_slot("sem", 2, 3, four, 100.0, at(2.0), &random)
            .map(|_| ()),
        Err(LockError::ConcurrencyMismatch {
            name: "sem".into(),
            asked: 4,
            found: 3
        })
    );
    assert!(core
        .acquire_slot("sem", 3, 4, three, 100.0, at(2.0), &random)
        .is_err());
    // Released, the record this isolate freed is taken with no read — unless the concurrency
    // differs: refused before any write, as a record read that says another is.
    let step = core.release(two, at(3.0), &random);
    assert_eq!(
        drive(&mut core, &store, &key, two, step, 3.0, &random),
        Step::Done
    );
    let (_, step) = core
        .acquire_slot("sem", 2, 5, four, 100.0, at(4.0), &random)
        .unwrap();
    assert_eq!(step, Step::Mismatch { found: 3 });
    assert!(core.is_idle());
    let (six, step) = core
        .acquire_slot("sem", 2, 6, four, 100.0, at(5.0), &random)
        .unwrap();
    assert_eq!(
        drive(&mut core, &store, &key, six, step, 5.0, &random),
        Step::Mismatch { found: 3 }
    );
    assert!(!stored(&store, &key).held, "nothing written");
    // A name taken one at a time writes no `n`, as before.
    let (one, step) = acquire(
        &mut core,
        &store,
        "mutex",
        7,
        options(0.0, 2000.0),
        6.0,
        &random,
    );
    assert_eq!(
        drive(&mut core, &store, "mutex", one, step, 6.0, &random),
        Step::Held
    );
    assert!(!store.get("mutex").unwrap().value.contains("\"n\""));
}
