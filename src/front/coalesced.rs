//! Coalescing calls for Rust callers ([`KeyedSerializer::run_coalesced`]): one run of a work,
//! shared by the call that queued it and every call that joined it while it waited.
//!
//! Whichever caller is polled drives the run: it starts the work when the key's turn comes,
//! polls it and its deadline, and settles every caller with a clone of the output. So a caller
//! that leaves (its future dropped) takes only itself out, as a joined caller's signal does in
//! JavaScript; the core says when it was the last, and the work is then cancelled or dropped.

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use super::serializer::{start, Abandon, KeyedSerializer, SerializeError, WorkSignal};
use crate::clock::{Clock, Sleep, WakeRoute};
use crate::engine::queue::Ticket;

/// A work, boxed so that any caller of the run can start it.
pub(super) type BoxedWork<T> = Box<dyn FnOnce(WorkSignal) -> Pin<Box<dyn Future<Output = T>>>>;

/// Where a shared run is.
enum RunState<T> {
    /// Queued: its turn has not come, or no caller was polled since.
    Waiting(BoxedWork<T>),
    /// Its work runs until it settles or its deadline passes.
    Running {
        work: Pin<Box<dyn Future<Output = T>>>,
        deadline: Sleep,
        signal: WorkSignal,
        timeout_ms: f64,
    },
    /// A caller is polling the work (taken out, so that a work dropping a caller of its own
    /// run finds the cell free).
    Polling,
    /// Settled: each caller gets a clone.
    Done(Result<T, SerializeError>),
    /// Its last caller left; nobody reads it.
    Gone,
}

/// One run shared by its callers, found by a joining call through the job's payload.
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

    /// The run behind a job's payload, if it is a run of this output type.
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
            let mut wakers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            wakers.iter_mut().filter_map(Option::take).collect()
        };
        // Woken outside the lock: a waker may poll at once.
        for waker in wakers {
            waker.wake();
        }
    }
}

/// One caller's future of a shared run.
pub(super) struct Coalesced<'a, C: Clock, T> {
    pub(super) serializer: &'a KeyedSerializer<C>,
    pub(super) key: &'a str,
    pub(super) ticket: Ticket,
    pub(super) run: Rc<SharedRun<T>>,
    slot: usize,
    route: WakeRoute,
    /// It returned the outcome: nothing left to leave.
    done: bool,
}

impl<'a, C: Clock, T> Coalesced<'a, C, T> {
    pub(super) fn new(
        serializer: &'a KeyedSerializer<C>,
        key: &'a str,
        ticket: Ticket,
        run: Rc<SharedRun<T>>,
    ) -> Self {
        let slot = run.notify.slot();
        Coalesced {
            serializer,
            key,
            ticket,
            run,
            slot,
            route: WakeRoute::default(),
            done: false,
        }
    }

    /// The run settled: its work is dropped (it was taken out of the state), the key moves on,
    /// and every other caller is woken to take its clone.
    fn settle(&self, outcome: Result<T, SerializeError>) -> Result<T, SerializeError>
    where
        T: Clone,
    {
        *self.run.state.borrow_mut() = RunState::Done(outcome.clone());
        self.serializer.leave_line(self.key, self.ticket);
        self.run.notify.wake_by_ref();
        outcome
    }

    /// Starts the run if its turn has come: `false` while it waits.
    fn start(&mut self, work: BoxedWork<T>) -> Result<bool, SerializeError>
    where
        T: Clone,
    {
        if !self.serializer.front.borrow().core.may_start(self.ticket) {
            *self.run.state.borrow_mut() = RunState::Waiting(work);
            return Ok(false);
        }
        let now = self.serializer.clock.now_ms();
        let (started, slot) = start(&self.serializer.front, self.ticket, now);
        let deadline = match self.serializer.clock.sleep(started) {
            Ok(deadline) => deadline,
            Err(error) => return Err(SerializeError::Timer(error)),
        };
        let signal = WorkSignal::in_slot(slot);
        let work = work(signal.clone());
        *self.run.state.borrow_mut() = RunState::Running {
            work,
            deadline,
            signal,
            timeout_ms: started,
        };
        Ok(true)
    }

