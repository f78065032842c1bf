// acquireLock and withLock over the lock's wasm module (keyturn_lock), which is its own module
// so that code that only serializes never loads it. Static JS, copied into pkg/ by the build.
//
// The entries make one lock API for their platform (`lockApi`): how to instantiate the module
// (on first use, synchronously), and whether lock waiters wait in their own request's context
// (Cloudflare Workers). Its managers — one per store object and `now` — drive the lock's core
// (lock/manager.js); held locks are lock/held.js.
import { LockUnavailable } from './errors.js';
import { LOCK_STATS, MESSAGES } from './constants.js';
import { OptionNames, checkKey, leaseOptions, optionalNumber, optionalSignal, typeError, wrongType } from './arguments.js';
import { KEEP_RENEWED } from './lock/held.js';
import { Manager, liveInstance, waitMs } from './lock/manager.js';
import { acquireSlot } from './lock/slots.js';

/** @typedef {import('./lock/manager.js').Store} Store */
/** @typedef {import('./lock/manager.js').LoadLock} LoadLock */
/** @typedef {import('./lock/held.js').KeyturnLock} KeyturnLock */

/**
 * @typedef {object} LockOptions
 * @property {number} [waitMs]
 * @property {number} [staleMs]
 * @property {number} [maxClockSkewMs]
 * @property {number} [storeTimeoutMs]
 * @property {number} [concurrency]
 * @property {() => number} [now]
 * @property {AbortSignal} [signal]
 */

const LOCK_OPTIONS = new OptionNames(['waitMs', 'staleMs', 'maxClockSkewMs', 'storeTimeoutMs', 'concurrency', 'now', 'signal']);

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

/** The lock API of one platform: one manager per store object and `now`. */
class Locks {
  /**
   * @param {LoadLock} load
   * @param {boolean} waitInOwnContext
   */
  constructor(load, waitInOwnContext) {
    this.load = load;
    this.waitInOwnContext = waitInOwnContext;
    // Weak: a store that goes away takes its managers along.
    /** @type {WeakMap<object, Map<(() => number) | undefined, Manager>>} */
    this.managers = new WeakMap();
  }

  /**
   * @param {unknown} store
   * @param {(() => number) | undefined} now
   * @param {string} what
   */
  manager(store, now, what) {
    let byNow = this.managers.get(/** @type {object} */ (store));
    if (byNow === undefined) {
      checkStore(store, what);
      byNow = new Map();
      this.managers.set(store, byNow);
    }
    let manager = byNow.get(now);
    // One whose instance failed is replaced: its locks keep failing, new calls get a fresh one.
    if (manager === undefined || manager.instance.failure !== undefined) {
      manager = new Manager(liveInstance(this.load), /** @type {Store} */ (store), now, this.waitInOwnContext);
      byNow.set(now, manager);
    }
    return manager;
  }

  /**
   * `acquireLock`: see `lockApi`.
   * @param {unknown} store
   * @param {unknown} name
   * @param {LockOptions | undefined} options
   * @returns {Promise<KeyturnLock | undefined>}
   */
  acquireLock(store, name, options) {
    /** @type {Manager | undefined} */
    let manager;
    let signal;
    let lease;
    try {
      LOCK_OPTIONS.check(options, 'options');
      const now = options?.now;
      if (now !== undefined && typeof now !== 'function') throw wrongType('options.now', 'a function or undefined', now);
      signal = optionalSignal(options?.signal, 'options.signal');
      lease = leaseOptions(options, optionalNumber(options?.waitMs, 'options.waitMs'), optionalNumber(options?.concurrency, 'options.concurrency'));
      manager = this.manager(store, now, 'store');
      manager.alive();
      checkKey(name, 'name');
    } catch (error) {
      return Promise.reject(manager === undefined ? error : manager.failed(error));
    }
    // A name taken one at a time is its own record: the mutex's path, unchanged.
    if (lease.concurrency === undefined || lease.concurrency === 1) return manager.acquire(name, lease, signal, undefined);
    return acquireSlot(manager, name, lease, signal, undefined);
  }

  /**
   * `lockStats`: see `lockApi`.
   * @param {unknown} store
   */
  lockStats(store) {
    const byNow = this.managers.get(/** @type {object} */ (store));
    if (byNow === undefined) {
      checkStore(store, 'store');
      return empty();
    }
    // Every manager of the store (one per `now` passed with it), summed.
    const total = empty();
    for (const manager of byNow.values()) {
      if (manager.instance.failure !== undefined) continue;
      const stats = manager.stats();
      for (const name of LOCK_STATS) total[name] += stats[name];
    }
    return total;
  }

  /**
   * `withLock`: see `lockApi`.
   * @param {unknown} store
   * @param {string} name
   * @param {(lock: KeyturnLock) => unknown} fn
   * @param {LockOptions | undefined} options
   */
  async withLock(store, name, fn, options) {
    if (typeof fn !== 'function') throw wrongType('fn', 'a function', fn);
    const lock = await this.acquireLock(store, name, options);
    if (lock === undefined) throw new LockUnavailable(name, waitMs(options?.waitMs));
    const stop = lock[KEEP_RENEWED](() => {});
    try {
      return await fn(lock);
    } finally {
      stop();
      // fn's outcome is withLock's: a release that fails leaves the record to go stale.
      await lock.release().catch(() => {});
    }
  }
}

/**
 * The package's lock API for a platform: `load(glue)` instantiates the lock module (once);
 * `waitInOwnContext`: each waiter also arms a timer in its own caller's context (Workers).
 *
 * acquireLock(store, name, { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, concurrency, now,
 * signal }) → Promise<Lock | undefined> takes the lock `name` in `store` — one of its
 * `concurrency` slots (lock/slots.js) — or resolves to `undefined` when live holders kept it
 * for the whole `waitMs`; it settles within `waitMs` plus one store call's bound
 * (`storeTimeoutMs`). It rejects with a `LockStoreError` when the store fails (or does not
 * answer within its bound), a `ConcurrencyMismatch` when the name is taken with another
 * `concurrency`, the signal's reason the moment it aborts (nothing left held), a `TypeError` or
 * `RangeError` for bad arguments.
 *
 * withLock(store, name, fn, options) → Promise of fn's result acquires `name`, runs `fn(lock)`,
 * renews the lease while `fn` runs (as the core says: every `staleMs / 3`, a failed renewal tried
 * again while the lease has time left), and releases when it settles, with `fn`'s value or error
 * as its own; `LockUnavailable` when a live holder kept the name for `waitMs`.
 *
 * lockStats(store) → what the locks of `store` did in this isolate (see `LockStats`).
 */
/**
 * @param {{ load: LoadLock, waitInOwnContext?: boolean }} platform
 */
export function lockApi({ load, waitInOwnContext = false }) {
  const locks = new Locks(load, waitInOwnContext);
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
    /**
     * The manager of a store's locks on `Date.now`, checking the store (for a serializer).
     * @param {unknown} store
     * @param {string} what
     */
    storeManager: (store, what) => locks.manager(store, undefined, what),
  };
}
