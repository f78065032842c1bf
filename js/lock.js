// acquireLock and withLock over the lock's wasm module (keyturn_lock), which is its own module
// so that code that only serializes never loads it. Static JS, copied into pkg/ by the build.
//
// The entries make one lock API for their platform (`lockApi`): how to instantiate the module
// (on first use, synchronously), and whether lock waiters wait in their own request's context
// (Cloudflare Workers). Its managers — one per store object and `now` — drive the lock's core
// (lock/manager.js); held locks are lock/held.js.
import { LockStoreError, LockUnavailable } from './errors.js';
import { LOCK_STALE_MS, LOCK_STATS, LOCK_WAIT_MS, MESSAGES } from './constants.js';
import { OptionNames, checkKey, leaseOptions, optionalNumber, optionalSignal, typeError, wrongType } from './arguments.js';
import { KEEP_RENEWED } from './lock/held.js';
import { Manager, liveInstance } from './lock/manager.js';

export { LockStoreError, LockUnavailable, LOCK_STALE_MS, LOCK_WAIT_MS };

const LOCK_OPTIONS = new OptionNames(['waitMs', 'staleMs', 'maxClockSkewMs', 'storeTimeoutMs', 'now', 'signal']);

/** A store is an object with the three methods; a Workers KV namespace is refused, saying why. */
function checkStore(store, what) {
  if (typeof store !== 'object' || store === null) throw wrongType(what, 'an object with create, read and replace methods', store);
  const has = (method) => typeof store[method] === 'function';
  if (!has('create') && !has('read') && has('getWithMetadata') && has('list')) throw typeError(MESSAGES.storeIsKv, { what });
  for (const method of ['create', 'read', 'replace']) {
    if (!has(method)) throw typeError(MESSAGES.storeMethodMissing, { what, method });
  }
}

/** Counters at 0, by the names of `LOCK_STATS`. */
const empty = () => Object.fromEntries(LOCK_STATS.map((name) => [name, 0]));

/** The lock API of one platform: one manager per store object and `now`. */
class Locks {
  constructor(load, waitInOwnContext) {
    this.load = load;
    this.waitInOwnContext = waitInOwnContext;
    // Weak: a store that goes away takes its managers along.
    this.managers = new WeakMap();
  }

  manager(store, now, what) {
    let byNow = this.managers.get(store);
    if (byNow === undefined) {
      checkStore(store, what);
      byNow = new Map();
      this.managers.set(store, byNow);
    }
    let manager = byNow.get(now);
    // One whose instance failed is replaced: its locks keep failing, new calls get a fresh one.
    if (manager === undefined || manager.instance.failure !== undefined) {
      manager = new Manager(liveInstance(this.load), store, now, this.waitInOwnContext);
      byNow.set(now, manager);
    }
    return manager;
  }

  /** `acquireLock`: see `lockApi`. */
  acquireLock(store, name, options) {
    let manager;
    let signal;
    let lease;
    try {
      LOCK_OPTIONS.check(options, 'options');
      const now = options?.now;
      if (now !== undefined && typeof now !== 'function') throw wrongType('options.now', 'a function or undefined', now);
      signal = optionalSignal(options?.signal, 'options.signal');
      lease = leaseOptions(options, optionalNumber(options?.waitMs, 'options.waitMs', LOCK_WAIT_MS));
      manager = this.manager(store, now, 'store');
      manager.alive();
      checkKey(name, 'name');
    } catch (error) {
      return Promise.reject(manager === undefined ? error : manager.failed(error));
    }
    return manager.acquire(name, lease, signal, NaN);
  }

  /** `lockStats`: see `lockApi`. */
  lockStats(store) {
    const byNow = this.managers.get(store);
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

  /** `withLock`: see `lockApi`. */
  async withLock(store, name, fn, options) {
    if (typeof fn !== 'function') throw wrongType('fn', 'a function', fn);
    const lock = await this.acquireLock(store, name, options);
    if (lock === undefined) throw new LockUnavailable(name, options?.waitMs ?? LOCK_WAIT_MS);
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
 * acquireLock(store, name, { waitMs, staleMs, maxClockSkewMs, storeTimeoutMs, now, signal }) →
 * Promise<Lock | undefined> takes the lock `name` in `store`, or resolves to `undefined` when a
 * live holder kept it for the whole `waitMs`; it settles within `waitMs` plus one store call's
 * bound (`storeTimeoutMs`). It rejects with a `LockStoreError` when the store fails (or does
 * not answer within its bound), the signal's reason the moment it aborts (nothing left held), a
 * `TypeError` or `RangeError` for bad arguments.
 *
 * withLock(store, name, fn, options) → Promise of fn's result acquires `name`, runs `fn(lock)`,
 * renews the lease while `fn` runs (as the core says: every `staleMs / 3`, a failed renewal tried
 * again while the lease has time left), and releases when it settles, with `fn`'s value or error
 * as its own; `LockUnavailable` when a live holder kept the name for `waitMs`.
 *
 * lockStats(store) → what the locks of `store` did in this isolate (see `LockStats`).
 */
export function lockApi({ load, waitInOwnContext = false }) {
  const locks = new Locks(load, waitInOwnContext);
  return {
    acquireLock: (store, name, options) => locks.acquireLock(store, name, options),
    withLock: (store, name, fn, options) => locks.withLock(store, name, fn, options),
    lockStats: (store) => locks.lockStats(store),
    /** The manager of a store's locks on `Date.now`, checking the store (for a serializer). */
    storeManager: (store, what) => locks.manager(store, undefined, what),
  };
}
