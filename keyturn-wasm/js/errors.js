// Error classes of the package (index.d.ts documents each for users). Static JS, copied into
// pkg/ by the build; their texts come from the crate (constants.js is generated from it).
import { MESSAGES, fill } from './constants.js';

// Same `name`, `key` and message as `keyed-serializer.js`'s (keyturn is its drop-in), plus `timeoutMs`.
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

export class KeyturnInstanceFailed extends Error {
  /** @param {unknown} cause the trap */
  constructor(cause) {
    super(fill(MESSAGES.instanceFailed, { reason: cause instanceof Error ? cause.message : String(cause) }), { cause });
    this.name = 'KeyturnInstanceFailed';
  }
}

/**
 * The `AbortError` a signal aborts with, or a call rejects with, for what the engine decided
 * (a lease lost, a work never started): a DOMException, as a platform's own aborts are.
 * @param {string} template
 * @param {Record<string, unknown>} values
 */
export const abortError = (template, values) => new DOMException(`keyturn: ${fill(template, values)}`, 'AbortError');
