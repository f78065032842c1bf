//! The Rust front end's one executor: it makes the store calls the engine asks for, keeps each
//! call's timer, and tells each call's future what the engine said of it. It decides nothing.
//! Each future polls [`Executor::drive`] with its own handle, so the store calls and the timer
//! made for it run in its own task (on Workers, its own request's context): docs/design.md.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use crate::clock::{Clock, Sleep, TimerError, WakeRoute};
use crate::engine::messages;
use crate::engine::random::Random;
use crate::engine::record::Record;
use crate::engine::slab::Slab;
use crate::engine::{Answer, Config, Effect, Engine, Now, Outcome, StoreCall, Ticket, Why};
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
    /// The call's first store failure, reported when the engine says it failed.
    pub(crate) failure: Option<StoreError>,
    /// The platform refused the call's timer.
    pub(crate) timer_error: Option<TimerError>,
    /// A coalescing run, which the calls that join it share.
    pub(crate) shared: Option<Rc<dyn std::any::Any>>,
    /// When the call's timer must fire, and the sleep armed for it (in the call's own poll).
    timer_at: Option<f64>,
    timer: Option<Sleep>,
    waker: Option<Waker>,
    route: WakeRoute,
}

impl Mailbox {
    /// The call's first store failure.
    pub(crate) fn store_error(&mut self) -> StoreError {
        self.failure
            .take()
            .unwrap_or_else(|| StoreError::new("a store call failed"))
    }

    /// The timer the platform refused this call (the engine gave the call up on it).
    pub(crate) fn timer_refusal(&mut self) -> TimerError {
        self.timer_error.take().unwrap_or_else(|| TimerError {
            message: "a timer was refused".into(),
        })
    }
}

type Flight<V> = Pin<Box<dyn Future<Output = (Answer<V>, Option<StoreError>)>>>;

/// A store call in flight: the op it answers, the call it is made for (if any), the call.
type InFlight<V> = (Ticket, Option<Ticket>, Flight<V>);

/// The wakers of the tasks that wait on one thing, all woken when it moves; a task adds its
/// own again each time it is polled.
#[derive(Default)]
pub(crate) struct Wakers(Mutex<Vec<Waker>>);

impl Wakers {
    pub(crate) fn add(&self, waker: &Waker) {
        let mut wakers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }
}

