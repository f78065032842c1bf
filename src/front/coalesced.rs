//! Coalescing calls for Rust callers ([`KeyedSerializer::run_coalesced`]): one run of a work,
//! shared by the call that queued it and every call that joined it while it waited. Whichever
//! caller is polled drives it, so a caller that leaves (its future dropped) takes out only
//! itself; the engine says when it was the last, and the work is then cancelled or dropped.
//!
//! [`KeyedSerializer::run_coalesced`]: crate::KeyedSerializer::run_coalesced

use std::any::Any;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::executor::Wakers;
use super::serializer::{Serial, SerializeError, Turn, WorkSignal};
use crate::clock::Clock;
use crate::engine::options::Coalesce;
use crate::engine::random::Random;
use crate::engine::{Entered, Ticket};
use crate::store::LockStore;

/// A work, boxed so that any caller of the run can start it.
type BoxedWork<T> = Box<dyn FnOnce(WorkSignal, u64) -> Pin<Box<dyn Future<Output = T>>>>;

/// Where a shared run is.
enum RunState<T> {
    /// Its turn: waiting, running, or settling.
    Turn(Turn<BoxedWork<T>, Box<dyn Future<Output = T>>, T>),
    /// A caller is stepping its turn (taken out, so that a work dropping a caller of its own
    /// run finds the cell free).
    Polling,
    /// Settled: each caller gets a clone.
    Done(Result<T, SerializeError>),
    /// Its last caller left; nobody reads it.
    Gone,
}

/// One run shared by its callers, found by a joining call through its job's mailbox.
struct SharedRun<T> {
    state: RefCell<RunState<T>>,
    /// Every caller: whoever drives the run, the others learn it settled.
    callers: Arc<Wakers>,
}

impl<S: LockStore + 'static, C: Clock, R: Random> Serial<S, C, R> {
    /// Joins the key's last waiting run of this output type and group, or queues `work` as one
    /// for later calls to join, as [`KeyedSerializer::run_coalesced`] says.
    ///
    /// [`KeyedSerializer::run_coalesced`]: crate::KeyedSerializer::run_coalesced
    pub(crate) async fn run_coalesced<F, Fut>(
        &self,
        key: &str,
        coalesce: Coalesce,
        work: F,
    ) -> Result<Fut::Output, SerializeError>
    where
        F: FnOnce(WorkSignal, u64) -> Fut + 'static,
        Fut: Future + 'static,
        Fut::Output: Clone + 'static,
    {
        let call = self.exec.call::<fn()>();
        let handle = call.handle;
        let entered = self.enter(key, handle, None, typed::<Fut::Output>(coalesce), false)?;
        let (ticket, job, run) = match entered {
            Entered::Queued(ticket) => {
                let work: BoxedWork<Fut::Output> =
                    Box::new(move |signal, fence| Box::pin(work(signal, fence)));
                let run = Rc::new(SharedRun {
                    state: RefCell::new(RunState::Turn(Turn::Waiting(work))),
                    callers: Arc::default(),
                });
                self.exec.mailbox(handle, |mailbox| {
                    mailbox.shared = Some(Rc::clone(&run) as Rc<dyn Any>);
                });
                // The mailbox is the run's now, closed by whichever caller ends it.
                std::mem::forget(call);
                (ticket, handle, run)
            }
            Entered::Joined(ticket, job) => {
                drop(call);
                let shared = self.exec.mailbox(job, |mailbox| mailbox.shared.clone());
                let run = shared.flatten().and_then(|shared| shared.downcast().ok());
                let Some(run) = run else {
                    unreachable!("a run of this group has this output type")
                };
                (ticket, job, run)
            }
        };
        Coalesced {
            serial: self,
            key,
            ticket,
            handle: job,
            run,
        }
        .await
    }
}

/// A call's coalescing group, by output type: a run answers only calls of its own type.
fn typed<T: 'static>(coalesce: Coalesce) -> Coalesce {
    let kind = std::any::type_name::<T>();
    match coalesce {
        Coalesce::Never => Coalesce::Never,
        Coalesce::Yes => Coalesce::Group(format!("\u{0}{kind}").into()),
        Coalesce::Group(name) => Coalesce::Group(format!("{name}\u{0}{kind}").into()),
    }
}

/// One caller's future of a shared run.
struct Coalesced<'a, S: LockStore + 'static, C: Clock, R: Random, T> {
    serial: &'a Serial<S, C, R>,
    key: &'a str,
    ticket: Ticket,
    /// The run's handle (its job's mailbox).
    handle: Ticket,
    run: Rc<SharedRun<T>>,
}

impl<S: LockStore + 'static, C: Clock, R: Random, T: Clone + 'static> Future
    for Coalesced<'_, S, C, R, T>
{
    type Output = Result<T, SerializeError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        this.run.callers.add(cx.waker());
        if let RunState::Done(outcome) = &*this.run.state.borrow() {
            return Poll::Ready(outcome.clone());
        }
        let state = std::mem::replace(&mut *this.run.state.borrow_mut(), RunState::Polling);
        let RunState::Turn(turn) = state else {
            // Polled from inside its own work's poll, or gone: nothing to do.
            *this.run.state.borrow_mut() = state;
            return Poll::Pending;
        };
        let shared = Waker::from(Arc::clone(&this.run.callers));
        let mut cx = Context::from_waker(&shared);
        let (key, handle, ticket) = (this.key, this.handle, this.ticket);
        let mut turn = Some(turn);
        let Poll::Ready(outcome) = Turn::step(&mut turn, this.serial, &mut cx, key, handle, ticket)
        else {
            let mut current = this.run.state.borrow_mut();
            // Its last caller left from inside the work's own poll: the work is dropped.
            if let (Some(turn), false) = (turn, matches!(*current, RunState::Gone)) {
                *current = RunState::Turn(turn);
            }
            return Poll::Pending;
        };
        // Settled: its work is dropped (it was taken out of the state), its job leaves its
        // line, and every other caller is woken to take its clone.
        *this.run.state.borrow_mut() = RunState::Done(outcome.clone());
        this.serial.done(this.ticket);
        this.serial.exec.close(this.handle);
        this.run.callers.wake_by_ref();
        Poll::Ready(outcome)
    }
}

impl<S: LockStore + 'static, C: Clock, R: Random, T> Drop for Coalesced<'_, S, C, R, T> {
    fn drop(&mut self) {
        if matches!(*self.run.state.borrow(), RunState::Done(_) | RunState::Gone) {
            return;
        }
        let (serial, ticket) = (self.serial, self.ticket);
        // Its last caller: a waiting run leaves the line, a running one is dropped.
        let others = serial
            .exec
            .event(|engine, now, random| engine.leave(serial.serializer, ticket, now, random));
        if others {
            return;
        }
        let state = std::mem::replace(&mut *self.run.state.borrow_mut(), RunState::Gone);
        if let RunState::Turn(Turn::Running { signal, .. }) = &state {
            signal.aborted.set(true);
        }
        drop(state);
        serial.done(ticket);
        serial.exec.close(self.handle);
    }
}
