//! A deterministic single-threaded executor for native tests: futures are polled by hand, in
//! the order they were woken, until nothing can make progress. Time moves only through a
//! `ManualClock`, so a test says exactly when each deadline passes. And the fault-injecting
//! test store (`FaultyStore`, its faults in `Faults`), and a lock record as a test reads it.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use keyturn::{LockStore, ManualClock, MemoryStore, Random, SeededRandom, StoreError, Versioned};

type Task = Pin<Box<dyn Future<Output = ()>>>;

struct TaskWaker {
    id: usize,
    woken: Arc<Mutex<VecDeque<usize>>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.woken.lock().unwrap().push_back(self.id);
    }
}

#[derive(Default)]
pub struct Executor {
    tasks: RefCell<Vec<Option<Task>>>,
    woken: Arc<Mutex<VecDeque<usize>>>,
}

impl Executor {
    pub fn new() -> Rc<Self> {
        Rc::new(Self::default())
    }

    /// Queues `future`; it is first polled by the next `run_until_stalled`.
    pub fn spawn(&self, future: impl Future<Output = ()> + 'static) {
        let mut tasks = self.tasks.borrow_mut();
        tasks.push(Some(Box::pin(future)));
        self.woken.lock().unwrap().push_back(tasks.len() - 1);
    }

    /// Spawns `future` and returns a cell that holds its output once it has finished.
    pub fn spawn_with_output<T: 'static>(
        &self,
        future: impl Future<Output = T> + 'static,
    ) -> Rc<RefCell<Option<T>>> {
        let output = Rc::new(RefCell::new(None));
        let slot = output.clone();
        self.spawn(async move {
            let value = future.await;
            *slot.borrow_mut() = Some(value);
        });
        output
    }

    /// Polls woken tasks until none is woken; returns how many polls it made.
    pub fn run_until_stalled(&self) -> usize {
        let mut polls = 0;
        loop {
            let next = self.woken.lock().unwrap().pop_front();
            let Some(id) = next else { return polls };
            let task = self.tasks.borrow_mut()[id].take();
            let Some(mut task) = task else { continue };
            let waker = Waker::from(Arc::new(TaskWaker {
                id,
                woken: self.woken.clone(),
            }));
            polls += 1;
            if task
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending()
            {
                self.tasks.borrow_mut()[id] = Some(task);
            }
        }
    }

    /// Tasks not finished yet.
    pub fn unfinished(&self) -> usize {
        self.tasks
            .borrow()
            .iter()
            .filter(|task| task.is_some())
            .count()
    }
}

/// Polls `future` once with a waker that does nothing.
pub fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    let waker = Waker::noop();
    Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// Runs `executor`, moving `clock` 1 ms at a time, until every task finished.
pub fn run(executor: &Executor, clock: &keyturn::ManualClock) {
    for _ in 0..1_000_000 {
        executor.run_until_stalled();
        if executor.unfinished() == 0 {
            return;
        }
        clock.advance(1.0);
    }
    panic!("tasks did not finish");
}

/// A lock record as a test reads it back from a store (the crate keeps its own type private).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub held: bool,
    pub token: String,
    pub fence: u64,
    pub at: f64,
    /// The lease its holder promised itself (held records; free ones have none).
    pub lease: Option<u64>,
}

impl Record {
    /// A held record, as another holder would leave it: promising the default lease.
    pub fn held(token: &str, fence: u64, at: f64) -> Record {
        Record {
            held: true,
            token: token.to_owned(),
            fence,
            at,
            lease: Some(u64::from(keyturn::LOCK_STALE_MS)),
        }
    }

    /// The record as stored (`{"keyturn":1,"state":…,"token":…,"fence":…,"at":…,"lease":…}`).
    pub fn encode(&self) -> String {
        let mut record = serde_json::json!({
            "keyturn": 1,
            "state": if self.held { "held" } else { "free" },
            "token": self.token,
            "fence": self.fence,
            "at": self.at.floor() as u64,
        });
        if let Some(lease) = self.lease {
            record["lease"] = lease.into();
        }
        record.to_string()
    }

    /// A stored text read as a record of ours; `None` for anything else.
    pub fn decode(text: &str) -> Option<Record> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        if value.get("keyturn")?.as_u64()? != 1 {
            return None;
        }
        Some(Record {
            held: match value.get("state")?.as_str()? {
                "held" => true,
                "free" => false,
                _ => return None,
            },
            token: value.get("token")?.as_str()?.to_owned(),
            fence: value.get("fence")?.as_u64()?,
            at: value.get("at")?.as_f64()?,
            lease: match value.get("lease") {
                None => None,
                Some(lease) => Some(lease.as_u64()?),
            },
        })
    }
}

