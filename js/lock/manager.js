// The driver of the lock's core (src/lock/core.rs) for one store in this isolate: contenders for
// a name queue here and only the head talks to the store. The core decides everything; this
// file only does what it asks — each store call through `exchange`, the one path with the one
// answer classifier, sleeps, waits and wake-ups — and feeds the answers back. The core calls no
// JavaScript.
import * as glue from '../keyturn_lock.js';
import { LockStoreError } from '../errors.js';
import { InstanceHost } from '../instance.js';
import {
  LOCK_BAD_WAIT,
  LOCK_CREATE,
  LOCK_CREATED,
  LOCK_FAILED,
  LOCK_GIVE_UP,
  LOCK_HELD,
  LOCK_NAME_EMPTY,
  LOCK_NAME_TOO_LONG,
  LOCK_READ,
  LOCK_REPLACE,
  LOCK_REPLACED,
  LOCK_SLEEP,
  LOCK_WAIT,
  LOCK_WOKE,
  MESSAGES,
  STORE_METHODS,
  fill,
} from '../constants.js';
import { describe, keyError, rangeError } from '../arguments.js';
import { KeyturnLock } from './held.js';

let host;

/**
 * The lock module's live instance, instantiated on first use by `load(glue)` (synchronously:
 * Node reads it from disk, workerd has it compiled, a browser entry fetched it up front). After
 * a trap it is failed for good (see instance.js): managers made on it fail every call with
 * `KeyturnInstanceFailed`, and new ones get a fresh instance.
 */
export function liveInstance(load) {
  if (host === undefined) {
    load(glue);
    host = new InstanceHost(glue);
  }
  return host.current();
}

/** Told, for each JS value a failed instance held: a waiter in it is woken to fail. */
function settleHeld(value, failure) {
  if (!(value instanceof Waiter)) return;
  value.failure = failure;
  value.wakeNow();
}

/** One acquisition's wake-up: set while it waits, called once by whoever ends the wait. */
export class Waiter {
  constructor() {
    this.wake = undefined;
    this.failure = undefined;
  }

  /** Wakes it if it waits (one that does not has a step in hand already). */
  wakeNow() {
    const wake = this.wake;
    if (wake !== undefined) {
      this.wake = undefined;
      wake();
    }
  }
}

