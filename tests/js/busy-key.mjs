// A busy key across isolates: instance A keeps `inFlight` works of 1 ms in flight on one key,
// while instance B calls once every `everyMs`; each a serializer over the store. What B pays:
// its waits (from its call to its work's start), and the store calls of both instances per turn
// of B. Shared by tests/js/cross-isolate.test.mjs and bench/cross-isolate.mjs.
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * @param {{ a: any, b: any, storeA: any, storeB: any, calls: () => number, ms?: number, inFlight?: number, everyMs?: number }} options
 * @returns {Promise<{ waits: number[], turnsOfA: number, callsPerTurnOfB: number, callsOfBPerTurn: number }>}
 */
export async function busyKey({ a, b, storeA, storeB, calls, ms = 3000, inFlight = 4, everyMs = 50 }) {
  const serializeA = a.createKeyedSerializer({ store: storeA, timeoutMs: 10_000 });
  const serializeB = b.createKeyedSerializer({ store: storeB, timeoutMs: 10_000 });
  const work = () => sleep(1);
  let running = true;
  let turnsOfA = 0;
  const loopA = async () => {
    while (running) {
      await serializeA('busy', work);
      turnsOfA += 1;
    }
  };
  const loops = Array.from({ length: inFlight }, loopA);
  await sleep(50); // A is busy before B first calls
  const waits = [];
  const before = calls();
  const beforeB = b.lockStats(storeB).storeCalls;
  const end = performance.now() + ms;
  const callsOfB = [];
  while (performance.now() < end) {
    const called = performance.now();
    callsOfB.push(
      serializeB('busy', async () => {
        waits.push(performance.now() - called);
        await sleep(1);
      }),
    );
    await sleep(everyMs);
  }
  await Promise.all(callsOfB);
  const spent = calls() - before;
  const spentByB = b.lockStats(storeB).storeCalls - beforeB;
  running = false;
  await Promise.all(loops);
  return { waits, turnsOfA, callsPerTurnOfB: spent / waits.length, callsOfBPerTurn: spentByB / waits.length };
}

/** The `q` quantile of `values` (0.5: the median, 1: the largest). */
export const quantile = (values, q) => [...values].sort((x, y) => x - y)[Math.min(values.length - 1, Math.floor(q * values.length))];
