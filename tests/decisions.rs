//! The shared decision table (`tests/decisions.json`), run by the Rust front end: `LockManager`
//! (acquire, `with_lock`) and `StoreSerializer` over a store whose answers each case scripts,
//! on a manual clock moved 1 ms at a time. The package's JS runs the same table
//! (`tests/js/decisions.test.mjs`); a rule decided in one front end only fails one of the two.

mod common;

#[cfg(target_family = "wasm")]
use wasm_bindgen_test::wasm_bindgen_test as test;

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::{Poll, Waker};

use common::{injected, Executor, Fate, Faults, Record};
use keyturn::{
    Clock, LockError, LockManager, LockOptions, LockStore, ManualClock, SeededRandom,
    SerializeError, SerializerOptions, Sleep, StoreError, StoreSerializer, TimerError, Versioned,
};
use serde_json::Value;

type Log = Rc<RefCell<Vec<(u64, String)>>>;

/// A store whose answers a case scripts: the calls it names (by number, from 1) fail (`fail`),
/// apply and then fail (`lose`: the answer was lost), or never answer (`hang`) — the faults of
/// the tests' fault-injecting store (`common::Faults`); versions are
/// counters, or the value itself (`"versions": "values"`, as a store whose version hashes the
/// value). With `"changed": true` it tells changes, answering `changed` at the write that
/// changes the record. It logs every call with the record it writes (its asks, and its `at` and
/// `lease` when the case asks for `detail`) and its answer.
#[derive(Clone)]
struct Scripted {
    records: Rc<RefCell<BTreeMap<String, Versioned>>>,
    clock: ManualClock,
    log: Log,
    /// Which calls fail, lose their answer or hang.
    faults: Rc<Faults>,
    versions: Rc<Cell<u64>>,
    script: Rc<Script>,
    /// The `changed` calls waiting, each woken at every write.
    watchers: Rc<RefCell<Vec<Waker>>>,
}

#[derive(Default)]
struct Script {
    versions_are_values: bool,
    detail: bool,
    changed: bool,
}

/// Another isolate's ask, as it adds itself to a record's queue: its id, waiting for good.
const OTHER_ASK: &str = "eeeeeeeeeeeeeeee:9999999999";

impl Scripted {
    fn now(&self) -> u64 {
        self.clock.now_ms() as u64
    }

    /// The next call's fate.
    fn fate(&self) -> Fate {
        self.faults.next()
    }

    fn put(&self, key: &str, value: &str) -> String {
        let version = if self.script.versions_are_values {
            value.to_owned()
        } else {
            self.versions.set(self.versions.get() + 1);
            self.versions.get().to_string()
        };
        self.records.borrow_mut().insert(
            key.to_owned(),
            Versioned {
                value: value.to_owned(),
                version: version.clone(),
            },
        );
        self.watchers.borrow_mut().drain(..).for_each(Waker::wake);
        version
    }

    /// What another isolate does to the record under `key` at `t` (`store.others`): `ask` adds
    /// its ask, keeping every other field; `free` lets go of a held record (fence and asks kept);
    /// `lose` is the store losing it (a restart without persistence, an eviction).
    fn other(&self, key: &str, does: &str, t: u64) {
        if does == "lose" {
            self.records.borrow_mut().remove(key);
            self.watchers.borrow_mut().drain(..).for_each(Waker::wake);
            return;
        }
        let found = self.records.borrow()[key].value.clone();
        let mut record: Value = serde_json::from_str(&found).unwrap();
        match does {
            "ask" => {
                record["asks"] = match record.get("asks").and_then(Value::as_str) {
                    Some(asks) => format!("{asks},{OTHER_ASK}"),
                    None => OTHER_ASK.to_owned(),
                }
                .into();
            }
            "free" => {
                let (asks, n) = (record.get("asks").cloned(), record.get("n").cloned());
                let starts = record.get("starts").cloned();
                record = serde_json::json!({
                    "keyturn": 1, "state": "free", "token": "", "fence": record["fence"], "at": t,
                });
                if let Some(asks) = asks {
                    record["asks"] = asks;
                }
                if let Some(starts) = starts {
                    record["starts"] = starts;
                }
                if let Some(n) = n {
                    record["n"] = n;
                }
            }
            other => panic!("unknown thing another isolate does: {other}"),
        }
        self.put(key, &record.to_string());
    }

