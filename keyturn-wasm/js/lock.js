// acquireLock, withLock and lockStats (index.d.ts) over the lock module's engine (keyturn_lock),
// its own module so that code that only serializes never loads it. One engine host per store
// object and `now`; the engine decides every acquisition, renewal, release, wait and bound, and
// this file keeps the JavaScript surface: promises, `signal`, `await using`. Static JS, copied
// into pkg/ by the build.
import { ConcurrencyMismatch, LockUnavailable, abortError } from './errors.js';
import {
  EFFECT_ARM,
  EFFECT_LOCK_LOST,
  EFFECT_SETTLE,
  EVENT_ABORT,
  EVENT_FIRED_CALL,
  EVENT_KEEP_RENEWED,
  EVENT_RELEASE,
  EVENT_RENEW,
  EVENT_WATCH,
  FIELD_CODE,
  FIELD_FENCE,
  FIELD_FOUND,
  FIELD_HELD_UNTIL,
  FIELD_TOOK_OVER,
  FIELD_ID,
  FIELD_SLOT,
  FIELD_TOKEN_COUNT,
  DETAIL_ISOLATE,
  LOCK_STATS,
  MESSAGES,
  OUTCOME_ABORTED,
  OUTCOME_HELD,
  OUTCOME_MISMATCH,
  OUTCOME_NOT_RENEWED,
  OUTCOME_RELEASED,
  OUTCOME_RENEWED,
  OUTCOME_TIMER_REFUSED,
  OUTCOME_UNAVAILABLE,
  QUERY_LOCK_STAT,
  QUERY_WAIT_MS,
  REFUSED_CONCURRENCY_MISMATCH,
  WHY_RELEASED,
  WHY_TAKEN_OVER,
} from './constants.js';
import { OptionNames, checkKey, optionalFunction, optionalNumber, optionalSignal, refusalError, typeError, wrongType } from './arguments.js';
import { Door, Host } from './engine.js';
import { channels } from './tracing.js';

/** @typedef {import('./engine.js').Box} Box */

/** @typedef {import('./engine.js').Store} Store */
/** @typedef {import('./instance.js').Instance} Instance */

/** @typedef {import('./index.d.ts').LockOptions} LockOptions */

// Other libraries' words for these options: a lock's "timeout" is how long it waits for the
// name (not the bound on one store call), its "ttl" or "lease" how long a holder keeps it.
const LOCK_OPTIONS = new OptionNames(['waitMs', 'staleMs', 'maxClockSkewMs', 'storeTimeoutMs', 'concurrency', 'now', 'signal'], {
  timeout: 'waitMs', wait: 'waitMs', deadline: 'waitMs', acquiretimeout: 'waitMs', retry: 'waitMs',
  ttl: 'staleMs', lease: 'staleMs', leasetime: 'staleMs', expiry: 'staleMs', expires: 'staleMs', duration: 'staleMs',
  skew: 'maxClockSkewMs', clockskew: 'maxClockSkewMs', slots: 'concurrency', permits: 'concurrency', max: 'concurrency',
  clock: 'now', abortsignal: 'signal',
});

/**
 * The box of every call off Workers, where nothing is posted (frozen: a post to it throws).
 * @type {Box}
 */
const UNPOSTED = Object.freeze({ mail: undefined, doors: undefined });

/**
 * A call about locks that answers one promise: an acquisition, a renewal, a release.
 */
class LockCall {
  /**
   * @param {Host} host
   * @param {(value: any) => void} resolve
   * @param {(error: unknown) => void} reject
   */
  constructor(host, resolve, reject) {
    this.host = host;
    this.resolve = resolve;
    this.reject = reject;
    this.handle = host.instance.hold(this);
    this.id = -1;
    /** @type {unknown} its first store failure */
    this.failure = undefined;
    /** @type {ReturnType<typeof setTimeout> | undefined} on Workers: its own timer */
    this.timer = undefined;
    /** @type {Box} on Workers: what is posted to it, and its door (in its caller's request) */
    this.box = UNPOSTED;
    if (host.perCall) {
      this.box = { mail: undefined, doors: undefined };
      this.box.doors = [new Door(host, this.box, this.handle)];
    }
  }

