//! A deterministic single-threaded executor for native tests: futures are polled by hand, in
//! the order they were woken, until nothing can make progress. Time moves only through a
//! `ManualClock`, so a test says exactly when each deadline passes.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

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
