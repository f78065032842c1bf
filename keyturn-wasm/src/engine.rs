//! The engine for JavaScript: one class, the engine of one store's locks and serializers (the
//! lock module) or of one serializer without a store (the serializer module, which carries no
//! lock code). The package's JS calls an event, reads the effect it answers from the register
//! (`interop.rs` puts it there) and does it, then asks for the next.
//!
//! Nothing here calls JavaScript (the lock module's randomness, a `catch` import, aside), so a
//! host call that throws cannot meet Rust state half changed; every value from JavaScript is
//! checked before it reaches a rule, so none reaches a panic.

use wasm_bindgen::prelude::*;

use keyturn::engine::{Config, EnqueueError, Entered, LineId, Now, Ticket};
use keyturn::{validate_key, Coalesce, SerializerOptions};

use crate::interop::{self, Details, Register};
#[cfg(feature = "lock")]
use crate::wire::answer;
#[cfg(feature = "lock")]
use crate::wire::detail;
use crate::wire::{event, field, query};

#[cfg(feature = "lock")]
type Version = JsValue;
#[cfg(not(feature = "lock"))]
type Version = ();

#[cfg(feature = "lock")]
type Random = keyturn::PlatformRandom;
#[cfg(not(feature = "lock"))]
type Random = keyturn::engine::NoRandom;

/// The group a JS call coalesces in: none (`undefined`), `true` (`""`: a group name is never
/// empty), or the named group.
fn coalesce(group: Option<String>) -> Coalesce {
    match group {
        None => Coalesce::Never,
        Some(name) if name.is_empty() => Coalesce::Yes,
        Some(name) => Coalesce::Group(name.into()),
    }
}

/// One engine; the package does not export it.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Engine {
    engine: keyturn::engine::Engine<Version, u32, { cfg!(feature = "lock") }>,
    register: Register,
    details: Details<Version>,
    random: Random,
}

impl Engine {
    fn set(&mut self, at: f64, value: f64) {
        interop::set(&mut self.register, at, value);
    }
}

#[wasm_bindgen]
impl Engine {
    /// An engine: a timer per call in its own context (Workers), or one for all; whether
    /// contexts end (Workers); whether the store tells changes (its `changed`).
    #[wasm_bindgen(constructor)]
    pub fn new(timer_per_call: bool, contexts_end: bool, store_tells_changes: bool) -> Engine {
        Engine {
            engine: keyturn::engine::Engine::new(Config {
                timer_per_call,
                contexts_end,
                store_tells_changes,
            }),
            register: [0.0; field::LEN],
            details: Details::default(),
            random: Random::default(),
        }
    }

    /// Adds a serializer with the options the caller gave (`undefined` for each left out; the
    /// JS checked their types; a rate's limit and period come together or not at all); with
    /// `lease`, over the store, with its lease options; `scope_isolate`: its caller said one
    /// isolate is meant. Its number, or a refusal code (negative).
    #[allow(clippy::too_many_arguments)]
    pub fn serializer(
        &mut self,
        timeout_ms: Option<f64>,
        max_pending: Option<f64>,
        concurrency: Option<f64>,
        rate_limit: Option<f64>,
        rate_period_ms: Option<f64>,
        lease: bool,
        stale_ms: Option<f64>,
        max_clock_skew_ms: Option<f64>,
        store_timeout_ms: Option<f64>,
        scope_isolate: bool,
    ) -> f64 {
        let options =
            SerializerOptions::given(timeout_ms, max_pending).and_then(
                |options| match concurrency {
                    Some(n) => options.with_concurrency(n),
                    None => Ok(options),
                },
            );
        let options = options.and_then(|options| match (rate_limit, rate_period_ms) {
            (Some(limit), Some(period_ms)) => options.with_rate(limit, period_ms),
            _ => Ok(options),
        });
        let options = match options {
            Ok(options) => options,
            Err(error) => return interop::serializer_refusal(error),
        };
        // (Never over a store in the serializer's module: its JS has no store to give.)
        let lease = (cfg!(feature = "lock") && lease).then(|| {
            interop::lock_options(None, stale_ms, max_clock_skew_ms, store_timeout_ms, None)
        });
        match self
            .engine
            .add_scoped_serializer(options, lease, scope_isolate)
        {
            Ok(serializer) => f64::from(serializer),
            Err(error) => interop::option_refusal(error),
        }
    }

