//! The Rust front end's one executor: it makes the store calls the engine asks for, keeps each
//! call's timer, and tells each call's future what the engine said of it. It decides nothing.
//!
//! Every future of the Rust API — a work's turn, an acquisition, a renewal, a release — polls
//! [`Executor::drive`] with its own handle: the store calls made for it and its timer are polled
//! in its own task (on Cloudflare Workers, in its own request's context: a timer or I/O started
//! by another request ends with that request), the engine's effects are applied, and whoever an
//! effect is for is woken. Store calls made for no call (a guard, a lease given back) are polled
//! by whichever future drives next.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use crate::clock::{Clock, Sleep, TimerError, WakeRoute};
use crate::engine::messages;
use crate::engine::random::Random;
use crate::engine::record::Record;
use crate::engine::{Answer, Config, Effect, Engine, Lost, Now, Outcome, StoreCall, Ticket, Why};
use crate::store::{LockStore, StoreError};

/// What a work's turn is, once it starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Started {
    pub(crate) slot: u16,
    pub(crate) fence: u64,
    pub(crate) report: bool,
}

/// What the engine told one call, kept until its future reads it.
#[derive(Default)]
pub(crate) struct Mailbox {
    /// The engine's name for the call, for [`Engine::fired`]: a work (its serializer and
    /// ticket), or a lock call.
    pub(crate) owner: Option<(Option<u32>, Ticket)>,
    pub(crate) started: Option<Started>,
    pub(crate) outcome: Option<Outcome>,
    pub(crate) aborted: Option<Why>,
    pub(crate) lost: Option<Lost>,
    /// The call's first store failure, reported when the engine says it failed.
    pub(crate) failure: Option<StoreError>,
    /// The platform refused the call's timer.
    pub(crate) timer_error: Option<TimerError>,
    /// A coalescing run, which the calls that join it share.
    pub(crate) shared: Option<Rc<dyn std::any::Any>>,
    /// When the call's timer must fire, and the sleep armed for it (armed in the call's own
    /// poll).
    timer_at: f64,
    timer: Option<Sleep>,
    waker: Option<Waker>,
    route: WakeRoute,
}

impl Mailbox {
    fn new() -> Self {
        Mailbox {
            timer_at: f64::INFINITY,
            ..Mailbox::default()
        }
    }
}

type Flight<V> = Pin<Box<dyn Future<Output = (Answer<V>, Option<StoreError>)>>>;

/// A store call in flight: the op it answers, the call it is made for (if any), the call.
type InFlight<V> = (Ticket, Option<u32>, Flight<V>);

/// Wakes every task that drove lately: for store calls made for no call.
#[derive(Default)]
struct Broadcast(Mutex<Vec<Waker>>);

impl Broadcast {
    fn add(&self, waker: &Waker) {
        let mut wakers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}

impl Wake for Broadcast {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let wakers = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for waker in wakers {
            waker.wake();
        }
    }
}

/// A store that no call uses: a serializer without one.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoStore;

impl LockStore for NoStore {
    type Version = ();
    async fn create(&self, _: &str, _: &str) -> Result<Option<()>, StoreError> {
        Ok(None)
    }
    async fn read(&self, _: &str) -> Result<Option<crate::store::Versioned<()>>, StoreError> {
        Ok(None)
    }
    async fn replace(&self, _: &str, _: &(), _: &str) -> Result<Option<()>, StoreError> {
        Ok(None)
    }
}

/// A source of randomness that no call uses: a serializer without a store draws nothing.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct NoRandom;

impl Random for NoRandom {
    fn fill(&self, bytes: &mut [u8]) {
        bytes.fill(0);
    }
}

/// The engine, its store, its clock, and what its calls were told.
pub(crate) struct Executor<S: LockStore, C, R> {
    pub(crate) engine: RefCell<Engine<S::Version, u32>>,
    pub(crate) store: Rc<S>,
    pub(crate) clock: C,
    pub(crate) random: R,
    mailboxes: RefCell<Vec<Option<Mailbox>>>,
    free: RefCell<Vec<u32>>,
    /// Store calls in flight: the op, the handle they are made for, the call.
    flights: RefCell<Vec<InFlight<S::Version>>>,
    broadcast: Arc<Broadcast>,
}