/// What a fault-injecting store does with one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// Answers as the store would.
    Answer,
    /// Fails without reaching the store.
    Fail,
    /// Applies, then fails: its answer was lost.
    Lose,
    /// Never answers.
    Hang,
}

/// The error of every injected failure.
pub fn injected() -> StoreError {
    StoreError::new("injected failure")
}

/// How long each call of a [`FaultyStore`] waits on its manual clock before it reaches the store.
#[derive(Debug, Clone, Copy)]
pub enum Lag {
    /// Not at all.
    None,
    /// A whole number of milliseconds below this, drawn from the faults' random.
    UpTo(f64),
    /// 1, 2, 0, 1, 2, 0, … ms, call after call: calls made at once are all queued before the
    /// first answers.
    Cycle,
}

/// Which calls of a test store lag, fail, lose their answer or never answer, shared by every
/// clone of the store: its calls counted from 1, each failing when its number is scripted to,
/// with the faults' fraction (drawn from their seeded random, so the same seed fails the same
/// calls) or while failures are owed (`fail_next`).
pub struct Faults {
    random: SeededRandom,
    lag: Lag,
    fail_rate: f64,
    fail: Vec<u64>,
    lose: Vec<u64>,
    hang: Vec<u64>,
    calls: Cell<u64>,
    lagged: Cell<u64>,
    fail_next: Cell<u32>,
    failures: Rc<Cell<u64>>,
}

impl Default for Faults {
    fn default() -> Self {
        Self::new()
    }
}

impl Faults {
    /// No fault: every call answers at once (its random seeded with 1).
    pub fn new() -> Self {
        Faults {
            random: SeededRandom::new(1),
            lag: Lag::None,
            fail_rate: 0.0,
            fail: Vec::new(),
            lose: Vec::new(),
            hang: Vec::new(),
            calls: Cell::new(0),
            lagged: Cell::new(0),
            fail_next: Cell::new(0),
            failures: Rc::default(),
        }
    }

    /// Draws its lags and failures from `SeededRandom::new(seed)`.
    pub fn seeded(mut self, seed: u64) -> Self {
        self.random = SeededRandom::new(seed);
        self
    }

    pub fn lagging(mut self, lag: Lag) -> Self {
        self.lag = lag;
        self
    }

    /// Fails this fraction of the calls.
    pub fn failing(mut self, rate: f64) -> Self {
        self.fail_rate = rate;
        self
    }

    /// The calls (numbered from 1) that fail, that apply and then fail, and that never answer.
    pub fn scripted(mut self, fail: Vec<u64>, lose: Vec<u64>, hang: Vec<u64>) -> Self {
        (self.fail, self.lose, self.hang) = (fail, lose, hang);
        self
    }

    /// Counts the calls it failed in `failures` (which other stores' faults may count in too).
    pub fn counting_failures_in(mut self, failures: Rc<Cell<u64>>) -> Self {
        self.failures = failures;
        self
    }

    /// The next `n` calls fail (after any a script or the fraction fails).
    pub fn fail_next(&self, n: u32) {
        self.fail_next.set(n);
    }

    /// The calls so far.
    pub fn calls(&self) -> u64 {
        self.calls.get()
    }

    /// The calls failed so far (`Fate::Fail`).
    pub fn failures(&self) -> u64 {
        self.failures.get()
    }

    /// Counts a call: its number.
    pub fn count(&self) -> u64 {
        self.calls.set(self.calls.get() + 1);
        self.calls.get()
    }

    /// The lag of the call just counted, if it waits at all.
    pub fn lag_ms(&self) -> Option<f64> {
        match self.lag {
            Lag::None => None,
            Lag::UpTo(max) if max > 0.0 => Some((self.random.unit() * max).floor()),
            Lag::UpTo(_) => None,
            Lag::Cycle => {
                let n = self.lagged.get();
                self.lagged.set(n + 1);
                Some(((n + 1) % 3) as f64)
            }
        }
    }

    /// What becomes of call `call`: its script's fate, or else a failure by the fraction or one
    /// owed, or else an answer.
    pub fn fate(&self, call: u64) -> Fate {
        let fate = if self.fail.contains(&call) {
            Fate::Fail
        } else if self.lose.contains(&call) {
            Fate::Lose
        } else if self.hang.contains(&call) {
            Fate::Hang
        } else if self.random.unit() < self.fail_rate {
            Fate::Fail
        } else if self.fail_next.get() > 0 {
            self.fail_next.set(self.fail_next.get() - 1);
            Fate::Fail
        } else {
            Fate::Answer
        };
        if fate == Fate::Fail {
            self.failures.set(self.failures.get() + 1);
        }
        fate
    }

