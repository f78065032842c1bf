//! Coalescing calls for Rust callers ([`KeyedSerializer::run_coalesced`]): one run of a work,
//! shared by the call that queued it and every call that joined it while it waited.
//!
//! Whichever caller is polled drives the run: it starts the work when the engine says its turn
//! came, polls it, and settles every caller with a clone of the output. So a caller that leaves
//! (its future dropped) takes only itself out, as a joined caller's signal does in JavaScript;
//! the engine says when it was the last, and the work is then cancelled or dropped.
//!
//! [`KeyedSerializer::run_coalesced`]: crate::KeyedSerializer::run_coalesced

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use super::executor::Started;
use super::serializer::{ended, Serial, SerializeError, Turn, WorkSignal};
use crate::clock::Clock;
use crate::engine::random::Random;
use crate::engine::{Outcome, Ticket, Why};
use crate::store::LockStore;

/// A work, boxed so that any caller of the run can start it.
pub(super) type BoxedWork<T> = Box<dyn FnOnce(WorkSignal, u64) -> Pin<Box<dyn Future<Output = T>>>>;

/// Where a shared run is.
enum RunState<T> {
    /// Queued: its turn has not come, or no caller was polled since.
    Waiting(BoxedWork<T>),
    /// Its work runs until it settles or its deadline passes.
    Running {
        work: Pin<Box<dyn Future<Output = T>>>,
        signal: WorkSignal,
        started: Started,
    },
    /// Its work settled and its outcome waits for the engine (its lease let go first).
    Settling(T),
    /// A caller is polling the work (taken out, so that a work dropping a caller of its own
    /// run finds the cell free).
    Polling,
    /// Settled: each caller gets a clone.
    Done(Result<T, SerializeError>),
    /// Its last caller left; nobody reads it.
    Gone,
}

/// One run shared by its callers, found by a joining call through its job's mailbox.
pub(super) struct SharedRun<T> {
    state: RefCell<RunState<T>>,
    notify: Arc<Notify>,
}

impl<T: 'static> SharedRun<T> {
    pub(super) fn new(work: BoxedWork<T>) -> Rc<Self> {
        Rc::new(SharedRun {
            state: RefCell::new(RunState::Waiting(work)),
            notify: Arc::new(Notify::default()),
        })
    }

    /// The run behind a job's mailbox, if it is a run of this output type.
    pub(super) fn of(shared: &Rc<dyn Any>) -> Option<Rc<Self>> {
        Rc::clone(shared).downcast::<Self>().ok()
    }
}

/// Wakes every caller of a run: whoever drives the run, the others learn it settled. Each
/// caller has a slot, so a poll replaces its own waker instead of searching the list.
#[derive(Default)]
struct Notify(Mutex<Vec<Option<Waker>>>);

impl Notify {
    fn slot(&self) -> usize {
        let mut wakers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        wakers.push(None);
        wakers.len() - 1
    }

    /// The waker of a caller's slot: its latest, or none once it left.
    fn set(&self, slot: usize, waker: Option<Waker>) {
        let mut wakers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = wakers.get_mut(slot) {
            *entry = waker;
        }
    }
}

impl Wake for Notify {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let wakers: Vec<Waker> = {
            let wakers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            wakers.iter().flatten().cloned().collect()
        };
        // Woken outside the lock: a waker may poll at once.
        for waker in wakers {
            waker.wake();
        }
    }
}

/// One caller's future of a shared run.
pub(super) struct Coalesced<'a, S: LockStore + 'static, C: Clock, R: Random, T> {
    serial: &'a Serial<S, C, R>,
    key: &'a str,
    ticket: Ticket,
    /// The run's handle (its job's mailbox).
    handle: u32,
    run: Rc<SharedRun<T>>,
    slot: usize,
    /// It returned the outcome: nothing left to leave.
    done: bool,
}