  /**
   * What the engine says of this call.
   * @param {Host} host
   * @param {number} kind
   */
  effect(host, kind) {
    if (kind === EFFECT_SETTLE) {
      this.settle(host.field(FIELD_CODE), host);
    } else if (kind === EFFECT_ARM) {
      host.arm(this, () => host.event(EVENT_FIRED_CALL, this.id, 0, this.handle), -1, this.id);
    }
  }

  /**
   * Its instance failed: it rejects with the failure.
   * @param {Error} failure
   */
  failed(failure) {
    this.reject(failure);
  }

  /** Its handle and its timer go: the engine names it no more. */
  done() {
    this.host.instance.letGo(this.handle);
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /**
   * @param {number} outcome
   * @param {Host} host
   */
  settle(outcome, host) {
    this.done();
    if (outcome === OUTCOME_RENEWED) this.resolve(host.field(FIELD_HELD_UNTIL));
    else if (outcome === OUTCOME_RELEASED) this.resolve(undefined);
    else if (outcome === OUTCOME_NOT_RENEWED) this.resolve(false);
    else this.reject(outcome === OUTCOME_TIMER_REFUSED ? host.refusal : this.failure);
  }
}

/** An acquisition: its lock, `undefined` when live holders kept the name, or its failure. */
class Acquisition extends LockCall {
  /**
   * @param {Host} host
   * @param {string} name
   * @param {number} concurrency
   * @param {AbortSignal | undefined} signal
   * @param {(value: any) => void} resolve
   * @param {(error: unknown) => void} reject
   */
  constructor(host, name, concurrency, signal, resolve, reject) {
    super(host, resolve, reject);
    this.name = name;
    this.concurrency = concurrency;
    this.signal = signal;
    /** When it was asked for, while `keyturn:lock:acquire` has a subscriber (NaN otherwise). */
    this.askedAt = channels !== undefined && channels.acquire.hasSubscribers ? performance.now() : NaN;
  }

  /** Its signal aborted: it rejects at once; what a store call in flight takes is given back. */
  handleEvent() {
    this.host.event(EVENT_ABORT, this.id, 0, this.handle);
  }

  /**
   * @override
   * @param {number} outcome
   * @param {Host} host
   */
  settle(outcome, host) {
    this.signal?.removeEventListener('abort', this);
    if (outcome === OUTCOME_HELD) {
      const lock = new KeyturnLock(host, this);
      host.instance.replace(this.handle, lock);
      if (channels !== undefined && channels.acquire.hasSubscribers) {
        const waitedMs = Number.isNaN(this.askedAt) ? undefined : performance.now() - this.askedAt;
        const tookOver = host.field(FIELD_TOOK_OVER) === 1;
        channels.acquire.publish({ name: this.name, slot: lock.slot, fence: lock.fence, heldUntil: lock.heldUntil, waitedMs, tookOver });
      }
      this.resolve(lock);
      return;
    }
    this.done();
    if (outcome === OUTCOME_UNAVAILABLE) this.resolve(undefined);
    else if (outcome === OUTCOME_ABORTED) this.reject(/** @type {AbortSignal} */ (this.signal).reason);
    else if (outcome === OUTCOME_MISMATCH) this.reject(new ConcurrencyMismatch(this.name, this.concurrency, host.field(FIELD_FOUND)));
    else this.reject(outcome === OUTCOME_TIMER_REFUSED ? host.refusal : this.failure);
  }
}

/**
 * A held lock: its `name`, its `token` (in the record while held; shared within one hand-off
 * batch), its `fence` (rises with every acquisition of the name), its `slot` and `heldUntil`
 * (its lease end, moved by `renew`). Whether it is held, lost or released is the engine's to
 * say.
 */
export class KeyturnLock {
  /** @type {Host} */
  #host;
  /** The engine's name for it (its acquisition's). */
  #id;
  /** The number the instance holds it under while the engine names it (-1 once released). */
  #handle;
  #name;
  #slot;
  #fence;
  #tokenCount;
  #heldUntil;
  /** @type {AbortController | undefined} `signal`'s, made when it is first read. */
  #controller;
  /** @type {{ timer?: ReturnType<typeof setTimeout>, box: Box }} on Workers: its own timer (its renewals'), and what is posted to it */
  #own;
  /** When it was acquired, while `keyturn:lock:release` has a subscriber (NaN otherwise). */
  #acquiredAt = channels !== undefined && channels.release.hasSubscribers ? performance.now() : NaN;