    /// Polls the running work and its deadline, on a waker that wakes every caller.
    fn poll_running(
        &mut self,
        mut work: Pin<Box<dyn Future<Output = T>>>,
        mut deadline: Sleep,
        signal: WorkSignal,
        timeout_ms: f64,
    ) -> Poll<Result<T, SerializeError>>
    where
        T: Clone,
    {
        let shared = Waker::from(Arc::clone(&self.run.notify));
        let mut run_cx = Context::from_waker(&shared);
        if let Poll::Ready(output) = work.as_mut().poll(&mut run_cx) {
            drop(work);
            self.done = true;
            return Poll::Ready(self.settle(Ok(output)));
        }
        if deadline.as_mut().poll(&mut run_cx).is_ready() {
            signal.aborted.set(true);
            drop(work);
            self.serializer
                .front
                .borrow_mut()
                .core
                .abandon(self.ticket, Abandon::TimedOut);
            self.done = true;
            return Poll::Ready(self.settle(Err(SerializeError::TimedOut {
                key: self.key.to_owned(),
                timeout_ms,
            })));
        }
        let mut state = self.run.state.borrow_mut();
        // Its last caller left from inside the work's own poll: the work is dropped.
        if !matches!(*state, RunState::Gone) {
            *state = RunState::Running {
                work,
                deadline,
                signal,
                timeout_ms,
            };
        }
        Poll::Pending
    }
}

impl<C: Clock, T: Clone + 'static> Future for Coalesced<'_, C, T> {
    type Output = Result<T, SerializeError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let waker = this.route.waker(&this.serializer.clock, cx);
        this.run.notify.set(this.slot, Some(waker));
        loop {
            let state = std::mem::replace(&mut *this.run.state.borrow_mut(), RunState::Polling);
            match state {
                RunState::Done(outcome) => {
                    *this.run.state.borrow_mut() = RunState::Done(outcome.clone());
                    this.done = true;
                    return Poll::Ready(outcome);
                }
                RunState::Waiting(work) => match this.start(work) {
                    Ok(true) => continue,
                    Ok(false) => {
                        // Woken when the turn comes: every caller, through the run.
                        let turn_waker = Waker::from(Arc::clone(&this.run.notify));
                        let mut front = this.serializer.front.borrow_mut();
                        if let Some(turn) = front.core.payload_mut(this.ticket) {
                            turn.waker = Some(turn_waker);
                        }
                        return Poll::Pending;
                    }
                    Err(error) => {
                        this.done = true;
                        return Poll::Ready(this.settle(Err(error)));
                    }
                },
                RunState::Running {
                    work,
                    deadline,
                    signal,
                    timeout_ms,
                } => return this.poll_running(work, deadline, signal, timeout_ms),
                // Polled from inside its own work, or after its last caller left: nothing to do.
                RunState::Polling | RunState::Gone => {
                    *this.run.state.borrow_mut() = state;
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<C: Clock, T> Drop for Coalesced<'_, C, T> {
    fn drop(&mut self) {
        self.run.notify.set(self.slot, None);
        if self.done {
            return;
        }
        let waiting = match &*self.run.state.borrow() {
            RunState::Done(_) | RunState::Gone => return,
            RunState::Waiting(_) => true,
            RunState::Running { .. } | RunState::Polling => false,
        };
        let mut front = self.serializer.front.borrow_mut();
        if front.core.leave(self.ticket) {
            return;
        }
        // Its last caller: a waiting run leaves the line, a running one is dropped.
        if !waiting {
            front.core.abandon(self.ticket, Abandon::Aborted);
        }
        drop(front);
        let state = std::mem::replace(&mut *self.run.state.borrow_mut(), RunState::Gone);
        if let RunState::Running { signal, .. } = &state {
            signal.aborted.set(true);
        }
        drop(state);
        self.serializer.leave_line(self.key, self.ticket);
    }
}
