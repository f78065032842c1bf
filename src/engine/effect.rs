//! What the engine asks its host to do: one [`Effect`] type, which every front end executes and
//! none decides. An effect names the host's own handle of the call it is for (`H`: a JS object's
//! number, a Rust waker's slot), and, where the host answers, the id the answer must carry.

use std::rc::Rc;

use crate::engine::queue::{LineId, Ticket};

/// Something for the host to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect<V, H> {
    /// The work of `handle`, line `line`'s next of serializer `serializer`, may start: the
    /// host starts it when its own order says — by line ([`Engine::start`](super::Engine::start):
    /// the package's JS two microtasks on, so that the handlers of the caller before run first,
    /// as `keyed-serializer.js` orders them), or by ticket from the work's own context
    /// ([`Engine::start_work`](super::Engine::start_work): its Rust future's next poll, its
    /// Workers request's own reaction).
    Ready {
        /// The serializer.
        serializer: u32,
        /// The line.
        line: LineId,
        /// The work's host handle.
        handle: H,
    },
    /// Call the work of `handle` now, with its turn: its key's `slot`, its lease's `fence` (0
    /// without a store) and its `deadline` (monotonic). With `report`, the work's outcome goes to
    /// the engine ([`Engine::settled`](super::Engine::settled)) before its caller is told: its
    /// lease may be let go first.
    Start {
        /// The work's host handle.
        handle: H,
        /// Its key's slot, 0 … `concurrency` − 1.
        slot: u16,
        /// Its lease's fence; 0 without a store.
        fence: u64,
        /// When it is abandoned, on the monotonic clock.
        deadline: f64,
        /// Whether its outcome is reported to the engine first.
        report: bool,
    },
    /// Tell the caller of `handle` how its call ended.
    Settle {
        /// The call's host handle.
        handle: H,
        /// How it ended.
        outcome: Outcome,
    },
    /// Abort the signal of the running work of `handle` (its caller is told by a
    /// [`Settle`](Effect::Settle) that follows).
    Abort {
        /// The work's host handle.
        handle: H,
        /// Why.
        why: Why,
    },
    /// Make a store call; answer it with [`Engine::answer`](super::Engine::answer) and `op`.
    /// Its bound is the engine's: past it the engine counts the call failed and says
    /// [`Forget`](Effect::Forget).
    Store {
        /// Names the call in its answer.
        op: Ticket,
        /// The call this store call is made for (its failure is that call's to report), if any.
        owner: Option<H>,
        /// The record's key.
        key: Rc<str>,
        /// The call.
        call: StoreCall<V>,
    },
    /// The store call `op` did not answer within its bound (`bound_ms`): its answer, if it
    /// comes, is not wanted; a Rust host drops its future. Its failure is `owner`'s to report.
    Forget {
        /// The call that timed out.
        op: Ticket,
        /// The call it was made for, if any.
        owner: Option<H>,
        /// Which method it was.
        method: Method,
        /// Its bound, in milliseconds.
        bound_ms: f64,
    },
    /// The lock of `handle` lost its lease (or was released): abort its signal.
    LockLost {
        /// The lock's host handle.
        handle: H,
        /// Why.
        why: Lost,
    },
    /// With one timer for all: arm it to call [`Engine::tick`](super::Engine::tick) at `at`
    /// (monotonic), replacing an armed one; ∞: nothing is timed any more, clear it. Said
    /// whenever the engine's next time comes earlier than what it last said, after every tick,
    /// and when whether it keeps the host alive changes.
    Wake {
        /// When.
        at: f64,
        /// Whether something waits on it — an acquisition, a store call in flight — and the
        /// host must not exit before it fires (off Workers: a ref'd timer). A timer that only
        /// guards (a work's deadline, a renewal) keeps nothing alive, as `keyed-serializer.js`'s
        /// unref'd timer does not.
        keep: bool,
        /// Whether it may fire up to a millisecond before `at`: a pause between polls, which a
        /// host rounding its delay up to whole milliseconds would only make later, and every
        /// poll after it. Otherwise it must not fire before `at` (a deadline, a lease's end).
        early: bool,
    },
    /// With a timer per call ([`Config::timer_per_call`](super::Config::timer_per_call)): the
    /// call of `handle` keeps a timer of its own, in its own context, that calls
    /// [`Engine::fired`](super::Engine::fired) at `at` (monotonic). A later `Arm` of the same
    /// handle replaces it.
    Arm {
        /// The call's host handle.
        handle: H,
        /// When.
        at: f64,
        /// Whether its caller waits on it (an acquisition, a renewal, a release, a work's
        /// lease), as [`Wake`](Effect::Wake)'s `keep`.
        keep: bool,
        /// Whether it may fire up to a millisecond early, as [`Wake`](Effect::Wake)'s `early`.
        early: bool,
    },
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A work ended as it did: the host holds its value or its error.
    Done,
    /// A work was abandoned at its deadline (`timeout_ms` long).
    TimedOut {
        /// The deadline's length.
        timeout_ms: f64,
    },
    /// The call's caller gave up (its signal, a dropped future): the host holds the reason.
    Aborted,
    /// A store call failed: the first failure of the call, which the host holds (it answered
    /// it, or the engine said [`Effect::Forget`]).
    StoreFailed,
    /// The host refused the timer the call needed (a platform's quota, a fault): the call is
    /// given up on, and the host holds the refusal.
    TimerRefused,
    /// An acquisition holds its lease: the lock's id is the acquisition's own.
    Held(Held),
    /// Live holders kept the name for the whole wait.
    Unavailable,
    /// The name is taken `found` at a time, not as the acquisition asked: nothing was written.
    Mismatch {
        /// The name's concurrency, as found.
        found: u16,
    },
    /// A renewal moved the lease: it now runs until `held_until` (the wall clock's).
    Renewed {
        /// The lease's new end.
        held_until: f64,
    },
    /// A renewal found the lease lost (taken over, released, or past its end).
    NotRenewed,
    /// A release is done.
    Released,
    /// Where contexts end: the work's turn came and it did not start within
    /// [`START_GRACE_MS`](super::START_GRACE_MS) — its caller's context had ended, so the start
    /// the engine asked of it never came. It never runs, and the key moves on.
    NeverStarted,
    /// Over a store: a call that asked to start at once (`if_available`) found its key's lease
    /// held in another isolate, or took it and the starts the record carries allow none for
    /// `retry_after_ms` more. It never runs; a lease it took goes to the next work.
    NotYet {
        /// How long until the record's pace allows a start; `None` when the lease was held
        /// elsewhere.
        retry_after_ms: Option<f64>,
    },
}

