//! The engine alone, natively, with no executor: what it says when the host refuses a timer,
//! which of its wake-ups may come early, and how a change of whether its one timer keeps the host
//! alive is taken; how a line's watcher is armed where contexts end; which serializers warn that
//! they order keys in one isolate only.

use keyturn::engine::{
    read_answer, Answer, Config, Effect, Engine, Entered, Now, Outcome, StoreCall, Ticket, Why,
    ORPHAN_MS, START_GRACE_MS,
};
use keyturn::{Coalesce, LockOptions, OptionError, SeededRandom, SerializerOptions};

const PER_CALL: Config = Config {
    timer_per_call: true,
    contexts_end: true,
    store_tells_changes: false,
};

fn at(ms: f64) -> Now {
    Now {
        wall: 1_700_000_000_000.0 + ms,
        mono: ms,
    }
}

fn effects(engine: &mut Engine<u64, u32>) -> Vec<Effect<u64, u32>> {
    std::iter::from_fn(|| engine.poll()).collect()
}

fn enter(engine: &mut Engine<u64, u32>, handle: u32) -> Ticket {
    match engine.enter(0, "k", handle, None, Coalesce::Never, false, at(0.0)) {
        Ok(Entered::Queued(ticket)) => ticket,
        other => panic!("queued: {other:?}"),
    }
}

/// An engine with one serializer (deadline 1 s), a timer per call, and a first work running.
fn running() -> (Engine<u64, u32>, Ticket, SeededRandom) {
    let random = SeededRandom::new(7);
    let mut engine = Engine::<u64, u32>::new(PER_CALL);
    let options = SerializerOptions::new(1000.0, f64::INFINITY).expect("options");
    engine.add_serializer(options, None).expect("serializer");
    let first = enter(&mut engine, 1);
    assert!(engine.start_work(0, first, at(0.0), &random));
    let started = effects(&mut engine);
    assert!(
        started
            .iter()
            .any(|e| matches!(e, Effect::Start { handle: 1, .. })),
        "{started:?}"
    );
    assert!(
        started
            .iter()
            .any(|e| matches!(e, Effect::Arm { handle: 1, at, .. } if *at == 1000.0)),
        "the running work's deadline is armed in its own context: {started:?}"
    );
    (engine, first, random)
}

#[test]
fn the_work_behind_a_running_one_watches_its_deadline_after_the_work_itself_would() {
    let (mut engine, _first, _random) = running();
    enter(&mut engine, 2);
    let armed = effects(&mut engine);
    // Its own request handles its own deadline first: on Workers, timed out from the waiter's
    // request instead, with its timer spent, it would be cancelled as hung before it heard.
    assert!(
        armed
            .iter()
            .any(|e| matches!(e, Effect::Arm { handle: 2, at, .. } if *at == 1000.0 + ORPHAN_MS)),
        "{armed:?}"
    );
}

type Effects = Effect<u64, u32>;

/// An engine with one serializer (deadline 30 s), a timer per call, works 1 to 4 of one key
/// queued at 0 and work 1 started then.
fn a_line_of_four() -> (Engine<u64, u32>, [Ticket; 4], SeededRandom, Vec<Effects>) {
    let random = SeededRandom::new(7);
    let mut engine = Engine::<u64, u32>::new(PER_CALL);
    let options = SerializerOptions::new(30_000.0, f64::INFINITY).expect("options");
    engine.add_serializer(options, None).expect("serializer");
    let works = [1, 2, 3, 4].map(|handle| enter(&mut engine, handle));
    effects(&mut engine);
    assert!(engine.start_work(0, works[0], at(0.0), &random));
    let started = effects(&mut engine);
    (engine, works, random, started)
}

/// The times `handle`'s timer was armed for.
fn arms(effects: &[Effect<u64, u32>], handle: u32) -> Vec<f64> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Arm { handle: h, at, .. } if *h == handle => Some(*at),
            _ => None,
        })
        .collect()
}

