// A name taken N at a time by many holders, and the checker of their history: what
// tests/js/semaphore.test.mjs runs in one process over two package instances, across two
// processes over a redis-server (tests/runtimes/redis-keyturn-process.mjs is the other one), and
// in two workerd isolates (tests/workerd/semaphore-worker.mjs).

/** @param {number} ms */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `holders` loops, each taking `name` (`concurrency` `n`) `turns` times through `withLock` and
 * holding it up to `holdMs`; every turn is written to the history by `record` — its `in` once
 * held, its `out` before the release, both while it holds — so the history's order (one
 * process's, or a store's list) shows every overlap. Resolves with the turns taken.
 * @param {(store: object, name: string, fn: (lock: any) => Promise<void>, options: object) => Promise<void>} withLock
 * @param {object} store
 * @param {(event: { who: string, kind: 'in' | 'out', slot: number, fence: number }) => unknown} record
 * @param {{ name: string, n: number, holders: number, turns: number, holdMs: number, who: string }} options
 */
export async function semaphoreLoops(withLock, store, record, { name, n, holders, turns, holdMs, who }) {
  let taken = 0;
  await Promise.all(
    Array.from({ length: holders }, async () => {
      for (let i = 0; i < turns; i++) {
        await withLock(
          store,
          name,
          async (lock) => {
            await record({ who, kind: 'in', slot: lock.slot, fence: lock.fence });
            if (Math.random() < 0.7) await sleep(Math.random() * holdMs);
            await record({ who, kind: 'out', slot: lock.slot, fence: lock.fence });
          },
          { concurrency: n, waitMs: 60_000 },
        );
        taken += 1;
      }
    }),
  );
  return taken;
}

/**
 * Replays a history in its order and throws at the first broken promise: more than `n` holders
 * at once, two holders of one slot at once, a slot out of range, a fence of a slot not above the
 * one before it in that slot. Answers the most holders seen at once, the turns, and the turns per
 * slot.
 * @param {{ who: string, kind: string, slot: number, fence: number }[]} events
 * @param {number} n
 */
export function checkHistory(events, n) {
  let running = 0;
  let most = 0;
  let turns = 0;
  /** @type {(string | undefined)[]} */
  const holder = Array(n).fill(undefined);
  const lastFence = Array(n).fill(0);
  const perSlot = Array(n).fill(0);
  for (const [i, event] of events.entries()) {
    const { slot, fence, kind, who } = event;
    const at = `event ${i} ${JSON.stringify(event)}`;
    if (!(Number.isInteger(slot) && slot >= 0 && slot < n)) throw new Error(`${at}: slot out of range`);
    const id = `${who}:${fence}`;
    if (kind === 'in') {
      if (holder[slot] !== undefined) throw new Error(`${at}: slot ${slot} held by ${holder[slot]} already`);
      if (!(fence > lastFence[slot])) throw new Error(`${at}: fence not above ${lastFence[slot]}, the last of slot ${slot}`);
      holder[slot] = id;
      lastFence[slot] = fence;
      running += 1;
      most = Math.max(most, running);
      if (running > n) throw new Error(`${at}: ${running} holders at once`);
      turns += 1;
      perSlot[slot] += 1;
    } else {
      if (holder[slot] !== id) throw new Error(`${at}: leaves slot ${slot}, held by ${holder[slot]}`);
      holder[slot] = undefined;
      running -= 1;
    }
  }
  if (running !== 0) throw new Error(`${running} holders never left`);
  return { most, turns, perSlot };
}