/// A lease just acquired, as its holder sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Held {
    /// The name's slot it holds.
    pub slot: u16,
    /// Its fence.
    pub fence: u64,
    /// The count in its token (after the isolate's id): see [`Engine::token`](super::Engine::token).
    pub token_count: u64,
    /// Until when nobody may take it over, on the writer's wall clock.
    pub held_until: f64,
    /// It was taken over from a holder found stale (or a record not ours).
    pub took_over: bool,
}

/// Why a running work's signal aborts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// Its deadline passed.
    TimedOut,
    /// Its caller gave up.
    Aborted,
    /// Its lease was lost while it ran.
    LeaseLost,
    /// The host refused the timer that bounds it.
    TimerRefused,
}

/// Why a lock's signal aborts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// It was released.
    Released,
    /// Its lease passed its end without a renewal.
    Lapsed,
    /// A renewal found the record no longer its holder's.
    TakenOver,
}

/// A store call.
#[derive(Debug, Clone, PartialEq)]
pub enum StoreCall<V> {
    /// `store.create(key, value)`.
    Create {
        /// The record to write.
        value: String,
    },
    /// `store.read(key)`.
    Read,
    /// `store.replace(key, version, value)`.
    Replace {
        /// The version the record must still have.
        version: V,
        /// The record to write.
        value: String,
    },
    /// `store.changed(key, version, ms)`.
    Changed {
        /// The version the record had.
        version: V,
        /// How long to wait, at most.
        ms: f64,
    },
}

impl<V> StoreCall<V> {
    /// Which method it calls.
    pub fn method(&self) -> Method {
        match self {
            StoreCall::Create { .. } => Method::Create,
            StoreCall::Read => Method::Read,
            StoreCall::Replace { .. } => Method::Replace,
            StoreCall::Changed { .. } => Method::Changed,
        }
    }
}

/// A store's method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `create`.
    Create,
    /// `read`.
    Read,
    /// `replace`.
    Replace,
    /// `changed`.
    Changed,
}

impl Method {
    /// The method's name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Create => "create",
            Method::Read => "read",
            Method::Replace => "replace",
            Method::Changed => "changed",
        }
    }
}
