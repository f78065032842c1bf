// Run inside workerd (Miniflare) by tests/js/workerd.test.mjs: counts the timers the package
// holds. A burst of serialized works (over a store, some timing out), locks and waiters runs to
// its end in one request, and the answer says how many of the timers armed meanwhile are still
// live: none may be, or a request would keep them toward workerd's 10 000.
import { acquireLock, createKeyedSerializer, MemoryStore, withLock } from '../../pkg/workerd.js';
import { watchTimers } from '../runtimes/timer-watch.mjs';

const timers = watchTimers();
const { live, original: realSetTimeout } = timers;

const sleep = (ms) => new Promise((resolve) => realSetTimeout(resolve, ms));

async function burst() {
  // One waiter served after its holder's release: the waits' shared timer goes with the wait.
  const first = new MemoryStore();
  const holding = await acquireLock(first, 'n', { staleMs: 60_000 });
  const waiting = acquireLock(first, 'n', { waitMs: 60_000, staleMs: 60_000 });
  await sleep(5);
  await holding.release();
  await (await waiting).release();
  const afterOneWaiter = live.size;

  const store = new MemoryStore();
  const serialize = createKeyedSerializer({ store, staleMs: 60, timeoutMs: 300 });
  const plain = createKeyedSerializer({ timeoutMs: 300 });
  const works = [];
  for (let i = 0; i < 40; i++) {
    const work = i % 10 === 9 ? () => new Promise(() => {}) : () => sleep(i % 3);
    works.push(serialize(`k${i % 2}`, work).catch(() => {}), plain(`p${i % 4}`, work).catch(() => {}));
  }
  works.push(serialize('long', () => sleep(150))); // renewed twice
  const holder = await acquireLock(store, 'n', { staleMs: 60_000 });
  void holder.signal;
  const waiters = Array.from({ length: 5 }, () => acquireLock(store, 'n', { waitMs: 60_000, staleMs: 60_000 }).then((lock) => lock.release()));
  const held = withLock(store, 'w', () => sleep(5));
  const beside = acquireLock(store, 'w', { waitMs: 60_000 }).then((lock) => lock.release());
  await sleep(5);
  await holder.release();
  await Promise.all([...works, ...waiters, held, beside]);
  return { armed: timers.armed(), afterOneWaiter, live: live.size };
}

export default {
  async fetch() {
    return Response.json(await burst());
  },
};
