// Error classes of the package. Static JS, copied into pkg/ by the build; their texts come from
// the crate (constants.js is generated from it).
import { MESSAGES, fill } from './constants.js';

/**
 * A serialized work did not settle within its deadline. Its caller's promise rejects with this,
 * its signal is aborted, and the next work for the key starts. Same `name`, `key` and message as
 * `keyed-serializer.js`'s (the per-key serializer keyturn is a drop-in for), plus `timeoutMs`.
 */
export class SerializedWorkTimeout extends Error {
  /**
   * @param {string} key
   * @param {number | undefined} timeoutMs
   */
  constructor(key, timeoutMs) {
    super(fill(MESSAGES.timeout, { key, timeoutMs }));
    this.name = 'SerializedWorkTimeout';
    this.key = key;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A call found its key with `maxPending` works queued or running already: it rejects with this
 * at once and queues nothing.
 */
export class SerializedQueueFull extends Error {
  /**
   * @param {string} key
   * @param {number} maxPending
   */
  constructor(key, maxPending) {
    super(fill(MESSAGES.queueFull, { key, maxPending }));
    this.name = 'SerializedQueueFull';
    this.key = key;
    this.maxPending = maxPending;
  }
}

/**
 * A call with `ifAvailable` whose work could not start at once: a work of its key is ahead of
 * it, no slot is free, or the key's `rate` allows no start yet. It rejects with this at once and
 * queues nothing; its work is never called. `retryAfterMs` is how long until the pace allows a
 * start when the pace is all that held it up (an API's `Retry-After`), else `undefined`: how
 * long a running work takes is not keyturn's to know.
 */
export class SerializedWorkUnavailable extends Error {
  /**
   * @param {string} key
   * @param {number | undefined} retryAfterMs
   */
  constructor(key, retryAfterMs) {
    super(fill(MESSAGES.unavailable, { key }));
    this.name = 'SerializedWorkUnavailable';
    this.key = key;
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * A lock store failed (threw, rejected, or answered something that is not a store's answer).
 * Never a busy lock: that is `undefined` from `acquireLock`. The store's own error is `cause`.
 */
export class LockStoreError extends Error {
  /**
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(message, options) {
    super(message, options);
    this.name = 'LockStoreError';
  }
}

/** A live holder kept the lock's name for the whole wait of `withLock`. */
export class LockUnavailable extends Error {
  /**
   * @param {string} key
   * @param {number} waitMs
   */
  constructor(key, waitMs) {
    super(fill(MESSAGES.lockUnavailable, { key, waitMs }));
    this.name = 'LockUnavailable';
    this.key = key;
    this.waitMs = waitMs;
  }
}

/**
 * A lock name (or a serializer's key over a store) was acquired with a `concurrency` other than
 * the one its records carry, or its holders and waiters in this isolate have: nothing was
 * written, nothing is held. A name keeps one concurrency; use another name for another.
 */
export class ConcurrencyMismatch extends Error {
  /**
   * @param {string} lockName
   * @param {number} concurrency what the acquisition asked
   * @param {number} found what the name's record (or its acquisitions here) say
   */
  constructor(lockName, concurrency, found) {
    super(fill(MESSAGES.concurrencyMismatch, { name: lockName, asked: concurrency, found }));
    this.name = 'ConcurrencyMismatch';
    this.lockName = lockName;
    this.concurrency = concurrency;
    this.found = found;
  }
}

/**
 * keyturn's wasm instance trapped (a bug, or memory exhausted): every serializer and lock made
 * on it fails with this from then on; new ones get a fresh instance where the runtime can make
 * one. `cause` is the trap.
 */
export class KeyturnInstanceFailed extends Error {
  /** @param {unknown} cause */
  constructor(cause) {
    super(fill(MESSAGES.instanceFailed, { reason: cause instanceof Error ? cause.message : String(cause) }), { cause });
    this.name = 'KeyturnInstanceFailed';
  }
}