#[test]
fn a_watcher_is_armed_for_no_later_than_a_grace_on_and_not_moved_once_the_work_it_watches_is_told()
{
    // Work 3 waits right behind work 2, which waits on work 1's deadline (30 000 +
    // ORPHAN_MS): its timer fires by START_GRACE_MS, so that once work 2 is told it may start,
    // what work 3 then watches (work 2's start, by START_GRACE_MS after) needs no timer moved.
    let (mut engine, works, random, started) = a_line_of_four();
    assert_eq!(arms(&started, 3), vec![START_GRACE_MS], "{started:?}");
    engine.done(0, works[0], at(20.0), &random);
    let told = effects(&mut engine);
    assert!(
        told.iter()
            .any(|e| matches!(e, Effect::Ready { handle: 2, .. })),
        "{told:?}"
    );
    assert_eq!(
        arms(&told, 3),
        Vec::<f64>::new(),
        "its timer stands: {told:?}"
    );
    // The line's last watches work 2's start too.
    assert_eq!(arms(&told, 4), vec![20.0 + START_GRACE_MS], "{told:?}");
}

#[test]
fn a_watcher_whose_timer_fired_before_the_work_ahead_is_due_is_armed_again_for_it() {
    let (mut engine, works, random, _started) = a_line_of_four();
    // Work 1 still runs: work 3's timer fired with nothing due — nobody is given up, and it is
    // armed again for work 1's deadline, ORPHAN_MS on.
    engine.fired(Some(0), works[2], at(START_GRACE_MS), &random);
    let fired = effects(&mut engine);
    assert!(
        !fired
            .iter()
            .any(|e| matches!(e, Effect::Settle { .. } | Effect::Abort { .. })),
        "{fired:?}"
    );
    assert_eq!(arms(&fired, 3), vec![30_000.0 + ORPHAN_MS], "{fired:?}");
}

#[test]
fn a_running_work_whose_deadline_timer_is_refused_is_aborted_and_its_key_moves_on() {
    let (mut engine, first, random) = running();
    let second = enter(&mut engine, 2);
    effects(&mut engine);
    engine.timer_refused(Some(0), Some(first), at(5.0), &random);
    let told = effects(&mut engine);
    assert!(
        told.contains(&Effect::Abort {
            handle: 1,
            why: Why::TimerRefused
        }),
        "its signal aborts, saying why: {told:?}"
    );
    assert!(
        told.contains(&Effect::Settle {
            handle: 1,
            outcome: Outcome::TimerRefused
        }),
        "its caller is told: {told:?}"
    );
    // Its caller heard: the next work's turn comes (no work waits for a timer that never fires).
    engine.done(0, first, at(6.0), &random);
    effects(&mut engine);
    assert!(engine.start_work(0, second, at(6.0), &random));
    let next = effects(&mut engine);
    assert!(
        next.iter()
            .any(|e| matches!(e, Effect::Start { handle: 2, .. })),
        "{next:?}"
    );
}

#[test]
fn a_queued_work_whose_timer_is_refused_never_runs_and_holds_no_one_up() {
    let (mut engine, first, random) = running();
    let second = enter(&mut engine, 2);
    let third = enter(&mut engine, 3);
    effects(&mut engine);
    engine.timer_refused(Some(0), Some(second), at(5.0), &random);
    let told = effects(&mut engine);
    assert_eq!(
        told,
        vec![Effect::Settle {
            handle: 2,
            outcome: Outcome::TimerRefused
        }],
        "only its caller hears, and nothing of it runs"
    );
    assert!(
        !engine.start_work(0, second, at(5.0), &random),
        "it never starts"
    );
    engine.settled(0, first, at(10.0), &random);
    engine.done(0, first, at(10.0), &random);
    effects(&mut engine);
    assert!(
        engine.start_work(0, third, at(10.0), &random),
        "the one behind it goes next"
    );
    let next = effects(&mut engine);
    assert!(
        next.iter()
            .any(|e| matches!(e, Effect::Start { handle: 3, .. })),
        "{next:?}"
    );
}

