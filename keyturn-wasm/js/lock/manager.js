// The driver of the lock's core (the keyturn crate's `LockCore`) for one store in this isolate:
// contenders for a name queue here and only the head talks to the store. The core decides
// everything, every default and bound included; this file only does what it asks — store calls
// through an `Exchange` (each bounded as its step says, by flights.js; their answers through
// the one classifier), sleeps, waits and wake-ups — and feeds the answers back. The core calls
// no JavaScript. Time goes to the core on two clocks: `now()` (or `Date.now()`), which records
// carry, and `performance.now()`, which times everything here.
import * as glue from '../keyturn_lock.js';
import { InstanceHost } from '../instance.js';
import {
  LOCK_CHANGED,
  LOCK_CONCURRENCY_MISMATCH,
  LOCK_CREATE,
  LOCK_FAILED,
  LOCK_GIVE_UP,
  LOCK_GUARD,
  LOCK_HELD,
  LOCK_MISMATCH,
  LOCK_NAME_EMPTY,
  LOCK_NAME_TOO_LONG,
  LOCK_REPLACE,
  LOCK_SLEEP,
  LOCK_STATS,
  LOCK_WAIT,
  LOCK_WATCH,
  LOCK_WOKE,
  LOCK_WOKEN,
} from '../constants.js';
import { keyError, leaseOptionError } from '../arguments.js';
import { ConcurrencyMismatch } from '../errors.js';
import { KeyturnLock } from './held.js';
import { Exchange } from './exchange.js';
import { Flights } from './flights.js';
import { unref } from '../timers.js';

/** @typedef {import('../keyturn_lock.js').LockCoreBinding} LockCoreBinding */
/** @typedef {import('../instance.js').Instance} Instance */
/** @typedef {import('../arguments.js').LeaseOptions} LeaseOptions */
/** @typedef {(glue: typeof import('../keyturn_lock.js')) => void} LoadLock */

/**
 * A store: three atomic methods (and whatever else it has).
 * @typedef {object} Store
 * @property {(key: string, value: string) => unknown} create
 * @property {(key: string) => unknown} read
 * @property {(key: string, version: unknown, value: string) => unknown} replace
 * @property {((key: string, version: unknown, ms: number) => unknown) | undefined} [changed]
 */

/** @type {InstanceHost | undefined} */
let host;

/**
 * The lock module's live instance, instantiated on first use by `load(glue)` (synchronously:
 * Node reads it from disk, workerd has it compiled, a browser entry fetched it up front). After
 * a trap it is failed for good (see instance.js): managers made on it fail every call with
 * `KeyturnInstanceFailed`, and new ones get a fresh instance.
 * @param {LoadLock} load
 */
export function liveInstance(load) {
  if (host === undefined) {
    load(glue);
    host = new InstanceHost(glue, settleHeld);
  }
  return host.current();
}

/**
 * How long an acquisition given `waitMs` (`undefined`: the default) waits, for the error that
 * says so. The lock module is loaded by then: an acquisition has run.
 * @param {number | undefined} waitMs
 */
export const waitMs = (waitMs) => glue.LockCoreBinding.waitMs(waitMs);

/**
 * Told, for each JS value a failed instance held: a waiter in it is woken to fail.
 * @param {unknown} value
 * @param {Error} failure
 */
function settleHeld(value, failure) {
  if (!(value instanceof Waiter)) return;
  value.failure = failure;
  value.wakeNow();
}

/**
 * The record of slot `slot` of the lock `name`.
 * @param {string} name
 * @param {number} slot
 */
export const slotName = (name, slot) => glue.LockCoreBinding.slotName(name, slot);

/** What an acquisition takes: the record `key`, slot `slot` of the lock `name`. */
class Slotted {
  /**
   * @param {string} key
   * @param {string} name
   * @param {number} slot
   * @param {number | undefined} concurrency
   */
  constructor(key, name, slot, concurrency) {
    this.key = key;
    this.name = name;
    this.slot = slot;
    this.concurrency = concurrency ?? 1;
  }