    fn written(&self, method: &str, value: &str, answer: &str) {
        let record = Record::decode(value).expect("the lock writes its own records");
        let state = if record.held { "held" } else { "free" };
        let mut line = format!("{method} {state} f{}", record.fence);
        let fields: Value = serde_json::from_str(value).unwrap();
        if let Some(n) = fields.get("n").and_then(Value::as_u64) {
            line += &format!(" n{n}");
        }
        if let Some(asks) = fields.get("asks").and_then(Value::as_str) {
            line += &format!(" asks {}", asks.split(',').count());
        }
        if let Some(starts) = fields.get("starts").and_then(Value::as_str) {
            line += &format!(" starts {starts}");
        }
        if self.script.detail {
            line += &format!(" @{}", record.at);
            if let Some(lease) = record.lease {
                line += &format!(" lease {lease}");
            }
        }
        line += &format!(" → {answer}");
        self.log.borrow_mut().push((self.now(), line));
    }

    /// A write's end as its fate says: `write` applies it (a new version, or `None` refused).
    async fn writing(
        &self,
        method: &str,
        value: &str,
        write: impl FnOnce() -> Option<String>,
    ) -> Result<Option<String>, StoreError> {
        match self.fate() {
            Fate::Fail => {
                self.written(method, value, "fail");
                Err(injected())
            }
            Fate::Hang => {
                self.written(method, value, "hang");
                std::future::pending().await
            }
            Fate::Lose => {
                let applied = write();
                self.written(
                    method,
                    value,
                    if applied.is_some() {
                        "lost"
                    } else {
                        "none, lost"
                    },
                );
                Err(injected())
            }
            Fate::Answer => {
                let version = write();
                self.written(method, value, if version.is_some() { "ok" } else { "none" });
                Ok(version)
            }
        }
    }
}

impl LockStore for Scripted {
    type Version = String;
    async fn create(&self, key: &str, value: &str) -> Result<Option<String>, StoreError> {
        self.writing(&in_slot("create", key), value, || {
            let exists = self.records.borrow().contains_key(key);
            (!exists).then(|| self.put(key, value))
        })
        .await
    }
    async fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        let fate = self.fate();
        let found = self.records.borrow().get(key).cloned();
        let answer = match fate {
            Fate::Fail | Fate::Lose => "fail",
            Fate::Hang => "hang",
            Fate::Answer if found.is_some() => "ok",
            Fate::Answer => "none",
        };
        self.log
            .borrow_mut()
            .push((self.now(), format!("{} → {answer}", in_slot("read", key))));
        match fate {
            Fate::Answer => Ok(found),
            Fate::Hang => std::future::pending().await,
            _ => Err(injected()),
        }
    }
    async fn replace(
        &self,
        key: &str,
        version: &String,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        self.writing(&in_slot("replace", key), value, || {
            let current = self
                .records
                .borrow()
                .get(key)
                .map(|found| found.version.clone());
            (current.as_ref() == Some(version)).then(|| self.put(key, value))
        })
        .await
    }
    fn tells_changes(&self) -> bool {
        self.script.changed
    }
    async fn changed(
        &self,
        key: &str,
        version: Option<&String>,
        ms: f64,
    ) -> Result<bool, StoreError> {
        let fate = self.fate();
        let line = match fate {
            Fate::Answer => "changed",
            Fate::Hang => "changed → hang",
            _ => "changed → fail",
        };
        self.log.borrow_mut().push((self.now(), line.into()));
        match fate {
            Fate::Answer => {}
            Fate::Hang => return std::future::pending().await,
            _ => return Err(injected()),
        }
        let mut timeout = self.clock.sleep(ms).ok();
        std::future::poll_fn(|cx| {
            let current = self
                .records
                .borrow()
                .get(key)
                .map(|found| found.version.clone());
            if current.as_ref() != version {
                return Poll::Ready(Ok(true));
            }
            if timeout
                .as_mut()
                .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready())
            {
                return Poll::Ready(Ok(false));
            }
            self.watchers.borrow_mut().push(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// This isolate's clock as a case sets it: the wall clock `ahead` of the monotonic one (the
/// manual clock), or stopped at `ahead` (`frozen`).
#[derive(Clone)]
struct CaseClock {
    manual: ManualClock,
    ahead: f64,
    frozen: bool,
}

impl Clock for CaseClock {
    fn now_ms(&self) -> f64 {
        if self.frozen {
            self.ahead
        } else {
            self.manual.now_ms() + self.ahead
        }
    }
    fn monotonic_ms(&self) -> f64 {
        self.manual.now_ms()
    }
    fn sleep(&self, ms: f64) -> Result<Sleep, TimerError> {
        self.manual.sleep(ms)
    }
}

/// Lets whatever runs beside a work in its task (its renewals) take its turn in this
/// millisecond before the work looks: a JS work hears of a lost lease the moment it is lost.
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return std::task::Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        std::task::Poll::Pending
    })
    .await
}

