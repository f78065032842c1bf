//! The same tests in Node, headless Chromium and headless Firefox: `scripts/test.sh` runs this
//! file once per host (WASM_BINDGEN_USE_BROWSER with CHROMEDRIVER, then with GECKODRIVER).
//! Real platform timers throughout: nothing here uses a manual clock. A busy machine delays a
//! timer by tens of milliseconds (a GC pause, two CPU-bound neighbours on two cores), so no
//! outcome here rests on a timer firing within less than 300 ms of when it was asked for: a
//! test waits for what it awaits (`until`), or gives each step 300 ms or more to spare.
#![cfg(target_arch = "wasm32")]

use std::cell::RefCell;
use std::rc::Rc;

use keyturn::{Clock, KeyedSerializer, PlatformClock, SerializeError, WorkSignal};
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::spawn_local;
use wasm_bindgen_test::wasm_bindgen_test as test;

type Log = Rc<RefCell<Vec<String>>>;

/// A real platform sleep of `ms`.
async fn sleep(ms: f64) {
    PlatformClock.sleep(ms).expect("a timer").await;
}

/// Waits until `done()`, looking every 5 ms, for at most `limit_ms` (then the test's own
/// assertions say what is missing): a test waits for what it awaits, not for a guess of how
/// long that takes.
async fn until(done: impl Fn() -> bool, limit_ms: f64) {
    let end = js_sys::Date::now() + limit_ms;
    while !done() && js_sys::Date::now() <= end {
        sleep(5.0).await;
    }
}

fn spawn_run(
    serializer: &Rc<KeyedSerializer<PlatformClock>>,
    log: &Log,
    key: &'static str,
    name: &'static str,
    ms: u32,
) {
    let (serializer, log) = (serializer.clone(), log.clone());
    spawn_local(async move {
        let result = serializer
            .run(key, |_signal: WorkSignal| {
                let log = log.clone();
                async move {
                    log.borrow_mut().push(format!("start {name}"));
                    sleep(f64::from(ms)).await;
                    log.borrow_mut().push(format!("end {name}"));
                }
            })
            .await;
        if let Err(SerializeError::TimedOut { .. }) = result {
            log.borrow_mut().push(format!("timeout {name}"));
        }
    });
}

#[test]
async fn rust_api_runs_one_key_in_order_and_keys_side_by_side() {
    let serializer = Rc::new(KeyedSerializer::new(1000.0).unwrap());
    let log: Log = Rc::default();
    spawn_run(&serializer, &log, "a", "a1", 20);
    spawn_run(&serializer, &log, "a", "a2", 1);
    spawn_run(&serializer, &log, "b", "b1", 5);
    until(|| log.borrow().len() == 6, 5_000.0).await;
    assert_eq!(
        *log.borrow(),
        ["start a1", "start b1", "end b1", "end a1", "start a2", "end a2"]
    );
    assert_eq!(serializer.pending(), 0);
}

#[test]
async fn rust_api_deadline_drops_the_work_on_a_real_timer() {
    // A deadline of 400 ms looked at 100 ms in: 300 ms to spare.
    let serializer = Rc::new(KeyedSerializer::new(400.0).unwrap());
    let log: Log = Rc::default();
    spawn_run(&serializer, &log, "k", "slow", 10_000);
    spawn_run(&serializer, &log, "k", "next", 1);
    sleep(100.0).await;
    assert_eq!(*log.borrow(), ["start slow"], "not before the deadline");
    until(|| log.borrow().len() == 4, 5_000.0).await;
    assert_eq!(
        *log.borrow(),
        ["start slow", "timeout slow", "start next", "end next"]
    );
    assert_eq!(serializer.pending(), 0);
}

/// Replaces the global `setTimeout`/`clearTimeout` with ones that count live timers and can
/// be told to throw on given calls; gives back the counters and a restore function.
fn counting_timers(throw_on: &[u32]) -> (js_sys::Object, js_sys::Function) {
    let script = format!(
        r#"
        const realSet = globalThis.setTimeout, realClear = globalThis.clearTimeout;
        const throwOn = new Set({throw_on:?});
        const stats = {{ calls: 0, live: 0, max: 0 }};
        const live = new Set();
        globalThis.setTimeout = (f, ms, ...args) => {{
          stats.calls += 1;
          if (throwOn.has(stats.calls)) throw new Error('no timer for you');
          const handle = realSet(() => {{ live.delete(handle); stats.live = live.size; f(...args); }}, ms);
          live.add(handle); stats.live = live.size; stats.max = Math.max(stats.max, live.size);
          return handle;
        }};
        globalThis.clearTimeout = (handle) => {{ live.delete(handle); stats.live = live.size; realClear(handle); }};
        return [stats, () => {{ globalThis.setTimeout = realSet; globalThis.clearTimeout = realClear; }}];
        "#
    );
    let pair: js_sys::Array = js_sys::Function::new_no_args(&script)
        .call0(&JsValue::UNDEFINED)
        .unwrap()
        .unchecked_into();
    (pair.get(0).unchecked_into(), pair.get(1).unchecked_into())
}