impl<S: LockStore + 'static, C: Clock, R: Random> Executor<S, C, R> {
    pub(crate) fn new(store: S, clock: C, random: R) -> Self {
        let config = Config {
            timer_per_call: true,
            contexts_end: clock.contexts_end(),
            store_tells_changes: store.tells_changes(),
        };
        Executor {
            engine: RefCell::new(Engine::new(config)),
            store: Rc::new(store),
            clock,
            random,
            mailboxes: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            flights: RefCell::new(Vec::new()),
            broadcast: Arc::default(),
        }
    }

    /// The time on both clocks.
    pub(crate) fn now(&self) -> Now {
        Now {
            wall: self.clock.now_ms(),
            mono: self.clock.monotonic_ms(),
        }
    }

    /// A mailbox for a new call: its handle.
    pub(crate) fn open(&self) -> u32 {
        let mut mailboxes = self.mailboxes.borrow_mut();
        match self.free.borrow_mut().pop() {
            Some(handle) => {
                if let Some(slot) = mailboxes.get_mut(handle as usize) {
                    *slot = Some(Mailbox::new());
                }
                handle
            }
            None => {
                mailboxes.push(Some(Mailbox::new()));
                mailboxes.len() as u32 - 1
            }
        }
    }

    /// Whether store calls made for the call of `handle` are in flight.
    pub(crate) fn flying(&self, handle: u32) -> bool {
        self.flights
            .borrow()
            .iter()
            .any(|(_, owner, _)| *owner == Some(handle))
    }

    /// Waits until the store calls made for the call of `handle` have landed (a lease given
    /// back on its behalf: the key's last turn frees it before its caller hears).
    pub(crate) async fn landed(&self, handle: u32) {
        std::future::poll_fn(|cx| {
            self.drive(cx, handle);
            if self.flying(handle) {
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        })
        .await;
    }

    /// Store calls in flight for the call of `handle` are no longer its to wait for (an
    /// acquisition it gave up finishes on its own): whoever drives next polls them.
    pub(crate) fn disown(&self, handle: u32) {
        for (_, owner, _) in self.flights.borrow_mut().iter_mut() {
            if *owner == Some(handle) {
                *owner = None;
            }
        }
    }

    /// A call is done with: its mailbox goes (and with it its timer); store calls still in
    /// flight for it are polled by whoever drives next.
    pub(crate) fn close(&self, handle: u32) {
        self.disown(handle);
        let closed = self
            .mailboxes
            .borrow_mut()
            .get_mut(handle as usize)
            .and_then(Option::take);
        if closed.is_some() {
            self.free.borrow_mut().push(handle);
        }
        drop(closed);
    }

    /// Reads or changes a call's mailbox.
    pub(crate) fn mailbox<T>(&self, handle: u32, f: impl FnOnce(&mut Mailbox) -> T) -> Option<T> {
        let mut mailboxes = self.mailboxes.borrow_mut();
        mailboxes
            .get_mut(handle as usize)
            .and_then(Option::as_mut)
            .map(f)
    }

    /// Runs an event on the engine, then applies what it asks.
    pub(crate) fn event<T>(&self, f: impl FnOnce(&mut Engine<S::Version, u32>, Now, &R) -> T) -> T {
        let now = self.now();
        let out = f(&mut self.engine.borrow_mut(), now, &self.random);
        self.apply();
        out
    }

    /// Everything the engine asks, done: store calls put in flight (polled by their call's own
    /// future), callers told, timers noted (armed by their call's own future).
    fn apply(&self) {
        loop {
            let effect = self.engine.borrow_mut().poll();
            let Some(effect) = effect else {
                return;
            };
            match effect {
                Effect::Store {
                    op,
                    owner,
                    key,
                    call,
                } => {
                    let flight = self.flight(key, call);
                    self.flights.borrow_mut().push((op, owner, flight));
                    match owner {
                        Some(owner) => self.wake(owner),
                        None => self.broadcast.wake_by_ref(),
                    }
                }
                Effect::Forget {
                    op,
                    owner,
                    method,
                    bound_ms,
                } => {
                    self.flights
                        .borrow_mut()
                        .retain(|(flight, _, _)| *flight != op);
                    if let Some(owner) = owner {
                        let message = messages::fill(
                            messages::STORE_TIMED_OUT,
                            &[
                                ("method", method.name()),
                                ("storeTimeoutMs", &bound_ms.to_string()),
                            ],
                        );
                        self.mailbox(owner, |mailbox| {
                            mailbox.failure.get_or_insert(StoreError::new(message));
                        });
                    }
                }
                Effect::Start {
                    handle,
                    slot,
                    fence,
                    report,
                    ..
                } => {
                    self.mailbox(handle, |mailbox| {
                        mailbox.started = Some(Started {
                            slot,
                            fence,
                            report,
                        });
                    });
                    self.wake(handle);
                }
                Effect::Settle { handle, outcome } => {
                    self.mailbox(handle, |mailbox| mailbox.outcome = Some(outcome));
                    self.wake(handle);
                }
                Effect::Abort { handle, why } => {
                    self.mailbox(handle, |mailbox| mailbox.aborted = Some(why));
                    self.wake(handle);
                }
                Effect::LockLost { handle, why } => {
                    self.mailbox(handle, |mailbox| mailbox.lost = Some(why));
                    self.wake(handle);
                }
                Effect::Arm { handle, at, .. } => {
                    self.mailbox(handle, |mailbox| {
                        mailbox.timer_at = at;
                        mailbox.timer = None;
                    });
                    self.wake(handle);
                }
                // Each call keeps its own timer here (`Arm`).
                Effect::Wake { .. } => {}
                // Started by its own future, when next polled (see `Serial::poll_turn`).
                Effect::Ready { handle, .. } => self.wake(handle),
            }
        }
    }

    /// The store call of an effect, as a future of the engine's answer.
    fn flight(&self, key: Rc<str>, call: StoreCall<S::Version>) -> Flight<S::Version> {
        let store = Rc::clone(&self.store);
        Box::pin(async move {
            let answer = match call {
                StoreCall::Create { value } => {
                    store.create(&key, &value).await.map(Answer::Created)
                }
                StoreCall::Read => store.read(&key).await.map(|found| {
                    Answer::Read(found.map(|found| (found.version, Record::decode(&found.value))))
                }),
                StoreCall::Replace { version, value } => store
                    .replace(&key, &version, &value)
                    .await
                    .map(Answer::Replaced),
                StoreCall::Changed { version, ms } => store
                    .changed(&key, Some(&version), ms)
                    .await
                    .map(|changed| {
                        if changed {
                            Answer::Changed
                        } else {
                            Answer::Woke
                        }
                    }),
            };
            match answer {
                Ok(answer) => (answer, None),
                Err(error) => (Answer::Failed, Some(error)),
            }
        })
    }

    fn wake(&self, handle: u32) {
        let waker = self
            .mailbox(handle, |mailbox| mailbox.waker.take())
            .flatten();
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Drives the engine for the call of `handle`: its store calls and those made for nobody
    /// polled, its timer armed and polled (in this task), the engine's effects applied. The
    /// call's future then reads its mailbox; it is woken when something is put there.
    pub(crate) fn drive(&self, cx: &mut Context<'_>, handle: u32) {
        let waker = self
            .mailbox(handle, |mailbox| mailbox.route.waker(&self.clock, cx))
            .unwrap_or_else(|| cx.waker().clone());
        let broadcast = Waker::from(Arc::clone(&self.broadcast));
        loop {
            let mut progress = false;
            // Store calls made for this call (in its own context), and for nobody.
            let answered = {
                let mut flights = self.flights.borrow_mut();
                let mut answered = Vec::new();
                let mut at = 0;
                while at < flights.len() {
                    let (op, owner, flight) = &mut flights[at];
                    let mine = *owner == Some(handle);
                    if !(mine || owner.is_none()) {
                        at += 1;
                        continue;
                    }
                    let mut flight_cx = Context::from_waker(if mine { &waker } else { &broadcast });
                    match flight.as_mut().poll(&mut flight_cx) {
                        Poll::Ready(answer) => {
                            answered.push((*op, *owner, answer));
                            let _ = flights.swap_remove(at);
                        }
                        Poll::Pending => at += 1,
                    }
                }
                answered
            };
            for (op, owner, (answer, error)) in answered {
                progress = true;
                if let (Some(owner), Some(error)) = (owner, error) {
                    self.mailbox(owner, |mailbox| {
                        mailbox.failure.get_or_insert(error);
                    });
                }
                self.event(|engine, now, random| engine.answer(op, answer, now, random));
            }
            // This call's timer, armed here so that it belongs to this task's context.
            let fired = self.poll_timer(handle, &waker);
            if let Some(owner) = fired {
                progress = true;
                self.event(|engine, now, random| engine.fired(owner.0, owner.1, now, random));
            }
            if !progress {
                break;
            }
        }
        // Someone must poll the store calls made for nobody: those who drive while they fly.
        if self
            .flights
            .borrow()
            .iter()
            .any(|(_, owner, _)| owner.is_none())
        {
            self.broadcast.add(cx.waker());
        }
        self.mailbox(handle, |mailbox| mailbox.waker = Some(waker));
    }

    /// Arms the call's timer if it has none for the time the engine asked, and polls it: the
    /// call's engine name when it fired.
    fn poll_timer(&self, handle: u32, waker: &Waker) -> Option<(Option<u32>, Ticket)> {
        let mut mailboxes = self.mailboxes.borrow_mut();
        let mailbox = mailboxes.get_mut(handle as usize)?.as_mut()?;
        if mailbox.timer_at.is_infinite() {
            return None;
        }
        if mailbox.timer.is_none() {
            let ms = (mailbox.timer_at - self.clock.monotonic_ms()).max(0.0);
            match self.clock.sleep(ms) {
                Ok(sleep) => mailbox.timer = Some(sleep),
                Err(error) => {
                    mailbox.timer_error.get_or_insert(error);
                    mailbox.timer_at = f64::INFINITY;
                    return None;
                }
            }
        }
        let timer = mailbox.timer.as_mut()?;
        if timer
            .as_mut()
            .poll(&mut Context::from_waker(waker))
            .is_pending()
        {
            return None;
        }
        mailbox.timer = None;
        mailbox.timer_at = f64::INFINITY;
        mailbox.owner
    }

    /// Polls store calls made for nobody and applies what follows, until nothing moves: for a
    /// future that drives the engine without a call of its own.
    pub(crate) fn drive_unowned(&self, cx: &mut Context<'_>) {
        let handle = self.open();
        self.drive(cx, handle);
        self.close(handle);
    }
}