fn number(value: &Value, name: &str, default: f64) -> f64 {
    value.get(name).and_then(Value::as_f64).unwrap_or(default)
}

/// A case's serializer `rate` (`limit`, `periodMs`), if it has one.
fn options_rate(options: &Value) -> Option<(f64, f64)> {
    let rate = options.get("rate")?;
    Some((rate["limit"].as_f64()?, rate["periodMs"].as_f64()?))
}

fn error_name(error: &SerializeError) -> &'static str {
    match error {
        SerializeError::TimedOut { .. } => "SerializedWorkTimeout",
        SerializeError::Lock(LockError::Store(_)) => "LockStoreError",
        SerializeError::Lock(LockError::ConcurrencyMismatch { .. }) => "ConcurrencyMismatch",
        SerializeError::Unavailable { .. } => "SerializedWorkUnavailable",
        other => panic!("unexpected {other:?}"),
    }
}

/// A store call's method as the log shows it: with `s<k>` for the record of slot k above 0.
fn in_slot(method: &str, key: &str) -> String {
    match key.strip_prefix(keyturn::SLOT_PREFIX) {
        Some(rest) => format!("{method} s{}", rest.split(':').next().unwrap()),
        None => method.to_owned(),
    }
}

fn lock_error_name(error: &LockError) -> &'static str {
    match error {
        LockError::Store(_) => "LockStoreError",
        LockError::Unavailable { .. } => "LockUnavailable",
        LockError::ConcurrencyMismatch { .. } => "ConcurrencyMismatch",
        // The package's JS refuses an option out of range with a RangeError.
        LockError::InvalidOption(_) => "RangeError",
        other => panic!("unexpected {other:?}"),
    }
}