fn stat(stats: &js_sys::Object, name: &str) -> f64 {
    js_sys::Reflect::get(stats, &name.into())
        .unwrap()
        .as_f64()
        .unwrap()
}

#[test]
async fn rust_api_clears_each_deadline_timer_when_its_work_settles() {
    let (stats, restore) = counting_timers(&[]);
    let serializer = Rc::new(KeyedSerializer::new(60_000.0).unwrap());
    let log: Log = Rc::default();
    for i in 0..30 {
        spawn_run(
            &serializer,
            &log,
            if i % 2 == 0 { "a" } else { "b" },
            "w",
            1,
        );
    }
    until(|| log.borrow().len() == 60, 5_000.0).await;
    restore.call0(&JsValue::UNDEFINED).unwrap();
    assert_eq!(log.borrow().len(), 60, "every work started and ended");
    assert_eq!(serializer.pending(), 0);
    // At most two works ran at once (keys a and b), each with its deadline and its own 1 ms
    // sleep; and this test's own sleep (one at a time while it waits).
    assert!(
        stat(&stats, "max") <= 5.0,
        "live timers peaked at {}",
        stat(&stats, "max")
    );
    assert_eq!(
        stat(&stats, "live"),
        0.0,
        "no deadline timer outlives its work"
    );
}

#[test]
async fn rust_api_work_whose_deadline_cannot_be_armed_does_not_run() {
    // The 1st setTimeout is this test's own sleep (the spawned tasks run after it), the 2nd
    // the first work's deadline.
    let (_stats, restore) = counting_timers(&[2]);
    let serializer = Rc::new(KeyedSerializer::new(1_000.0).unwrap());
    let ran = Rc::new(RefCell::new(Vec::new()));
    let outcomes = Rc::new(RefCell::new(Vec::new()));
    for name in ["refused", "next"] {
        let (s, ran, outcomes) = (serializer.clone(), ran.clone(), outcomes.clone());
        spawn_local(async move {
            let outcome = s
                .run("k", |_| async move {
                    ran.borrow_mut().push(name);
                })
                .await;
            outcomes.borrow_mut().push(match outcome {
                Ok(()) => "ok".to_string(),
                Err(error) => error.to_string(),
            });
        });
    }
    sleep(50.0).await;
    restore.call0(&JsValue::UNDEFINED).unwrap();
    assert_eq!(*ran.borrow(), ["next"]);
    assert_eq!(
        *outcomes.borrow(),
        [
            "the platform refused a timer: no timer for you".to_string(),
            "ok".to_string()
        ]
    );
    assert_eq!(serializer.pending(), 0);
}

#[test]
async fn rust_lock_api_on_real_timers_and_crypto() {
    use keyturn::{
        acquire_lock, LockManager, LockOptions, MemoryStore, PlatformRandom, WallClock,
        FENCES_PER_MS,
    };

    let store = Rc::new(MemoryStore::new());
    let asked = js_sys::Date::now();
    let first = acquire_lock(store.clone(), "board", LockOptions::default())
        .await
        .unwrap()
        .expect("free");
    assert_eq!(first.token().len(), 32);
    assert!(
        first.fence() as f64 >= asked.floor() * FENCES_PER_MS,
        "fences follow the clock"
    );
    let busy = LockOptions {
        wait_ms: 30.0,
        ..LockOptions::default()
    };
    let started = js_sys::Date::now();
    assert!(acquire_lock(store.clone(), "board", busy)
        .await
        .unwrap()
        .is_none());
    assert!(
        js_sys::Date::now() - started >= 29.0,
        "waited on real timers"
    );
    first.release().await.unwrap();

    let manager = LockManager::new(store.clone(), WallClock, PlatformRandom::default());
    let second = manager
        .acquire("board", LockOptions::default())
        .await
        .unwrap()
        .expect("released");
    assert!(second.fence() > first.fence());
    assert_ne!(second.token(), first.token());
    second.release().await.unwrap();
}

