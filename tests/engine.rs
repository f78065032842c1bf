//! The engine alone, natively, with no executor: what it says when the host refuses a timer.

use keyturn::engine::{Config, Effect, Engine, Entered, Now, Outcome, Ticket, Why};
use keyturn::{Coalesce, SeededRandom, SerializerOptions};

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
    match engine.enter(0, "k", handle, None, Coalesce::Never, at(0.0)) {
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
