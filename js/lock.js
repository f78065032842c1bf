// acquireLock, withLock and MemoryStore over the lock's wasm module (keyturn_lock), which is its
// own module so that code that only serializes never loads it. Static JS, copied into pkg/ by
// the build. The entry tells `setLockLoader` how to instantiate the module; it is instantiated
// on first use (synchronously: Node reads it from disk, workerd has it compiled, a browser entry
// fetched it up front).
//
// The wasm core decides everything (see src/lock/core.rs): this file only does what it asks —
// each store call through `exchange`, the one path with the one answer classifier, sleeps, and
// wake-ups — and feeds the answers back. The core calls no JavaScript.
import * as glue from './keyturn_lock.js';
import { LockStoreError, LockUnavailable } from './errors.js';
import { InstanceHost } from './instance.js';
import { LOCK_STALE_MS, LOCK_WAIT_MS } from './constants.js';

export { LockStoreError, LockUnavailable, LOCK_STALE_MS, LOCK_WAIT_MS };

let load;
let loaded = false;
// Workers mode (the workerd entry): each waiter also arms a timer of its own, in its caller's
// request, where it can.
let ownTimers = false;

/**
 * Called by the workerd entry. workerd cancels a request that waits with nothing of its own
 * pending ("hung"), and a timer belongs to the request that armed it: a waiter woken only by
 * another request's release, or by a timer another request armed, would be cancelled. So each
 * waiter arms its own timer for its wait's end. Past workerd's 10 000 active timers per request
 * a waiter goes without (that request has timers pending already); the shared timer still ends
 * its wait on time.
 */
export function waitInTheirCallersContext() {
  ownTimers = true;
}

/** Called once by the entry: `load(glue)` instantiates the lock module synchronously. */
export function setLockLoader(loader) {
  load = loader;
}

let host;

/**
 * The lock module's live instance, instantiated on first use. After a trap it is failed for
 * good (see instance.js): managers made on it fail every call with `KeyturnInstanceFailed`, and
 * new ones get a fresh instance.
 */
function liveInstance() {
  if (!loaded) {
    load(glue);
    loaded = true;
    host = new InstanceHost(glue);
  }
  return host.current();
}

/** Told, for each JS value a failed instance held: a waiter in it is woken to fail. */
function settleHeld(value, failure) {
  if (value === null || typeof value !== 'object' || !('wake' in value)) return;
  value.failure = failure;
  const wake = value.wake;
  if (wake !== undefined) {
    value.wake = undefined;
    wake();
  }
}

// Step codes of the core (src/js/lock.rs).
const CREATE = 0;
const READ = 1;
const REPLACE = 2;
const SLEEP = 3;
const WAIT = 4;
const HELD = 5;
// 6 DONE and 7 LOST end a release or renewal; 8 GIVE_UP ends a wait.
// Answer kinds.
const CREATED = 0;
const REPLACED = 1;
const WOKE = 2;
const FAILED = 3;

const METHODS = ['create', 'read', 'replace'];

const describe = (value) => (value === null ? 'null' : typeof value);

/** An optional number option (its range is the core's to check). */
function number(value, what, fallback) {
  if (value === undefined) return fallback;
  if (typeof value !== 'number') throw new TypeError(`keyturn: ${what} must be a number or undefined, got ${describe(value)}`);
  return value;
}

function wrongAnswer(method, expected, answer) {
  return new LockStoreError(`store.${method} answered a ${describe(answer)}, not ${expected}`);
}

/**
 * All locks of one store object (and `now`) in this isolate: contenders for a name queue here
 * and only the head talks to the store. Waiters in line share one timer, armed for the earliest
 * time the core must look again (a wait's end, a holder's lease end).
 */
