// A name taken N at a time (`concurrency` N above 1): N slots, each a lock of its own whose
// record is the core's `slotName(name, k)` — slot 0 the name itself. Every rule of each slot
// (fences, asks, leases, hand-offs, read-backs) is the lock core's, as for any name; this file
// only picks which slots to acquire. Its whole policy, the Rust `LockManager::acquire`'s too:
// 1. each slot with nobody in line for it here is tried once, from slot 0 up, with no wait — so
//    an idle name costs what a mutex costs (one create), and a name with a record that says
//    another concurrency is refused before anything is written;
// 2. none taken: every slot is waited for at once (in line here behind this isolate's earlier
//    waiters, asking in its record elsewhere), until the wait's end; the first slot had wins
//    and the other waits are aborted — a slot one of them took meanwhile is released at once.
import { slotName, waitMs } from './manager.js';

/** @typedef {import('./manager.js').Manager} Manager */
/** @typedef {import('./held.js').KeyturnLock} KeyturnLock */
/** @typedef {import('../arguments.js').LeaseOptions} LeaseOptions */

/**
 * One of `name`'s `options.concurrency` slots, or `undefined` when live holders kept all of them
 * for the whole wait. Settles as `manager.acquire` does: within the wait plus one store call's
 * bound; `signal` aborts it at once, leaving nothing held.
 * @param {Manager} manager
 * @param {string} name
 * @param {LeaseOptions} options
 * @param {AbortSignal | undefined} signal
 * @param {number | undefined} streakMs
 * @returns {Promise<KeyturnLock | undefined>}
 */
export async function acquireSlot(manager, name, options, signal, streakMs) {
  const n = options.concurrency ?? 1;
  // Its wait's end, on the clock waits are timed by.
  const until = performance.now() + waitMs(options.waitMs);
  // Slot 0 is always tried: the core checks the options there (a refusal rejects before any
  // slot is waited for) and the name's concurrency against its line here.
  const once = { ...options, waitMs: 0 };
  for (let slot = 0; slot === 0 || slot < n; slot++) {
    if (slot > 0 && manager.core.localLine(slotName(name, slot)) > 0) continue;
    const lock = await manager.acquire(name, once, signal, streakMs, slot);
    if (lock !== undefined) return lock;
  }
  const rest = { ...options, waitMs: Math.max(0, until - performance.now()) };
  return anySlot(manager, name, n, rest, signal, streakMs);
}

/**
 * The first of `n` waits, one per slot, to take its slot; the others aborted.
 * @param {Manager} manager
 * @param {string} name
 * @param {number} n
 * @param {LeaseOptions} options
 * @param {AbortSignal | undefined} signal
 * @param {number | undefined} streakMs
 * @returns {Promise<KeyturnLock | undefined>}
 */
function anySlot(manager, name, n, options, signal, streakMs) {
  return new Promise((resolve, reject) => {
    /** @type {AbortController[]} */
    const waits = [];
    let left = n;
    let over = false;
    /**
     * Ends the race: every wait still running is aborted (what it takes is let go).
     * @param {() => void} settle
     */
    const end = (settle) => {
      if (over) return;
      over = true;
      signal?.removeEventListener('abort', onAbort);
      for (const wait of waits) wait.abort();
      settle();
    };
    const onAbort = () => end(() => reject(/** @type {AbortSignal} */ (signal).reason));
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort);
    for (let slot = 0; slot < n && !over; slot++) {
      const wait = new AbortController();
      waits.push(wait);
      manager.acquire(name, options, wait.signal, streakMs, slot).then(
        (lock) => {
          // Two slots taken at once: the later one is let go.
          if (lock !== undefined && over) lock.release().catch(() => {});
          else if (lock !== undefined) end(() => resolve(lock));
          else if (--left === 0) end(() => resolve(undefined));
        },
        (error) => {
          // Aborted by the race's end: what it took is let go (manager.js).
          if (!wait.signal.aborted) end(() => reject(error));
        },
      );
    }
  });
}