  /**
   * The lock `acquisition` took, as the `HELD` outcome being done says. The acquisition's
   * handle is the lock's from now on: the engine names the lock by it. Its timer (which the
   * engine counts on) and its box are the lock's too: one owner, whichever of the two an effect
   * reaches.
   * @param {Host} host
   * @param {Acquisition} acquisition
   */
  constructor(host, acquisition) {
    this.#own = acquisition;
    this.#host = host;
    this.#id = acquisition.id;
    this.#handle = acquisition.handle;
    this.#name = acquisition.name;
    this.#slot = host.field(FIELD_SLOT);
    this.#fence = host.field(FIELD_FENCE);
    this.#tokenCount = host.field(FIELD_TOKEN_COUNT);
    this.#heldUntil = host.field(FIELD_HELD_UNTIL);
  }

  get name() {
    return this.#name;
  }

  /** Which of its name's `concurrency` slots it holds: 0 … N − 1 (0 for a name taken one at a time). */
  get slot() {
    return this.#slot;
  }

  /** Its isolate's id and a count in 16 hex digits: made only when read. */
  get token() {
    const host = this.#host;
    host.isolateId ??= String(host.engine.detail(DETAIL_ISOLATE));
    return host.isolateId + this.#tokenCount.toString(16).padStart(16, '0');
  }

  get fence() {
    return this.#fence;
  }

  get heldUntil() {
    return this.#heldUntil;
  }

  /** Aborts once this holder has lost the lease or released it; watched only once read. */
  get signal() {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      const { instance } = this.#host;
      // Released, the engine names it no more: held for the answer only (it comes at once).
      const handle = this.#handle === -1 ? instance.hold(this) : this.#handle;
      this.#host.event(EVENT_WATCH, this.#id, handle, handle);
      if (handle !== this.#handle) instance.letGo(handle);
    }
    return this.#controller.signal;
  }