/// Runs one case: its events, grouped by millisecond (each group sorted), and the counters at
/// the end: the serializer's (`stats`) and the lock manager's (`lockStats`).
fn run_case(case: &Value) -> (BTreeMap<u64, Vec<String>>, Value) {
    if let Ok(only) = std::env::var("KEYTURN_CASE") {
        if !case["name"].as_str().unwrap().contains(&only) {
            return (BTreeMap::new(), Value::Null);
        }
    }
    let options = case.get("options").cloned().unwrap_or(Value::Null);
    let options_json = options.clone();
    let stale_ms = number(&options, "staleMs", 2_000.0);
    let wait_ms = number(&options, "waitMs", 100.0);
    let timeout_ms = number(&options, "timeoutMs", 30_000.0);
    let store_script = case.get("store").cloned().unwrap_or(Value::Null);
    let calls = |name: &str| -> Vec<u64> {
        store_script
            .get(name)
            .and_then(Value::as_array)
            .map(|calls| calls.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    let clock = ManualClock::new();
    let log: Log = Rc::default();
    let store = Scripted {
        records: Rc::default(),
        clock: clock.clone(),
        log: log.clone(),
        faults: Rc::new(Faults::new().scripted(calls("fail"), calls("lose"), calls("hang"))),
        versions: Rc::default(),
        script: Rc::new(Script {
            versions_are_values: store_script["versions"] == "values",
            detail: case["detail"] == true,
            changed: store_script["changed"] == true,
        }),
        watchers: Rc::default(),
    };
    if let Some(records) = store_script.get("records").and_then(Value::as_object) {
        for (name, record) in records {
            let seeded = Record {
                held: record["state"] == "held",
                token: "someone".into(),
                fence: record["fence"].as_u64().unwrap(),
                at: record["at"].as_f64().unwrap(),
                lease: record["lease"].as_u64(),
            };
            let mut value: Value = serde_json::from_str(&seeded.encode()).unwrap();
            if let Some(asks) = record.get("asks") {
                value["asks"] = asks.clone();
            }
            if let Some(starts) = record.get("starts") {
                value["starts"] = starts.clone();
            }
            if let Some(n) = record.get("n") {
                value["n"] = n.clone();
            }
            store.put(name, &value.to_string());
        }
    }
    let case_clock = CaseClock {
        manual: clock.clone(),
        ahead: number(&case["clock"], "ahead", 0.0),
        frozen: case["clock"]["frozen"] == true,
    };
    let concurrency = number(&options, "concurrency", 1.0);
    let lock_options = LockOptions {
        wait_ms,
        stale_ms,
        max_clock_skew_ms: number(&options, "maxClockSkewMs", 0.0),
        store_timeout_ms: options.get("storeTimeoutMs").and_then(Value::as_f64),
        concurrency,
    };
    // A slot is logged only where a name has more than one.
    let slotted = move |slot: u16| {
        if concurrency > 1.0 {
            format!("s{slot} ")
        } else {
            String::new()
        }
    };
    let locks = LockManager::new(store.clone(), case_clock, SeededRandom::new(7));
    // (A case about a refused lock option has no serializer: it would be refused too.)
    let serializer = Rc::new(
        StoreSerializer::new(
            SerializerOptions::new(timeout_ms, f64::INFINITY)
                .and_then(|options| options.with_concurrency(concurrency))
                .and_then(|options| match options_rate(&options_json) {
                    Some((limit, period_ms)) => options.with_rate(limit, period_ms),
                    None => Ok(options),
                })
                .unwrap(),
            lock_options,
            locks.clone(),
        )
        .ok(),
    );
    let executor = Executor::new();
    // Guards on busy lines, as the package's JavaScript keeps them always.
    let guards = locks.clone();
    executor.spawn(async move { guards.watch_for_asks().await });
    let actions = case["actions"].as_array().unwrap().clone();
    let steals = store_script
        .get("steals")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let others = store_script
        .get("others")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let until = case["until"].as_u64().unwrap();
    for t in 0..=until {
        for steal in &steals {
            if steal["at"].as_u64() == Some(t) {
                let thief = Record::held("thief", 99, t as f64);
                store.put(steal["name"].as_str().unwrap(), &thief.encode());
            }
        }
        for other in &others {
            if other["at"].as_u64() == Some(t) {
                let (name, does) = (other["name"].as_str(), other["does"].as_str());
                store.other(name.unwrap(), does.unwrap(), t);
            }
        }
        for (i, action) in actions.iter().enumerate() {
            if action["at"].as_u64() != Some(t) {
                continue;
            }
            let (log, clock) = (log.clone(), clock.clone());
            let say = move |clock: &ManualClock, line: String| {
                log.borrow_mut()
                    .push((clock.now_ms() as u64, format!("{i} {line}")))
            };
            let ms = action.get("ms").and_then(Value::as_f64).unwrap_or(0.0);
            if let Some(name) = action.get("acquire").and_then(Value::as_str) {
                let (locks, name) = (locks.clone(), name.to_owned());
                executor.spawn(async move {
                    match locks.acquire(&name, lock_options).await {
                        Ok(Some(lock)) => {
                            say(
                                &clock,
                                format!("held {}f{}", slotted(lock.slot()), lock.fence()),
                            );
                            clock.after(ms).await;
                            let _ = lock.release().await;
                        }
                        Ok(None) => say(&clock, "→ undefined".into()),
                        Err(error) => say(&clock, format!("→ {}", lock_error_name(&error))),
                    }
                });
            } else if let Some(name) = action.get("withLock").and_then(Value::as_str) {
                let (locks, name) = (locks.clone(), name.to_owned());
                executor.spawn(async move {
                    let outcome = locks
                        .with_lock(&name, lock_options, async |lock| {
                            say(
                                &clock,
                                format!("held {}f{}", slotted(lock.slot()), lock.fence()),
                            );
                            let mut lost = false;
                            for _ in 0..ms as u64 {
                                clock.after(1.0).await;
                                yield_once().await;
                                if !lost && !lock.is_held() {
                                    lost = true;
                                    say(&clock, "lease lost".into());
                                }
                            }
                        })
                        .await;
                    match outcome {
                        Ok(()) => say(&clock, "→ ok".into()),
                        Err(error) => say(&clock, format!("→ {}", lock_error_name(&error))),
                    }
                });
            } else if let Some(key) = action.get("serialize").and_then(Value::as_str) {
                let hang = action.get("hang").and_then(Value::as_bool).unwrap_or(false);
                let if_available = action["ifAvailable"] == true;
                let (serializer, key) = (serializer.clone(), key.to_owned());
                executor.spawn(async move {
                    let serializer =
                        Option::as_ref(&serializer).expect("the case's options are a serializer's");
                    let work = |signal: keyturn::WorkSignal, fence| {
                        let (clock, say) = (clock.clone(), say.clone());
                        async move {
                            say(&clock, format!("runs {}f{fence}", slotted(signal.slot())));
                            let mut lost = false;
                            let mut elapsed = 0.0;
                            while hang || elapsed < ms {
                                clock.after(1.0).await;
                                yield_once().await;
                                elapsed += 1.0;
                                if !lost && signal.is_aborted() {
                                    lost = true;
                                    say(&clock, "lease lost".into());
                                }
                            }
                        }
                    };
                    let outcome = if if_available {
                        serializer.try_run(&key, work).await
                    } else {
                        serializer.run(&key, work).await
                    };
                    match outcome {
                        Ok(()) => say(&clock, "→ ok".into()),
                        Err(error) => say(&clock, format!("→ {}", error_name(&error))),
                    }
                });
            } else {
                panic!("unknown action {action}");
            }
        }
        executor.run_until_stalled();
        clock.advance(1.0);
    }
    executor.run_until_stalled();
    let ignore: Vec<String> = case
        .get("ignore")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let serializer_stats = Option::as_ref(&serializer)
        .map(|s| s.stats())
        .unwrap_or_default();
    let lock_stats = locks.stats();
    let stats = serde_json::json!({
        "stats": {
            "started": serializer_stats.started,
            "timedOut": serializer_stats.timed_out,
            "aborted": serializer_stats.aborted,
            "paced": serializer_stats.paced,
            "unavailable": serializer_stats.unavailable,
        },
        "lockStats": {
            "held": lock_stats.held,
            "waiting": lock_stats.waiting,
            "acquisitions": lock_stats.acquisitions,
            "handOffs": lock_stats.hand_offs,
            "takeovers": lock_stats.takeovers,
            "storeCalls": lock_stats.store_calls,
            "storeFailures": lock_stats.store_failures,
            "storeTimeouts": lock_stats.store_timeouts,
            "readBacksApplied": lock_stats.read_backs_applied,
            "watches": lock_stats.watches,
            "wakeUps": lock_stats.wake_ups,
            "pollsSaved": lock_stats.polls_saved,
        },
    });
    let events: Vec<String> = log
        .borrow()
        .iter()
        .filter(|(_, line)| !ignore.iter().any(|kind| line.starts_with(kind.as_str())))
        .map(|(t, line)| format!("{t} {line}"))
        .collect();
    (group(events), stats)
}

/// Events grouped by their millisecond, each group sorted: order within one millisecond is
/// each front end's own.
fn group(events: impl IntoIterator<Item = String>) -> BTreeMap<u64, Vec<String>> {
    let mut groups: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for event in events {
        let t = event.split(' ').next().unwrap().parse().unwrap();
        groups.entry(t).or_default().push(event);
    }
    groups.values_mut().for_each(|group| group.sort());
    groups
}

#[test]
fn the_rust_front_end_decides_every_case_of_the_shared_table() {
    let table: Value = serde_json::from_str(include_str!("decisions.json")).unwrap();
    let mut failures = Vec::new();
    for case in table["cases"].as_array().unwrap() {
        let expected = group(
            case["expect"]
                .as_array()
                .unwrap()
                .iter()
                .map(|event| event.as_str().unwrap().to_owned()),
        );
        let (got, stats) = run_case(case);
        if got != expected {
            failures.push(format!(
                "{}\n  expected {:?}\n  got      {:?}",
                case["name"], expected, got
            ));
        }
        for counters in ["stats", "lockStats"] {
            let Some(expected) = case.get(counters).and_then(Value::as_object) else {
                continue;
            };
            // The counters a case names, as the front end has them.
            let got: serde_json::Map<String, Value> = expected
                .keys()
                .map(|name| (name.clone(), stats[counters][name].clone()))
                .collect();
            if &got != expected {
                failures.push(format!(
                    "{}: {counters}\n  expected {expected:?}\n  got      {got:?}",
                    case["name"]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