impl<'a, S: LockStore + 'static, C: Clock, R: Random, T: Clone> Coalesced<'a, S, C, R, T> {
    pub(super) fn new(
        serial: &'a Serial<S, C, R>,
        key: &'a str,
        ticket: Ticket,
        handle: u32,
        run: Rc<SharedRun<T>>,
    ) -> Self {
        let slot = run.notify.slot();
        Coalesced {
            serial,
            key,
            ticket,
            handle,
            run,
            slot,
            done: false,
        }
    }

    /// The run settled: its work is dropped (it was taken out of the state), its job leaves
    /// its line, and every other caller is woken to take its clone.
    fn settle(&mut self, outcome: Result<T, SerializeError>) -> Result<T, SerializeError> {
        *self.run.state.borrow_mut() = RunState::Done(outcome.clone());
        self.done = true;
        let (exec, serializer, ticket) = (&self.serial.exec, self.serial.serializer, self.ticket);
        exec.event(|engine, now, random| {
            engine.done(serializer, ticket, now, random);
        });
        exec.close(self.handle);
        self.run.notify.wake_by_ref();
        outcome
    }

    /// One step of the run, on a waker that wakes every caller: `None` while it goes on.
    fn step(
        &mut self,
        cx: &mut Context<'_>,
        state: RunState<T>,
    ) -> Option<Result<T, SerializeError>> {
        let exec = &self.serial.exec;
        match state {
            RunState::Waiting(work) => {
                match self.serial.poll_turn(cx, self.key, self.handle) {
                    Poll::Pending => {
                        *self.run.state.borrow_mut() = RunState::Waiting(work);
                        None
                    }
                    Poll::Ready(Turn::Ended(outcome)) => Some(outcome.map(|()| {
                        unreachable!("a run's call ends with its work, or fails before it")
                    })),
                    Poll::Ready(Turn::Started(started)) => {
                        let signal = WorkSignal::in_slot(started.slot);
                        let work = work(signal.clone(), started.fence);
                        *self.run.state.borrow_mut() = RunState::Running {
                            work,
                            signal,
                            started,
                        };
                        self.step(cx, RunState::Polling)
                    }
                }
            }
            RunState::Polling => {
                let state = std::mem::replace(&mut *self.run.state.borrow_mut(), RunState::Polling);
                match state {
                    RunState::Running { .. } | RunState::Settling(_) => self.step(cx, state),
                    other => {
                        *self.run.state.borrow_mut() = other;
                        None
                    }
                }
            }
            RunState::Running {
                mut work,
                signal,
                started,
            } => {
                if let Poll::Ready(output) = work.as_mut().poll(cx) {
                    drop(work);
                    if !started.report {
                        return Some(Ok(output));
                    }
                    let (serializer, ticket) = (self.serial.serializer, self.ticket);
                    exec.event(|engine, now, random| {
                        engine.settled(serializer, ticket, now, random)
                    });
                    return self.step(cx, RunState::Settling(output));
                }
                exec.drive(cx, self.handle);
                let aborted = exec
                    .mailbox(self.handle, |mailbox| match mailbox.aborted.take() {
                        Some(Why::LeaseLost) => {
                            signal.aborted.set(true);
                            None
                        }
                        Some(_) => {
                            let outcome = mailbox.outcome.take().unwrap_or(Outcome::Aborted);
                            Some(ended(self.key, outcome, mailbox))
                        }
                        None => None,
                    })
                    .flatten();
                if let Some(outcome) = aborted {
                    signal.aborted.set(true);
                    drop(work);
                    return Some(
                        outcome.map(|()| unreachable!("an abandoned run ends with an error")),
                    );
                }
                let mut state = self.run.state.borrow_mut();
                // Its last caller left from inside the work's own poll: the work is dropped.
                if !matches!(*state, RunState::Gone) {
                    *state = RunState::Running {
                        work,
                        signal,
                        started,
                    };
                }
                None
            }
            RunState::Settling(output) => {
                exec.drive(cx, self.handle);
                let outcome = exec
                    .mailbox(self.handle, |mailbox| {
                        let outcome = mailbox.outcome.take()?;
                        Some(ended(self.key, outcome, mailbox))
                    })
                    .flatten();
                match outcome {
                    Some(outcome) => Some(outcome.map(|()| output)),
                    None => {
                        *self.run.state.borrow_mut() = RunState::Settling(output);
                        None
                    }
                }
            }
            RunState::Done(outcome) => {
                *self.run.state.borrow_mut() = RunState::Done(outcome.clone());
                self.done = true;
                Some(outcome)
            }
            RunState::Gone => {
                *self.run.state.borrow_mut() = RunState::Gone;
                None
            }
        }
    }
}

impl<S: LockStore + 'static, C: Clock, R: Random, T: Clone + 'static> Future
    for Coalesced<'_, S, C, R, T>
{
    type Output = Result<T, SerializeError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.run.notify.set(this.slot, Some(cx.waker().clone()));
        let shared = Waker::from(Arc::clone(&this.run.notify));
        let mut run_cx = Context::from_waker(&shared);
        let state = std::mem::replace(&mut *this.run.state.borrow_mut(), RunState::Polling);
        if let RunState::Done(outcome) = state {
            *this.run.state.borrow_mut() = RunState::Done(outcome.clone());
            this.done = true;
            return Poll::Ready(outcome);
        }
        match this.step(&mut run_cx, state) {
            Some(outcome) if this.done => Poll::Ready(outcome),
            Some(outcome) => Poll::Ready(this.settle(outcome)),
            None => Poll::Pending,
        }
    }
}

impl<S: LockStore + 'static, C: Clock, R: Random, T> Drop for Coalesced<'_, S, C, R, T> {
    fn drop(&mut self) {
        self.run.notify.set(self.slot, None);
        if self.done {
            return;
        }
        if matches!(
            &*self.run.state.borrow(),
            RunState::Done(_) | RunState::Gone
        ) {
            return;
        }
        let (exec, serializer, ticket) = (&self.serial.exec, self.serial.serializer, self.ticket);
        // Its last caller: a waiting run leaves the line, a running one is dropped.
        let others =
            exec.event(|engine, now, random| engine.leave(serializer, ticket, now, random));
        if others {
            return;
        }
        let state = std::mem::replace(&mut *self.run.state.borrow_mut(), RunState::Gone);
        if let RunState::Running { signal, .. } = &state {
            signal.aborted.set(true);
        }
        drop(state);
        exec.event(|engine, now, random| {
            engine.done(serializer, ticket, now, random);
        });
        exec.close(self.handle);
    }
}