class Manager {
  constructor(store, now) {
    this.instance = liveInstance();
    this.core = new glue.LockCoreBinding();
    this.store = store;
    this.now = now;
    this.last = 0;
    this.timer = undefined;
    this.timerAt = Infinity;
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
    // The shared timer: ends what is due, and arms itself for what comes next.
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

  /** Takes `ticket` out of its line (a waiter giving up; nothing for a ticket already gone). */
  leave(ticket) {
    if (this.instance.failure !== undefined) return;
    this.core.leave(ticket, true);
    this.drain();
  }

  /** Wakes the waiters the core named; one that is not waiting has a step in hand already. */
  drain() {
    for (let waiter; (waiter = this.core.takeWoken()) !== undefined;) {
      const wake = waiter.wake;
      if (wake !== undefined) {
        waiter.wake = undefined;
        wake();
      }
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
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.timer = setTimeout(this.fire, Math.max(0, at - this.time()));
    this.timerAt = at;
  }

  /** Resolves when the core wakes `waiter`, or its time comes (through the shared timer). */
  wait(waiter, until) {
    return new Promise((resolve) => {
      waiter.wake = resolve;
      this.arm();
      if (ownTimers) {
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
      }
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
}

// One manager per store object and `now`. Weak: a store that goes away takes its managers along.
const managers = new WeakMap();

/** A store is an object with the three methods; a Workers KV namespace is refused, saying why. */
function checkStore(store) {
  if (typeof store !== 'object' || store === null) {
    throw new TypeError(`keyturn: store must be an object with create, read and replace methods, got ${describe(store)}`);
  }
  const has = (method) => typeof store[method] === 'function';
  if (!has('create') && !has('read') && has('getWithMetadata') && has('list')) {
    throw new TypeError(
      'keyturn: store is a Workers KV namespace, which has no conditional put and is eventually consistent: a lock over it ' +
        'would let two holders in at once. Use a store with a conditional put: a Durable Object, R2, Redis or Deno KV.',
    );
  }
  for (const method of METHODS) {
    if (!has(method)) throw new TypeError(`keyturn: store.${method} must be a function (a store has create, read and replace)`);
  }
}

// A lone surrogate would reach wasm as U+FFFD: two different names must not become one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** The JS side of a name's rules (its length and emptiness are the core's). */
function checkName(name) {
  if (typeof name !== 'string') throw new TypeError(`keyturn: name must be a non-empty string, got ${describe(name)}`);
  if (!(name.isWellFormed?.() ?? !LONE_SURROGATE.test(name))) throw new TypeError('keyturn: name must be well-formed Unicode (it has a lone surrogate)');
}

/** The manager of a store's locks on `Date.now`, checking the store (for a serializer). */
export function storeManager(store) {
  return managerFor(store, undefined);
}

function managerFor(store, now) {
  let byNow = managers.get(store);
  if (byNow === undefined) {
    checkStore(store);
    byNow = new Map();
    managers.set(store, byNow);
  }
  let manager = byNow.get(now);
  // One whose instance failed is replaced: its locks keep failing, new calls get a fresh one.
  if (manager === undefined || manager.instance.failure !== undefined) {
    manager = new Manager(store, now);
    byNow.set(now, manager);
  }
  return manager;
}

/**
 * The store call the core asked for (`code`, details in its outbox), its answer classified and
 * fed back: a promise of the next step's code — or of `then(code)`, run in the same reaction
 * (an uncontended acquisition or release is one store call: one promise hop less each), with
 * `otherwise()` run before a failure is passed on. A store that throws, rejects or answers
 * something that is not a store's answer is a `LockStoreError` — after the core was told, so it
 * holds nothing. (Promise reactions, not an async function: one hop per store call.)
 */
function exchange(manager, name, ticket, code, then, otherwise) {
  const { core, store } = manager;
  let value;
  let version;
  try {
    value = code === READ ? undefined : core.value();
    version = code === REPLACE ? core.version() : undefined;
  } catch (error) {
    return Promise.reject(passOn(otherwise, manager.failed(error)));
  }
  let call;
  try {
    call = code === CREATE ? store.create(name, value) : code === READ ? store.read(name) : store.replace(name, version, value);
  } catch (error) {
    return Promise.reject(passOn(otherwise, failed(manager, ticket, code, error)));
  }
  return Promise.resolve(call).then(
    (answer) => {
      let next;
      try {
        next = classify(manager, ticket, code, answer);
        if (then === undefined) return next;
        manager.drain();
      } catch (error) {
        throw passOn(otherwise, manager.failed(error));
      }
      return then(next);
    },
    (error) => {
      throw passOn(otherwise, failed(manager, ticket, code, error));
    },
  );
}

/** A failure to pass on, once `otherwise` (if any) ran. */
function passOn(otherwise, error) {
  otherwise?.();
  return error;
}

// A record's fields as the core takes them: a number or NaN, a string or undefined.
const numberOr = (value) => (typeof value === 'number' ? value : NaN);
const stringOr = (value) => (typeof value === 'string' ? value : undefined);

/** The one answer classifier: what the store said, fed to the core; the next step's code. */
function classify(manager, ticket, code, answer) {
  const { core } = manager;
  const now = manager.time();
  if (code === READ) {
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
    throw failed(manager, ticket, code, undefined, wrongAnswer('read', '{ value: string, version: string } or null', answer));
  }
  if (typeof answer === 'string' || answer === null || answer === undefined) {
    return core.step(ticket, code === CREATE ? CREATED : REPLACED, answer ?? undefined, now);
  }
  throw failed(manager, ticket, code, undefined, wrongAnswer(METHODS[code], 'a version string or null', answer));
}

/** Tells the core a call failed (it then holds nothing for it); the error to report. */
function failed(manager, ticket, code, cause, error) {
  try {
    manager.alive();
    manager.core.step(ticket, FAILED, undefined, manager.time());
    manager.drain();
  } catch (trapped) {
    return manager.failed(trapped);
  }
  if (error !== undefined) return error;
  const message = cause instanceof Error ? cause.message : String(cause);
  return new LockStoreError(`store.${METHODS[code]} failed: ${message}`, { cause });
}

/**
 * acquireLock(store, name, { waitMs, staleMs, now, signal }) → Promise<Lock | undefined>
 *
 * Takes the lock `name` in `store`, or resolves to `undefined` when a live holder kept it for
 * the whole `waitMs`. Rejects with a `LockStoreError` when the store fails, the signal's reason
 * when it aborts (nothing left held), a `TypeError` or `RangeError` for bad arguments.
 */
export function acquireLock(store, name, options) {
  let manager;
  let signal;
  let waitMs = LOCK_WAIT_MS;
  let staleMs = LOCK_STALE_MS;
  try {
    let now;
    if (options !== undefined) {
      if (options === null || typeof options !== 'object') throw new TypeError(`keyturn: options must be an object or undefined, got ${describe(options)}`);
      ({ now, signal } = options);
      if (now !== undefined && typeof now !== 'function') throw new TypeError(`keyturn: options.now must be a function or undefined, got ${describe(now)}`);
      if (signal !== undefined && !(typeof signal === 'object' && signal !== null && typeof signal.addEventListener === 'function' && 'aborted' in signal)) {
        throw new TypeError(`keyturn: options.signal must be an AbortSignal or undefined, got ${describe(signal)}`);
      }
      waitMs = number(options.waitMs, 'options.waitMs', waitMs);
      staleMs = number(options.staleMs, 'options.staleMs', staleMs);
    }
    manager = managerFor(store, now);
    manager.alive();
    checkName(name);
  } catch (error) {
    return Promise.reject(manager === undefined ? error : manager.failed(error));
  }
  return acquireWith(manager, name, waitMs, staleMs, signal, false);
}

/**
 * An acquisition on `manager` of a checked name; `serialized`: a serializer's turn, whose streaks
 * of local hand-offs are longer (see `Succession` in src/lock/core.rs).
 */
export function acquireWith(manager, name, waitMs, staleMs, signal, serialized) {
  let waiter;
  let code;
  let ticket;
  try {
    if (signal?.aborted) throw signal.reason;
    waiter = { wake: undefined };
    // Validates the name and the options' ranges: a TypeError or RangeError before anything is
    // queued. (A `now` that throws here fails the call with nothing queued.)
    code = manager.core.acquire(name, waitMs, staleMs, waiter, manager.clock(), serialized);
    ticket = manager.core.lastTicket();
    manager.drain();
    if (signal === undefined && (code === CREATE || code === REPLACE)) {
      // Nobody here in line: the one store call that may take the name, and (mostly) the lock.
      return exchange(manager, name, ticket, code, (next) => {
        try {
          return next === HELD ? new KeyturnLock(manager, ticket, name) : acquiring(manager, name, ticket, next, waiter, undefined);
        } catch (error) {
          throw manager.failed(error);
        }
      });
    }
  } catch (error) {
    return Promise.reject(manager.failed(error));
  }
  return acquiring(manager, name, ticket, code, waiter, signal);
}

/** The rest of an acquisition: waiting in line, polling, the caller's signal. */
async function acquiring(manager, name, ticket, code, waiter, signal) {
  const { core } = manager;
  let aborted = false;
  const onAbort = () => {
    aborted = true;
    // A waiter leaves its line at once; a call in flight is finished first (and undone).
    const wake = waiter.wake;
    if (wake !== undefined) {
      waiter.wake = undefined;
      manager.leave(ticket);
      wake();
    }
  };
  signal?.addEventListener('abort', onAbort);
  let held = false;
  try {
    for (;;) {
      if (code === HELD) {
        held = true;
        const lock = new KeyturnLock(manager, ticket, name);
        if (aborted) {
          // A create that won meanwhile: let it go, then report the abort.
          await lock.release().catch(() => {});
          throw signal.reason;
        }
        return lock;
      }
      if (waiter.failure !== undefined) throw waiter.failure;
      manager.alive();
      if (aborted) throw signal.reason;
      if (code > WAIT) return undefined; // GIVE_UP: the wait is over, nothing held
      if (code === SLEEP) {
        await manager.sleep(waiter, core.until());
        code = core.step(ticket, WOKE, undefined, manager.time());
      } else if (code === WAIT) {
        await manager.wait(waiter, core.until());
        code = core.step(ticket, WOKE, undefined, manager.time());
      } else {
        code = await exchange(manager, name, ticket, code);
      }
      manager.drain();
    }
  } catch (error) {
    throw manager.failed(error);
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // Whatever ended the wait (an abort, a refused timer, a failed store): out of the line.
    if (!held) manager.leave(ticket);
  }
}

/**
 * withLock(store, name, fn, options) → Promise of fn's result
 *
 * Acquires `name`, runs `fn(lock)`, renews the lease every `staleMs / 3` while `fn` runs, and
 * releases when it settles, with `fn`'s value or error as its own. Rejects with
 * `LockUnavailable` when a live holder kept the name for `waitMs`.
 */
export async function withLock(store, name, fn, options) {
  if (typeof fn !== 'function') throw new TypeError(`keyturn: fn must be a function, got ${describe(fn)}`);
  const lock = await acquireLock(store, name, options);
  if (lock === undefined) throw new LockUnavailable(name, options?.waitMs ?? LOCK_WAIT_MS);
  const every = (options?.staleMs ?? LOCK_STALE_MS) / 3;
  let timer;
  let running = true;
  const schedule = () => {
    if (!running) return;
    timer = setTimeout(() => {
      // A failed renewal is tried again next period; a lost lease ends the renewals.
      lock.renew().then((held) => held && schedule(), schedule);
    }, every);
  };
  try {
    schedule();
    return await fn(lock);
  } finally {
    running = false;
    clearTimeout(timer);
    // fn's outcome is withLock's: a release that fails leaves the record to go stale.
    await lock.release().catch(() => {});
  }
}

const released = Promise.resolve();

/** The serializer's release, which announces the works queued behind the next one. */
export const HAND_ON = Symbol('keyturn.handOn');

function lostReason(name, why) {
  return new DOMException(`keyturn: the lease on lock ${name} ${why}`, 'AbortError');
}

/**
 * A held lock: its `name`, its `token` (in the record while held; shared within one hand-off
 * batch), its `fence` (rises with every acquisition of the name) and `heldUntil` (its lease
 * end, moved by `renew`). The core keeps it under `ticket` until it is released or lost.
 */
class KeyturnLock {
  #manager;
  #ticket;
  #name;
  #fence;
  #token;
  #heldUntil;
  /** Released: the core forgot it. */
  #done = false;
  /** Lost (renewal refused, or past heldUntil): never renewed again; a release still frees an unchanged record. */
  #lost = false;
  #renewal;
  #controller;
  #timer;

  constructor(manager, ticket, name) {
    manager.alive();
    const { core } = manager;
    this.#manager = manager;
    this.#ticket = ticket;
    this.#name = name;
    this.#fence = core.fence(ticket);
    this.#token = core.token(ticket);
    this.#heldUntil = core.heldUntil(ticket);
  }

  get name() {
    return this.#name;
  }

  get token() {
    return this.#token;
  }

  get fence() {
    return this.#fence;
  }

  get heldUntil() {
    return this.#heldUntil;
  }

  /** Aborts once this holder has lost the lease; its timer is armed only when first read. */
  get signal() {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#done) this.#controller.abort(lostReason(this.#name, 'was released'));
      else if (this.#lost) this.#controller.abort(lostReason(this.#name, 'was lost: taken over, or past its heldUntil'));
      else this.#watch();
    }
    return this.#controller.signal;
  }

  /** The lease end's timer, for the signal (measured with `now`: checked again when it fires). */
  #watch() {
    if (this.#controller === undefined || this.#done || this.#lost) return;
    clearTimeout(this.#timer);
    const manager = this.#manager;
    this.#timer = setTimeout(() => {
      if (manager.time() >= this.#heldUntil) this.#lose('passed its heldUntil unrenewed');
      else this.#watch();
    }, Math.max(0, this.#heldUntil - manager.time()));
  }

  #lose(why) {
    this.#lost = true;
    clearTimeout(this.#timer);
    this.#controller?.abort(lostReason(this.#name, why));
  }

  /** One CAS moving the lease to `now + staleMs`: true, or false once lost (for good). */
  renew() {
    if (this.#done || this.#lost) return Promise.resolve(false);
    if (this.#renewal === undefined) {
      this.#renewal = this.#renew().finally(() => {
        this.#renewal = undefined;
      });
    }
    return this.#renewal;
  }

  async #renew() {
    const manager = this.#manager;
    let code;
    try {
      manager.alive();
      code = manager.core.renew(this.#ticket, manager.time());
      if (code === REPLACE) code = await exchange(manager, this.#name, this.#ticket, code);
      manager.drain();
    } catch (error) {
      throw manager.failed(error);
    }
    if (code === HELD) {
      this.#heldUntil = manager.core.heldUntil(this.#ticket);
      this.#watch();
      return true;
    }
    this.#lose('was lost: taken over, or past its heldUntil');
    return false;
  }

  /** Gives the lock back: one store call at most; the core decides what it writes. */
  release() {
    return this[HAND_ON](0);
  }

  /** A serializer's release, announcing `followers` turns after the next waiter's. */
  [HAND_ON](followers) {
    if (this.#done) return released;
    this.#done = true;
    clearTimeout(this.#timer);
    const settle = () => this.#release(followers);
    return this.#renewal === undefined ? settle() : this.#renewal.then(settle, settle);
  }

  #release(followers) {
    const manager = this.#manager;
    let code;
    try {
      manager.alive();
      code = manager.core.release(this.#ticket, manager.time(), followers);
      manager.drain();
    } catch (error) {
      this.#released();
      return Promise.reject(manager.failed(error));
    }
    if (code !== REPLACE) {
      this.#released();
      return released;
    }
    const gone = () => this.#released();
    return exchange(manager, this.#name, this.#ticket, code, gone, gone);
  }

  #released() {
    this.#controller?.abort(lostReason(this.#name, 'was released'));
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await acquireLock(…)` releases at the end of the block.
  KeyturnLock.prototype[Symbol.asyncDispose] = function release() {
    return this.release();
  };
}

function checkString(value, what) {
  if (typeof value !== 'string') throw new TypeError(`keyturn: ${what} must be a string, got ${describe(value)}`);
}

/**
 * The embedded store: records in this isolate's memory, with exact create-if-absent and
 * compare-and-set — the crate's `MemoryStore` (src/store.rs), written in JS because a `Map`
 * costs no wasm (the lock module is ~4 KB smaller without it); tests/js/stores.test.mjs holds
 * it to the same contract as every store. Locks over it exclude within one isolate only.
 */
export class MemoryStore {
  #records = new Map();
  #versions = 0;
  #put(key, value) {
    const version = String(++this.#versions);
    this.#records.set(key, { value, version });
    return version;
  }
  /** Resolves to the new version, or null if a record exists. */
  async create(key, value) {
    checkString(key, 'key');
    checkString(value, 'value');
    return this.#records.has(key) ? null : this.#put(key, value);
  }
  /** Resolves to `{ value, version }`, or null. */
  async read(key) {
    checkString(key, 'key');
    const record = this.#records.get(key);
    return record === undefined ? null : { value: record.value, version: record.version };
  }
  /** Resolves to the new version if the record's version is still `version`, else null. */
  async replace(key, version, value) {
    checkString(key, 'key');
    checkString(version, 'version');
    checkString(value, 'value');
    return this.#records.get(key)?.version === version ? this.#put(key, value) : null;
  }
}