  /**
   * What the engine says of this lock: its signal aborts, its renewals' timer.
   * @param {Host} host
   * @param {number} kind
   */
  effect(host, kind) {
    if (kind === EFFECT_LOCK_LOST) {
      const why = host.field(FIELD_CODE);
      const template = why === WHY_RELEASED ? MESSAGES.lockReleased : why === WHY_TAKEN_OVER ? MESSAGES.lockLost : MESSAGES.lockLapsed;
      if (why !== WHY_RELEASED && channels !== undefined && channels.lost.hasSubscribers) {
        channels.lost.publish({ name: this.#name, slot: this.#slot, fence: this.#fence, reason: why === WHY_TAKEN_OVER ? 'takenOver' : 'lapsed' });
      }
      this.#controller?.abort(abortError(template, { name: this.#name }));
    } else if (kind === EFFECT_ARM) {
      const handle = this.#handle;
      host.arm(this.#own, () => host.event(EVENT_FIRED_CALL, this.#id, 0, handle), -1, this.#id);
    }
  }

  /** On Workers: what is posted to it (see `Host.post`). */
  get box() {
    return this.#own.box;
  }

  /** One CAS moving the lease to `now + staleMs`: true, or false once lost (for good). */
  renew() {
    const failure = this.#host.instance.failure;
    if (failure !== undefined) return Promise.reject(failure);
    return this.#call(EVENT_RENEW).then((heldUntil) => {
      if (heldUntil === false) return false;
      this.#heldUntil = /** @type {number} */ (heldUntil);
      return true;
    });
  }

  /**
   * Renews while its holder works (`withLock`), as the engine says, until released or lost.
   * @param {boolean} keep
   */
  keepRenewed(keep) {
    this.#host.event(EVENT_KEEP_RENEWED, this.#id, keep ? 1 : 0, this.#handle);
  }

  /**
   * A renewal or a release (`kind`), as a call of its own: its promise, settled as the engine says.
   * @param {number} kind
   */
  #call(kind) {
    const host = this.#host;
    return new Promise((resolve, reject) => {
      const call = new LockCall(host, resolve, reject);
      host.event(kind, this.#id, call.handle, call.handle);
    });
  }

  /** Gives the lock back: one store call at most; the engine decides what it writes. */
  release() {
    const host = this.#host;
    if (host.instance.failure !== undefined) return Promise.reject(host.instance.failure);
    // (A release's call resolves with nothing: its promise is the caller's as it is.)
    const released = this.#call(EVENT_RELEASE);
    if (this.#handle !== -1 && channels !== undefined && channels.release.hasSubscribers) {
      const heldMs = Number.isNaN(this.#acquiredAt) ? undefined : performance.now() - this.#acquiredAt;
      channels.release.publish({ name: this.#name, slot: this.#slot, fence: this.#fence, heldMs });
    }
    // Its handle is named no more: the engine forgot the lock (its signal was told).
    if (this.#handle !== -1) {
      host.instance.letGo(this.#handle);
      this.#handle = -1;
    }
    clearTimeout(this.#own.timer);
    return /** @type {Promise<void>} */ (released);
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await acquireLock(…)` releases at the end of the block.
  Object.defineProperty(KeyturnLock.prototype, Symbol.asyncDispose, {
    /** @this {KeyturnLock} */
    value: function release() {
      return this.release();
    },
    writable: true,
    configurable: true,
  });
}

/**
 * A store is an object with the three methods; a Workers KV namespace is refused, saying why.
 * @param {unknown} store
 * @param {string} what
 * @returns {asserts store is Store}
 */
function checkStore(store, what) {
  if (typeof store !== 'object' || store === null) throw wrongType(what, 'an object with create, read and replace methods', store);
  /** @param {string} method */
  const has = (method) => typeof (/** @type {Record<string, unknown>} */ (store))[method] === 'function';
  if (!has('create') && !has('read') && has('getWithMetadata') && has('list')) throw typeError(MESSAGES.storeIsKv, { what });
  for (const method of ['create', 'read', 'replace']) {
    if (!has(method)) throw typeError(MESSAGES.storeMethodMissing, { what, method });
  }
}

/**
 * Counters at 0, by the names of `LOCK_STATS`.
 * @returns {Record<string, number>}
 */
const empty = () => Object.fromEntries(LOCK_STATS.map((name) => [name, 0]));

/**
 * How the lock module is had: its generated JS (see `Host`) and live instance, loaded on first
 * use.
 * @typedef {() => { glue: any, instance: () => Instance }} LoadLock
 */

/** The lock API of one platform: one engine host per store object and `now`. */
export class Locks {
  /**
   * @param {LoadLock} load
   * @param {boolean} inContext a timer per call, in its own request (Workers)
   */
  constructor(load, inContext) {
    this.load = load;
    this.inContext = inContext;
    // Weak: a store that goes away takes its hosts along.
    /** @type {WeakMap<object, Map<(() => number) | undefined, Host>>} */
    this.hosts = new WeakMap();
  }

  /**
   * The host of `store`'s locks on `now` (a store checked the first time).
   * @param {unknown} store
   * @param {(() => number) | undefined} now
   * @param {string} what
   */
  host(store, now, what) {
    let byNow = this.hosts.get(/** @type {object} */ (store));
    if (byNow === undefined) {
      checkStore(store, what);
      byNow = new Map();
      this.hosts.set(store, byNow);
    }
    let host = byNow.get(now);
    // One whose instance failed is replaced: its locks keep failing, new calls get a fresh one.
    if (host === undefined || host.instance.failure !== undefined) {
      const { glue, instance } = this.load();
      host = new Host(glue, instance(), /** @type {Store} */ (store), now, this.inContext);
      byNow.set(now, host);
    }
    return host;
  }

  /**
   * `acquireLock`.
   * @param {unknown} store
   * @param {unknown} name
   * @param {LockOptions | undefined} options
   * @returns {Promise<KeyturnLock | undefined>}
   */
  acquireLock(store, name, options) {
    /** @type {Host | undefined} */
    let host;
    try {
      LOCK_OPTIONS.check(options, 'options');
      const now = optionalFunction(options?.now, 'options.now');
      const signal = optionalSignal(options?.signal, 'options.signal');
      const given = {
        key: name,
        waitMs: optionalNumber(options?.waitMs, 'options.waitMs'),
        staleMs: optionalNumber(options?.staleMs, 'options.staleMs'),
        maxClockSkewMs: optionalNumber(options?.maxClockSkewMs, 'options.maxClockSkewMs'),
        storeTimeoutMs: optionalNumber(options?.storeTimeoutMs, 'options.storeTimeoutMs'),
        concurrency: optionalNumber(options?.concurrency, 'options.concurrency'),
      };
      host = this.host(store, now, 'store');
      const h = host;
      if (h.instance.failure !== undefined) throw h.instance.failure;
      checkKey(name, 'name');
      if (signal?.aborted) return Promise.reject(signal.reason);
      // (A `now` that throws here fails this acquisition with its error.)
      const wall = h.wall(true);
      return new Promise((resolve, reject) => {
        const call = new Acquisition(h, /** @type {string} */ (name), given.concurrency ?? 1, signal, resolve, reject);
        let kind;
        try {
          kind = h.engine.acquire(name, call.handle, given.waitMs, given.staleMs, given.maxClockSkewMs, given.storeTimeoutMs, given.concurrency, wall, performance.now());
        } catch (error) {
          reject(h.instance.failed(error));
          return;
        }
        if (kind < 0) {
          call.done();
          reject(kind === REFUSED_CONCURRENCY_MISMATCH ? new ConcurrencyMismatch(/** @type {string} */ (name), given.concurrency ?? 1, h.read(FIELD_FOUND)) : refusalError(kind, given, 'name'));
          return;
        }
        call.id = h.read(FIELD_ID);
        signal?.addEventListener('abort', call);
        h.applyAs(call.handle, kind);
      });
    } catch (error) {
      return Promise.reject(host === undefined ? error : host.instance.failed(error));
    }
  }

  /**
   * `lockStats`.
   * @param {unknown} store
   */
  lockStats(store) {
    const byNow = this.hosts.get(/** @type {object} */ (store));
    if (byNow === undefined) {
      checkStore(store, 'store');
      return empty();
    }
    // Every host of the store (one per `now` passed with it), summed.
    const total = empty();
    for (const host of byNow.values()) {
      if (host.instance.failure !== undefined) continue;
      LOCK_STATS.forEach((name, i) => {
        total[name] += host.engine.query(QUERY_LOCK_STAT, i, undefined, undefined);
      });
    }
    return total;
  }

  /**
   * `withLock`. Its work's outcome is its own once it ran, whatever the release
   * answers: a release that fails leaves the record to lapse, and a caller whose work
   * succeeded must not be led to run it again.
   * @param {unknown} store
   * @param {string} name
   * @param {(lock: KeyturnLock) => unknown} fn
   * @param {LockOptions | undefined} options
   */
  async withLock(store, name, fn, options) {
    if (typeof fn !== 'function') throw wrongType('fn', 'a function', fn);
    const lock = await this.acquireLock(store, name, options);
    if (lock === undefined) {
      const host = this.host(store, options?.now, 'store');
      throw new LockUnavailable(name, host.engine.query(QUERY_WAIT_MS, 0, options?.waitMs, undefined));
    }
    lock.keepRenewed(true);
    try {
      return await fn(lock);
    } finally {
      lock.keepRenewed(false);
      await lock.release().catch(() => {});
    }
  }
}

/**
 * The package's lock API for a platform (index.d.ts documents it).
 * @param {Locks} locks
 */
export function lockApi(locks) {
  return {
    /**
     * @param {unknown} store
     * @param {unknown} name
     * @param {LockOptions} [options]
     */
    acquireLock: (store, name, options) => locks.acquireLock(store, name, options),
    /**
     * @param {unknown} store
     * @param {string} name
     * @param {(lock: KeyturnLock) => unknown} fn
     * @param {LockOptions} [options]
     */
    withLock: (store, name, fn, options) => locks.withLock(store, name, fn, options),
    /** @param {unknown} store */
    lockStats: (store) => locks.lockStats(store),
  };
}