    /// A call of `serializer` for `key`, held by the JS as `handle`, with its own deadline
    /// (`undefined`: the serializer's), coalescing in `group` (`undefined`: none), queued only
    /// if it can start at once with `if_available`. The kind of the first effect (its work's
    /// ticket in `ID`; the handle of the work it joined in `JOINED`, else -1), or a refusal
    /// code.
    #[allow(clippy::too_many_arguments)]
    pub fn enter(
        &mut self,
        serializer: u32,
        key: &str,
        handle: u32,
        timeout_ms: Option<f64>,
        group: Option<String>,
        if_available: bool,
        mono: f64,
    ) -> f64 {
        let now = Now { wall: 0.0, mono };
        let entered = self.engine.enter(
            serializer,
            key,
            handle,
            timeout_ms,
            coalesce(group),
            if_available,
            now,
        );
        match entered {
            Ok(Entered::Queued(ticket)) => {
                let line = self.engine.line_of(serializer, ticket);
                self.set(field::ID, ticket.pack());
                self.set(field::LINE, line.map_or(-1.0, |line| f64::from(line.0)));
                self.set(field::JOINED, -1.0);
            }
            Ok(Entered::Joined(ticket, joined)) => {
                self.set(field::ID, ticket.pack());
                self.set(field::JOINED, f64::from(joined));
            }
            Err(error) => {
                if let EnqueueError::Unavailable { retry_after_ms } = error {
                    self.set(field::MS, retry_after_ms.unwrap_or(-1.0));
                }
                return interop::enqueue_refusal(error);
            }
        }
        self.next()
    }

    /// What happened (`kind`, with `a` and `b` as `wire::event` says), at `wall` and `mono`:
    /// the kind of the first effect.
    pub fn event(&mut self, kind: f64, a: f64, b: f64, wall: f64, mono: f64) -> f64 {
        let now = Now { wall, mono };
        let (engine, random) = (&mut self.engine, &self.random);
        let serializer = a as u32;
        let ticket: Option<Ticket> = engine.work(serializer, b);
        if kind == event::TICK {
            engine.tick(now, random);
        } else if kind == event::TIMER_REFUSED {
            let (serializer, owner) = match a >= 0.0 {
                true => (Some(serializer), ticket),
                false => (None, engine.call(b)),
            };
            engine.timer_refused(serializer, owner, now, random);
        } else if kind == event::LATE_SETTLED {
            engine.late_settled(serializer);
        } else if kind == event::START {
            engine.start(serializer, LineId(b as u32), now, random);
        } else if kind == event::DONE_HEAD {
            let left = engine.done_head(serializer, LineId(b as u32), now, random);
            self.set(field::LEFT, left.map_or(-1.0, f64::from));
        } else if let Some(ticket) = ticket {
            if kind == event::START_WORK {
                engine.start_work(serializer, ticket, now, random);
            } else if kind == event::DONE {
                engine.done(serializer, ticket, now, random);
            } else if kind == event::SETTLED {
                engine.settled(serializer, ticket, now, random);
            } else if kind == event::CANCEL {
                engine.cancel(serializer, ticket, now, random);
            } else if kind == event::LEAVE {
                engine.leave(serializer, ticket, now, random);
            } else if kind == event::FIRED_WORK {
                engine.fired(Some(serializer), ticket, now, random);
            } else if kind == event::CALLED {
                engine.work_called(serializer, ticket, now);
            }
        }
        #[cfg(feature = "lock")]
        self.lock_event(kind, a, b, now);
        self.next()
    }