export class Manager {
  /**
   * All locks of `store` (and `now`) in this isolate. `waitInOwnContext`: on Workers, a waiter
   * also arms a timer of its own for its wait's end (see `wait`).
   */
  constructor(instance, store, now, waitInOwnContext) {
    this.instance = instance;
    this.core = new glue.LockCoreBinding();
    this.store = store;
    this.now = now;
    this.waitInOwnContext = waitInOwnContext;
    this.last = 0;
    // Waiters in line share one timer, armed for the earliest time the core must look again
    // (a wait's end, a holder's lease end); `waiting` of them wait now.
    this.timer = undefined;
    this.timerAt = Infinity;
    this.waiting = 0;
    // Ends the waits and leases that are due, and wakes whom the core names.
    this.due = () => {
      if (this.instance.failure !== undefined) return;
      try {
        this.core.expire(this.time());
        this.drain();
      } catch (error) {
        this.failed(error);
      }
    };
    this.fire = () => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.due();
      try {
        if (this.instance.failure === undefined) this.arm();
      } catch (error) {
        this.failed(error);
      }
    };
  }

  /** A call into the core threw: a trap fails the instance and every waiter in it (instance.js). */
  failed(error) {
    return this.instance.failed(error, settleHeld);
  }

  /** Throws the instance's failure, if it failed. */
  alive() {
    if (this.instance.failure !== undefined) throw this.instance.failure;
  }

  /** `now()`, or its last good answer when it gives something other than a finite number. */
  clock() {
    if (this.now === undefined) return (this.last = Date.now());
    const now = this.now();
    if (typeof now === 'number' && Number.isFinite(now)) this.last = now;
    return this.last;
  }

  /** The time for a step that must not fail: `clock()`, or its last good answer if `now` throws. */
  time() {
    if (this.now === undefined) return (this.last = Date.now());
    try {
      return this.clock();
    } catch {
      return this.last;
    }
  }

  /** Whether `staleMs` is a lease length the core takes. */
  checkStale(staleMs) {
    return glue.LockCoreBinding.checkStale(staleMs) === 0;
  }

  /** A serializer's turns over this store (the crate's `Turns` machine). */
  turns(staleMs) {
    return new glue.TurnsBinding(staleMs);
  }

  /** What a turn does once its acquisition ended (see `Turns::acquired`). */
  acquired(held, abandoned) {
    return glue.TurnsBinding.acquired(held, abandoned);
  }

  /** Whether a turn's lease is freed before its caller hears (see `Turns::settled`). */
  settled(pending, abandoned) {
    return glue.TurnsBinding.settled(pending, abandoned);
  }

  /** Takes `ticket` out of its line (a waiter giving up; nothing for a ticket already gone). */
  leave(ticket) {
    if (this.instance.failure !== undefined) return;
    this.core.leave(ticket, true);
    this.drain();
  }

  /** Wakes the waiters the core named. */
  drain() {
    for (let waiter; (waiter = this.core.takeWoken()) !== undefined; ) waiter.wakeNow();
  }

  /**
   * Someone starts (`+1`) or stops (`-1`) waiting in line. The shared timer is the waits' own:
   * once nobody waits it is cleared, so it keeps neither a Node process alive nor a Workers
   * request's timer a moment longer.
   */
  waits(delta) {
    this.waiting += delta;
    if (this.waiting === 0 && this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
    }
  }

  /** The shared timer, for the core's earliest time (re-armed only for an earlier one). */
  arm() {
    const at = this.core.nextTimer();
    if (Number.isNaN(at)) {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    if (this.timer !== undefined && this.timerAt <= at) return;
    // The new timer first: a refusal (past workerd's quota) leaves the old one.
    const timer = setTimeout(this.fire, Math.max(0, at - this.time()));
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = timer;
    this.timerAt = at;
  }

  /**
   * Resolves when the core wakes `waiter`, or its time comes (through the shared timer).
   *
   * On Workers a waiter also arms a timer of its own, in its caller's request: workerd cancels
   * a request that waits with nothing of its own pending ("hung"), and a timer belongs to the
   * request that armed it, so a waiter woken only by another request's release, or by a timer
   * another request armed, would be cancelled. Past workerd's 10 000 active timers per request
   * a waiter goes without (that request has timers pending already); the shared timer still
   * ends its wait on time.
   */
  wait(waiter, until) {
    return new Promise((resolve) => {
      waiter.wake = resolve;
      this.arm();
      if (!this.waitInOwnContext) return;
      let timer;
      try {
        // When it fires: end what is due, then look again (the loop asks the core).
        timer = setTimeout(() => {
          waiter.wake = undefined;
          this.due();
          resolve();
        }, Math.max(0, until - this.time()));
      } catch {
        return; // over the request's quota: the shared timer serves
      }
      waiter.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /** The head's pause between polls: a timer of its own, cut short by its abort. */
  sleep(waiter, until) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        waiter.wake = undefined;
        resolve();
      }, Math.max(0, until - this.time()));
      waiter.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * An acquisition of a checked name (a well-formed string): a promise of the lock, or of
   * `undefined` when a live holder kept it for the whole wait. `signal` cancels the wait,
   * leaving nothing held; `streakMs` is how long a serializer's streaks of local hand-offs may
   * run (NaN for a lock's). A name or option the core refuses rejects with the TypeError or
   * RangeError, having queued nothing.
   */
  acquire(name, waitMs, staleMs, signal, streakMs) {
    let code;
    let ticket;
    let waiter;
    try {
      if (signal?.aborted) throw signal.reason;
      this.alive();
      waiter = new Waiter();
      code = this.core.acquire(name, waitMs, staleMs, waiter, this.clock(), streakMs);
      if (code < 0) throw this.refused(code, name, waitMs, staleMs);
      ticket = this.core.lastTicket();
      this.drain();
      if (signal === undefined && (code === LOCK_CREATE || code === LOCK_REPLACE)) {
        // Nobody here in line: the one store call that may take the name, and (mostly) the lock.
        return this.exchange(name, ticket, code, (next) => {
          try {
            return next === LOCK_HELD ? new KeyturnLock(this, ticket, name) : this.acquiring(name, ticket, next, waiter, undefined);
          } catch (error) {
            throw this.failed(error);
          }
        });
      }
    } catch (error) {
      return Promise.reject(this.failed(error));
    }
    return this.acquiring(name, ticket, code, waiter, signal);
  }

  /** The error for an acquisition the core refused (`code`, negative). */
  refused(code, name, waitMs, staleMs) {
    if (code === LOCK_NAME_EMPTY || code === LOCK_NAME_TOO_LONG) return keyError('name', name, code === LOCK_NAME_EMPTY);
    if (code === LOCK_BAD_WAIT) return rangeError(MESSAGES.waitRange, { what: 'options.waitMs', value: waitMs });
    return rangeError(MESSAGES.staleRange, { what: 'options.staleMs', value: staleMs });
  }

  /** The rest of an acquisition: waiting in line, polling, the caller's signal. */
  async acquiring(name, ticket, code, waiter, signal) {
    const { core } = this;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      // A waiter leaves its line at once; a call in flight is finished first (and undone).
      if (waiter.wake !== undefined) {
        this.leave(ticket);
        waiter.wakeNow();
      }
    };
    signal?.addEventListener('abort', onAbort);
    let held = false;
    try {
      for (;;) {
        if (code === LOCK_HELD) {
          held = true;
          const lock = new KeyturnLock(this, ticket, name);
          if (aborted) {
            // A create that won meanwhile: let it go, then report the abort.
            await lock.release().catch(() => {});
            throw signal.reason;
          }
          return lock;
        }
        if (waiter.failure !== undefined) throw waiter.failure;
        this.alive();
        if (aborted) throw signal.reason;
        if (code === LOCK_GIVE_UP) return undefined; // the wait is over, nothing held
        if (code === LOCK_SLEEP) {
          await this.sleep(waiter, core.until());
          code = core.step(ticket, LOCK_WOKE, undefined, this.time());
        } else if (code === LOCK_WAIT) {
          this.waits(1);
          await this.wait(waiter, core.until());
          this.waits(-1);
          code = core.step(ticket, LOCK_WOKE, undefined, this.time());
        } else {
          code = await this.exchange(name, ticket, code);
        }
        this.drain();
      }
    } catch (error) {
      throw this.failed(error);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Whatever ended the wait (an abort, a refused timer, a failed store): out of the line.
      if (!held) this.leave(ticket);
    }
  }

  /**
   * The store call the core asked for (`code`, details in its outbox), its answer classified and
   * fed back: a promise of the next step's code — or of `then(code)`, run in the same reaction
   * (an uncontended acquisition or release is one store call: one promise hop less each), with
   * `otherwise()` run before a failure is passed on. A store that throws, rejects or answers
   * something that is not a store's answer is a `LockStoreError` — after the core was told, so
   * it holds nothing. (Promise reactions, not an async function: one hop per store call.)
   */
  exchange(name, ticket, code, then, otherwise) {
    const { core, store } = this;
    let value;
    let version;
    try {
      value = code === LOCK_READ ? undefined : core.value();
      version = code === LOCK_REPLACE ? core.version() : undefined;
    } catch (error) {
      return Promise.reject(passOn(otherwise, this.failed(error)));
    }
    let call;
    try {
      call = code === LOCK_CREATE ? store.create(name, value) : code === LOCK_READ ? store.read(name) : store.replace(name, version, value);
    } catch (error) {
      return Promise.reject(passOn(otherwise, this.storeFailed(ticket, code, error)));
    }
    return Promise.resolve(call).then(
      (answer) => {
        let next;
        try {
          next = this.classify(ticket, code, answer);
          if (then === undefined) return next;
          this.drain();
        } catch (error) {
          throw passOn(otherwise, this.failed(error));
        }
        return then(next);
      },
      (error) => {
        throw passOn(otherwise, this.storeFailed(ticket, code, error));
      },
    );
  }

  /** The one answer classifier: what the store said, fed to the core; the next step's code. */
  classify(ticket, code, answer) {
    const { core } = this;
    const now = this.time();
    if (code === LOCK_READ) {
      if (answer === null || answer === undefined) return core.stepRead(ticket, undefined, NaN, undefined, undefined, NaN, NaN, now);
      if (typeof answer === 'object' && typeof answer.value === 'string' && typeof answer.version === 'string') {
        let record;
        try {
          record = JSON.parse(answer.value);
        } catch {
          record = undefined;
        }
        // Not an object: not ours; the core checks every field of one that is.
        if (record === null || typeof record !== 'object') record = {};
        return core.stepRead(ticket, answer.version, numberOr(record.keyturn), stringOr(record.state), stringOr(record.token), numberOr(record.fence), numberOr(record.at), now);
      }
      throw this.storeFailed(ticket, code, undefined, wrongAnswer(code, '{ value: string, version: string } or null', answer));
    }
    if (typeof answer === 'string' || answer === null || answer === undefined) {
      return core.step(ticket, code === LOCK_CREATE ? LOCK_CREATED : LOCK_REPLACED, answer ?? undefined, now);
    }
    throw this.storeFailed(ticket, code, undefined, wrongAnswer(code, 'a version string or null', answer));
  }

  /** Tells the core a call failed (it then holds nothing for it); the error to report. */
  storeFailed(ticket, code, cause, error) {
    try {
      this.alive();
      this.core.step(ticket, LOCK_FAILED, undefined, this.time());
      this.drain();
    } catch (trapped) {
      return this.failed(trapped);
    }
    if (error !== undefined) return error;
    const message = cause instanceof Error ? cause.message : String(cause);
    return new LockStoreError(fill(MESSAGES.storeFailed, { method: STORE_METHODS[code], message }), { cause });
  }
}

/** A failure to pass on, once `otherwise` (if any) ran. */
function passOn(otherwise, error) {
  otherwise?.();
  return error;
}

function wrongAnswer(code, expected, answer) {
  return new LockStoreError(fill(MESSAGES.storeWrongAnswer, { method: STORE_METHODS[code], actual: describe(answer), expected }));
}

// A record's fields as the core takes them: a number or NaN, a string or undefined.
const numberOr = (value) => (typeof value === 'number' ? value : NaN);
const stringOr = (value) => (typeof value === 'string' ? value : undefined);
