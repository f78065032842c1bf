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

import { LOCK_STALE_MS, LOCK_WAIT_MS } from './constants.js';

export { LOCK_STALE_MS, LOCK_WAIT_MS };

const storeError = (message, cause) => new LockStoreError(message, cause === undefined ? undefined : { cause });

// One manager per store object (and `now`) in this isolate, so that contenders for a name
// queue locally and only the head talks to the store. Weak: a store that goes away takes its
// managers with it.
const managers = new WeakMap();

// What a manager is to this file: the lock module's core; `name`, the lock name of the core
// call in progress (the store calls `start` makes are under it); and `lastId`, the id of the
// store call the core last made through `start`, -1 for none. Each caller saves both, sets
// them, calls the core, reads `lastId` and puts the saved values back, so a store method or
// `now` that calls back in (a nested acquisition) leaves the outer call seeing only its own.
function newManager(store, now) {
  const Core = lockModule().LockManagerCore;
  const manager = { core: undefined, lastId: -1, name: undefined };
  // Locks are plain JS objects holding an id into the manager: no finalizer per lock.
  const newLock = (id, name, fence, token) => new KeyturnLock(manager, id, name, fence, token);
  let create;
  let replace;
  // The store call of a first call or a release, made here rather than from wasm: a JS call
  // and no Promise.resolve (its answer is awaited as it is).
  const start = (id, version, value) => {
    const { name } = manager;
    let answer;
    try {
      answer = version === undefined ? create.call(store, name, value) : replace.call(store, name, version, value);
    } catch (error) {
      answer = Promise.reject(error);
    }
    manager.lastId = id;
    return answer;
  };
  manager.core = new Core(store, now, storeError, newLock, start); // throws the TypeError naming `store`
  // The methods the core checked (and keeps, for the calls it makes itself).
  ({ create, replace } = store);
  return manager;
}

function managerFor(store, options) {
  const now = options !== null && typeof options === 'object' ? options.now : undefined;
  if (store === null || (typeof store !== 'object' && typeof store !== 'function')) {
    return newManager(store, now);
  }
  let byNow = managers.get(store);
  if (byNow === undefined) {
    byNow = new Map();
    managers.set(store, byNow);
  }
  let manager = byNow.get(now);
  if (manager === undefined) {
    manager = newManager(store, now);
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
  let id = -1;
  try {
    manager = managerFor(store, options);
    // Read here, where a property read is cheap: the fast path takes numbers (defaults put in
    // here); anything else goes to `acquire`, which names it in its error.
    const plain = options === undefined || (typeof options === 'object' && options !== null);
    if (plain && options !== undefined) {
      waitMs = options.waitMs;
      staleMs = options.staleMs;
    }
    if (typeof name === 'string' && plain && (waitMs === undefined || typeof waitMs === 'number') && (staleMs === undefined || typeof staleMs === 'number')) {
      const saved = manager.lastId;
      const savedName = manager.name;
      manager.lastId = -1;
      manager.name = name;
      try {
        // Nobody here in line for `name`: the one store call that may take it is made already.
        first = manager.core.tryFirst(name, waitMs ?? LOCK_WAIT_MS, staleMs ?? LOCK_STALE_MS);
        id = manager.lastId;
      } finally {
        manager.lastId = saved;
        manager.name = savedName;
      }
    }
  } catch (error) {
    return Promise.reject(error);
  }
  if (id === -1) return manager.core.acquire(name, options, waitMs, staleMs);
  return finishFirst(manager.core, id, name, first);
}

// How a store call settled, for the lock module: a version string, null or undefined, a
// rejection, or anything else (which it reports as a wrong answer).
const VERSION = 0;
const NONE = 1;
const FAILED = 2;
const OTHER = 3;
const kindOf = (answer) => (typeof answer === 'string' ? VERSION : answer === null || answer === undefined ? NONE : OTHER);

async function finishFirst(core, id, name, first) {
  let answer;
  let kind;
  try {
    answer = await first;
    kind = kindOf(answer);
  } catch (error) {
    answer = error;
    kind = FAILED;
  }
  // The lock, or the promise of the rest of the acquisition (somebody else's record is there).
  return core.finishFirst(id, name, answer, kind);
}

const released = Promise.resolve();

/**
 * A held lock: its `name`, its `token` (in the record while held; shared within one hand-off
 * batch) and its `fence` (rises with every acquisition of the name). The lock module keeps the
 * lock under `id` until it is released — or, if it never is, until its record is stale.
 */
class KeyturnLock {
  #manager;
  #id;
  #name;
  #fence;
  #token;

  constructor(manager, id, name, fence, token) {
    this.#manager = manager;
    this.#id = id;
    this.#name = name;
    this.#fence = fence;
    this.#token = token;
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

  /** Gives the lock back: one store call at most; the lock module decides what it writes. */
  release() {
    const id = this.#id;
    if (id === -1) return released;
    this.#id = -1;
    const manager = this.#manager;
    const saved = manager.lastId;
    const savedName = manager.name;
    manager.lastId = -1;
    manager.name = this.#name;
    let pending;
    let started;
    try {
      pending = manager.core.beginRelease(id);
      started = manager.lastId === id;
    } catch (error) {
      return Promise.reject(error);
    } finally {
      manager.lastId = saved;
      manager.name = savedName;
    }
    if (!started) return released;
    return finishRelease(manager.core, id, pending);
  }
}

async function finishRelease(core, id, pending) {
  let answer;
  let kind;
  try {
    answer = await pending;
    kind = kindOf(answer);
  } catch (error) {
    answer = error;
    kind = FAILED;
  }
  core.finishRelease(id, answer, kind);
}

if (typeof Symbol.asyncDispose === 'symbol') {
  // `await using lock = await acquireLock(…)` releases at the end of the block.
  KeyturnLock.prototype[Symbol.asyncDispose] = function release() {
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