    /// The next effect into the register: its kind (`NONE` when none is left).
    pub fn next(&mut self) -> f64 {
        let effect = self.engine.poll();
        #[cfg(feature = "lock")]
        {
            // A change of whether the one timer keeps the host alive, due right after this
            // effect, goes with it: no crossing of its own (a Wake says its own).
            let keep = match effect {
                None | Some(keyturn::engine::Effect::Wake { .. }) => None,
                Some(_) => self.engine.poll_keep(),
            };
            self.set(
                field::ALIVE,
                keep.map_or(0.0, |keep| if keep { 1.0 } else { -1.0 }),
            );
        }
        let more = self.engine.has_effects();
        interop::load(&mut self.register, &mut self.details, effect, more)
    }

    /// What `kind` asks (`wire::query`), of `a`, `b` (`undefined` where it is an option left
    /// out) and `key`.
    pub fn query(&mut self, kind: f64, a: f64, b: Option<f64>, key: Option<String>) -> f64 {
        let serializer = a as u32;
        if kind == query::REGISTER {
            self.register.as_ptr() as usize as f64
        } else if kind == query::PENDING {
            self.engine
                .pending(serializer, key.as_deref().unwrap_or_default()) as f64
        } else if kind == query::KEYS {
            self.engine.keys(serializer) as f64
        } else if kind == query::STAT {
            interop::stat(&self.engine.stats(serializer), b.unwrap_or_default())
        } else if kind == query::NEXT_TICK {
            self.engine.poll_timeout().unwrap_or(f64::INFINITY)
        } else if kind == query::MAX_PENDING {
            match self.engine.options(serializer).max_pending() {
                usize::MAX => f64::INFINITY,
                max => max as f64,
            }
        } else if kind == query::ONE_ISOLATE {
            f64::from(u8::from(self.engine.warns_one_isolate(serializer)))
        } else if kind == query::AHEAD {
            let work = self.engine.work(serializer, b.unwrap_or(-1.0));
            let ahead = work.and_then(|work| self.engine.ahead(serializer, work));
            ahead.map_or(-1.0, f64::from)
        } else if kind == query::CHECK_CALL {
            let key = key.unwrap_or_default();
            if let Err(error) = validate_key(&key) {
                return interop::key_refusal(error);
            }
            match b.map(|ms| SerializerOptions::given(Some(ms), None)) {
                Some(Err(error)) => interop::serializer_refusal(error),
                _ => 0.0,
            }
        } else {
            #[cfg(feature = "lock")]
            return self.lock_query(kind, a, b);
            #[cfg(not(feature = "lock"))]
            f64::NAN
        }
    }

    /// What `which` names (`wire::detail`): a part of the last store call (its key is told
    /// from then on: see `field::KEY_TOLD`). (Lock's only: a wasm export answering a JS value
    /// brings the externref table's code along.)
    #[cfg(feature = "lock")]
    pub fn detail(&mut self, which: f64) -> JsValue {
        if which == detail::KEY {
            self.details.told.clone_from(&self.details.key);
            return JsValue::from_str(self.details.key.as_deref().unwrap_or_default());
        } else if which == detail::VERSION {
            return self.details.version.clone().unwrap_or_default();
        } else if which == detail::ISOLATE {
            return self
                .engine
                .isolate_id()
                .map_or(JsValue::UNDEFINED, |id| JsValue::from_str(&id));
        }
        JsValue::UNDEFINED
    }
}

#[cfg(feature = "lock")]
impl Engine {
    fn lock_event(&mut self, kind: f64, a: f64, b: f64, now: Now) {
        let (engine, random) = (&mut self.engine, &self.random);
        // A lock released already: its id names nothing, and the engine answers as much.
        let call = engine.call(a).unwrap_or(Ticket::new(u32::MAX, 0));
        if kind == event::ABORT {
            engine.abort(call, now, random);
        } else if kind == event::RENEW {
            engine.renew(call, b as u32, now, random);
        } else if kind == event::RELEASE {
            engine.release(call, b as u32, now, random);
        } else if kind == event::KEEP_RENEWED {
            engine.keep_renewed(call, b == 1.0, now);
        } else if kind == event::WATCH {
            engine.watch_lock(call, b as u32, now);
        } else if kind == event::FIRED_CALL {
            engine.fired(None, call, now, random);
        }
    }

