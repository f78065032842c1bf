//! The serializer's core: deadlines ordered for one shared timer, expiry, the bound, refusals,
//! and the options' ranges.

// The same tests on wasm (Node and browsers), as smol-rs does.
#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use super::{Abandon, EnqueueError, GaveUp, SerializerCore, Stats};
use crate::engine::key::{KeyError, MAX_KEY_BYTES};
use crate::engine::options::{
    validate_max_pending, validate_timeout_ms, Coalesce, MaxPendingOutOfRange,
    SerializerOptionError, SerializerOptions, TimeoutOutOfRange, MAX_TIMEOUT_MS,
};

fn core<P>(timeout_ms: f64, max_pending: f64) -> SerializerCore<P> {
    SerializerCore::new(
        SerializerOptions::new(timeout_ms, max_pending).unwrap(),
        true,
        true,
    )
}

#[test]
fn core_times_works_from_their_start_and_expires_them_earliest_first() {
    let mut core: SerializerCore<&str> = core(100.0, f64::INFINITY);
    let a = core.open("a", "a1", None, Coalesce::Never).unwrap();
    let b = core.open("b", "b1", None, Coalesce::Never).unwrap();
    let a2 = core
        .enqueue_on(a.line, "a2", None, Coalesce::Never)
        .unwrap();
    assert!(a.is_head && b.is_head);
    assert_eq!(
        core.next_deadline(),
        None,
        "nothing runs before it is started"
    );
    assert_eq!(core.start_next(a.line, 0.0).unwrap().timeout_ms, 100.0);
    assert_eq!(core.next_deadline(), Some(100.0));
    assert_eq!(*core.start_next(b.line, 30.0).unwrap().payload, "b1");
    assert!(
        core.start_next(a.line, 40.0).is_none(),
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
    assert_eq!((released.next, released.idle), (Some(a2), false));
    core.start_next(a.line, 100.0).unwrap();
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
            let line = core
                .open(&format!("k{i}"), i as u32, own, Coalesce::Never)
                .unwrap()
                .line;
            let started = core.start_next(line, i as f64).unwrap();
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
        .map(|i| {
            core.open(&format!("k{i}"), i, None, Coalesce::Never)
                .unwrap()
        })
        .collect();
    for (i, p) in pushed.iter().enumerate() {
        core.start_next(p.line, i as f64).unwrap();
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
    let line = core.open("k", 0, None, Coalesce::Never).unwrap().line;
    for i in 0..100_000 {
        core.start_next(line, f64::from(i)).unwrap();
        core.enqueue_on(line, i + 1, None, Coalesce::Never).unwrap();
        core.finish_head(line).unwrap();
    }
    assert!(core.deadline_entries() <= 66, "{}", core.deadline_entries());
}

#[test]
fn core_bounds_a_key_and_abandoned_works_stop_counting() {
    let mut core: SerializerCore<u32> = core(100.0, 2.0);
    let a = core.open("a", 1, None, Coalesce::Never).unwrap();
    core.enqueue_on(a.line, 2, None, Coalesce::Never).unwrap();
    assert_eq!(
        core.enqueue_on(a.line, 3, None, Coalesce::Never),
        Err(EnqueueError::QueueFull { max_pending: 2 })
    );
    assert_eq!((core.pending_in(a.line), core.stats().refused), (2, 1));
    // Another key has its own bound.
    let b = core.open("b", 4, None, Coalesce::Never).unwrap();
    core.enqueue_on(b.line, 5, None, Coalesce::Never).unwrap();
    // The running head times out: it no longer counts, so one more fits.
    core.start_next(a.line, 0.0).unwrap();
    assert_eq!(core.expire(100.0), Some(a.ticket));
    assert_eq!(core.pending_in(a.line), 1);
    let third = core.enqueue_on(a.line, 3, None, Coalesce::Never).unwrap();
    // A waiting work cancelled leaves the line at once and counts as aborted.
    let cancelled = core.finish(third).unwrap();
    assert_eq!((cancelled.next, cancelled.idle), (None, false));
    assert_eq!(core.payload(third), None, "gone");
    let stats = core.stats();
    assert_eq!((stats.aborted, stats.refused, stats.timed_out), (1, 1, 1));
    // A running work cancelled by its caller: abandoned, then it leaves when told.
    core.finish_head(a.line).unwrap();
    core.start_next(a.line, 100.0).unwrap();
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
        core.open("", (), None, Coalesce::Never).unwrap_err(),
        EnqueueError::InvalidKey(KeyError::Empty)
    );
    let long = "x".repeat(MAX_KEY_BYTES + 1);
    assert_eq!(
        core.open(&long, (), None, Coalesce::Never).unwrap_err(),
        EnqueueError::InvalidKey(KeyError::TooLong(MAX_KEY_BYTES + 1))
    );
    assert_eq!(
        core.open("k", (), Some(0.0), Coalesce::Never).unwrap_err(),
        EnqueueError::InvalidTimeout(TimeoutOutOfRange(0.0))
    );
    let line = core.open("k", (), Some(5.0), Coalesce::Never).unwrap().line;
    assert!(matches!(
        core.enqueue_on(line, (), Some(f64::NAN), Coalesce::Never),
        Err(EnqueueError::InvalidTimeout(TimeoutOutOfRange(ms))) if ms.is_nan()
    ));
    assert_eq!(core.pending_in(line), 1);
    core.finish_head(line).unwrap();
    assert_eq!(
        core.enqueue_on(line, (), None, Coalesce::Never),
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

#[test]
fn started_counts_works_called_which_a_driver_may_say_later() {
    let options = SerializerOptions::new(100.0, f64::INFINITY).unwrap();
    let mut core: SerializerCore<()> = SerializerCore::new(options, true, false);
    let a = core.open("k", (), None, Coalesce::Never).unwrap();
    let _b = core.enqueue_on(a.line, (), None, Coalesce::Never).unwrap();
    core.start_next(a.line, 0.0).unwrap();
    assert_eq!(
        core.stats().started,
        0,
        "its turn came; its work is not called yet"
    );
    core.called(core.head(a.line).unwrap());
    assert_eq!(core.stats().started, 1);
    core.finish_head(a.line).unwrap();
    core.start_next(a.line, 10.0).unwrap();
    // Its deadline passes while it waits to be called (for a lease): timed out, never started.
    assert!(core.expire(110.0).is_some());
    core.called(core.head(a.line).unwrap());
    let stats = core.stats();
    assert_eq!((stats.started, stats.timed_out), (1, 1));
}

#[test]
fn a_coalescing_call_joins_only_the_last_waiting_work_of_its_group_and_deadline() {
    let mut core: SerializerCore<&str> = core(100.0, 2.0);
    let yes = Coalesce::Yes;
    let acl = Coalesce::Group("acl".into());
    let a = core.open("k", "running", None, yes.clone()).unwrap();
    // Queued on an idle key and not started yet: its deadline is not running, so it is joinable.
    assert_eq!(core.join(a.line, &yes, None), Ok(Some(a.ticket)));
    core.start_next(a.line, 0.0).unwrap();
    assert_eq!(core.join(a.line, &yes, None), Ok(None), "its deadline runs");
    let b = core.enqueue_on(a.line, "b", None, yes.clone()).unwrap();
    assert_eq!(core.join(a.line, &Coalesce::Never, None), Ok(None));
    assert_eq!(core.join(a.line, &acl, None), Ok(None), "another group");
    assert_eq!(
        core.join(a.line, &yes, Some(50.0)),
        Ok(None),
        "another deadline length"
    );
    assert_eq!(
        core.join(a.line, &yes, Some(100.0)),
        Ok(Some(b)),
        "the same length"
    );
    assert_eq!(core.join(a.line, &yes, None), Ok(Some(b)));
    // The bound counts works, not callers: two works, a full key, yet joining is never refused.
    assert_eq!(core.pending_in(a.line), 2);
    assert!(matches!(
        core.enqueue_on(a.line, "c", None, acl.clone()),
        Err(EnqueueError::QueueFull { .. })
    ));
    assert_eq!(core.join(a.line, &yes, None), Ok(Some(b)));
    assert!(matches!(
        core.join(a.line, &yes, Some(0.0)),
        Err(EnqueueError::InvalidTimeout(_))
    ));
    let stats = core.stats();
    assert_eq!((stats.coalesced, stats.refused, stats.waiting), (4, 1, 1));
    // A work behind the joinable one: calls never skip ahead of it.
    assert!(core.finish_head(a.line).is_some());
    let c = core.enqueue_on(a.line, "c", None, Coalesce::Never).unwrap();
    assert_eq!(core.join(a.line, &yes, None), Ok(None));
    assert_eq!(core.line_of(c), Some(a.line));
}

#[test]
fn a_joined_work_leaves_only_with_its_last_caller() {
    let mut core: SerializerCore<&str> = core(100.0, f64::INFINITY);
    let group = Coalesce::Group("acl".into());
    let a = core.open("k", "a", None, Coalesce::Never).unwrap();
    let b = core.enqueue_on(a.line, "b", None, group.clone()).unwrap();
    assert_eq!(core.join(a.line, &group, None), Ok(Some(b)));
    assert_eq!(core.join(a.line, &group, None), Ok(Some(b)));
    assert!(core.leave(b), "two callers remain");
    assert!(core.leave(b), "one caller remains");
    assert!(
        !core.leave(b),
        "its last caller: its front end takes it out"
    );
    assert!(!core.leave(b), "leave alone changes nothing");
    assert_eq!(core.stats().aborted, 0);
    assert!(core.finish(b).is_some());
    assert_eq!(core.stats().aborted, 1, "the work left its line, cancelled");
    assert_eq!(core.pending_in(a.line), 1);
    // A running shared work is abandoned only when its last caller leaves too.
    let c = core.enqueue_on(a.line, "c", None, group.clone()).unwrap();
    assert_eq!(core.join(a.line, &group, None), Ok(Some(c)));
    core.finish_head(a.line).unwrap();
    core.start_next(a.line, 0.0).unwrap();
    assert!(core.leave(c));
    assert!(!core.leave(c));
    assert!(core.abandon(c, Abandon::Aborted));
    assert_eq!(core.stats().coalesced, 3);
}

#[test]
fn a_started_work_says_its_deadline_and_a_caller_giving_up_leaves_or_abandons_it() {
    let mut core = core::<u8>(50.0, f64::INFINITY);
    let first = core.open("k", 1, Some(20.0), Coalesce::Never).unwrap();
    let second = core
        .enqueue_on(first.line, 2, None, Coalesce::Never)
        .unwrap();
    assert_eq!(core.timeout_of(first.ticket), Some(20.0), "its own");
    assert_eq!(core.timeout_of(second), Some(50.0), "the serializer's");
    let started = core.start_next(first.line, 100.0).unwrap();
    assert_eq!((started.timeout_ms, started.deadline), (20.0, 120.0));
    // The waiting one leaves its line; the running one is abandoned, and stays the head.
    let GaveUp::Left(released) = core.give_up(second) else {
        panic!("a waiting work leaves")
    };
    assert!(!released.idle && released.next.is_none());
    assert!(matches!(core.give_up(first.ticket), GaveUp::Abandoned));
    assert!(core.is_abandoned(first.ticket) && core.has_started(first.ticket));
    assert!(
        matches!(core.give_up(first.ticket), GaveUp::Nothing),
        "once"
    );
    assert_eq!(core.stats().aborted, 2);
    assert_eq!(core.timeout_of(second), None, "gone");
}

#[test]
fn options_a_caller_left_out_are_the_defaults() {
    assert_eq!(
        SerializerOptions::given(None, None),
        Ok(SerializerOptions::default())
    );
    assert_eq!(
        SerializerOptions::given(Some(5.0), None).map(|o| o.timeout_ms()),
        Ok(5.0)
    );
    assert!(SerializerOptions::given(Some(f64::NAN), None).is_err());
    assert!(SerializerOptions::given(None, Some(0.5)).is_err());
}

fn core_of<P>(concurrency: f64) -> SerializerCore<P> {
    let options = SerializerOptions::new(100.0, f64::INFINITY)
        .and_then(|options| options.with_concurrency(concurrency))
        .unwrap();
    SerializerCore::new(options, true, true)
}

#[test]
fn concurrency_runs_a_keys_first_n_works_each_in_the_lowest_free_slot() {
    let mut core: SerializerCore<&str> = core_of(3.0);
    let a = core.open("k", "a", None, Coalesce::Never).unwrap();
    let rest: Vec<_> = ["b", "c", "d", "e"]
        .into_iter()
        .map(|work| {
            core.enqueue_on(a.line, work, None, Coalesce::Never)
                .unwrap()
        })
        .collect();
    let [b, c, d, e] = rest[..] else {
        unreachable!()
    };
    let came: Vec<bool> = [a.ticket, b, c, d, e]
        .iter()
        .map(|&t| core.turn_has_come(t))
        .collect();
    assert_eq!(came, [true, true, true, false, false]);
    assert!(!core.may_start(b), "b starts after a");
    let slots: Vec<(&str, u16)> = (0..3)
        .map(|i| {
            let started = core.start_next(a.line, f64::from(i)).unwrap();
            (*started.payload, started.slot)
        })
        .collect();
    assert_eq!(slots, [("a", 0), ("b", 1), ("c", 2)]);
    assert!(
        core.start_next(a.line, 3.0).is_none(),
        "d's turn has not come"
    );
    assert_eq!(core.stats().running, 3);

    // b settles: d's turn comes, in b's slot; e still waits.
    let released = core.finish(b).unwrap();
    assert_eq!(released.next, Some(d));
    let started = core.start_next(a.line, 4.0).unwrap();
    assert_eq!((*started.payload, started.slot), ("d", 1));
    assert!(!core.turn_has_come(e));

    // e gives up waiting: nobody's turn comes. An abandoned work keeps its slot until it leaves.
    assert!(core.finish(e).unwrap().next.is_none());
    assert!(core.abandon(a.ticket, Abandon::TimedOut));
    assert_eq!(core.pending_in(a.line), 2);
    let f = core.enqueue_on(a.line, "f", None, Coalesce::Never).unwrap();
    assert!(!core.turn_has_come(f), "a, c and d hold the three slots");
    assert_eq!(core.finish(a.ticket).unwrap().next, Some(f));
    assert_eq!(core.start_next(a.line, 5.0).unwrap().slot, 0);
    for t in [c, d] {
        assert!(!core.finish(t).unwrap().idle);
    }
    assert!(core.finish(f).unwrap().idle);
    assert_eq!(core.stats().started, 5);
}

#[test]
fn a_call_that_coalesces_joins_only_a_work_that_has_not_started() {
    let mut core: SerializerCore<&str> = core_of(2.0);
    let group = Coalesce::Yes;
    let a = core.open("k", "a", None, group.clone()).unwrap();
    core.start_next(a.line, 0.0).unwrap();
    assert_eq!(core.join(a.line, &group, None), Ok(None), "a runs");
    let b = core.enqueue_on(a.line, "b", None, group.clone()).unwrap();
    assert!(
        core.turn_has_come(b),
        "its turn came, but it has not started"
    );
    assert_eq!(core.join(a.line, &group, None), Ok(Some(b)));
    core.start_next(a.line, 1.0).unwrap();
    assert_eq!(core.join(a.line, &group, None), Ok(None), "b runs");
}

/// A small deterministic generator for the schedules below.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

#[test]
fn random_schedules_never_run_more_than_n_and_start_works_in_call_order() {
    for seed in 1..=200u64 {
        let mut random = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let n = 1 + random.below(5);
        let mut core: SerializerCore<u32> = core_of(n as f64);
        let mut line = None;
        let mut queued: Vec<super::Ticket> = Vec::new(); // waiting, in call order
        let mut running: Vec<(super::Ticket, u16)> = Vec::new();
        let mut calls = 0u32;
        let mut started_order: Vec<u32> = Vec::new();
        let mut left: Vec<u32> = Vec::new();
        for step in 0..400 {
            match random.below(6) {
                0 | 1 => {
                    let pushed = match line {
                        None => {
                            let pushed = core.open("k", calls, None, Coalesce::Never).unwrap();
                            line = Some(pushed.line);
                            pushed.ticket
                        }
                        Some(line) => core.enqueue_on(line, calls, None, Coalesce::Never).unwrap(),
                    };
                    calls += 1;
                    queued.push(pushed);
                }
                2 | 3 => {
                    if let Some(started) =
                        line.and_then(|line| core.start_next(line, f64::from(step)))
                    {
                        let (work, slot) = (*started.payload, started.slot);
                        let ticket = queued.remove(0);
                        assert_eq!(
                            core.payload(ticket),
                            Some(&work),
                            "the first waiting work starts"
                        );
                        started_order.push(work);
                        running.push((ticket, slot));
                    }
                }
                4 if !running.is_empty() => {
                    let (ticket, _) = running.remove(random.below(running.len()));
                    if core.finish(ticket).unwrap().idle {
                        line = None;
                    }
                }
                5 if !queued.is_empty() => {
                    let at = random.below(queued.len());
                    let ticket = queued.remove(at);
                    left.push(*core.payload(ticket).unwrap());
                    if core.finish(ticket).unwrap().idle {
                        line = None;
                    }
                }
                _ => {}
            }
            assert!(
                running.len() <= n,
                "seed {seed}: {} running at N = {n}",
                running.len()
            );
            let mut slots: Vec<u16> = running.iter().map(|&(_, slot)| slot).collect();
            slots.sort_unstable();
            slots.dedup();
            assert_eq!(
                slots.len(),
                running.len(),
                "seed {seed}: two works share a slot"
            );
            assert!(slots.iter().all(|&slot| usize::from(slot) < n));
            // Every waiting work whose turn came is among the first N works of the line.
            let came = queued.iter().filter(|&&t| core.turn_has_come(t)).count();
            assert_eq!(
                came,
                n.saturating_sub(running.len()).min(queued.len()),
                "seed {seed}"
            );
        }
        let mut expected: Vec<u32> = (0..calls).filter(|w| !left.contains(w)).collect();
        expected.truncate(started_order.len());
        assert_eq!(
            started_order, expected,
            "seed {seed}: works start in call order"
        );
    }
}

#[test]
fn concurrency_is_a_whole_number_from_1_to_1024() {
    let options = SerializerOptions::default();
    assert_eq!(options.concurrency(), 1);
    for good in [1.0, 4.0, 1024.0] {
        assert_eq!(
            options.with_concurrency(good).map(|o| o.concurrency()),
            Ok(good as usize)
        );
    }
    for bad in [0.0, -1.0, 1.5, 1025.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            options.with_concurrency(bad),
            Err(SerializerOptionError::Concurrency(_))
        ));
    }
    assert_eq!(
        options.with_concurrency(0.0).unwrap_err().to_string(),
        "concurrency must be a whole number from 1 to 1024, got 0"
    );
}
