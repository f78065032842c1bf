// acquireLock and MemoryStore over the lock's wasm module (keyturn_lock), which is its own
// module so that code that only serializes never loads it. Static JS, copied into pkg/ by the
// build. The entry tells `setLockLoader` how to instantiate the module; it is instantiated on
// first use (synchronously: Node reads it from disk, workerd has it compiled, a browser entry
// fetched it up front).
import * as glue from './keyturn_lock.js';
import { LockStoreError } from './errors.js';

export { LockStoreError };

let load;
let loaded = false;

/** Called once by the entry: `load(glue)` instantiates the lock module synchronously. */
export function setLockLoader(loader) {
  load = loader;
}

function lockModule() {
  if (!loaded) {
    load(glue);
    loaded = true;
  }
  return glue;
}

/** How long one acquisition waits for a live holder before answering nothing, as the seed. */
export const LOCK_WAIT_MS = 100;

/** The age past which a held lock record is abandoned and taken over, as the seed. */
export const LOCK_STALE_MS = 2000;

const storeError = (message, cause) => new LockStoreError(message, cause === undefined ? undefined : { cause });

// One manager per store object (and `now`) in this isolate, so that contenders for a name
// queue locally and only the head talks to the store. Weak: a store that goes away takes its
// managers with it.
const managers = new WeakMap();

function managerFor(store, options) {
  const now = options !== null && typeof options === 'object' ? options.now : undefined;
  if (store === null || (typeof store !== 'object' && typeof store !== 'function')) {
    return new (lockModule().LockManagerCore)(store, now, storeError); // throws the TypeError naming `store`
  }
  let byNow = managers.get(store);
  if (byNow === undefined) {
    byNow = new Map();
    managers.set(store, byNow);
  }
  let manager = byNow.get(now);
  if (manager === undefined) {
    manager = new (lockModule().LockManagerCore)(store, now, storeError);
    byNow.set(now, manager);
  }
  return manager;
}

/**
 * acquireLock(store, name, { waitMs, staleMs, now }) → Promise<Lock | undefined>
 *
 * Takes the lock `name` in `store`, or resolves to `undefined` when a live holder kept it for
 * the whole `waitMs`. Rejects with a `LockStoreError` when the store fails, a `TypeError` or
 * `RangeError` for bad arguments.
 */
export function acquireLock(store, name, options) {
  // Not `async`: that would add promise hops to every acquisition. A bad argument still
  // rejects rather than throws.
  let manager;
  let first;
  let waitMs;
  let staleMs;
  try {
    manager = managerFor(store, options);
    // Read here, where a property read is cheap; the lock module checks them (and `options`).
    if (typeof options === 'object' && options !== null) {
      waitMs = options.waitMs;
      staleMs = options.staleMs;
    }
    // Nobody here in line for `name`: the one store call that may take it is made already.
    first = manager.tryFirst(name, options, waitMs, staleMs);
  } catch (error) {
    return Promise.reject(error);
  }
  if (first === undefined) return manager.acquire(name, options, waitMs, staleMs);
  return finishFirst(manager, name, first);
}

async function finishFirst(manager, name, first) {
  let answer;
  let failed = false;
  try {
    answer = await first;
  } catch (error) {
    answer = error;
    failed = true;
  }
  // The lock, or the promise of the rest of the acquisition (somebody else's record is there).
  return manager.finishFirst(name, answer, failed);
}

// A release is one store call at most; the lock module decides what it writes.
glue.KeyturnLock.prototype.release = async function release() {
  const pending = this.beginRelease();
  if (pending === undefined) return;
  let answer;
  let failed = false;
  try {
    answer = await pending;
  } catch (error) {
    answer = error;
    failed = true;
  }
  this.finishRelease(answer, failed);
};

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await acquireLock(…)` releases at the end of the block.
  glue.KeyturnLock.prototype[Symbol.asyncDispose] = function release() {
    return this.release();
  };
}

/**
 * The embedded store: records in this isolate's memory, with exact create-if-absent and
 * compare-and-set (the crate's `MemoryStore`). Locks over it exclude within one isolate only.
 */
export class MemoryStore {
  #store;
  constructor() {
    this.#store = new (lockModule().MemoryStore)();
  }
  /** Resolves to the new version, or null if a record exists. */
  create(key, value) {
    return this.#store.create(key, value);
  }
  /** Resolves to `{ value, version }`, or null. */
  read(key) {
    return this.#store.read(key);
  }
  /** Resolves to the new version if the record's version is still `version`, else null. */
  replace(key, version, value) {
    return this.#store.replace(key, version, value);
  }
}