  /**
   * The error of a name found taken `found` at a time.
   * @param {number} found
   */
  mismatch(found) {
    return new ConcurrencyMismatch(this.name, this.concurrency, found);
  }
}

/** One acquisition's wake-up: set while it waits, called once by whoever ends the wait. */
export class Waiter {
  constructor() {
    /** @type {(() => void) | undefined} */
    this.wake = undefined;
    /** @type {Error | undefined} */
    this.failure = undefined;
    /** The number the core knows it by while its acquisition lasts (-1: none). */
    this.id = -1;
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
   * All locks of `store` (and `now`) in this isolate. `inContext`: on Workers, a waiter also arms
   * a timer of its own for its wait's end (see `wait`), and so does each store call's bound.
   * @param {Instance} instance
   * @param {Store} store
   * @param {(() => number) | undefined} now
   * @param {boolean} inContext
   */
  constructor(instance, store, now, inContext) {
    this.instance = instance;
    /** @type {LockCoreBinding} */
    this.core = new glue.LockCoreBinding();
    this.core.setStoreTellsChanges(typeof store.changed === 'function');
    // A busy line's guard (see `guard`) outlives the hand-offs it serves: a promise is no task.
    this.core.setLineGuards(true);
    this.store = store;
    this.now = now;
    this.inContext = inContext;
    this.flights = new Flights(inContext);
    this.last = 0;
    // Waiters in line share one timer, armed for the earliest time the core must look again
    // (a wait's end, a holder's lease end); `waiting` of them wait now.
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    this.timerAt = Infinity;
    this.waiting = 0;
    // A step's code said the core has waiters to wake (see `code`).
    this.woken = false;
    // This isolate's id in tokens (see `tokenId`).
    this.isolateId = '';
    // Ends the waits and leases that are due, and wakes whom the core names.
    this.due = () => {
      if (this.instance.failure !== undefined) return;
      try {
        this.core.expire(this.time(), performance.now());
        this.drain(true);
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

  /**
   * A call into the core threw: a trap fails the instance and every waiter in it (instance.js).
   * @param {unknown} error
   */
  failed(error) {
    return this.instance.failed(error);
  }

  /** Throws the instance's failure, if it failed. */
  alive() {
    if (this.instance.failure !== undefined) throw this.instance.failure;
  }

  /** This isolate's id in the tokens of its locks (their first half): asked of the core once. */
  tokenId() {
    if (this.isolateId === '') {
      this.core.isolateId();
      this.isolateId = this.core.record();
    }
    return this.isolateId;
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

  /** What this store's locks did here, by the names of `LOCK_STATS`. */
  stats() {
    this.alive();
    /** @type {Record<string, number>} */
    const stats = {};
    LOCK_STATS.forEach((name, i) => {
      stats[name] = this.core.stat(i);
    });
    return stats;
  }

  /**
   * Takes `ticket` out of its line (a waiter giving up; nothing for a ticket already gone).
   * @param {number} ticket
   */
  leave(ticket) {
    if (this.instance.failure !== undefined) return;
    this.core.leave(ticket, true);
    this.drain(true);
  }

  /**
   * A step's code from the core, without the `WOKEN` it carries when the core has waiters to
   * wake: that is noted for the next `drain()`.
   * @param {number} code
   */
  code(code) {
    if (code < LOCK_WOKEN) return code;
    this.woken = true;
    return code - LOCK_WOKEN;
  }

  /**
   * Wakes the waiters the core named, and starts the guards it wants — when a step's code said
   * there are some, or (`any`) after a call that answers no code.
   * @param {boolean} [any]
   */
  drain(any) {
    if (!any && !this.woken) return;
    this.woken = false;
    const { core, instance } = this;
    for (let id; (id = core.takeWoken()) !== undefined; ) {
      if (id === LOCK_GUARD) this.guard();
      else /** @type {Waiter | undefined} */ (instance.get(id))?.wakeNow();
    }
  }

  /**
   * Starts the guards the core wants: for each busy line, `store.changed` on its batch's record
   * until the bound the core gives, so its holders hear when another isolate asks for the name
   * while they hand the lease on among themselves. Its answer goes to the core, whichever
   * holder has the lease by then. Its timer is `unref`'d: a guard serves holders, who keep
   * what they need alive themselves.
   */
  guard() {
    const { core } = this;
    for (let line; (line = core.takeGuard(this.time(), performance.now())) !== -1; ) {
      const guard = line;
      const number = core.ticket();
      changedWithin(this.store, core.record(), core.version(), core.wakeAt(), true).then((code) => {
        if (this.instance.failure !== undefined) return;
        try {
          core.guarded(guard, number, code);
          this.drain(true);
        } catch (error) {
          this.failed(error);
        }
      });
    }
  }

  /**
   * Someone starts (`+1`) or stops (`-1`) waiting in line. The shared timer is the waits' own:
   * once nobody waits it is cleared, so it keeps neither a Node process alive nor a Workers
   * request's timer a moment longer.
   * @param {number} delta
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
    if (at === Infinity) {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    if (this.timer !== undefined && this.timerAt <= at) return;
    // The new timer first: a refusal (past workerd's quota) leaves the old one.
    const timer = setTimeout(this.fire, Math.max(0, at - performance.now()));
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = timer;
    this.timerAt = at;
  }

  /**
   * Resolves when the core wakes `waiter`, or its time comes (`until`, monotonic, through the
   * shared timer).
   *
   * On Workers a waiter also arms a timer of its own, in its caller's request: workerd cancels
   * a request that waits with nothing of its own pending ("hung"), and a timer belongs to the
   * request that armed it, so a waiter woken only by another request's release, or by a timer
   * another request armed, would be cancelled. Past workerd's 10 000 active timers per request
   * a waiter goes without (that request has timers pending already); the shared timer still
   * ends its wait on time.
   * @param {Waiter} waiter
   * @param {number} until
   * @returns {Promise<void>}
   */
  wait(waiter, until) {
    return new Promise((resolve) => {
      waiter.wake = resolve;
      this.arm();
      if (!this.inContext) return;
      /** @type {ReturnType<typeof setTimeout>} */
      let timer;
      try {
        // When it fires: end what is due, then look again (the loop asks the core).
        timer = setTimeout(() => {
          waiter.wake = undefined;
          this.due();
          resolve();
        }, Math.max(0, until - performance.now()));
      } catch {
        return; // over the request's quota: the shared timer serves
      }
      waiter.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * The head's pause between polls (until `until`, monotonic): a timer of its own, cut short
   * by its abort.
   * @param {Waiter} waiter
   * @param {number} until
   * @returns {Promise<void>}
   */
  sleep(waiter, until) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        waiter.wake = undefined;
        resolve();
      }, Math.max(0, until - performance.now()));
      waiter.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * The head's wait for a record held in another isolate to change (until `until`, monotonic):
   * `store.changed` from the version its read saw, raced with a timer of its own and cut short
   * by its abort. `CHANGED` when it answered true; `WOKE` when it answered false or the time
   * came; `FAILED` when it threw, rejected or answered something not a boolean (not reported:
   * the acquisition polls from then on).
   * @param {Waiter} waiter
   * @param {string} name
   * @param {unknown} version
   * @param {number} until
   * @returns {Promise<number>}
   */
  watch(waiter, name, version, until) {
    const watching = changedWithin(this.store, name, version, until, false);
    const wake = () => watching.end(LOCK_WOKE);
    waiter.wake = wake;
    return watching.then((code) => {
      if (waiter.wake === wake) waiter.wake = undefined;
      return code;
    });
  }

  /**
   * An acquisition of a checked name (a well-formed string) with the options the caller gave
   * (numbers, or `undefined` for the core's defaults): a promise of the lock, or of `undefined`
   * when a live holder kept it for the whole wait. It settles within its wait plus one store
   * call's bound. `signal` cancels it at once, even with a store call in flight (what that call
   * takes is let go when it answers); `streakMs` is how long a serializer's streaks of local
   * hand-offs may run (`undefined` for a lock's). A name or option the core refuses rejects
   * with the TypeError or RangeError, having queued nothing.
   *
   * `slot` is which of the name's `options.concurrency` slots (lock/slots.js picks it): its
   * record is the name's own for slot 0, `slotName(name, slot)` past it.
   * @param {string} name
   * @param {LeaseOptions} options
   * @param {AbortSignal | undefined} signal
   * @param {number | undefined} streakMs
   * @param {number} [slot]
   * @returns {Promise<KeyturnLock | undefined>}
   */
  acquire(name, options, signal, streakMs, slot = 0) {
    const waiter = new Waiter();
    let code;
    let ticket = -1;
    const key = slot === 0 ? name : slotName(name, slot);
    try {
      if (signal?.aborted) throw signal.reason;
      this.alive();
      const { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, concurrency } = options;
      const mono = performance.now();
      const wall = this.clock();
      waiter.id = this.instance.hold(waiter);
      code = this.code(this.core.acquire(name, slot, waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, waiter.id, wall, mono, streakMs, concurrency));
      if (code < 0) throw this.refusal(code, name, options);
      const acquired = (ticket = this.core.ticket());
      this.drain();
      if (signal === undefined && (code === LOCK_CREATE || code === LOCK_REPLACE)) {
        // Nobody here in line: the one store call that may take the name, and (mostly) the lock.
        const exchange = new Exchange(this, key, acquired, (next) => {
          if (next !== LOCK_HELD) return this.acquiring(new Slotted(key, name, slot, options.concurrency), acquired, next, waiter, undefined);
          this.letGo(waiter);
          return new KeyturnLock(this, acquired, key, name, slot);
        });
        exchange.waiter = waiter;
        return exchange.start(code, wall, mono);
      }
    } catch (error) {
      this.letGo(waiter);
      return Promise.reject(this.failed(error));
    }
    const acquisition = this.acquiring(new Slotted(key, name, slot, options.concurrency), ticket, code, waiter, signal);
    return signal === undefined ? acquisition : abortable(acquisition, signal);
  }

  /**
   * The error of an acquisition the core refused (`code`, negative), having queued nothing.
   * @param {number} code
   * @param {string} name
   * @param {LeaseOptions} options
   */
  refusal(code, name, options) {
    if (code === LOCK_NAME_EMPTY || code === LOCK_NAME_TOO_LONG) return keyError('name', name, code === LOCK_NAME_EMPTY);
    if (code === LOCK_CONCURRENCY_MISMATCH) return new ConcurrencyMismatch(name, options.concurrency ?? 1, this.core.found());
    return leaseOptionError(code, options);
  }

  /**
   * The rest of an acquisition: waiting in line, polling, the caller's signal. Aborted, a waiter
   * leaves its line at once; a store call in flight is finished first — the caller heard
   * already (`abortable`) — and a lock it took is let go.
   * @param {Slotted} slotted
   * @param {number} ticket
   * @param {number} code
   * @param {Waiter} waiter
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<KeyturnLock | undefined>}
   */
  async acquiring(slotted, ticket, code, waiter, signal) {
    const { key } = slotted;
    const { core } = this;
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      if (waiter.wake !== undefined) {
        this.leave(ticket);
        waiter.wakeNow();
      }
    };
    signal?.addEventListener('abort', onAbort);
    let held = false;
    // Where the step's details are read: the core's view, or what an exchange kept of it.
    /** @type {{ wakeAt(): number, version(): unknown, found(): number }} */
    let view = core;
    try {
      for (;;) {
        if (code === LOCK_HELD) {
          held = true;
          const lock = new KeyturnLock(this, ticket, key, slotted.name, slotted.slot);
          if (aborted) {
            // A call that took the name meanwhile: let it go, then report the abort.
            await lock.release().catch(() => {});
            throw /** @type {AbortSignal} */ (signal).reason;
          }
          return lock;
        }
        if (waiter.failure !== undefined) throw waiter.failure;
        this.alive();
        if (aborted) throw /** @type {AbortSignal} */ (signal).reason;
        if (code === LOCK_GIVE_UP) return undefined; // the wait is over, nothing held
        if (code === LOCK_MISMATCH) throw slotted.mismatch(view.found());
        if (code === LOCK_SLEEP) {
          await this.sleep(waiter, view.wakeAt());
          view = core;
          code = this.code(core.answer(ticket, LOCK_WOKE, undefined, this.time(), performance.now()));
        } else if (code === LOCK_WATCH) {
          const answer = await this.watch(waiter, key, view.version(), view.wakeAt());
          view = core;
          code = this.code(core.answer(ticket, answer, undefined, this.time(), performance.now()));
        } else if (code === LOCK_WAIT) {
          this.waits(1);
          await this.wait(waiter, view.wakeAt());
          this.waits(-1);
          view = core;
          code = this.code(core.answer(ticket, LOCK_WOKE, undefined, this.time(), performance.now()));
        } else {
          const exchange = new Exchange(this, key, ticket);
          code = await exchange.start(code, this.time(), performance.now());
          view = exchange.view ?? core;
        }
        this.drain();
      }
    } catch (error) {
      throw this.failed(error);
    } finally {
      signal?.removeEventListener('abort', onAbort);
      // Whatever ended the wait (an abort, a refused timer, a failed store): out of the line.
      if (!held) this.leave(ticket);
      this.letGo(waiter);
    }
  }

  /**
   * An acquisition ended: its waiter is no longer the core's to wake.
   * @param {Waiter} waiter
   */
  letGo(waiter) {
    if (waiter.id === -1) return;
    this.instance.letGo(waiter.id);
    waiter.id = -1;
  }
}

/**
 * `store.changed(name, version, ms)` until `until` (monotonic) at the latest: a promise of
 * `CHANGED` when it answered true, `WOKE` when it answered false or the time came, `FAILED`
 * when it threw, rejected or answered something not a boolean; `end(code)` settles it sooner.
 * `quiet`: its timer keeps no Node process alive.
 * @param {Store} store
 * @param {string} name
 * @param {unknown} version
 * @param {number} until
 * @param {boolean} quiet
 * @returns {Promise<number> & { end: (code: number) => void }}
 */
function changedWithin(store, name, version, until, quiet) {
  const ms = Math.max(0, until - performance.now());
  /** @type {Promise<unknown>} */
  let answer;
  try {
    answer = Promise.resolve(/** @type {NonNullable<Store['changed']>} */ (store.changed).call(store, name, version, ms));
  } catch (error) {
    answer = Promise.reject(error);
  }
  /** @type {(code: number) => void} */
  let end = () => {};
  const settled = /** @type {Promise<number> & { end: (code: number) => void }} */ (
    new Promise((resolve) => {
      let timer = setTimeout(() => end(LOCK_WOKE), ms);
      if (quiet) timer = unref(timer);
      end = (code) => {
        clearTimeout(timer);
        resolve(code);
      };
      answer.then(
        (changed) => end(changed === true ? LOCK_CHANGED : changed === false ? LOCK_WOKE : LOCK_FAILED),
        () => end(LOCK_FAILED),
      );
    })
  );
  settled.end = (code) => end(code);
  return settled;
}

/**
 * `acquisition`, or the signal's reason the moment it aborts: the acquisition then ends in the
 * background. A lock it took after all — it was answered just before the abort, its caller
 * just after — is let go: nobody else has it to release.
 * @param {Promise<KeyturnLock | undefined>} acquisition
 * @param {AbortSignal} signal
 * @returns {Promise<KeyturnLock | undefined>}
 */
function abortable(acquisition, signal) {
  return new Promise((resolve, reject) => {
    let aborted = false;
    const onAbort = () => {
      aborted = true;
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort);
    acquisition
      .then((lock) => {
        if (!aborted) resolve(lock);
        else lock?.release().catch(() => {});
      }, reject)
      .finally(() => signal.removeEventListener('abort', onAbort));
  });
}
