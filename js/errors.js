// Error classes of the package. Static JS, copied into pkg/ by the build.

/**
 * A serialized work did not settle within its deadline. Its caller's promise rejects with this,
 * its signal is aborted, and the next work for the key starts. Same `name`, `key` and message as
 * the seed's, plus `timeoutMs`.
 */
export class SerializedWorkTimeout extends Error {
  constructor(key, timeoutMs) {
    super(`serialized work for ${key} timed out after ${timeoutMs} ms: released, the next notification re-decides`);
    this.name = 'SerializedWorkTimeout';
    this.key = key;
    this.timeoutMs = timeoutMs;
  }
}

/**
 * A lock store failed (threw, rejected, or answered something that is not a store's answer).
 * Never a busy lock: that is `undefined` from `acquireLock`. The store's own error is `cause`.
 */
export class LockStoreError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'LockStoreError';
  }
}