impl Wake for Wakers {
    fn wake(self: Arc<Self>) {
        // Taken out of the lock first: a waker may poll at once.
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

/// A call's mailbox, closed when dropped — after `give_up`, what the engine must hear of a
/// caller gone before it heard (`None` once it heard).
pub(crate) struct Call<'a, S: LockStore + 'static, C: Clock, R: Random, G: FnOnce()> {
    pub(crate) exec: &'a Executor<S, C, R>,
    pub(crate) handle: Ticket,
    pub(crate) give_up: Option<G>,
}

impl<S: LockStore + 'static, C: Clock, R: Random, G: FnOnce()> Drop for Call<'_, S, C, R, G> {
    fn drop(&mut self) {
        if let Some(give_up) = self.give_up.take() {
            give_up();
        }
        self.exec.close(self.handle);
    }
}

/// The engine, its store, its clock, and what its calls were told.
pub(crate) struct Executor<S: LockStore, C, R> {
    pub(crate) engine: RefCell<Engine<S::Version, Ticket>>,
    pub(crate) store: Rc<S>,
    pub(crate) clock: C,
    pub(crate) random: R,
    mailboxes: RefCell<Slab<Mailbox>>,
    flights: RefCell<Vec<InFlight<S::Version>>>,
    /// Whoever drives while store calls made for no call fly.
    broadcast: Arc<Wakers>,
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
            mailboxes: RefCell::default(),
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

    /// A mailbox for a new call, closed when its guard drops.
    pub(crate) fn call<G: FnOnce()>(&self) -> Call<'_, S, C, R, G> {
        Call {
            exec: self,
            handle: self.mailboxes.borrow_mut().insert(Mailbox::default()),
            give_up: None,
        }
    }

    /// A call is done with: its mailbox goes (and with it its timer); store calls still in
    /// flight for it are polled by whoever drives next.
    pub(crate) fn close(&self, handle: Ticket) {
        self.disown(handle);
        let closed = self.mailboxes.borrow_mut().remove(handle);
        drop(closed);
    }

    /// Reads or changes a call's mailbox.
    pub(crate) fn mailbox<T>(
        &self,
        handle: Ticket,
        f: impl FnOnce(&mut Mailbox) -> T,
    ) -> Option<T> {
        self.mailboxes.borrow_mut().get_mut(handle).map(f)
    }

    /// Store calls in flight for the call of `handle` are no longer its to wait for (an
    /// acquisition it gave up finishes on its own): whoever drives next polls them.
    pub(crate) fn disown(&self, handle: Ticket) {
        for (_, owner, _) in self.flights.borrow_mut().iter_mut() {
            if *owner == Some(handle) {
                *owner = None;
            }
        }
    }

    /// Waits until the store calls made for the call of `handle` have landed (a lease given
    /// back on its behalf: the key's last turn frees it before its caller hears).
    pub(crate) async fn landed(&self, handle: Ticket) {
        poll_fn(|cx| {
            self.drive(cx, handle);
            let flights = self.flights.borrow();
            match flights.iter().any(|(_, owner, _)| *owner == Some(handle)) {
                true => Poll::Pending,
                false => Poll::Ready(()),
            }
        })
        .await;
    }

    /// Drives the engine for the call of `handle` ([`drive`](Self::drive)), then reads its
    /// mailbox: ready with what `read` takes out of it (pending with no mailbox: a coalesced
    /// run whose last caller left).
    pub(crate) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        handle: Ticket,
        read: impl FnOnce(&mut Mailbox) -> Option<T>,
    ) -> Poll<T> {
        self.drive(cx, handle);
        let read = self.mailbox(handle, read).flatten();
        read.map_or(Poll::Pending, Poll::Ready)
    }

    /// Runs an event on the engine, then applies what it asks.
    pub(crate) fn event<T>(
        &self,
        f: impl FnOnce(&mut Engine<S::Version, Ticket>, Now, &R) -> T,
    ) -> T {
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
            match effect {
                None => return,
                Some(Effect::Store {
                    op,
                    owner,
                    key,
                    call,
                }) => {
                    let flight = self.flight(key, call);
                    self.flights.borrow_mut().push((op, owner, flight));
                    match owner {
                        Some(owner) => self.tell(owner, |_| {}),
                        None => self.broadcast.wake_by_ref(),
                    }
                }
                Some(Effect::Forget {
                    op,
                    owner,
                    method,
                    bound_ms,
                }) => {
                    self.flights.borrow_mut().retain(|flight| flight.0 != op);
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
                Some(Effect::Start {
                    handle,
                    slot,
                    fence,
                    report,
                    ..
                }) => self.tell(handle, |mailbox| {
                    mailbox.started = Some(Started {
                        slot,
                        fence,
                        report,
                    });
                }),
                Some(Effect::Settle { handle, outcome }) => {
                    self.tell(handle, |mailbox| mailbox.outcome = Some(outcome));
                }
                Some(Effect::Abort { handle, why }) => {
                    self.tell(handle, |mailbox| mailbox.aborted = Some(why));
                }
                Some(Effect::Arm { handle, at, .. }) => self.tell(handle, |mailbox| {
                    mailbox.timer_at = Some(at);
                    mailbox.timer = None;
                }),
                // A lock reads its loss from the engine; a work is started by its own future
                // when next polled (see `Turn::step`).
                Some(Effect::LockLost { handle, .. } | Effect::Ready { handle, .. }) => {
                    self.tell(handle, |_| {});
                }
                // Each call keeps its own timer here (`Arm`).
                Some(Effect::Wake { .. }) => {}
            }
        }
    }