#[test]
async fn rust_leases_on_real_timers_renew_and_with_lock() {
    use keyturn::{
        LockError, LockManager, LockOptions, MemoryStore, PlatformRandom, WallClock, FENCES_PER_MS,
    };

    let store = Rc::new(MemoryStore::new());
    let locks = LockManager::new(store.clone(), WallClock, PlatformRandom::default());
    let rival = LockManager::new(store.clone(), WallClock, PlatformRandom::default());
    // Leases long enough that every step below has 300 ms or more to spare: a timer a busy
    // machine delays by tens of milliseconds decides nothing.
    let short = LockOptions {
        wait_ms: 0.0,
        stale_ms: 700.0,
        ..LockOptions::default()
    };
    // The two halves run side by side, on names of their own, to keep the test short.
    let lapse = async {
        // A lease renewed on real timers outlives its first staleMs; unrenewed, it lapses.
        let lock = locks.acquire("lease", short).await.unwrap().expect("free");
        let first_end = lock.held_until();
        // Renewed with 350 ms of the first lease left.
        WallClock.sleep(350.0).unwrap().await;
        assert!(lock.renew().await.unwrap());
        assert!(lock.held_until() > first_end);
        // Past the first lease's end (700 ms), 320 ms before the renewed one's.
        WallClock.sleep(380.0).unwrap().await;
        assert!(
            lock.is_held(),
            "renewed: still held past the first lease's end"
        );
        // Past the renewed lease's end.
        WallClock.sleep(450.0).unwrap().await;
        assert!(!lock.is_held(), "lapsed");
        assert!(!lock.renew().await.unwrap(), "lost for good");
        let taker = rival
            .acquire("lease", short)
            .await
            .unwrap()
            .expect("taken over");
        assert!(taker.fence() > lock.fence());
        taker.release().await.unwrap();
    };
    let renewing = async {
        // with_lock renews while its work runs three leases long; a rival never gets in.
        // Leases of 450 ms renewed every 150 ms: a renewal may come 300 ms late, still in time.
        let renewed = LockOptions {
            stale_ms: 450.0,
            ..short
        };
        let asked = js_sys::Date::now();
        let work = locks.with_lock("job", renewed, async |held| {
            WallClock.sleep(1_350.0).unwrap().await;
            assert!(held.is_held(), "renewed all along");
            held.fence()
        });
        let tries = async {
            let mut got = 0;
            // Four tries over 1 000 ms, the last 350 ms before the 1 350 ms work ends (after
            // it, the name is free).
            for _ in 0..4 {
                WallClock.sleep(250.0).unwrap().await;
                if rival.acquire("job", renewed).await.unwrap().is_some() {
                    got += 1;
                }
            }
            got
        };
        let (fence, rival_got) = futures_join(work, tries).await;
        assert!(fence.unwrap() as f64 >= asked.floor() * FENCES_PER_MS);
        assert_eq!(rival_got, 0, "the lease was renewed while the work ran");
    };
    futures_join(lapse, renewing).await;
    // Busy: Unavailable.
    let held = rival
        .acquire("busy", LockOptions::default())
        .await
        .unwrap()
        .unwrap();
    let refused = locks
        .with_lock("busy", short, async |_| 1)
        .await
        .unwrap_err();
    assert!(matches!(refused, LockError::Unavailable { .. }));
    held.release().await.unwrap();
}

/// Polls both futures to completion on one task.
async fn futures_join<A: std::future::Future, B: std::future::Future>(
    a: A,
    b: B,
) -> (A::Output, B::Output) {
    let mut a = Box::pin(a);
    let mut b = Box::pin(b);
    let (mut out_a, mut out_b) = (None, None);
    std::future::poll_fn(|cx| {
        if out_a.is_none() {
            if let std::task::Poll::Ready(value) = a.as_mut().poll(cx) {
                out_a = Some(value);
            }
        }
        if out_b.is_none() {
            if let std::task::Poll::Ready(value) = b.as_mut().poll(cx) {
                out_b = Some(value);
            }
        }
        if out_a.is_some() && out_b.is_some() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    (out_a.unwrap(), out_b.unwrap())
}
