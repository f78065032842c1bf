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

use common::{Executor, Record};
use keyturn::{
    Clock, LockError, LockManager, LockOptions, LockStore, ManualClock, MemoryStore, SeededRandom,
    SerializeError, SerializerOptions, StoreError, StoreSerializer, Versioned,
};
use serde_json::Value;

type Log = Rc<RefCell<Vec<(u64, String)>>>;

/// A store whose answers a case scripts: a `MemoryStore` that fails the calls it names (by
/// number, from 1) and logs every call with the record it writes and its answer.
#[derive(Clone)]
struct Scripted {
    memory: Rc<MemoryStore>,
    clock: ManualClock,
    log: Log,
    calls: Rc<Cell<u64>>,
    fail: Rc<Vec<u64>>,
}

impl Scripted {
    fn now(&self) -> u64 {
        self.clock.now_ms() as u64
    }

    /// The next call: whether it fails.
    fn failing(&self) -> bool {
        self.calls.set(self.calls.get() + 1);
        self.fail.contains(&self.calls.get())
    }

    fn written(&self, method: &str, value: &str, answer: &str) {
        let record = Record::decode(value).expect("the lock writes its own records");
        let state = if record.held { "held" } else { "free" };
        let line = format!("{method} {state} f{} → {answer}", record.fence);
        self.log.borrow_mut().push((self.now(), line));
    }
}

fn injected() -> StoreError {
    StoreError::new("injected failure")
}

impl LockStore for Scripted {
    type Version = String;
    async fn create(&self, key: &str, value: &str) -> Result<Option<String>, StoreError> {
        if self.failing() {
            self.written("create", value, "fail");
            return Err(injected());
        }
        let version = self.memory.create_now(key, value);
        self.written(
            "create",
            value,
            if version.is_some() { "ok" } else { "none" },
        );
        Ok(version)
    }
    async fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        let failing = self.failing();
        let found = self.memory.get(key);
        let answer = if failing {
            "fail"
        } else if found.is_some() {
            "ok"
        } else {
            "none"
        };
        self.log
            .borrow_mut()
            .push((self.now(), format!("read → {answer}")));
        if failing {
            return Err(injected());
        }
        Ok(found)
    }
    async fn replace(
        &self,
        key: &str,
        version: &String,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        if self.failing() {
            self.written("replace", value, "fail");
            return Err(injected());
        }
        let version = self.memory.replace_now(key, version, value);
        self.written(
            "replace",
            value,
            if version.is_some() { "ok" } else { "none" },
        );
        Ok(version)
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

fn error_name(error: &SerializeError) -> &'static str {
    match error {
        SerializeError::TimedOut { .. } => "SerializedWorkTimeout",
        SerializeError::Lock(LockError::Store(_)) => "LockStoreError",
        other => panic!("unexpected {other:?}"),
    }
}

fn lock_error_name(error: &LockError) -> &'static str {
    match error {
        LockError::Store(_) => "LockStoreError",
        LockError::Unavailable { .. } => "LockUnavailable",
        other => panic!("unexpected {other:?}"),
    }
}

/// Runs one case: its events, grouped by millisecond (each group sorted), and the serializer's
/// counters at the end.
fn run_case(case: &Value) -> (BTreeMap<u64, Vec<String>>, Value) {
    let options = case.get("options").cloned().unwrap_or(Value::Null);
    let stale_ms = number(&options, "staleMs", 2_000.0);
    let wait_ms = number(&options, "waitMs", 100.0);
    let timeout_ms = number(&options, "timeoutMs", 30_000.0);
    let store_script = case.get("store").cloned().unwrap_or(Value::Null);
    let clock = ManualClock::new();
    let log: Log = Rc::default();
    let store = Scripted {
        memory: Rc::new(MemoryStore::new()),
        clock: clock.clone(),
        log: log.clone(),
        calls: Rc::default(),
        fail: Rc::new(
            store_script
                .get("fail")
                .and_then(Value::as_array)
                .map(|calls| calls.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default(),
        ),
    };
    if let Some(records) = store_script.get("records").and_then(Value::as_object) {
        for (name, record) in records {
            let seeded = Record {
                held: record["state"] == "held",
                token: "someone".into(),
                fence: record["fence"].as_u64().unwrap(),
                at: record["at"].as_f64().unwrap(),
            };
            store.memory.put(name, &seeded.encode());
        }
    }
    let locks = LockManager::new(store.clone(), clock.clone(), SeededRandom::new(7));
    let serializer = Rc::new(
        StoreSerializer::new(
            SerializerOptions::new(timeout_ms, f64::INFINITY).unwrap(),
            stale_ms,
            locks.clone(),
        )
        .unwrap(),
    );
    let lock_options = LockOptions { wait_ms, stale_ms };
    let executor = Executor::new();
    let actions = case["actions"].as_array().unwrap().clone();
    let steals = store_script
        .get("steals")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let until = case["until"].as_u64().unwrap();
    for t in 0..=until {
        for steal in &steals {
            if steal["at"].as_u64() == Some(t) {
                let thief = Record::held("thief", 99, t as f64);
                store
                    .memory
                    .put(steal["name"].as_str().unwrap(), &thief.encode());
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
                            say(&clock, format!("held f{}", lock.fence()));
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
                            say(&clock, format!("held f{}", lock.fence()));
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
                let (serializer, key) = (serializer.clone(), key.to_owned());
                executor.spawn(async move {
                    let outcome = serializer
                        .run(&key, |signal, fence| {
                            let (clock, say) = (clock.clone(), say.clone());
                            async move {
                                say(&clock, format!("runs f{fence}"));
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
                        })
                        .await;
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
    let stats = serializer.stats();
    let stats = serde_json::json!({
        "started": stats.started,
        "timedOut": stats.timed_out,
        "aborted": stats.aborted,
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
        if let Some(expected) = case.get("stats") {
            if &stats != expected {
                failures.push(format!(
                    "{}: stats\n  expected {expected}\n  got      {stats}",
                    case["name"]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
