// The libraries users pick instead of keyturn to run one key's async works one at a time, each
// made keyed the way its docs show, with the library's own timeout at the serializer's default
// deadline, and letting an idle key go (so memory stays bounded, as keyturn's does). None hands
// the work a signal or aborts it: their timeouts bound the wait for the lock (async-lock,
// async-mutex) or reject the caller while the work runs on (p-queue).
import { createRequire } from 'node:module';

import PQueue from 'p-queue';
import { Mutex, withTimeout } from 'async-mutex';

const require = createRequire(import.meta.url);
const AsyncLock = require('async-lock');

const TIMEOUT_MS = 30_000;

/** A map of per-key locks that drops a key once its lock is idle (also semaphore-peers.mjs's). */
export function keyed(make, run, idle) {
  const locks = new Map();
  const serialize = (key, work) => {
    let lock = locks.get(key);
    if (lock === undefined) {
      lock = make();
      locks.set(key, lock);
    }
    const result = run(lock, work);
    const forget = () => {
      if (locks.get(key) === lock && idle(lock)) locks.delete(key);
    };
    result.then(forget, forget);
    return result;
  };
  serialize.pending = () => locks.size;
  return serialize;
}

export const peers = {
  // Keyed by design; `timeout` bounds the wait in the queue. Its default maxPending is 1000.
  'async-lock': () => {
    const lock = new AsyncLock({ timeout: TIMEOUT_MS, maxPending: Infinity });
    const serialize = (key, work) => lock.acquire(key, work);
    serialize.pending = () => Object.keys(lock.queues).length;
    return serialize;
  },
  // A queue of concurrency 1 per key; `timeout` rejects an operation that runs too long.
  'p-queue': () =>
    keyed(
      () => new PQueue({ concurrency: 1, timeout: TIMEOUT_MS }),
      (queue, work) => queue.add(work),
      (queue) => queue.size === 0 && queue.pending === 0,
    ),
  // A mutex per key; `withTimeout` bounds the wait for it.
  'async-mutex': () =>
    keyed(
      () => withTimeout(new Mutex(), TIMEOUT_MS),
      (mutex, work) => mutex.runExclusive(work),
      (mutex) => !mutex.isLocked(),
    ),
};