#[test]
fn a_lock_waiter_in_line_here_whose_own_timer_is_refused_keeps_waiting_and_is_served() {
    use keyturn::engine::{Answer, StoreCall};
    use keyturn::LockOptions;
    let random = SeededRandom::new(7);
    let mut engine = Engine::<u64, u32>::new(PER_CALL);
    let options = LockOptions::default();
    let first = engine
        .acquire("n", options, 1, at(0.0), &random)
        .expect("acquire");
    let create = effects(&mut engine)
        .into_iter()
        .find_map(|e| match e {
            Effect::Store {
                op,
                call: StoreCall::Create { .. },
                ..
            } => Some(op),
            _ => None,
        })
        .expect("the first acquisition creates the record");
    engine.answer(create, Answer::Created(Some(1)), at(1.0), &random);
    let held = effects(&mut engine);
    assert!(
        held.iter().any(|e| matches!(
            e,
            Effect::Settle {
                handle: 1,
                outcome: Outcome::Held(_)
            }
        )),
        "{held:?}"
    );
    // A second acquisition waits behind it here; the host refuses its timer (a request at
    // workerd's quota): it is not given up on.
    let second = engine
        .acquire("n", options, 2, at(2.0), &random)
        .expect("acquire");
    effects(&mut engine);
    engine.timer_refused(None, Some(second), at(3.0), &random);
    let told = effects(&mut engine);
    assert!(
        !told
            .iter()
            .any(|e| matches!(e, Effect::Settle { handle: 2, .. })),
        "the waiter is not given up on: {told:?}"
    );
    // The holder releases: the lease is handed to the waiter by one write.
    engine.release(first, 3, at(4.0), &random);
    let write = effects(&mut engine)
        .into_iter()
        .find_map(|e| match e {
            Effect::Store {
                op,
                call: StoreCall::Replace { .. },
                ..
            } => Some(op),
            _ => None,
        })
        .expect("the hand-off writes the record");
    engine.answer(write, Answer::Replaced(Some(2)), at(5.0), &random);
    let handed = effects(&mut engine);
    assert!(
        handed.iter().any(|e| matches!(
            e,
            Effect::Settle {
                handle: 2,
                outcome: Outcome::Held(_)
            }
        )),
        "the waiter is served: {handed:?}"
    );
}