    /// Puts what the engine said in the call's mailbox, and wakes its future.
    fn tell(&self, handle: Ticket, put: impl FnOnce(&mut Mailbox)) {
        let waker = self.mailbox(handle, |mailbox| {
            put(mailbox);
            mailbox.waker.take()
        });
        if let Some(waker) = waker.flatten() {
            waker.wake();
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

    /// Drives the engine for the call of `handle`: its store calls and those made for nobody
    /// polled, its timer armed and polled (in this task), the engine's effects applied. The
    /// call's future then reads its mailbox; it is woken when something is put there.
    pub(crate) fn drive(&self, cx: &mut Context<'_>, handle: Ticket) {
        let waker = self
            .mailbox(handle, |mailbox| mailbox.route.waker(&self.clock, cx))
            .unwrap_or_else(|| cx.waker().clone());
        let broadcast = Waker::from(Arc::clone(&self.broadcast));
        loop {
            // Store calls made for this call (in its own context), and for nobody.
            let mut answered = Vec::new();
            self.flights.borrow_mut().retain_mut(|(op, owner, flight)| {
                let waker = match owner {
                    None => &broadcast,
                    Some(owner) if *owner == handle => &waker,
                    Some(_) => return true,
                };
                let Poll::Ready(answer) = flight.as_mut().poll(&mut Context::from_waker(waker))
                else {
                    return true;
                };
                answered.push((*op, *owner, answer));
                false
            });
            let progress = !answered.is_empty();
            for (op, owner, (answer, error)) in answered {
                if let (Some(owner), Some(error)) = (owner, error) {
                    self.mailbox(owner, |mailbox| {
                        mailbox.failure.get_or_insert(error);
                    });
                }
                self.event(|engine, now, random| engine.answer(op, answer, now, random));
            }
            // This call's timer, armed here so that it belongs to this task's context; one the
            // platform refuses is the engine's to rule on.
            match self.poll_timer(handle, &waker) {
                Some((serializer, call, false)) => {
                    self.event(|engine, now, random| engine.fired(serializer, call, now, random))
                }
                Some((serializer, call, true)) => self.event(|engine, now, random| {
                    engine.timer_refused(serializer, Some(call), now, random)
                }),
                None if !progress => break,
                None => {}
            }
        }
        // Someone must poll the store calls made for nobody: those who drive while they fly.
        if self
            .flights
            .borrow()
            .iter()
            .any(|flight| flight.1.is_none())
        {
            self.broadcast.add(cx.waker());
        }
        self.mailbox(handle, |mailbox| mailbox.waker = Some(waker));
    }

    /// Arms the call's timer if it has none for the time the engine asked, and polls it: the
    /// call's engine name when it fired, or when the platform refused it (`true`; the refusal
    /// is kept in its mailbox for its error).
    fn poll_timer(&self, handle: Ticket, waker: &Waker) -> Option<(Option<u32>, Ticket, bool)> {
        let mut mailboxes = self.mailboxes.borrow_mut();
        let mailbox = mailboxes.get_mut(handle)?;
        let at = mailbox.timer_at?;
        if mailbox.timer.is_none() {
            match self.clock.sleep((at - self.clock.monotonic_ms()).max(0.0)) {
                Ok(sleep) => mailbox.timer = Some(sleep),
                Err(error) => {
                    mailbox.timer_error.get_or_insert(error);
                    mailbox.timer_at = None;
                    return mailbox
                        .owner
                        .map(|(serializer, call)| (serializer, call, true));
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
        mailbox.timer_at = None;
        mailbox
            .owner
            .map(|(serializer, call)| (serializer, call, false))
    }

    /// Polls store calls made for nobody and applies what follows, until nothing moves: for a
    /// future that drives the engine without a call of its own.
    pub(crate) fn drive_unowned(&self, cx: &mut Context<'_>) {
        self.drive(cx, self.call::<fn()>().handle);
    }
}