    /// Counts a call and answers its fate, with no lag.
    pub fn next(&self) -> Fate {
        let call = self.count();
        self.fate(call)
    }
}

/// A store over a `MemoryStore` (shared by several of these, as isolates share a store) that
/// injects its [`Faults`] on the manual clock: each call counted, lagged, then failed, answered,
/// applied with its answer lost, or left unanswered. It can refuse every CAS (as if rivals
/// always wrote first), and keeps every value it wrote. Its clones share its faults and counts.
#[derive(Clone)]
pub struct FaultyStore {
    pub memory: Rc<MemoryStore>,
    pub clock: ManualClock,
    pub faults: Rc<Faults>,
    refuse_replace: bool,
    /// Every value a create or CAS wrote.
    pub writes: Rc<RefCell<Vec<String>>>,
}

impl FaultyStore {
    pub fn new(memory: &Rc<MemoryStore>, clock: &ManualClock, faults: Faults) -> Self {
        FaultyStore {
            memory: memory.clone(),
            clock: clock.clone(),
            faults: Rc::new(faults),
            refuse_replace: false,
            writes: Rc::default(),
        }
    }

    /// A store with no fault.
    pub fn plain(memory: &Rc<MemoryStore>, clock: &ManualClock) -> Self {
        Self::new(memory, clock, Faults::new())
    }

    /// Every CAS answers that the record changed, applying nothing.
    pub fn refusing_replaces(mut self) -> Self {
        self.refuse_replace = true;
        self
    }

    /// A call's weather: counted, lagged, then its fate.
    async fn weather(&self) -> Fate {
        let call = self.faults.count();
        if let Some(lag) = self.faults.lag_ms() {
            self.clock.after(lag).await;
        }
        self.faults.fate(call)
    }

    /// A write as its fate says (`write` applies it), kept when it applied.
    async fn writing(
        &self,
        value: &str,
        write: impl AsyncFnOnce() -> Result<Option<String>, StoreError>,
    ) -> Result<Option<String>, StoreError> {
        let fate = self.weather().await;
        match fate {
            Fate::Fail => return Err(injected()),
            Fate::Hang => return std::future::pending().await,
            Fate::Answer | Fate::Lose => {}
        }
        let written = write().await?;
        if written.is_some() {
            self.writes.borrow_mut().push(value.to_owned());
        }
        if fate == Fate::Lose {
            return Err(injected());
        }
        Ok(written)
    }
}

impl LockStore for FaultyStore {
    type Version = String;

    async fn create(&self, key: &str, value: &str) -> Result<Option<String>, StoreError> {
        self.writing(value, async || self.memory.create(key, value).await)
            .await
    }
    async fn read(&self, key: &str) -> Result<Option<Versioned>, StoreError> {
        match self.weather().await {
            Fate::Answer => self.memory.read(key).await,
            Fate::Hang => std::future::pending().await,
            Fate::Fail | Fate::Lose => Err(injected()),
        }
    }
    async fn replace(
        &self,
        key: &str,
        version: &String,
        value: &str,
    ) -> Result<Option<String>, StoreError> {
        self.writing(value, async || {
            if self.refuse_replace {
                return Ok(None);
            }
            self.memory.replace(key, version, value).await
        })
        .await
    }
}

/// A manual clock whose next `refuse` sleeps the platform refuses, as workerd does past 10 000
/// timers in one request.
#[derive(Clone)]
pub struct Refusing {
    pub clock: keyturn::ManualClock,
    pub refuse: std::rc::Rc<std::cell::Cell<u32>>,
}

impl Refusing {
    pub fn new(clock: &keyturn::ManualClock) -> Self {
        Refusing {
            clock: clock.clone(),
            refuse: std::rc::Rc::new(std::cell::Cell::new(0)),
        }
    }
}

impl keyturn::Clock for Refusing {
    fn now_ms(&self) -> f64 {
        self.clock.now_ms()
    }
    fn sleep(&self, ms: f64) -> Result<keyturn::Sleep, keyturn::TimerError> {
        if self.refuse.get() > 0 {
            self.refuse.set(self.refuse.get() - 1);
            return Err(keyturn::TimerError {
                message: "QuotaExceededError".into(),
            });
        }
        keyturn::Clock::sleep(&self.clock, ms)
    }
}