/// A store call of `effects`: its op and call.
fn store_call(effects: &[Effect<u64, u32>]) -> (Ticket, StoreCall<u64>) {
    effects
        .iter()
        .find_map(|effect| match effect {
            Effect::Store { op, call, .. } => Some((*op, call.clone())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("a store call: {effects:?}"))
}

/// The last timer `effects` arm (the one timer's `Wake`, or a call's `Arm`): its time and
/// whether it may come early.
fn wake(effects: &[Effect<u64, u32>]) -> Option<(f64, bool)> {
    effects.iter().rev().find_map(|effect| match effect {
        Effect::Wake { at, early, .. } | Effect::Arm { at, early, .. } => Some((*at, *early)),
        _ => None,
    })
}

#[test]
fn only_a_pause_between_polls_may_wake_the_host_early() {
    pauses_may_come_early(Config {
        timer_per_call: false,
        contexts_end: false,
        store_tells_changes: false,
    });
}

#[test]
fn only_a_pause_between_polls_may_fire_a_calls_own_timer_early() {
    pauses_may_come_early(PER_CALL);
}

/// Another isolate holds a name; this one polls for it until its lease ends. Each pause between
/// polls may come early; the store calls' bounds and the lease's end may not.
fn pauses_may_come_early(config: Config) {
    let random = SeededRandom::new(11);
    let (mut a, mut b) = (
        Engine::<u64, u32>::new(config),
        Engine::<u64, u32>::new(config),
    );
    // Another isolate holds the name.
    a.acquire("k", LockOptions::default(), 1, at(0.0), &random)
        .expect("acquire");
    let asked = effects(&mut a);
    let (op, StoreCall::Create { value }) = store_call(&asked) else {
        panic!("a create: {asked:?}")
    };
    assert_eq!(
        wake(&asked).map(|(_, early)| early),
        Some(false),
        "a store call's bound is never early: {asked:?}"
    );
    a.answer(op, Answer::Created(Some(1)), at(1.0), &random);
    effects(&mut a);
    // This one finds it held (asking for it), and polls, served by one record.
    let mut record = (1u64, value);
    let call = b
        .acquire("k", LockOptions::default(), 1, at(2.0), &random)
        .expect("acquire");
    let mut now = 2.0;
    let mut wakes = Vec::new();
    let mut armed = f64::INFINITY;
    for _ in 0..400 {
        let asked = effects(&mut b);
        if let Some(woken) = wake(&asked) {
            armed = woken.0;
            wakes.push(woken);
        }
        let store = asked.iter().find_map(|effect| match effect {
            Effect::Store { op, call, .. } => Some((*op, call.clone())),
            _ => None,
        });
        match store {
            Some((op, StoreCall::Create { .. })) => {
                b.answer(op, Answer::Created(None), at(now), &random)
            }
            Some((op, StoreCall::Read)) => b.answer(
                op,
                read_answer(Some((record.0, record.1.as_str()))),
                at(now),
                &random,
            ),
            Some((op, StoreCall::Replace { version, value })) if version == record.0 => {
                record = (record.0 + 1, value);
                b.answer(op, Answer::Replaced(Some(record.0)), at(now), &random)
            }
            Some((op, _)) => b.answer(op, Answer::Replaced(None), at(now), &random),
            None => {
                if armed > 2500.0 {
                    break;
                }
                now = armed;
                armed = f64::INFINITY;
                match config.timer_per_call {
                    true => b.fired(None, call, at(now), &random),
                    false => b.tick(at(now), &random),
                }
            }
        }
    }
    let polls: Vec<_> = wakes.iter().filter(|(when, _)| *when < 2000.0).collect();
    assert!(
        polls.iter().filter(|(_, early)| *early).count() >= 3,
        "jittered pauses between polls may come early: {wakes:?}"
    );
    assert!(
        wakes.iter().any(|(when, early)| *when >= 2000.0 && !early),
        "the wake at the record's lease end is not early: {wakes:?}"
    );
}

#[test]
fn a_change_of_whether_the_one_timer_keeps_the_host_alive_is_taken_by_poll_keep_or_poll() {
    const SHARED: Config = Config {
        timer_per_call: false,
        contexts_end: false,
        store_tells_changes: false,
    };
    let random = SeededRandom::new(5);
    let mut engine = Engine::<u64, u32>::new(SHARED);
    engine
        .acquire("k", LockOptions::default(), 1, at(0.0), &random)
        .expect("acquire");
    let asked = effects(&mut engine);
    assert!(
        matches!(asked.last(), Some(Effect::Wake { keep: true, .. })),
        "a store call in flight keeps the host alive: {asked:?}"
    );
    let (op, _) = store_call(&asked);
    engine.answer(op, Answer::Created(Some(1)), at(1.0), &random);
    // The effect before the change first, then the change alone, taken: poll says it no more.
    assert!(engine.poll_keep().is_none(), "an effect is left first");
    assert!(matches!(
        engine.poll(),
        Some(Effect::Settle {
            handle: 1,
            outcome: Outcome::Held(_)
        })
    ));
    assert_eq!(engine.poll_keep(), Some(false), "nothing waits on it now");
    assert!(engine.poll().is_none() && !engine.has_effects());
    assert_eq!(engine.poll_keep(), None);
}

#[test]
fn a_serializer_without_a_store_where_contexts_end_warns_unless_one_isolate_was_meant() {
    let options = SerializerOptions::given(None, None).expect("options");
    let mut workers: Engine<u64, u32> = Engine::new(PER_CALL);
    let plain = workers.add_serializer(options, None).expect("serializer");
    let meant = workers
        .add_scoped_serializer(options, None, true)
        .expect("serializer");
    let stored = workers
        .add_serializer(options, Some(LockOptions::default()))
        .expect("serializer");
    assert!(workers.warns_one_isolate(plain));
    assert!(!workers.warns_one_isolate(meant));
    assert!(!workers.warns_one_isolate(stored));
    assert_eq!(
        workers.add_scoped_serializer(options, Some(LockOptions::default()), true),
        Err(OptionError::ScopeOverStore)
    );
    // One process is one isolate: contexts that do not end never warn.
    let mut node: Engine<u64, u32> = Engine::new(Config::default());
    let plain = node.add_serializer(options, None).expect("serializer");
    assert!(!node.warns_one_isolate(plain));
}