    fn lock_query(&mut self, kind: f64, a: f64, b: Option<f64>) -> f64 {
        if kind == query::LOCK_STAT {
            interop::lock_stat(&self.engine.lock_stats(), a)
        } else if kind == query::WAIT_MS {
            interop::lock_options(b, None, None, None, None).wait_ms
        } else {
            f64::NAN
        }
    }
}

#[cfg(feature = "lock")]
#[wasm_bindgen]
impl Engine {
    /// An acquisition of `name` held by the JS as `handle`, with the options the caller gave
    /// (`undefined` for each left out): the kind of the first effect (the call's id in `ID`),
    /// or a refusal code (a mismatch's concurrency in `FOUND`).
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        name: &str,
        handle: u32,
        wait_ms: Option<f64>,
        stale_ms: Option<f64>,
        max_clock_skew_ms: Option<f64>,
        store_timeout_ms: Option<f64>,
        concurrency: Option<f64>,
        wall: f64,
        mono: f64,
    ) -> f64 {
        let options = interop::lock_options(
            wait_ms,
            stale_ms,
            max_clock_skew_ms,
            store_timeout_ms,
            concurrency,
        );
        let acquired = self
            .engine
            .acquire(name, options, handle, Now { wall, mono }, &self.random);
        match acquired {
            Ok(call) => self.set(field::ID, call.pack()),
            Err(error) => {
                if let keyturn::engine::Refusal::ConcurrencyMismatch { found, .. } = &error {
                    self.set(field::FOUND, f64::from(*found));
                }
                return interop::acquire_refusal(error);
            }
        }
        self.next()
    }

    /// What the store answered to `op`: `kind` with a version (`versioned`; else `undefined`,
    /// said by the JS so that no call back into it asks) — a read (`READ`) that found no record
    /// has none; one that found a record is `answer_read`'s. The kind of the first effect. A
    /// write's answer is timed by the engine from when it was sent.
    pub fn answer(
        &mut self,
        op: f64,
        kind: f64,
        version: JsValue,
        versioned: bool,
        wall: f64,
        mono: f64,
    ) -> f64 {
        if let Some(op) = self.engine.op(op) {
            let answer = match versioned.then_some(version) {
                None if kind == answer::READ => keyturn::engine::Answer::Read(None),
                version => interop::answer(kind, version),
            };
            self.engine
                .answer(op, answer, Now { wall, mono }, &self.random);
        }
        self.next()
    }

    /// What the store answered to the read `op` that found a record: its version and its
    /// fields as `JSON.parse` found them (`undefined` where absent, NaN where of another type).
    /// The kind of the first effect.
    #[allow(clippy::too_many_arguments)]
    #[wasm_bindgen(js_name = answerRead)]
    pub fn answer_read(
        &mut self,
        op: f64,
        version: JsValue,
        format: Option<f64>,
        state: Option<String>,
        token: Option<String>,
        fence: Option<f64>,
        record_at: Option<f64>,
        lease: Option<f64>,
        asks: Option<String>,
        starts: Option<String>,
        n: Option<f64>,
        wall: f64,
        mono: f64,
    ) -> f64 {
        if let Some(op) = self.engine.op(op) {
            // Held to the record's rules by the crate, each field as it was found.
            let record = keyturn::engine::Record::from_fields(
                format,
                state.as_deref(),
                token,
                fence,
                record_at,
                lease,
                asks.as_deref(),
                starts.as_deref(),
                n,
            );
            let answer = keyturn::engine::Answer::Read(Some((version, record)));
            self.engine
                .answer(op, answer, Now { wall, mono }, &self.random);
        }
        self.next()
    }
}
